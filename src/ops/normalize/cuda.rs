//! GPU launcher of `normalize` (the `convert` kernel with `(x - mean) * inv_std`).

use super::Normalize;
use crate::cuda::desc::{conv_flags, ConvertDesc};
use crate::cuda::run::run_convert;
use crate::cuda::{Device, DeviceBatch, DeviceImage, FusedSample};
use crate::error::Error;
use crate::image::Layout;

impl Normalize {
    /// Normalizes every image of a batch on the GPU into `self.dtype`.
    pub fn run_cuda(&self, dev: &Device, inputs: &[DeviceImage]) -> Result<DeviceBatch, Error> {
        let mut descs = Vec::with_capacity(inputs.len());
        for im in inputs {
            self.check_channels(im.channels).map_err(Error::Cuda)?;
            let mut d = ConvertDesc {
                flags: conv_flags::NORMALIZE,
                ..ConvertDesc::default()
            };
            if im.layout == Layout::Chw {
                d.flags |= conv_flags::CHW;
            }
            if self.mean.len() == 1 && self.inv_std.len() == 1 {
                d.flags |= conv_flags::UNIFORM;
                d.mean[0] = self.mean[0];
                d.inv_std[0] = self.inv_std[0];
            } else {
                (d.mean, d.inv_std) =
                    FusedSample::normalize_params(&self.mean, &self.inv_std, im.channels)?;
            }
            descs.push(d);
        }
        run_convert(dev, inputs, descs, self.dtype)
    }
}
