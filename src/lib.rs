//! # stokehold
//!
//! Keeps a GPU fed during training: a declarative image input pipeline (built from Rust or
//! read from a TOML pipeline file) that reads files or tar shards on CPU threads, decodes
//! JPEG and PNG, augments (crop, resize, flip, color jitter, normalize, cast, layout, pad)
//! and hands out batches: those of Pillow and torchvision (bit for bit for decoding,
//! resizing, cropping and color jitter), the same for a seed whatever the thread count.
//! The CPU path is complete and is the reference; the GPU path (nvJPEG's JPEG engines beside
//! our CPU decoder, one fused kernel per batch) has run on an H100 and an H200 within
//! tolerance of the CPU path, and the tests run it end to end on the emulated device
//! (`DeviceChoice::Emu`).
//!
//! ```
//! use stokehold::pipeline::{OpSpec, Pipeline, PipelineSpec};
//!
//! // A folder of class sub-folders; here the small sample set stokehold generates.
//! let data = stokehold::builtin_data::ensure(&stokehold::builtin_data::default_dir())?;
//! let spec = PipelineSpec::builder()
//!     .batch(16)
//!     .seed(1)
//!     .epochs(2)
//!     .op(OpSpec::new("file_reader").output("jpegs").output("labels").arg("root", &data))
//!     .op(OpSpec::new("decode").input("jpegs").output("decoded"))
//!     .op(OpSpec::new("random_resized_crop").input("decoded").output("cropped").arg("size", 64))
//!     .op(OpSpec::new("flip").input("cropped").output("flipped"))
//!     .op(OpSpec::new("normalize")
//!         .input("flipped")
//!         .output("normalized")
//!         .arg("mean", [123.675, 116.28, 103.53])
//!         .arg("std", [58.395, 57.12, 57.375]))
//!     .op(OpSpec::new("layout").input("normalized").output("images").arg("layout", "CHW"))
//!     .outputs(&["images", "labels"]);
//!
//! let mut pipeline = Pipeline::new(spec)?;
//! println!("{}", pipeline.device()); // which path runs, and why
//! // `&mut`: the pipeline stays yours for its statistics afterwards.
//! for batch in &mut pipeline {
//!     let batch = batch?;
//!     // In host memory on the CPU path (a GPU batch: `batch.device_images`).
//!     if let Some(images) = batch.images("images") {
//!         assert_eq!(images.shape().unwrap()[1..], [3, 64, 64]); // f32 CHW
//!     }
//!     let labels = batch.labels("labels").unwrap();
//!     assert_eq!(labels.len(), batch.samples.len());
//!     for (sample, label) in batch.samples.iter().zip(labels) {
//!         let crop = sample.crop().unwrap(); // the window, in the image it was cut from
//!         let mirrored = sample.flip().unwrap().horizontal;
//!         let _ = (label, crop, mirrored, &sample.path);
//!     }
//!     for bad in &batch.skipped {
//!         eprintln!("skipped {bad}"); // path and cause; the batch was filled from the next
//!     }
//! }
//! let stats = pipeline.stats();
//! assert_eq!(stats.epochs.len(), 2);
//! println!("{} images in {} batches", stats.images, stats.batches);
//! # Ok::<(), stokehold::Error>(())
//! ```
//!
//! A pipeline file loads with [`pipeline::file::load`]; `Pipeline::resume` continues from a
//! batch's `resume` position. The batches, the settings and the operators' arguments are
//! documented in their modules; the repository's `docs/` has the rest: `pipeline-file.md`
//! (every setting and operator, generated from the schemas), `semantics.md` (what each
//! operator computes, epochs, bad files, resume, memory), `architecture.md`, `gpu.md`,
//! `performance.md`.
//!
//! # Depending on it
//!
//! The crate is not on crates.io yet: depend on a checkout (or on the repository, with `git`), and
//! optimise it in your debug builds too, which are otherwise about 21 times slower (this
//! repository's own `[profile.dev.package."*"]` does not carry over to dependents):
//!
//! ```toml
//! [dependencies]
//! stokehold = { path = "../stokehold" }
//!
//! [profile.dev.package."*"]
//! opt-level = 2
//! ```
//!
//! Building needs a C and C++ compiler, and on x86 `nasm`: without it the bundled
//! libjpeg-turbo is built without SIMD (`mozjpeg-sys` warns in a build log cargo hides) and
//! JPEG decoding is about 25% slower. [`decode::jpeg_simd`] says which SIMD the decoder uses;
//! pipelines log a warning once when there is none. Install `nasm`, then
//! `cargo clean -p mozjpeg-sys` and build again.
//!
//! # Where things are
//!
//! [`pipeline`] (definitions, the pipeline file, validation, the running [`Pipeline`] and its
//! [`Batch`]es), [`reader`] (data sets, tar shards, the sample schedule), [`decode`], [`ops`]
//! (one module per operator), [`fusion`], [`resample`], [`cuda`] and [`nvjpeg`] (the GPU
//! path), [`builtin_data`].

#![warn(missing_docs)]

pub mod builtin_data;
#[cfg(feature = "cli")]
pub mod cli;
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
pub mod size_class;
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
