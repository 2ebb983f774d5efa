//! GPU form of `crop`: in the fused chain, a window of the image (the chain reads inside
//! the image only: a window reaching outside it is run by the CPU operators).

use super::Crop;
use crate::cuda::chain::{ChainPiece, ChainStep};
use crate::ops::{CropParams, GpuOperator, Setup};

fn window_of(setup: &Setup) -> Result<&CropParams, String> {
    setup
        .crop()
        .ok_or_else(|| "crop: a setup without a window".to_string())
}

impl GpuOperator for Crop {
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
