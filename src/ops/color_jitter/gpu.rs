//! GPU form of `color_jitter`: the images are copied into the output batch, then for each of
//! the 4 steps (in each sample's own order) one `jitter_luma_sum` launch (only when some
//! sample applies contrast at that step; the mean depends on the image at that point) and
//! one `jitter_step` launch, each over the whole batch (`crate::cuda::run::run_jitter`). In
//! the fused chain, the factors as the jitter kernels take them.

use super::{hue_shift, ColorJitter, JitterParams};
use crate::cuda::chain::{ChainPiece, ChainStep, JitterSample};
use crate::cuda::desc::JitterDesc;
use crate::cuda::run::run_jitter;
use crate::cuda::{Device, DeviceBatch, DeviceImage};
use crate::error::Error;
use crate::ops::{check_setups, GpuOperator, Setup};

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
    /// Applies each sample's drawn adjustments to its image: u8 HWC RGB.
    fn launch(
        &self,
        dev: &Device,
        inputs: &[DeviceImage],
        setups: &[Setup],
    ) -> Result<DeviceBatch, Error> {
        check_setups(inputs, setups)?;
        let descs = inputs
            .iter()
            .zip(setups)
            .map(|(im, s)| {
                self.sample_of(s)
                    .map_err(Error::Cuda)?
                    .desc(im.height * im.width)
            })
            .collect::<Result<Vec<_>, Error>>()?;
        run_jitter(dev, inputs, descs)
    }

    fn chain_step(&self) -> Result<ChainStep, String> {
        Ok(ChainStep::ColorJitter)
    }

    fn chain_piece(&self, setup: &Setup) -> Result<ChainPiece, String> {
        Ok(ChainPiece::ColorJitter(self.sample_of(setup)?))
    }
}
