//! Operators: the interface every operator implements (host setup, CPU run, and its piece of
//! the fused GPU chain where it has one), and the operator folders, each holding its schema
//! and arguments, CPU code, GPU form (`gpu.rs`: its chain piece) and tests.
//!
//! An operator maps the values on its input edges to values on its output edges for one
//! sample. Its random choices are made by its host [`Operator::setup`] from a [`SampleRng`]
//! keyed by (seed, epoch, sample index, operator name) and recorded as [`OpParams`]: the CPU
//! path runs the setup inside [`Operator::run_cpu`], the GPU path runs it on the host and
//! turns the results into its pieces of the fused chain ([`GpuOperator::chain_piece`],
//! [`crate::cuda::chain`]), so both paths make exactly the same choices.
//!
//! Operators never import each other: code two operators share lives beside them
//! ([`window`]), in [`crate::resample`], or in the fused operators of [`crate::fusion`].

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use crate::cuda::chain::{ChainPiece, ChainStep};
use crate::error::SampleErrorKind;
use crate::image::{DType, Layout};
use crate::rng::SampleRng;
use crate::value::{Value, ValueType, Values};

pub mod params;
pub mod setup;
pub mod window;

pub mod cast;
pub mod color_jitter;
pub mod crop;
pub mod decode;
pub mod flip;
pub mod layout;
pub mod normalize;
pub mod pad;
pub mod random_resized_crop;
pub mod resize;

#[cfg(test)]
mod goldens;
#[cfg(test)]
pub(crate) mod testing;

/// The argument and port declarations ([`crate::schema`], shared with the readers and the
/// settings), here too so that an operator's folder takes all it is made of from `super`.
pub use crate::schema::{
    ArgError, ArgSpec, ArgType, ArgValue, Args, Backends, OpSchema, PortSpec, OPTIONAL, READER_KIND,
};
pub use params::{ColorJitterParams, CropParams, FlipParams, OpParams, SampleParams};
pub use setup::{ImageShape, SampleKey, Setup, SetupInput};

/// Builds an operator of one kind from validated arguments (defaults filled in); each
/// operator module has one, named `build`.
pub type BuildFn = fn(&Args) -> Result<Box<dyn Operator>, ArgError>;

/// A built operator, ready to run on samples.
pub trait Operator: Send + Sync + fmt::Debug {
    /// Output types from input types; an `Err` says what is wrong with the inputs.
    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String>;

    /// Where [`Operator::infer`] refuses `inputs` because of one of the operator's own
    /// arguments (normalize's `mean` with 3 values for gray images), that argument's name: a
    /// pipeline file's checker points at it rather than at the input. `None` (the default):
    /// what feeds the operator is what to change.
    fn argument_at_fault(&self, _inputs: &[ValueType]) -> Option<&'static str> {
        None
    }

    /// The host setup for one sample: from the input's shape and the sample's identity, the
    /// output shape and the parameters drawn — the draws [`Operator::run_cpu`] makes and
    /// records for the same sample. Reads no pixels. An `Err` says why this input can't be
    /// processed (what `run_cpu` would report). Operators with no setup (fused CPU operators,
    /// which the GPU path never runs) say so.
    fn setup(&self, input: SetupInput<'_>, sample: &SampleKey) -> Result<Setup, String> {
        let _ = (input, sample);
        Err("this operator has no host setup (it runs on the CPU only)".into())
    }

    /// Runs on one sample on the CPU. `inputs` are owned so operators can work in place.
    fn run_cpu(
        &self,
        inputs: Values,
        ctx: &mut SampleContext<'_>,
    ) -> Result<Values, SampleErrorKind>;

    /// As [`Operator::run_cpu`], but an operator with one image output may write that output
    /// straight into the room `place` offers (a place of the batch being filled, which saves
    /// copying it there); it then returns no values. The default runs [`Operator::run_cpu`].
    fn run_cpu_into(
        &self,
        inputs: Values,
        ctx: &mut SampleContext<'_>,
        place: &mut dyn OutputPlace,
    ) -> Result<Values, SampleErrorKind> {
        let _ = place;
        self.run_cpu(inputs, ctx)
    }

    /// The largest encoded input this operator accepts, so readers can refuse bigger files
    /// before reading them (decoders override this).
    fn max_input_bytes(&self) -> Option<u64> {
        None
    }

    /// The batched GPU form of this operator, where it has one (the decoder's GPU form is
    /// nvJPEG, which the GPU stage drives itself).
    fn gpu(&self) -> Option<&dyn GpuOperator> {
        None
    }
}

/// The GPU form of an operator: its piece of the fused chain.
///
/// The GPU stage sets each sample up on the host with [`Operator::setup`] (so it draws
/// exactly what the CPU path draws), composes every operator's
/// [`GpuOperator::chain_piece`] into one [`crate::cuda::FusedSample`] per sample
/// ([`crate::fusion::chain::SampleChain`] does that composition) and launches the chain once
/// per batch.
pub trait GpuOperator: Send + Sync {
    /// What this operator is in the fused chain, known before any sample (checked once at
    /// pipeline start by [`crate::cuda::chain::ChainSteps::new`]); an `Err` says why the chain
    /// can't do it.
    fn chain_step(&self) -> Result<ChainStep, String>;

    /// This operator's piece of one sample's fused work, from the setup drawn for it.
    fn chain_piece(&self, setup: &Setup) -> Result<ChainPiece, String>;
}

/// Where an operator may write its one image output in place (see
/// [`Operator::run_cpu_into`]).
pub trait OutputPlace {
    /// Room for an image of `dtype` and `layout` with `shape` (in layout order), if this place
    /// takes one; once given, the operator must write every element and return no values.
    fn room(&mut self, dtype: DType, layout: Layout, shape: [usize; 3]) -> Option<PixelsMut<'_>>;
}

/// Writable elements of one image, of one of the element types.
#[derive(Debug)]
pub enum PixelsMut<'a> {
    /// 8-bit.
    U8(&'a mut [u8]),
    /// Half precision.
    F16(&'a mut [half::f16]),
    /// Single precision.
    F32(&'a mut [f32]),
}

/// Per-sample state an operator sees while running: who the sample is, its random stream,
/// and where to record the parameters it chose.
pub struct SampleContext<'a> {
    /// Pipeline seed.
    pub seed: u64,
    /// Epoch number (from 0).
    pub epoch: u64,
    /// Index of the sample in the dataset.
    pub index: usize,
    /// Path of the sample's file.
    pub path: &'a Path,
    /// Key of the operator now running (hash of its name).
    pub op_key: u64,
    /// Name of the operator now running.
    pub op_name: &'a Arc<str>,
    /// Parameters recorded so far for this sample.
    pub params: &'a mut crate::ops::SampleParams,
}

impl SampleContext<'_> {
    /// Who the sample is, for the running operator (what its setup draws from).
    pub fn key(&self) -> SampleKey {
        SampleKey {
            seed: self.seed,
            epoch: self.epoch,
            index: self.index,
            op_key: self.op_key,
        }
    }

    /// The random stream of the running operator for this sample.
    pub fn rng(&self) -> SampleRng {
        SampleRng::for_sample(self.seed, self.epoch, self.index as u64, self.op_key)
    }

    /// Runs the operator's setup on `input` and records the parameters it drew; an error
    /// becomes this operator's error for the sample.
    pub fn setup(
        &mut self,
        op: &(impl Operator + ?Sized),
        input: SetupInput<'_>,
    ) -> Result<Setup, SampleErrorKind> {
        let s = op.setup(input, &self.key()).map_err(|e| self.error(e))?;
        if let Some(p) = &s.params {
            self.record(p.clone());
        }
        Ok(s)
    }

    /// Records the parameters the running operator chose.
    pub fn record(&mut self, p: OpParams) {
        self.params.push((self.op_name.clone(), p));
    }

    /// An operator error for this sample.
    pub fn error(&self, message: impl Into<String>) -> SampleErrorKind {
        SampleErrorKind::Op {
            op: self.op_name.to_string(),
            message: message.into(),
        }
    }
}

/// Takes the single image out of `inputs`, or says what came instead.
pub fn single_image(
    inputs: Values,
    ctx: &SampleContext<'_>,
) -> Result<crate::image::Image, SampleErrorKind> {
    match inputs.into_iter().next() {
        Some(Value::Image(im)) => Ok(im),
        Some(other) => Err(ctx.error(format!("expected an image, got {}", other.value_type()))),
        None => Err(ctx.error("missing input")),
    }
}
