//! The settings a running pipeline reads, resolved once when it starts (`start.rs`) and
//! handed to the stages, so that no stage reaches into the spec for them.

use crate::pipeline::graph::Graph;
use crate::pipeline::spec::{BatchMemory, DeviceChoice, OnError, Settings};
use crate::reader::schedule::{LastBatch, Position};

/// What the stages of a run read from its settings (`[pipeline]` and the reader's
/// `last_batch`, `rank` and `world_size`).
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
    /// This process's part of the data among `world_size` ranks.
    pub(crate) rank: usize,
    pub(crate) world_size: usize,
}

impl RunSettings {
    /// The settings `graph` runs with.
    pub(crate) fn of(graph: &Graph) -> RunSettings {
        RunSettings {
            last_batch: graph.reader.last_batch,
            rank: graph.reader.rank,
            world_size: graph.reader.world_size,
            ..RunSettings::from(&graph.spec.settings)
        }
    }

    /// The position of sample `sample` of `epoch`'s order, batch `batch`, in this run.
    pub(crate) fn position(&self, epoch: u64, sample: usize, batch: usize) -> Position {
        Position {
            seed: self.seed,
            epoch,
            sample,
            batch,
            batch_size: self.batch,
            rank: self.rank,
            world_size: self.world_size,
        }
    }
}

/// The pipeline-wide settings alone (the reader's `last_batch` at its default, one rank).
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
            rank: 0,
            world_size: 1,
        }
    }
}
