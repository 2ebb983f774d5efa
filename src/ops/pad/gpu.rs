//! GPU form of `pad`: a window that starts `top`/`left` outside the image, one launch of the
//! `crop_fill` kernels (the window code `crop` shares, in [`crate::ops::window`]). Not part
//! of the fused chain, which reads inside the image only, so the pipeline's GPU path does not
//! run it (`pad` is declared for the CPU only); the kernel tests do.

use super::Pad;
use crate::cuda::chain::{ChainPiece, ChainStep};
use crate::cuda::{Device, DeviceBatch, DeviceImage};
use crate::error::Error;
use crate::ops::window::window_fill_batch;
use crate::ops::{check_setups, GpuOperator, Setup};

const NOT_IN_CHAIN: &str =
    "pad fills borders, and the fused chain reads inside the image only: pad runs on the CPU";

impl GpuOperator for Pad {
    /// Pads every image of a batch (same output as `run_cpu`).
    fn launch(
        &self,
        dev: &Device,
        inputs: &[DeviceImage],
        setups: &[Setup],
    ) -> Result<DeviceBatch, Error> {
        check_setups(inputs, setups)?;
        let windows: Vec<_> = setups
            .iter()
            .map(|s| {
                let (oh, ow) = (s.output.height, s.output.width);
                (-(self.top as i64), -(self.left as i64), oh, ow)
            })
            .collect();
        window_fill_batch(dev, inputs, &windows, &self.fill)
    }

    fn chain_step(&self) -> Result<ChainStep, String> {
        Err(NOT_IN_CHAIN.into())
    }

    fn chain_piece(&self, _: &Setup) -> Result<ChainPiece, String> {
        Err(NOT_IN_CHAIN.into())
    }
}
