//! GPU launcher of `resize` (the `resize_u8` kernel: the fused kernel's resampler alone).

use super::{Interp, Resize};
use crate::cuda::fused::{run_resample, FusedSample};
use crate::cuda::{Device, DeviceBatch, DeviceImage, KernelModule};
use crate::error::Error;
use crate::image::{DType, Layout};

/// Resizes window `(top, left, height, width)` of image `i` to `sizes[i]` = (out_h, out_w),
/// bit-exact with [`super::resize_u8`]. u8 HWC images, 1 to 4 channels.
pub fn resize_batch(
    dev: &Device,
    inputs: &[DeviceImage],
    windows: &[(usize, usize, usize, usize)],
    sizes: &[(usize, usize)],
    interp: Interp,
    antialias: bool,
) -> Result<DeviceBatch, Error> {
    if windows.len() != inputs.len() || sizes.len() != inputs.len() {
        return Err(Error::Cuda("one window and one size per image".into()));
    }
    let samples: Vec<_> = windows
        .iter()
        .zip(sizes)
        .map(|(&w, &(oh, ow))| FusedSample::resize(w, oh, ow, interp, antialias))
        .collect();
    run_resample(
        dev,
        KernelModule::Resize,
        "resize_u8",
        inputs,
        &samples,
        DType::U8,
        Layout::Hwc,
    )
}

impl Resize {
    /// Resizes every image of a batch on the GPU, sizes as [`super::ResizeTarget::output_size`].
    pub fn run_cuda(&self, dev: &Device, inputs: &[DeviceImage]) -> Result<DeviceBatch, Error> {
        let windows: Vec<_> = inputs
            .iter()
            .map(|im| (0, 0, im.height, im.width))
            .collect();
        let sizes: Vec<_> = inputs
            .iter()
            .map(|im| self.target.output_size(im.height, im.width))
            .collect();
        resize_batch(dev, inputs, &windows, &sizes, self.interp, self.antialias)
    }
}
