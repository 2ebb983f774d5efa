//! GPU form of `flip`: in the fused chain, the mirror flags each sample drew.

use super::Flip;
use crate::cuda::chain::{ChainPiece, ChainStep};
use crate::ops::{GpuOperator, Setup};

impl GpuOperator for Flip {
    fn chain_step(&self) -> Result<ChainStep, String> {
        Ok(ChainStep::Flip)
    }

    fn chain_piece(&self, setup: &Setup) -> Result<ChainPiece, String> {
        let f = setup.flip().ok_or("flip: a setup without flips")?;
        Ok(ChainPiece::Flip {
            horizontal: f.horizontal,
            vertical: f.vertical,
        })
    }
}
