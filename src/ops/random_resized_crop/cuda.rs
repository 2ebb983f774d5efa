//! GPU launcher of `random_resized_crop`: the windows are drawn on the host (the CPU's
//! [`RandomResizedCrop::choose`](crate::ops::random_resized_crop::RandomResizedCrop::choose) with each sample's random stream), then one resize
//! launch reads each window.

use super::RandomResizedCrop;
use crate::cuda::{Device, DeviceBatch, DeviceImage};
use crate::error::Error;
use crate::ops::resize::cuda::resize_batch;

impl RandomResizedCrop {
    /// Resizes window `windows[i]` (as chosen by `choose`) of each image to the output size.
    pub fn run_cuda(
        &self,
        dev: &Device,
        inputs: &[DeviceImage],
        windows: &[(usize, usize, usize, usize)],
    ) -> Result<DeviceBatch, Error> {
        let sizes = vec![(self.height, self.width); inputs.len()];
        resize_batch(dev, inputs, windows, &sizes, self.interp, self.antialias)
    }
}
