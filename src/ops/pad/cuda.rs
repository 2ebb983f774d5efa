//! GPU launcher of `pad`: a crop whose window starts `top`/`left` outside the image.

use super::Pad;
use crate::cuda::{Device, DeviceBatch, DeviceImage};
use crate::error::Error;
use crate::ops::crop::cuda::crop_batch;

impl Pad {
    /// Pads every image of a batch on the GPU (same output as the CPU `run_cpu`).
    pub fn run_cuda(&self, dev: &Device, inputs: &[DeviceImage]) -> Result<DeviceBatch, Error> {
        let windows: Vec<_> = inputs
            .iter()
            .map(|im| {
                let (oh, ow) = self.output_size(im.height, im.width);
                (-(self.top as i64), -(self.left as i64), oh, ow)
            })
            .collect();
        crop_batch(dev, inputs, &windows, &self.fill)
    }
}
