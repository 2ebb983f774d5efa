//! What the CPU path's two ways of handing its finished batches to a device share: uploading
//! them (`batch_memory = "gpu"`, `upload.rs`) and pinning them (`batch_memory = "pinned"`,
//! `pin.rs`). Both make their buffers at the first batch, end the warm-up at the next epoch's
//! first batch, and report the device's figures after each batch.

use std::sync::Arc;

use crate::cuda::gpu_device::GpuDevice;
use crate::error::Error;
use crate::pipeline::batch::BatchTensor;
use crate::pipeline::device_tensor::ConsumerStreams;

use super::stats::{DeviceRole, Stats};

/// Buffers made at the first batch beyond the batch queue (`prefetch`): the batch the
/// assembler is handing on, two held by the consumer (the one it uses and the one before,
/// which a framework drops a step late), and at an epoch's end the next epoch's first, which
/// Python's iterator takes to see the epoch end and holds until the next loop — the host
/// bound's four (`memory.rs`). With three, a Python consumer a step behind made one more
/// after the warm-up when the pipeline was ahead at an epoch's end (1 run in 9).
const BUFFERS_BEYOND_QUEUE: usize = 4;

/// The shared part of a handoff (one per pipeline, on the assembler's thread).
pub(super) struct Handoff {
    dev: Arc<dyn GpuDevice>,
    streams: Arc<ConsumerStreams>,
    /// Buffers to make at the first batch (see [`BUFFERS_BEYOND_QUEUE`]).
    buffers: usize,
    /// Samples per batch.
    batch: usize,
    stats: Arc<Stats>,
    /// The epoch of the first batch: allocations are counted from the next epoch's first.
    first_epoch: Option<u64>,
}

impl std::fmt::Debug for Handoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handoff").field("dev", &self.dev).finish()
    }
}

impl Handoff {
    /// Hands batches of `batch` samples to `dev`, for a batch queue of `prefetch`; `stats`
    /// get the device's figures, under `reason` (the device report), as `role`.
    pub(super) fn new(
        dev: Arc<dyn GpuDevice>,
        (batch, prefetch): (usize, usize),
        stats: Arc<Stats>,
        (reason, role): (&str, DeviceRole),
    ) -> Handoff {
        stats.set_device(reason, role);
        Handoff {
            streams: ConsumerStreams::new(dev.clone()),
            dev,
            buffers: prefetch + BUFFERS_BEYOND_QUEUE,
            batch,
            stats,
            first_epoch: None,
        }
    }

    /// The device.
    pub(super) fn device(&self) -> &Arc<dyn GpuDevice> {
        &self.dev
    }

    /// The consumer streams the handed-out tensors share.
    pub(super) fn streams(&self) -> &Arc<ConsumerStreams> {
        &self.streams
    }

    /// The warm-up's steps, before `t`, a finished batch of `epoch`, is handed on. At the
    /// first batch, `make(count, len)` makes every buffer steady state holds: `count` of
    /// them, for full batches of `len` bytes of the largest sample so far (a resumed run may
    /// start with a short batch). At the next epoch's first, the warm-up ends
    /// ([`Stats::end_warm_up`], with `settle`).
    pub(super) fn warm_up(
        &mut self,
        t: &BatchTensor,
        epoch: u64,
        make: impl FnOnce(usize, usize) -> Result<(), Error>,
        settle: impl FnOnce() -> Result<(), Error>,
    ) -> Result<(), Error> {
        match self.first_epoch {
            None => {
                self.first_epoch = Some(epoch);
                let sample = t.shapes.iter().map(|s| s.iter().product::<usize>()).max();
                make(
                    self.buffers,
                    sample.unwrap_or(0) * t.dtype.size() * self.batch,
                )
            }
            Some(first) if epoch != first => self.stats.end_warm_up(self.dev.as_ref(), settle),
            Some(_) => Ok(()),
        }
    }

    /// Reports the device's figures, once a batch is handed on.
    pub(super) fn handed_on(&self) {
        self.stats.record_device(self.dev.as_ref());
    }
}
