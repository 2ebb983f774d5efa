//! GPU launcher of `color_jitter`: the images are copied into the output batch, then for each
//! of the 4 steps (in each sample's own order) one `jitter_luma_sum` launch (only when some
//! sample applies contrast at that step; the mean depends on the image at that point) and
//! one `jitter_step` launch, each over the whole batch.

use super::{hue_shift, JitterParams};
use crate::cuda::desc::JitterDesc;
use crate::cuda::launch::{batch_grid, launch, Arg};
use crate::cuda::run::{check_inputs, u32_of};
use crate::cuda::{cuda_err, Device, DeviceBatch, DeviceImage, KernelModule};
use crate::error::Error;
use crate::image::{DType, Layout};

/// The descriptor of one sample (address left 0).
pub fn jitter_desc(pixels: usize, p: &JitterParams) -> Result<JitterDesc, Error> {
    let mut d = JitterDesc {
        pixels: u32_of(pixels, "pixel count")?,
        order: u32::from_le_bytes(p.order),
        ..JitterDesc::default()
    };
    if let Some(f) = p.brightness {
        d.enabled |= 1;
        d.brightness = f as f32;
    }
    if let Some(f) = p.contrast {
        d.enabled |= 2;
        d.contrast = f as f32;
    }
    if let Some(f) = p.saturation {
        d.enabled |= 4;
        d.saturation = f as f32;
    }
    if let Some(h) = p.hue {
        d.enabled |= 8;
        d.hue_shift = u32::from(hue_shift(h));
    }
    Ok(d)
}

/// Applies `params[i]` (as [`super::ColorJitter::choose`] drew them) to image `i`: u8 HWC RGB.
pub fn color_jitter_batch(
    dev: &Device,
    inputs: &[DeviceImage],
    params: &[JitterParams],
) -> Result<DeviceBatch, Error> {
    if check_inputs(inputs)? != DType::U8 || params.len() != inputs.len() {
        return Err(Error::Cuda(
            "color_jitter takes u8 images, one parameter set each".into(),
        ));
    }
    let mut descs = Vec::with_capacity(inputs.len());
    for (im, p) in inputs.iter().zip(params) {
        if im.layout != Layout::Hwc || im.channels != 3 {
            return Err(Error::Cuda("color_jitter takes HWC RGB images".into()));
        }
        if p.order.iter().any(|&k| k > 3) {
            return Err(Error::Cuda(format!("bad adjustment order {:?}", p.order)));
        }
        descs.push(jitter_desc(im.height * im.width, p)?);
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
        let any_contrast = params
            .iter()
            .any(|p| p.contrast.is_some() && u32::from(p.order[k as usize]) == 1);
        let args = [
            Arg::Buf(descs_dev.slice()),
            Arg::U32(n),
            Arg::U32(k),
            Arg::Buf(sums.slice()),
        ];
        if any_contrast {
            // SAFETY: `jitter_luma_sum` takes (const JitterDesc*, u32, u32, u64*): each
            // descriptor reads `pixels` RGB pixels of its packed slot in `out`, and `sums`
            // holds one zeroed u64 per sample; block size 256 as the kernel requires.
            unsafe { launch(stream, &reduce, cfg, &args)? };
        }
        // SAFETY: `jitter_step` takes (const JitterDesc*, u32, u32, const u64*) and rewrites
        // `pixels` RGB pixels of each sample's slot in `out` in place; buffers stay alive
        // until the work is done (pooled, reused only by later work on this stream).
        unsafe { launch(stream, &step, cfg, &args)? };
    }
    DeviceBatch::finish(dev, out, placed, DType::U8, Layout::Hwc)
}
