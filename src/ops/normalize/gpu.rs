//! GPU form of `normalize`: one launch of the `convert` kernel with `(x - mean) * inv_std`;
//! in the fused chain, the per-channel mean and `1 / std`.

use super::Normalize;
use crate::cuda::chain::{ChainPiece, ChainStep};
use crate::cuda::desc::{conv_flags, ConvertDesc};
use crate::cuda::run::run_convert;
use crate::cuda::{Device, DeviceBatch, DeviceImage, FusedSample};
use crate::error::Error;
use crate::image::Layout;
use crate::ops::{check_setups, GpuOperator, Setup};

impl GpuOperator for Normalize {
    /// Normalizes every image of a batch into `self.dtype`.
    fn launch(
        &self,
        dev: &Device,
        inputs: &[DeviceImage],
        setups: &[Setup],
    ) -> Result<DeviceBatch, Error> {
        check_setups(inputs, setups)?;
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

    fn chain_step(&self) -> Result<ChainStep, String> {
        Ok(ChainStep::Normalize { dtype: self.dtype })
    }

    fn chain_piece(&self, setup: &Setup) -> Result<ChainPiece, String> {
        let c = setup.output.channels;
        self.check_channels(c)?;
        let (mean, inv_std) = FusedSample::normalize_params(&self.mean, &self.inv_std, c)
            .map_err(|e| e.to_string())?;
        Ok(ChainPiece::Normalize { mean, inv_std })
    }
}
