//! GPU form of `normalize`: in the fused chain, the per-channel mean and `1 / std`.

use super::Normalize;
use crate::cuda::chain::{ChainPiece, ChainStep};
use crate::cuda::FusedSample;
use crate::ops::{GpuOperator, Setup};

impl GpuOperator for Normalize {
    fn chain_step(&self) -> Result<ChainStep, String> {
        Ok(ChainStep::Normalize { dtype: self.dtype })
    }

    fn chain_piece(&self, setup: &Setup) -> Result<ChainPiece, String> {
        let c = setup.output.channels;
        self.check_channels(c)?;
        let (mean, inv_std) = FusedSample::normalize_params(&self.mean, &self.inv_std, c)
            .map_err(|e| e.to_string())?;
        Ok(ChainPiece::Normalize { mean, inv_std })
    }
}
