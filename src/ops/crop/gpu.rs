//! GPU form of `crop`: one launch of the `crop_fill` kernels over the batch (the window code
//! `pad` shares, in [`crate::ops::window`]), windows from the host setups; in the fused
//! chain, a window of the image.

use super::Crop;
use crate::cuda::chain::{ChainPiece, ChainStep};
use crate::cuda::{Device, DeviceBatch, DeviceImage};
use crate::error::Error;
use crate::ops::window::window_fill_batch;
use crate::ops::{check_setups, CropParams, GpuOperator, Setup};

fn window_of(setup: &Setup) -> Result<&CropParams, String> {
    setup
        .crop()
        .ok_or_else(|| "crop: a setup without a window".to_string())
}

impl GpuOperator for Crop {
    fn launch(
        &self,
        dev: &Device,
        inputs: &[DeviceImage],
        setups: &[Setup],
    ) -> Result<DeviceBatch, Error> {
        check_setups(inputs, setups)?;
        let windows = setups
            .iter()
            .map(|s| window_of(s).map(|c| (c.top, c.left, c.height, c.width)))
            .collect::<Result<Vec<_>, String>>()
            .map_err(Error::Cuda)?;
        window_fill_batch(dev, inputs, &windows, &[self.fill])
    }

    fn chain_step(&self) -> Result<ChainStep, String> {
        Ok(ChainStep::Geometry { resample: None })
    }

    fn chain_piece(&self, setup: &Setup) -> Result<ChainPiece, String> {
        let c = window_of(setup)?;
        Ok(ChainPiece::Geometry {
            window: Some((c.top, c.left, c.height, c.width)),
            out: (c.height, c.width),
        })
    }
}
