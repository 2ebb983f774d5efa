//! GPU form of `layout`: in the fused chain, the output layout.

use super::ToLayout;
use crate::cuda::chain::{ChainPiece, ChainStep};
use crate::ops::{GpuOperator, Setup};

impl GpuOperator for ToLayout {
    fn chain_step(&self) -> Result<ChainStep, String> {
        Ok(ChainStep::Layout {
            layout: self.layout,
        })
    }

    fn chain_piece(&self, _: &Setup) -> Result<ChainPiece, String> {
        Ok(ChainPiece::Fixed)
    }
}
