//! The fused chain: window → resize → flip → normalize → cast → layout, one launch per batch.
//!
//! Tap tables are computed on the host by the same Rust functions the CPU path uses
//! ([`bilinear_taps`], [`nearest_indices`], [`vertical_first`]) and uploaded once per batch,
//! so the integer arithmetic on the device sees exactly the CPU's weights. The kernel
//! reproduces Pillow's u8 rounding between the two passes by recomputing, per output pixel,
//! the rounded first-pass values it needs (see `kernels/common/resample.cuh`): no scratch
//! image, one read of the source, one write of the output. The cost is `taps_v × taps_h`
//! reads per output element instead of `taps_v + taps_h` amortised, which is small for the
//! usual 2–4× downscales of training crops and served from cache.

use super::batch::{DeviceBatch, DeviceImage};
use super::desc::{dtype, fused_flags, FusedDesc};
use super::launch::{batch_grid, launch, Arg};
use super::module::KernelModule;
use super::Device;
use crate::error::Error;
use crate::image::{DType, Layout};
use crate::ops::resize::{bilinear_taps, nearest_indices, vertical_first, Interp, Taps};

/// What the fused chain does to one sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FusedSample {
    /// Window (top, left, height, width) inside the source image.
    pub window: (usize, usize, usize, usize),
    /// Output rows.
    pub out_h: usize,
    /// Output columns.
    pub out_w: usize,
    /// Interpolation.
    pub interp: Interp,
    /// Widen the bilinear filter when shrinking.
    pub antialias: bool,
    /// Mirror left–right (after resizing).
    pub flip_h: bool,
    /// Mirror top–bottom (after resizing).
    pub flip_v: bool,
    /// Per-channel `(mean, 1 / std)` in f32, as `Normalize` holds them; `None` = no normalize.
    pub normalize: Option<([f32; 4], [f32; 4])>,
    /// Output element type (u8 only without normalize, or as `cast` to u8 after it).
    pub dtype: DType,
    /// Output layout.
    pub layout: Layout,
}

impl FusedSample {
    /// A plain resize of `window` to `out_h` × `out_w`, u8 HWC output.
    pub fn resize(
        window: (usize, usize, usize, usize),
        out_h: usize,
        out_w: usize,
        interp: Interp,
        antialias: bool,
    ) -> FusedSample {
        FusedSample {
            window,
            out_h,
            out_w,
            interp,
            antialias,
            flip_h: false,
            flip_v: false,
            normalize: None,
            dtype: DType::U8,
            layout: Layout::Hwc,
        }
    }

    /// `(mean, inv_std)` for the descriptor from `Normalize`'s one-or-per-channel values.
    pub fn normalize_params(
        mean: &[f32],
        inv_std: &[f32],
        channels: usize,
    ) -> Result<([f32; 4], [f32; 4]), Error> {
        let mut m = [0f32; 4];
        let mut s = [0f32; 4];
        for (dst, src, name) in [(&mut m, mean, "mean"), (&mut s, inv_std, "std")] {
            match src.len() {
                1 => dst.fill(src[0]),
                n if n == channels && n <= 4 => dst[..n].copy_from_slice(src),
                n => {
                    return Err(Error::Cuda(format!(
                        "normalize: {n} '{name}' values for {channels} channels (GPU path: 1, or one per channel up to 4)"
                    )))
                }
            }
        }
        Ok((m, s))
    }
}

fn push_taps(table: &mut Vec<i32>, t: &Taps) -> Result<(u32, u32), Error> {
    let off = u32::try_from(table.len()).map_err(|_| Error::Cuda("tap table too large".into()))?;
    table.extend(t.start.iter().map(|&s| s as i32));
    table.extend(t.len.iter().map(|&n| n as i32));
    table.extend_from_slice(&t.weights);
    Ok((off, t.ksize as u32))
}

fn push_indices(table: &mut Vec<i32>, v: &[u32]) -> Result<u32, Error> {
    let off = u32::try_from(table.len()).map_err(|_| Error::Cuda("tap table too large".into()))?;
    table.extend(v.iter().map(|&s| s as i32));
    Ok(off)
}

/// The size and row pitch of a u8 HWC source image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceDims {
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
    /// Channels (1..=4).
    pub channels: usize,
    /// Bytes from one row to the next.
    pub pitch: usize,
}

impl SourceDims {
    /// The dimensions of a device image, if it is u8 HWC with 1 to 4 channels.
    pub fn of(im: &DeviceImage) -> Result<SourceDims, Error> {
        if im.dtype != DType::U8 || im.layout != Layout::Hwc {
            return Err(Error::Cuda(format!(
                "fused resize takes u8 HWC images, got {} {}",
                im.dtype.name(),
                im.layout.name()
            )));
        }
        Ok(SourceDims {
            height: im.height,
            width: im.width,
            channels: im.channels,
            pitch: im.pitch,
        })
    }
}

/// The descriptor of one sample (addresses left 0) and its tables appended to `table`.
/// Errors on what the CPU path also rejects (window outside the image, empty sizes) and on
/// what the fused kernel does not take (more than 4 channels).
pub fn build_desc(
    im: SourceDims,
    s: &FusedSample,
    table: &mut Vec<i32>,
) -> Result<FusedDesc, Error> {
    if !(1..=4).contains(&im.channels) {
        return Err(Error::Cuda(format!(
            "fused resize takes 1 to 4 channels, got {}",
            im.channels
        )));
    }
    if im.pitch < im.width * im.channels {
        return Err(Error::Cuda(format!(
            "pitch {} below the row size",
            im.pitch
        )));
    }
    let (top, left, wh, ww) = s.window;
    if top.checked_add(wh).is_none_or(|e| e > im.height)
        || left.checked_add(ww).is_none_or(|e| e > im.width)
    {
        return Err(Error::Cuda(format!(
            "window {wh}x{ww} at ({top}, {left}) is outside the {}x{} image",
            im.height, im.width
        )));
    }
    if wh == 0 || ww == 0 || s.out_h == 0 || s.out_w == 0 {
        return Err(Error::Cuda(format!(
            "empty window {wh}x{ww} or output {}x{}",
            s.out_h, s.out_w
        )));
    }
    let u = |v: usize| u32::try_from(v).map_err(|_| Error::Cuda(format!("size {v} too large")));
    let mut d = FusedDesc {
        src_pitch: u(im.pitch)?,
        src_h: u(im.height)?,
        src_w: u(im.width)?,
        channels: im.channels as u32,
        win_top: u(top)?,
        win_left: u(left)?,
        win_h: u(wh)?,
        win_w: u(ww)?,
        out_h: u(s.out_h)?,
        out_w: u(s.out_w)?,
        out_dtype: dtype::code(s.dtype),
        ..FusedDesc::default()
    };
    match s.interp {
        Interp::Bilinear => {
            if s.out_w != ww {
                let t = bilinear_taps(ww, 0.0, ww as f32, s.out_w, s.antialias).shifted(left);
                (d.h_off, d.h_ksize) = push_taps(table, &t)?;
                d.flags |= fused_flags::H_PASS;
            }
            if s.out_h != wh {
                let t = bilinear_taps(wh, 0.0, wh as f32, s.out_h, s.antialias).shifted(top);
                (d.v_off, d.v_ksize) = push_taps(table, &t)?;
                d.flags |= fused_flags::V_PASS;
            }
            if vertical_first(wh, ww, s.out_h, s.out_w) {
                d.flags |= fused_flags::VERTICAL_FIRST;
            }
        }
        Interp::Nearest => {
            let xs: Vec<u32> = nearest_indices(ww, 0.0, ww as f32, s.out_w)
                .into_iter()
                .map(|x| x + left as u32)
                .collect();
            let ys: Vec<u32> = nearest_indices(wh, 0.0, wh as f32, s.out_h)
                .into_iter()
                .map(|y| y + top as u32)
                .collect();
            d.h_off = push_indices(table, &xs)?;
            d.v_off = push_indices(table, &ys)?;
            d.flags |= fused_flags::NEAREST;
        }
    }
    if s.flip_h {
        d.flags |= fused_flags::FLIP_H;
    }
    if s.flip_v {
        d.flags |= fused_flags::FLIP_V;
    }
    if let Some((m, inv)) = s.normalize {
        d.flags |= fused_flags::NORMALIZE;
        d.mean = m;
        d.inv_std = inv;
    }
    if s.layout == Layout::Chw {
        d.flags |= fused_flags::CHW;
    }
    Ok(d)
}

/// Runs the resampling kernel `entry` of `module` over a batch (shared by the fused chain
/// and the standalone resize).
pub(crate) fn run_resample(
    dev: &Device,
    module: KernelModule,
    entry: &'static str,
    inputs: &[DeviceImage],
    samples: &[FusedSample],
    out_dtype: DType,
    out_layout: Layout,
) -> Result<DeviceBatch, Error> {
    if inputs.len() != samples.len() || inputs.is_empty() {
        return Err(Error::Cuda(format!(
            "{} images for {} sample descriptions",
            inputs.len(),
            samples.len()
        )));
    }
    if samples
        .iter()
        .any(|s| s.dtype != out_dtype || s.layout != out_layout)
    {
        return Err(Error::Cuda(
            "every sample of a batch must have the same output dtype and layout".into(),
        ));
    }
    let mut table = Vec::new();
    let mut descs = Vec::with_capacity(samples.len());
    for (im, s) in inputs.iter().zip(samples) {
        im.check()?;
        descs.push(build_desc(SourceDims::of(im)?, s, &mut table)?);
    }
    let shapes: Vec<_> = inputs
        .iter()
        .zip(samples)
        .map(|(im, s)| (s.out_h, s.out_w, im.channels))
        .collect();
    let (out, placed) = DeviceBatch::allocate(dev, &shapes, out_dtype)?;
    let stream = dev.stream();
    for ((d, im), p) in descs.iter_mut().zip(inputs).zip(&placed) {
        d.src = im.address(stream);
        d.dst = out.address(stream, p.offset);
    }
    if table.is_empty() {
        table.push(0);
    }
    let descs_dev = dev.upload_pod(&descs)?;
    let table_dev = dev.upload_pod(&table)?;
    let func = dev.modules().function(module, entry)?;
    let max_px = samples
        .iter()
        .map(|s| (s.out_h * s.out_w) as u64)
        .max()
        .unwrap_or(1);
    let cfg = batch_grid(max_px, samples.len())?;
    let args = [
        Arg::Buf(descs_dev.slice()),
        Arg::Buf(table_dev.slice()),
        Arg::U32(samples.len() as u32),
    ];
    // SAFETY: the kernel takes (const FusedDesc*, const i32*, u32). Every descriptor's `src`
    // covers the image checked above (window inside, pitch ≥ row), `dst` the packed output
    // placed for it in `out` (out_h · out_w · channels elements of `out_dtype`), and its
    // table offsets index entries pushed into `table` for it. The uploads, inputs and output
    // stay alive until the kernel is done: they are pooled buffers reused only by later work
    // on this same stream, and `out` moves into the returned batch.
    unsafe { launch(stream, &func, cfg, &args)? };
    DeviceBatch::finish(dev, out, placed, out_dtype, out_layout)
}

/// Runs the fused chain over a batch: sample `i` of the output is `samples[i]` applied to
/// `inputs[i]` (u8 HWC, 1 to 4 channels). Every sample must ask for the same dtype and
/// layout. One kernel launch for the whole batch, on `dev`'s stream; the returned batch's
/// event completes when it is written.
pub fn run_fused_batch(
    dev: &Device,
    inputs: &[DeviceImage],
    samples: &[FusedSample],
) -> Result<DeviceBatch, Error> {
    let first = samples
        .first()
        .ok_or_else(|| Error::Cuda("empty batch".into()))?;
    run_resample(
        dev,
        KernelModule::Fused,
        "fused_crop_resize_normalize",
        inputs,
        samples,
        first.dtype,
        first.layout,
    )
}
