//! GPU form of `random_resized_crop`: the windows are drawn by the host setup (the CPU's
//! [`choose_window`](crate::ops::random_resized_crop::choose_window) with each sample's random stream), then one
//! `resize_u8` launch reads each window; in the fused chain, a window resampled to the size.

use super::RandomResizedCrop;
use crate::cuda::chain::{resize_batch, ChainPiece, ChainStep, Resample};
use crate::cuda::{Device, DeviceBatch, DeviceImage};
use crate::error::Error;
use crate::ops::{check_setups, CropParams, GpuOperator, Setup};

fn window_of(setup: &Setup) -> Result<&CropParams, String> {
    setup
        .crop()
        .ok_or_else(|| "random_resized_crop: a setup without a window".to_string())
}

impl GpuOperator for RandomResizedCrop {
    /// Resizes each sample's drawn window to the output size.
    fn launch(
        &self,
        dev: &Device,
        inputs: &[DeviceImage],
        setups: &[Setup],
    ) -> Result<DeviceBatch, Error> {
        check_setups(inputs, setups)?;
        let windows = setups
            .iter()
            .map(|s| window_of(s).map(|c| (c.top as usize, c.left as usize, c.height, c.width)))
            .collect::<Result<Vec<_>, String>>()
            .map_err(Error::Cuda)?;
        let sizes = vec![(self.height, self.width); inputs.len()];
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
        let c = window_of(setup)?;
        Ok(ChainPiece::Geometry {
            window: Some((c.top, c.left, c.height, c.width)),
            out: (self.height, self.width),
        })
    }
}
