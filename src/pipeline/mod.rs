//! The pipeline machinery: definitions ([`spec`]) and their [`settings`], the kinds a
//! pipeline may name ([`registry`]), pipeline files ([`file`](mod@file)), validation and
//! planning ([`graph`]), batches ([`batch`]), the running pipeline ([`run`]) and the
//! comparison of two devices ([`compare`]).

pub mod batch;
pub mod compare;
pub mod device_tensor;
pub mod file;
pub mod graph;
pub mod pinned_tensor;
pub mod registry;
pub mod run;
pub mod settings;
pub mod spec;
mod spec_data;
mod tensor_meta;

pub use crate::reader::schedule::{Position, PositionError};
pub use batch::{Batch, BatchTensor, DeviceTensor, PinnedTensor, SampleInfo};
pub use run::{
    DecoderStats, DeviceReport, EpochSummary, GpuStats, ModelledCounts, Pipeline, Stats,
    StatsSnapshot, Waited, START_WARNINGS_TARGET,
};
pub use spec::{BatchMemory, DeviceChoice, LastBatch, OnError, OpSpec, PipelineSpec, Settings};
