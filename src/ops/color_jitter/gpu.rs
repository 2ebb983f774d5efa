//! GPU form of `color_jitter`: in the fused chain, the factors as the jitter kernels take
//! them (the chain runs the jitter between two launches: `crate::cuda::chain::launcher`).

use super::{hue_shift, ColorJitter, JitterParams};
use crate::cuda::chain::{ChainPiece, ChainStep, JitterSample};
use crate::cuda::desc::JitterDesc;
use crate::error::Error;
use crate::ops::{GpuOperator, Setup};

/// One sample's choice as the jitter kernels take it (factors as f32, the hue as the byte
/// added to H).
pub fn jitter_sample(p: &JitterParams) -> JitterSample {
    JitterSample {
        order: p.order,
        brightness: p.brightness.map(|f| f as f32),
        contrast: p.contrast.map(|f| f as f32),
        saturation: p.saturation.map(|f| f as f32),
        hue_shift: p.hue.map(hue_shift),
    }
}

/// The descriptor of one sample of `pixels` pixels (address left 0).
pub fn jitter_desc(pixels: usize, p: &JitterParams) -> Result<JitterDesc, Error> {
    jitter_sample(p).desc(pixels)
}

impl ColorJitter {
    /// The choice recorded in `setup`, as the jitter kernels take it.
    fn sample_of(&self, setup: &Setup) -> Result<JitterSample, String> {
        let recorded = setup
            .color_jitter()
            .ok_or("color_jitter: a setup without factors")?;
        Ok(jitter_sample(&self.from_recorded(recorded)))
    }
}

impl GpuOperator for ColorJitter {
    fn chain_step(&self) -> Result<ChainStep, String> {
        Ok(ChainStep::ColorJitter)
    }

    fn chain_piece(&self, setup: &Setup) -> Result<ChainPiece, String> {
        Ok(ChainPiece::ColorJitter(self.sample_of(setup)?))
    }
}
