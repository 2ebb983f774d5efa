//! `pad` on the GPU: not part of the fused chain, which reads inside the image only, so the
//! GPU path refuses it with this reason (`pad` is declared for the CPU only).

use super::Pad;
use crate::cuda::chain::{ChainPiece, ChainStep};
use crate::ops::{GpuOperator, Setup};

const NOT_IN_CHAIN: &str =
    "pad fills borders, and the fused chain reads inside the image only: pad runs on the CPU";

impl GpuOperator for Pad {
    fn chain_step(&self) -> Result<ChainStep, String> {
        Err(NOT_IN_CHAIN.into())
    }

    fn chain_piece(&self, _: &Setup) -> Result<ChainPiece, String> {
        Err(NOT_IN_CHAIN.into())
    }
}
