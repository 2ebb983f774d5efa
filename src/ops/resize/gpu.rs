//! GPU form of `resize`: in the fused chain, the whole image resampled to each sample's
//! output size from the host setup.

use super::Resize;
use crate::cuda::chain::{ChainPiece, ChainStep, Resample};
use crate::ops::{GpuOperator, Setup};

impl GpuOperator for Resize {
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
