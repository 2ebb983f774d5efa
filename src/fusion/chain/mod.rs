//! The fused chain on the GPU, the operators' side (the kernel's is [`crate::cuda::chain`]):
//! the operators after the decoder, composed for the chain, checked once when the pipeline
//! starts ([`SampleChain::new`] refuses, with the operator and the reason, a chain
//! the fused kernel can't run), then set up per sample on the host ([`SampleChain::sample`]):
//! each operator's [`Operator::setup`] draws exactly what its `run_cpu` would, and its
//! [`GpuOperator::chain_piece`](crate::ops::GpuOperator::chain_piece) turns that into its piece of
//! the sample's [`FusedSample`].

use std::sync::Arc;

use crate::cuda::chain::{ChainError, ChainPiece, ChainSteps};
use crate::cuda::FusedSample;
use crate::image::{DType, Layout};

use crate::ops::{ImageShape, Operator, SampleKey, SetupInput};

#[cfg(test)]
mod kernel_tests;
#[cfg(test)]
pub(crate) mod on_device;

/// One operator of a chain, with the identity that keys its random stream.
#[derive(Clone, Copy)]
pub struct ChainOp<'a> {
    /// Its name in the pipeline (parameters are recorded under it).
    pub name: &'a Arc<str>,
    /// Its random-stream key (the hash of its name).
    pub key: u64,
    /// The operator.
    pub op: &'a dyn Operator,
}

/// One sample's setup through the chain: what the fused kernel does to it, and the parameters
/// recorded for it (by operator name, in order: what the CPU path records for the same
/// sample).
#[derive(Debug, Clone, PartialEq)]
pub struct ChainSetup {
    /// The fused chain's work for this sample.
    pub fused: FusedSample,
    /// The parameters drawn, by operator name.
    pub params: crate::ops::SampleParams,
}

/// The operators after the decoder, checked to compose into the fused chain.
pub struct SampleChain<'a> {
    ops: Vec<ChainOp<'a>>,
    steps: ChainSteps,
}

impl<'a> SampleChain<'a> {
    /// Checks that `ops` (in data-flow order, the first taking the decoded u8 HWC images)
    /// compose into the fused chain: each has a GPU form with a chain step, in an order the
    /// kernel can apply. The error names the first operator that doesn't, and why.
    pub fn new(ops: Vec<ChainOp<'a>>) -> Result<SampleChain<'a>, ChainError> {
        let mut steps = Vec::with_capacity(ops.len());
        for o in &ops {
            let refuse = |reason: String| ChainError {
                op: o.name.to_string(),
                reason,
            };
            let gpu =
                o.op.gpu()
                    .ok_or_else(|| refuse("it has no GPU form".to_string()))?;
            steps.push((o.name.to_string(), gpu.chain_step().map_err(refuse)?));
        }
        Ok(SampleChain {
            ops,
            steps: ChainSteps::new(steps)?,
        })
    }

    /// The checked steps.
    pub fn steps(&self) -> &ChainSteps {
        &self.steps
    }

    /// Sets up sample `index` of `epoch` under `seed`, whose decoded image has shape
    /// `decoded` (u8 HWC, from the decoder's setup on the parsed header): every operator's
    /// setup in order, each on the shape the one before it produces, and the pieces
    /// composed. Errors name the operator: what its setup refuses (as `run_cpu` would for
    /// this sample), or what the fused kernel can't do for this sample.
    pub fn sample(
        &self,
        decoded: ImageShape,
        seed: u64,
        epoch: u64,
        index: usize,
    ) -> Result<ChainSetup, ChainError> {
        if (decoded.dtype, decoded.layout) != (DType::U8, Layout::Hwc) {
            return Err(ChainError {
                op: self
                    .ops
                    .first()
                    .map_or(String::new(), |o| o.name.to_string()),
                reason: "the fused chain starts from decoded u8 HWC images".into(),
            });
        }
        let mut shape = decoded;
        // In place: a chain has a handful of operators.
        let mut pieces: smallvec::SmallVec<[ChainPiece; 8]> = smallvec::SmallVec::new();
        let mut params = crate::ops::SampleParams::new();
        for o in &self.ops {
            let refuse = |reason: String| ChainError {
                op: o.name.to_string(),
                reason,
            };
            let key = SampleKey {
                seed,
                epoch,
                index,
                op_key: o.key,
            };
            let setup = o.op.setup(SetupInput::Image(shape), &key).map_err(refuse)?;
            let gpu =
                o.op.gpu()
                    .ok_or_else(|| refuse("it has no GPU form".into()))?;
            pieces.push(gpu.chain_piece(&setup).map_err(refuse)?);
            if let Some(p) = setup.params {
                params.push((o.name.clone(), p));
            }
            shape = setup.output;
        }
        let fused = self
            .steps
            .sample((decoded.height, decoded.width, decoded.channels), &pieces)?;
        Ok(ChainSetup { fused, params })
    }
}
