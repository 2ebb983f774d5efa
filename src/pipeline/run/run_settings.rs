//! The settings a running pipeline reads, resolved once when it starts (`start.rs`) and
//! handed to the stages, so that no stage reaches into the spec for them.

use crate::pipeline::graph::Graph;
use crate::pipeline::spec::{BatchMemory, DeviceChoice, OnError, Settings};
use crate::reader::schedule::LastBatch;

/// What the stages of a run read from its settings (`[pipeline]` and the reader's
/// `last_batch`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RunSettings {
    /// Samples per batch.
    pub(crate) batch: usize,
    /// Worker threads asked for; `None`: the start's default for the path.
    pub(crate) threads: Option<usize>,
    /// Batches prepared ahead of the consumer.
    pub(crate) prefetch: usize,
    /// Seed of every random choice.
    pub(crate) seed: u64,
    /// Epochs to run (`None`: until stopped).
    pub(crate) epochs: Option<u64>,
    /// Bad-sample policy.
    pub(crate) on_error: OnError,
    /// Where to run, and the GPU ordinal there.
    pub(crate) device: DeviceChoice,
    pub(crate) device_id: usize,
    /// Where the CPU path's finished batches live.
    pub(crate) batch_memory: BatchMemory,
    /// What to do with the last, incomplete batch of an epoch.
    pub(crate) last_batch: LastBatch,
}

impl RunSettings {
    /// The settings `graph` runs with.
    pub(crate) fn of(graph: &Graph) -> RunSettings {
        RunSettings {
            last_batch: graph.reader.last_batch,
            ..RunSettings::from(&graph.spec.settings)
        }
    }
}

/// The pipeline-wide settings alone (the reader's `last_batch` at its default).
impl From<&Settings> for RunSettings {
    fn from(s: &Settings) -> RunSettings {
        RunSettings {
            batch: s.batch,
            threads: s.threads,
            prefetch: s.prefetch,
            seed: s.seed,
            epochs: s.epochs,
            on_error: s.on_error,
            device: s.device,
            device_id: s.device_id,
            batch_memory: s.batch_memory,
            last_batch: LastBatch::default(),
        }
    }
}
