//! GPU form of `cast`: in the fused chain, the output element type.

use super::Cast;
use crate::cuda::chain::{ChainPiece, ChainStep};
use crate::ops::{GpuOperator, Setup};

impl GpuOperator for Cast {
    fn chain_step(&self) -> Result<ChainStep, String> {
        Ok(ChainStep::Cast { dtype: self.dtype })
    }

    fn chain_piece(&self, _: &Setup) -> Result<ChainPiece, String> {
        Ok(ChainPiece::Fixed)
    }
}
