//! GPU form of `cast`: one launch of the `convert` kernel without normalization; in the
//! fused chain, the output element type.

use super::Cast;
use crate::cuda::chain::{ChainPiece, ChainStep};
use crate::cuda::desc::{conv_flags, ConvertDesc};
use crate::cuda::run::run_convert;
use crate::cuda::{Device, DeviceBatch, DeviceImage};
use crate::error::Error;
use crate::image::Layout;
use crate::ops::{check_setups, GpuOperator, Setup};

impl GpuOperator for Cast {
    /// Every image of a batch converted with the rules of [`super::cast_pixels`].
    fn launch(
        &self,
        dev: &Device,
        inputs: &[DeviceImage],
        setups: &[Setup],
    ) -> Result<DeviceBatch, Error> {
        check_setups(inputs, setups)?;
        let descs = inputs
            .iter()
            .map(|im| ConvertDesc {
                flags: if im.layout == Layout::Chw {
                    conv_flags::CHW
                } else {
                    0
                },
                ..ConvertDesc::default()
            })
            .collect();
        run_convert(dev, inputs, descs, self.dtype)
    }

    fn chain_step(&self) -> Result<ChainStep, String> {
        Ok(ChainStep::Cast { dtype: self.dtype })
    }

    fn chain_piece(&self, _: &Setup) -> Result<ChainPiece, String> {
        Ok(ChainPiece::Fixed)
    }
}
