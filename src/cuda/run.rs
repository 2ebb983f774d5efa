//! Batched launches shared by the operator launchers (`src/ops/<op>/gpu.rs`) and the fused
//! chain: each caller builds per-sample descriptors from its parameters and calls one of these.

use super::batch::{DeviceBatch, DeviceImage};
use super::desc::{ConvertDesc, GeomDesc, JitterDesc};
use super::launch::{batch_grid, launch, Arg};
use super::module::KernelModule;
use super::{cuda_err, Device};
use crate::error::Error;
use crate::image::{DType, Layout};

/// The geometry kernels (crop/pad with fill, flip, layout change).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeomKernel {
    /// Window with fill (crop, pad).
    CropFill,
    /// Mirror.
    Flip,
    /// HWC ↔ CHW.
    Transpose,
}

fn geom_entry(k: GeomKernel, elem: usize) -> Result<&'static str, Error> {
    Ok(match (k, elem) {
        (GeomKernel::CropFill, 1) => "crop_fill_b1",
        (GeomKernel::CropFill, 2) => "crop_fill_b2",
        (GeomKernel::CropFill, 4) => "crop_fill_b4",
        (GeomKernel::Flip, 1) => "flip_b1",
        (GeomKernel::Flip, 2) => "flip_b2",
        (GeomKernel::Flip, 4) => "flip_b4",
        (GeomKernel::Transpose, 1) => "transpose_b1",
        (GeomKernel::Transpose, 2) => "transpose_b2",
        (GeomKernel::Transpose, 4) => "transpose_b4",
        _ => {
            return Err(Error::Cuda(format!(
                "no geometry kernel for {elem}-byte elements"
            )))
        }
    })
}

/// Checks a batch of inputs for the element-wise kernels: non-empty, one dtype, packed.
pub(crate) fn check_inputs(inputs: &[DeviceImage]) -> Result<DType, Error> {
    let first = inputs
        .first()
        .ok_or_else(|| Error::Cuda("empty batch".into()))?;
    for im in inputs {
        im.check()?;
        if im.dtype != first.dtype {
            return Err(Error::Cuda(
                "every image of a batch must have the same dtype".into(),
            ));
        }
        if !im.is_packed() {
            return Err(Error::Cuda(
                "this kernel takes packed images (row pitch = width × channels × element size)"
                    .into(),
            ));
        }
    }
    Ok(first.dtype)
}

/// `v` as u32, or an error naming it.
pub(crate) fn u32_of(v: usize, what: &str) -> Result<u32, Error> {
    u32::try_from(v).map_err(|_| Error::Cuda(format!("{what} {v} is too large")))
}

/// Runs geometry kernel `k` with `descs` (addresses filled in here) producing samples of
/// `(out_h, out_w, channels)` taken from the descriptors, in `out_layout`.
pub(crate) fn run_geom(
    dev: &Device,
    k: GeomKernel,
    inputs: &[DeviceImage],
    mut descs: Vec<GeomDesc>,
    out_layout: Layout,
) -> Result<DeviceBatch, Error> {
    let dtype = check_inputs(inputs)?;
    if descs.len() != inputs.len() {
        return Err(Error::Cuda("one descriptor per image".into()));
    }
    let shapes: Vec<_> = descs
        .iter()
        .map(|d| (d.out_h as usize, d.out_w as usize, d.channels as usize))
        .collect();
    let (out, placed) = DeviceBatch::allocate(dev, &shapes, dtype)?;
    let stream = dev.stream();
    for ((d, im), p) in descs.iter_mut().zip(inputs).zip(&placed) {
        let src_elems = im.height * im.width * im.channels;
        let reads_inside = (d.src_h as usize, d.src_w as usize, d.channels as usize)
            == (im.height, im.width, im.channels);
        if !reads_inside || src_elems * dtype.size() > im.byte_len() {
            return Err(Error::Cuda("descriptor does not match its image".into()));
        }
        d.src = im.address(stream);
        d.dst = out.address(stream, p.offset);
    }
    let max = shapes
        .iter()
        .map(|&(h, w, c)| (h * w * c) as u64)
        .max()
        .unwrap_or(1);
    let descs_dev = dev.upload_pod(&descs)?;
    let func = dev
        .modules()
        .function(KernelModule::Geometry, geom_entry(k, dtype.size())?)?;
    let cfg = batch_grid(max, inputs.len())?;
    let args = [Arg::Buf(descs_dev.slice()), Arg::U32(inputs.len() as u32)];
    // SAFETY: the kernels take (const GeomDesc*, u32). Each descriptor's source is its packed
    // image (sizes checked equal above; the kernel reads only indices inside src_h × src_w ×
    // channels), its output the packed place of out_h × out_w × channels elements made for
    // it; all buffers stay alive until the kernel is done (pooled, reused only by later work
    // on this stream; `out` moves into the batch).
    unsafe { launch(stream, &func, cfg, &args)? };
    DeviceBatch::finish(dev, out, placed, dtype, out_layout)
}

/// Runs the `convert` kernel (normalize and/or cast) into `dst_dtype`, keeping sizes and layout.
pub(crate) fn run_convert(
    dev: &Device,
    inputs: &[DeviceImage],
    mut descs: Vec<ConvertDesc>,
    dst_dtype: DType,
) -> Result<DeviceBatch, Error> {
    let dtype = check_inputs(inputs)?;
    let layout = inputs[0].layout;
    if inputs.iter().any(|im| im.layout != layout) || descs.len() != inputs.len() {
        return Err(Error::Cuda(
            "one layout per batch and one descriptor per image".into(),
        ));
    }
    let shapes: Vec<_> = inputs
        .iter()
        .map(|im| (im.height, im.width, im.channels))
        .collect();
    let (out, placed) = DeviceBatch::allocate(dev, &shapes, dst_dtype)?;
    let stream = dev.stream();
    for ((d, im), p) in descs.iter_mut().zip(inputs).zip(&placed) {
        d.count = u32_of(im.height * im.width * im.channels, "element count")?;
        d.channels = u32_of(im.channels, "channels")?;
        d.plane = u32_of(im.height * im.width, "plane")?;
        d.src_dtype = super::desc::dtype::code(dtype);
        d.dst_dtype = super::desc::dtype::code(dst_dtype);
        d.src = im.address(stream);
        d.dst = out.address(stream, p.offset);
    }
    let max = shapes
        .iter()
        .map(|&(h, w, c)| (h * w * c) as u64)
        .max()
        .unwrap_or(1);
    let descs_dev = dev.upload_pod(&descs)?;
    let func = dev.modules().function(KernelModule::Convert, "convert")?;
    let cfg = batch_grid(max, inputs.len())?;
    let args = [Arg::Buf(descs_dev.slice()), Arg::U32(inputs.len() as u32)];
    // SAFETY: `convert` takes (const ConvertDesc*, u32); each descriptor reads `count`
    // elements of `src_dtype` from its packed image and writes `count` elements of
    // `dst_dtype` to the place made for it (same element count); buffers outlive the kernel
    // as in `run_geom`.
    unsafe { launch(stream, &func, cfg, &args)? };
    DeviceBatch::finish(dev, out, placed, dst_dtype, layout)
}

/// Runs the color jitter kernels: the images (u8 HWC RGB) are copied into the output batch,
/// then for each of the 4 steps (in each sample's own order) one `jitter_luma_sum` launch
/// (only when some sample applies contrast at that step; the mean depends on the image at
/// that point) and one `jitter_step` launch, each over the whole batch. `descs[i]` (data
/// address filled in here) says what to do to image `i`.
pub(crate) fn run_jitter(
    dev: &Device,
    inputs: &[DeviceImage],
    mut descs: Vec<JitterDesc>,
) -> Result<DeviceBatch, Error> {
    if check_inputs(inputs)? != DType::U8 || descs.len() != inputs.len() {
        return Err(Error::Cuda(
            "color jitter takes u8 images, one descriptor each".into(),
        ));
    }
    for (im, d) in inputs.iter().zip(&descs) {
        if im.layout != Layout::Hwc || im.channels != 3 {
            return Err(Error::Cuda("color jitter takes HWC RGB images".into()));
        }
        if d.pixels as usize != im.height * im.width {
            return Err(Error::Cuda("descriptor does not match its image".into()));
        }
    }
    let shapes: Vec<_> = inputs.iter().map(|im| (im.height, im.width, 3)).collect();
    let (mut out, placed) = DeviceBatch::allocate(dev, &shapes, DType::U8)?;
    let stream = dev.stream();
    for ((d, im), p) in descs.iter_mut().zip(inputs).zip(&placed) {
        let n = im.byte_len();
        if n > 0 {
            let (src, range) = im.bytes();
            let mut dst = out.slice_mut().slice_mut(p.offset..p.offset + n);
            stream
                .memcpy_dtod(&src.slice(range), &mut dst)
                .map_err(|e| cuda_err("copy image into the batch", e))?;
        }
        d.data = out.address(stream, p.offset);
    }
    let descs_dev = dev.upload_pod(&descs)?;
    let mut sums = dev.pool().take(8 * inputs.len())?;
    stream
        .memset_zeros(sums.slice_mut())
        .map_err(|e| cuda_err("clear luma sums", e))?;
    let reduce = dev
        .modules()
        .function(KernelModule::Color, "jitter_luma_sum")?;
    let step = dev.modules().function(KernelModule::Color, "jitter_step")?;
    let max = shapes
        .iter()
        .map(|&(h, w, _)| (h * w) as u64)
        .max()
        .unwrap_or(1);
    let cfg = batch_grid(max, inputs.len())?;
    let n = inputs.len() as u32;
    for k in 0..4u32 {
        // Contrast (adjustment 1, enable bit 2) at step k in some sample.
        let any_contrast = descs
            .iter()
            .any(|d| d.enabled & 2 != 0 && (d.order >> (8 * k)) & 255 == 1);
        let args = [
            Arg::Buf(descs_dev.slice()),
            Arg::U32(n),
            Arg::U32(k),
            Arg::Buf(sums.slice()),
        ];
        if any_contrast {
            // SAFETY: `jitter_luma_sum` takes (const JitterDesc*, u32, u32, u64*): each
            // descriptor reads `pixels` RGB pixels of its packed place in `out`, and `sums`
            // holds one zeroed u64 per sample; block size 256 as the kernel requires.
            unsafe { launch(stream, &reduce, cfg, &args)? };
        }
        // SAFETY: `jitter_step` takes (const JitterDesc*, u32, u32, const u64*) and rewrites
        // `pixels` RGB pixels of each sample's place in `out`, in place; buffers stay alive
        // until the work is done (pooled, reused only by later work on this stream).
        unsafe { launch(stream, &step, cfg, &args)? };
    }
    DeviceBatch::finish(dev, out, placed, DType::U8, Layout::Hwc)
}
