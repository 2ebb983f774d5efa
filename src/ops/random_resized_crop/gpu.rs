//! GPU form of `random_resized_crop`: the windows are drawn by the host setup (the CPU's
//! [`choose_window`](crate::ops::random_resized_crop::choose_window) with each sample's random
//! stream); in the fused chain, a window resampled to the size.

use super::RandomResizedCrop;
use crate::cuda::chain::{ChainPiece, ChainStep, Resample};
use crate::ops::{CropParams, GpuOperator, Setup};

fn window_of(setup: &Setup) -> Result<&CropParams, String> {
    setup
        .crop()
        .ok_or_else(|| "random_resized_crop: a setup without a window".to_string())
}

impl GpuOperator for RandomResizedCrop {
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
