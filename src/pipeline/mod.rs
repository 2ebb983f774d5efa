//! The pipeline machinery: definitions ([`spec`]), the kinds a pipeline may name
//! ([`registry`]), pipeline files ([`file`](mod@file)), validation and planning ([`graph`]),
//! batches ([`batch`]) and the threaded executor ([`executor`]).

pub mod batch;
pub mod executor;
pub mod file;
mod gather;
pub mod graph;
pub mod reference;
pub mod registry;
mod slots;
pub mod spec;

pub use batch::{Batch, BatchTensor, SampleInfo};
pub use executor::{EpochSummary, Pipeline, Position, Stats, StatsSnapshot};
pub use spec::{DeviceChoice, LastBatch, OnError, OpSpec, PipelineSpec, Placement, Settings};
