//! GPU launcher of `crop` (one launch per batch of the `crop_fill_b*` kernels).

use half::f16;

use super::Crop;
use crate::cuda::desc::{geom_flags, GeomDesc};
use crate::cuda::run::{run_geom, u32_of, GeomKernel};
use crate::cuda::{Device, DeviceBatch, DeviceImage};
use crate::error::Error;
use crate::image::{DType, Layout};

/// The raw element bits of fill value `v` in `dtype`, converted as the CPU `crop_fill`
/// does (u8: rounded half away from zero and clamped; f16/f32: nearest).
pub fn fill_bits(v: f64, dtype: DType) -> u32 {
    match dtype {
        DType::U8 => u32::from(v.round().clamp(0.0, 255.0) as u8),
        DType::F16 => u32::from(f16::from_f64(v).to_bits()),
        DType::F32 => (v as f32).to_bits(),
    }
}

/// Windows `(top, left, height, width)` of each image (negative or past the edge = filled
/// with `fill`: one value, or one per channel up to 4 channels), as [`super::crop_fill`].
pub fn crop_batch(
    dev: &Device,
    inputs: &[DeviceImage],
    windows: &[(i64, i64, usize, usize)],
    fill: &[f64],
) -> Result<DeviceBatch, Error> {
    if windows.len() != inputs.len() {
        return Err(Error::Cuda("one window per image".into()));
    }
    let layout = inputs.first().map_or(Layout::Hwc, |im| im.layout);
    let mut descs = Vec::with_capacity(inputs.len());
    for (im, &(top, left, h, w)) in inputs.iter().zip(windows) {
        if im.layout != layout {
            return Err(Error::Cuda("one layout per batch".into()));
        }
        let mut bits = [0u32; 4];
        match fill.len() {
            1 => bits.fill(fill_bits(fill[0], im.dtype)),
            n if n == im.channels && n <= 4 => {
                for (b, &v) in bits.iter_mut().zip(fill) {
                    *b = fill_bits(v, im.dtype);
                }
            }
            n => {
                return Err(Error::Cuda(format!(
                    "{n} fill values for {} channels (GPU path: 1, or one per channel up to 4)",
                    im.channels
                )))
            }
        }
        let pos =
            |v: i64| i32::try_from(v).map_err(|_| Error::Cuda(format!("offset {v} too large")));
        descs.push(GeomDesc {
            src_h: u32_of(im.height, "height")?,
            src_w: u32_of(im.width, "width")?,
            out_h: u32_of(h, "height")?,
            out_w: u32_of(w, "width")?,
            top: pos(top)?,
            left: pos(left)?,
            channels: u32_of(im.channels, "channels")?,
            flags: if layout == Layout::Chw {
                geom_flags::CHW
            } else {
                0
            },
            fill: bits,
            ..GeomDesc::default()
        });
    }
    run_geom(dev, GeomKernel::CropFill, inputs, descs, layout)
}

impl Crop {
    /// Crops every image of a batch on the GPU, placing the window as [`Crop::window`].
    pub fn run_cuda(&self, dev: &Device, inputs: &[DeviceImage]) -> Result<DeviceBatch, Error> {
        let windows: Vec<_> = inputs
            .iter()
            .map(|im| {
                let (top, left) = self.window(im.height, im.width);
                (top, left, self.height, self.width)
            })
            .collect();
        crop_batch(dev, inputs, &windows, &[self.fill])
    }
}
