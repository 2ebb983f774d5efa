//! GPU form of `resize`: one launch of the `resize_u8` kernel (the fused chain's resampler
//! alone) with each sample's output size from the host setup; in the fused chain, the whole
//! image resampled to that size.

use super::Resize;
use crate::cuda::chain::{resize_batch, ChainPiece, ChainStep, Resample};
use crate::cuda::{Device, DeviceBatch, DeviceImage};
use crate::error::Error;
use crate::ops::{check_setups, GpuOperator, Setup};

impl GpuOperator for Resize {
    /// Resizes every image of a batch to its setup's output size, bit-exact with the CPU.
    fn launch(
        &self,
        dev: &Device,
        inputs: &[DeviceImage],
        setups: &[Setup],
    ) -> Result<DeviceBatch, Error> {
        check_setups(inputs, setups)?;
        let windows: Vec<_> = inputs
            .iter()
            .map(|im| (0, 0, im.height, im.width))
            .collect();
        let sizes: Vec<_> = setups
            .iter()
            .map(|s| (s.output.height, s.output.width))
            .collect();
        resize_batch(dev, inputs, &windows, &sizes, self.interp, self.antialias)
    }

    fn chain_step(&self) -> Result<ChainStep, String> {
        Ok(ChainStep::Geometry {
            resample: Some(Resample {
                interp: self.interp,
                antialias: self.antialias,
            }),
        })
    }

    fn chain_piece(&self, setup: &Setup) -> Result<ChainPiece, String> {
        Ok(ChainPiece::Geometry {
            window: None,
            out: (setup.output.height, setup.output.width),
        })
    }
}
