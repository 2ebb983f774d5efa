//! The host-side setup of an operator for one sample (DALI's setup/run split): from the
//! input's shape and the sample's identity, the output shape and the parameters drawn, with
//! no pixels touched. The CPU path runs it inside `run_cpu`; the GPU path runs it on the host
//! and hands the results to the batched launch, so both pick the same crops and flips.

use crate::decode::ImageInfo;
use crate::image::{DType, Image, Layout};
use crate::rng::SampleRng;

use super::params::{ColorJitterParams, CropParams, FlipParams, OpParams};

/// The shape of one image, without its pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageShape {
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
    /// Channels.
    pub channels: usize,
    /// Element type.
    pub dtype: DType,
    /// Memory layout.
    pub layout: Layout,
}

impl ImageShape {
    /// The shape of `im`.
    pub fn of(im: &Image) -> ImageShape {
        ImageShape {
            height: im.height,
            width: im.width,
            channels: im.channels,
            dtype: im.dtype(),
            layout: im.layout,
        }
    }

    /// The same shape with another size.
    pub fn with_size(self, height: usize, width: usize) -> ImageShape {
        ImageShape {
            height,
            width,
            ..self
        }
    }
}

/// What an operator's setup sees of its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetupInput<'a> {
    /// Encoded bytes, known by their parsed header (decoders).
    Encoded(&'a ImageInfo),
    /// An image of this shape.
    Image(ImageShape),
}

impl SetupInput<'_> {
    /// The image shape, or a message saying encoded bytes came instead.
    pub fn image(&self) -> Result<ImageShape, String> {
        match self {
            SetupInput::Image(s) => Ok(*s),
            SetupInput::Encoded(_) => Err("expected an image, got encoded bytes".into()),
        }
    }
}

/// Who a sample is, for one operator: what keys that operator's random stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleKey {
    /// Pipeline seed.
    pub seed: u64,
    /// Epoch number (from 0).
    pub epoch: u64,
    /// Index of the sample in the dataset.
    pub index: usize,
    /// Key of the operator (hash of its name).
    pub op_key: u64,
}

impl SampleKey {
    /// The operator's random stream for this sample.
    pub fn rng(&self) -> SampleRng {
        SampleRng::for_sample(self.seed, self.epoch, self.index as u64, self.op_key)
    }

    /// The same sample, for another operator.
    pub fn for_op(self, op_key: u64) -> SampleKey {
        SampleKey { op_key, ..self }
    }
}

/// What an operator's setup decided for one sample: its output shape and the parameters it
/// drew (exactly what `run_cpu` records, `None` for operators with nothing to record).
#[derive(Debug, Clone, PartialEq)]
pub struct Setup {
    /// Shape of the output.
    pub output: ImageShape,
    /// The parameters drawn, as recorded in the batch.
    pub params: Option<OpParams>,
}

impl Setup {
    /// A setup that draws nothing.
    pub fn shape(output: ImageShape) -> Setup {
        Setup {
            output,
            params: None,
        }
    }

    /// The crop window drawn, if any.
    pub fn crop(&self) -> Option<&CropParams> {
        self.params.as_ref().and_then(OpParams::as_crop)
    }

    /// The flips drawn, if any.
    pub fn flip(&self) -> Option<&FlipParams> {
        self.params.as_ref().and_then(OpParams::as_flip)
    }

    /// The jitter factors drawn, if any.
    pub fn color_jitter(&self) -> Option<&ColorJitterParams> {
        self.params.as_ref().and_then(OpParams::as_color_jitter)
    }
}
