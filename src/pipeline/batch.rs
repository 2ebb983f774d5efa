//! Batches: one contiguous tensor per image output, labels, and who each sample is.

use std::path::PathBuf;
use std::sync::Arc;

use half::f16;

use crate::error::SampleError;
use crate::image::{DType, Image, Layout, Pixels};
use crate::ops::OpParams;

/// The images of one output for a whole batch, in one contiguous buffer.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchTensor {
    /// Element type.
    pub dtype: DType,
    /// Layout of each sample.
    pub layout: Layout,
    /// Each sample's shape in layout order (`[h, w, c]` or `[c, h, w]`).
    pub shapes: Vec<[usize; 3]>,
    /// Each sample's first element in `data`.
    pub offsets: Vec<usize>,
    /// All samples, back to back.
    pub data: Pixels,
}

impl BatchTensor {
    /// Concatenates images (all of one dtype and layout).
    pub fn from_images(images: &[&Image]) -> BatchTensor {
        let dtype = images.first().map_or(DType::U8, |i| i.dtype());
        let layout = images.first().map_or(Layout::Hwc, |i| i.layout);
        let total: usize = images.iter().map(|i| i.pixels.len()).sum();
        let mut shapes = Vec::with_capacity(images.len());
        let mut offsets = Vec::with_capacity(images.len());
        let mut off = 0;
        for im in images {
            shapes.push(im.shape());
            offsets.push(off);
            off += im.pixels.len();
        }
        macro_rules! cat {
            ($variant:ident, $t:ty) => {{
                let mut v: Vec<$t> = Vec::with_capacity(total);
                for im in images {
                    if let Pixels::$variant(p) = &im.pixels {
                        v.extend_from_slice(p);
                    }
                }
                Pixels::$variant(v)
            }};
        }
        let data = match dtype {
            DType::U8 => cat!(U8, u8),
            DType::F16 => cat!(F16, f16),
            DType::F32 => cat!(F32, f32),
        };
        BatchTensor {
            dtype,
            layout,
            shapes,
            offsets,
            data,
        }
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.shapes.len()
    }

    /// True when there are no samples (never the case for a delivered batch).
    pub fn is_empty(&self) -> bool {
        self.shapes.is_empty()
    }

    /// The batch shape `[n, ...sample shape]` when every sample has the same shape.
    pub fn shape(&self) -> Option<[usize; 4]> {
        let first = *self.shapes.first()?;
        self.shapes.iter().all(|s| *s == first).then_some([
            self.shapes.len(),
            first[0],
            first[1],
            first[2],
        ])
    }

    /// The data as `f32`, if that is its type.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.data {
            Pixels::F32(v) => Some(v),
            _ => None,
        }
    }

    /// The data as `f16`, if that is its type.
    pub fn as_f16(&self) -> Option<&[f16]> {
        match &self.data {
            Pixels::F16(v) => Some(v),
            _ => None,
        }
    }

    /// The data as `u8`, if that is its type.
    pub fn as_u8(&self) -> Option<&[u8]> {
        match &self.data {
            Pixels::U8(v) => Some(v),
            _ => None,
        }
    }

    /// The raw bytes of the whole batch.
    pub fn as_bytes(&self) -> &[u8] {
        self.data.as_bytes()
    }

    /// Size of the data in bytes.
    pub fn nbytes(&self) -> usize {
        self.data.len() * self.dtype.size()
    }
}

/// One output of a batch.
#[derive(Debug, Clone, PartialEq)]
pub enum BatchOutput {
    /// Images.
    Images(BatchTensor),
    /// Labels.
    Labels(Vec<i64>),
}

/// Who a sample in a batch is, and the random parameters applied to it.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleInfo {
    /// Index in the dataset (position in the reader's sorted listing).
    pub index: usize,
    /// The file.
    pub path: PathBuf,
    /// The label the reader gave it.
    pub label: i64,
    /// Random parameters chosen by each operator, by operator name.
    pub params: Vec<(Arc<str>, OpParams)>,
}

/// A batch of samples, as handed to the consumer.
#[derive(Debug, Clone)]
pub struct Batch {
    /// Epoch (from 0).
    pub epoch: u64,
    /// Index of this batch in its epoch.
    pub index: usize,
    /// Output names, in the order of `outputs`.
    pub names: Arc<[String]>,
    /// The outputs, in the order the pipeline names them.
    pub outputs: Vec<BatchOutput>,
    /// The samples, in batch order.
    pub samples: Vec<SampleInfo>,
    /// How many trailing samples are repeats added by `last_batch = "pad"`.
    pub padded: usize,
    /// Bad samples met (skipped, or replaced under `on_error = "replace"`) since the
    /// previous batch, each with its path and cause.
    pub skipped: Vec<SampleError>,
    /// Where to resume to get the batches after this one ([`crate::Pipeline::resume`]).
    pub resume: crate::pipeline::executor::Position,
}

impl Batch {
    /// Number of samples (padding included).
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Never true for a delivered batch.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// An output by name.
    pub fn get(&self, name: &str) -> Option<&BatchOutput> {
        let k = self.names.iter().position(|n| n == name)?;
        self.outputs.get(k)
    }

    /// An image output by name.
    pub fn images(&self, name: &str) -> Option<&BatchTensor> {
        match self.get(name)? {
            BatchOutput::Images(t) => Some(t),
            BatchOutput::Labels(_) => None,
        }
    }

    /// A label output by name.
    pub fn labels(&self, name: &str) -> Option<&[i64]> {
        match self.get(name)? {
            BatchOutput::Labels(l) => Some(l),
            BatchOutput::Images(_) => None,
        }
    }
}
