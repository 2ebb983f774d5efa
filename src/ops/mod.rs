//! Operators: each lives in one folder with its schema and arguments, its CPU reference
//! code and its tests (and, on the GPU path, its kernel launcher).
//!
//! An operator maps the values on its input edges to values on its output edges for one
//! sample. Random choices are made by a pure `choose` step from a [`SampleRng`] keyed by
//! (seed, epoch, sample index, operator name), recorded in [`OpParams`] and then applied,
//! so the GPU path can recompute exactly the same parameters.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use crate::error::SampleErrorKind;
use crate::image::{DType, Layout};
use crate::rng::SampleRng;
use crate::value::{Value, ValueType};

pub mod schema;

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

pub use schema::{
    ArgError, ArgSpec, ArgType, ArgValue, Args, Backends, OpSchema, PortSpec, OPTIONAL,
};

/// A built operator, ready to run on samples.
pub trait Operator: Send + Sync + fmt::Debug {
    /// Output types from input types; an `Err` says what is wrong with the inputs.
    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String>;

    /// Runs on one sample on the CPU. `inputs` are owned so operators can work in place.
    fn run_cpu(
        &self,
        inputs: Vec<Value>,
        ctx: &mut SampleContext<'_>,
    ) -> Result<Vec<Value>, SampleErrorKind>;

    /// As [`Operator::run_cpu`], but an operator with one image output may write that output
    /// straight into the room `slot` offers (a slot of the batch being filled, which saves
    /// copying it there); it then returns no values. The default runs [`Operator::run_cpu`].
    fn run_cpu_into(
        &self,
        inputs: Vec<Value>,
        ctx: &mut SampleContext<'_>,
        slot: &mut dyn OutputSlot,
    ) -> Result<Vec<Value>, SampleErrorKind> {
        let _ = slot;
        self.run_cpu(inputs, ctx)
    }

    /// The largest encoded input this operator accepts, so readers can refuse bigger files
    /// before reading them (decoders override this).
    fn max_input_bytes(&self) -> Option<u64> {
        None
    }

    /// The layout this operator converts to, if it is a pure layout change (lets the
    /// operator before it write that layout directly).
    fn converts_to_layout(&self) -> Option<crate::image::Layout> {
        None
    }

    /// One operator doing the work of `self` followed by `next`, when that is faster and
    /// gives bit-identical results (same values, same recorded parameters under the same
    /// operator names); the executor uses it for adjacent pairs.
    fn fuse_with(&self, next: FuseTarget<'_>) -> Option<Box<dyn Operator>> {
        let _ = next;
        None
    }

    /// This operator as `Any`, for operators that others may fuse with (they downcast).
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }

    /// This operator as a random resized crop, if it is one (for fusing it with decoding).
    fn as_random_resized_crop(&self) -> Option<&random_resized_crop::RandomResizedCrop> {
        None
    }

    /// For a fused operator whose results differ from the unfused pair's on purpose (an
    /// opt-in approximation), what differs; `None` for bit-identical fusions.
    fn fusion_differs(&self) -> Option<&'static str> {
        None
    }
}

/// Where an operator may write its one image output in place (see
/// [`Operator::run_cpu_into`]).
pub trait OutputSlot {
    /// Room for an image of `dtype` and `layout` with `shape` (in layout order), if this slot
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

/// The second operator of a pair offered for fusion, with its identity (its name and key
/// keep its random stream and recorded parameters the same when fused).
#[derive(Clone, Copy)]
pub struct FuseTarget<'a> {
    /// The operator.
    pub op: &'a dyn Operator,
    /// Its name in the pipeline.
    pub name: &'a Arc<str>,
    /// Its random-stream key.
    pub key: u64,
    /// The name of the first operator of the pair (the one offering to fuse).
    pub first_name: &'a Arc<str>,
    /// The first operator's random-stream key.
    pub first_key: u64,
}

/// Random parameters an operator chose for one sample, returned with the batch so users
/// can transform boxes and masks the same way.
#[derive(Debug, Clone, PartialEq)]
pub enum OpParams {
    /// A crop window in the input image (after EXIF orientation), in pixels. `top` and `left`
    /// are negative when the window starts above or left of the image (a crop larger than the
    /// image, filled outside).
    Crop {
        /// First row.
        top: i64,
        /// First column.
        left: i64,
        /// Rows.
        height: usize,
        /// Columns.
        width: usize,
    },
    /// Which flips were applied.
    Flip {
        /// Mirrored left–right.
        horizontal: bool,
        /// Mirrored top–bottom.
        vertical: bool,
    },
    /// Color jitter factors and the order they were applied in.
    ColorJitter {
        /// Indices into [brightness, contrast, saturation, hue], in application order.
        order: [u8; 4],
        /// Brightness factor (1 = unchanged).
        brightness: f64,
        /// Contrast factor (1 = unchanged).
        contrast: f64,
        /// Saturation factor (1 = unchanged).
        saturation: f64,
        /// Hue shift in turns, in [-0.5, 0.5] (0 = unchanged).
        hue: f64,
    },
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
    pub params: &'a mut Vec<(Arc<str>, OpParams)>,
}

impl SampleContext<'_> {
    /// The random stream of the running operator for this sample.
    pub fn rng(&self) -> SampleRng {
        SampleRng::for_sample(self.seed, self.epoch, self.index as u64, self.op_key)
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

/// The schema of the file reader: it is a graph node like any other, but runs on the
/// reader threads rather than per sample on the workers.
pub const READER_KIND: &str = "file_reader";

/// All operator kinds, the reader first.
pub fn registry() -> &'static [&'static OpSchema] {
    static ALL: &[&OpSchema] = &[
        &crate::reader::SCHEMA,
        &crate::reader::SHARD_SCHEMA,
        &decode::SCHEMA,
        &crop::SCHEMA,
        &random_resized_crop::SCHEMA,
        &resize::SCHEMA,
        &flip::SCHEMA,
        &color_jitter::SCHEMA,
        &normalize::SCHEMA,
        &cast::SCHEMA,
        &layout::SCHEMA,
        &pad::SCHEMA,
    ];
    ALL
}

/// Looks up an operator kind by name.
pub fn find(kind: &str) -> Option<&'static OpSchema> {
    registry().iter().copied().find(|s| s.kind == kind)
}

/// Takes the single image out of `inputs`, or says what came instead.
pub fn single_image(
    inputs: Vec<Value>,
    ctx: &SampleContext<'_>,
) -> Result<crate::image::Image, SampleErrorKind> {
    match inputs.into_iter().next() {
        Some(Value::Image(im)) => Ok(im),
        Some(other) => Err(ctx.error(format!("expected an image, got {}", other.value_type()))),
        None => Err(ctx.error("missing input")),
    }
}
