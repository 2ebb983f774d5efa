//! # stokehold
//!
//! Keeps a GPU fed during training: a declarative image input pipeline (built from Rust or
//! read from a TOML pipeline file) that reads files on CPU threads, decodes JPEG and PNG,
//! augments (crop, resize, flip, color jitter, normalize, cast, layout, pad) and hands out
//! batches. The CPU path documented here is also the reference the GPU path must match.

#![warn(missing_docs)]

pub mod builtin_data;
pub mod cuda;
pub mod decode;
pub mod error;
pub mod fusion;
pub mod image;
pub mod nvjpeg;
pub mod ops;
pub mod pipeline;
pub mod reader;
pub mod resample;
pub mod rng;
pub mod schema;
pub mod scratch;
pub mod value;

#[cfg(test)]
pub(crate) mod testutil;

pub use error::{DecodeError, Error, Result, SampleError, SampleErrorKind};
pub use image::{DType, Image, Layout, Pixels};
pub use ops::{ColorJitterParams, CropParams, FlipParams, OpParams};
pub use pipeline::{Batch, OpSpec, Pipeline, PipelineSpec};
pub use value::{Value, ValueType};

/// The README's Rust example, compiled as a doctest so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
