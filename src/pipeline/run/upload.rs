//! The CPU path's batches handed out on the GPU (`batch_memory = "gpu"`): the assembler's
//! last step copies each finished host batch into a pinned staging slot, queues the copy to a
//! pooled device buffer on the device's kernel stream, and hands the batch out as the same
//! [`DeviceTensor`] the GPU path gives, with the copy's ready event — the consumer never
//! waits on the host, and a framework reads it zero-copy (DLPack) once its stream waits on
//! that event.
//!
//! ```text
//! assembler   batch N: memcpy → pinned slot, queue copy, record ready    batch N+1 …
//! kernel stream              [H2D N] ready N                                 [H2D N+1]
//! consumer                                   waits on ready N (on its stream) …
//! ```
//! Steady state allocates nothing: the device buffers come from one pool, made at the first
//! batch for every batch that can be in flight (`prefetch` + 3), reused after their release
//! events, the consumer's included (waited for on the device, not the host); the
//! staging slots from a ring grown to the largest batch, the events from the device's free
//! list (a few created at the start). `--stats` counts it (`allocations after warm-up`,
//! counted from the first batch of the second epoch).

use std::sync::Arc;

use crate::cuda::gpu_device::{streams, Event, GpuDevice};
use crate::cuda::pool::{DevicePool, PinnedRing};
use crate::error::Error;
use crate::pipeline::batch::BatchTensor;
use crate::pipeline::device_tensor::{ConsumerStreams, DeviceTensor};

use super::stats::Stats;

/// Staging slots: the host waits for a slot only when the copy of the batch two before is
/// still queued (a copy of ~77 MB takes a few ms; a batch takes longer to make).
const STAGING_SLOTS: usize = 2;

/// Events created at the start, so that steady state recycles rather than creates them
/// (per batch in flight: its ready event and a consumer's release event).
const EVENTS_AHEAD: usize = 32;

/// Device buffers made at the first batch beyond the batch queue (`prefetch`): the batch
/// the assembler is handing on, and two held by the consumer (the one it trains on and the
/// one before, whose tensor a framework drops a step late).
const BUFFERS_BEYOND_QUEUE: usize = 3;

/// Uploads the CPU path's finished batches (one per pipeline, on the assembler's thread).
pub(super) struct Upload {
    dev: Arc<dyn GpuDevice>,
    outputs: Arc<DevicePool>,
    /// Device buffers to make at the first batch (see [`BUFFERS_BEYOND_QUEUE`]).
    buffers: usize,
    /// Samples per batch.
    batch: usize,
    staging: PinnedRing,
    streams: Arc<ConsumerStreams>,
    stats: Arc<Stats>,
    /// The epoch of the first batch: allocations are counted from the next epoch's first.
    first_epoch: Option<u64>,
}

impl std::fmt::Debug for Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upload").field("dev", &self.dev).finish()
    }
}

impl Upload {
    /// Uploads batches of `batch` samples to `dev`, for a batch queue of `prefetch`; `stats` get the device's figures,
    /// under `reason` (the device report).
    pub(super) fn new(
        dev: Arc<dyn GpuDevice>,
        (batch, prefetch): (usize, usize),
        stats: Arc<Stats>,
        reason: &str,
    ) -> Upload {
        let warm: Vec<Event> = (0..EVENTS_AHEAD)
            .filter_map(|_| dev.record(streams::KERNELS, false).ok())
            .collect();
        drop(warm);
        if let Ok(mut d) = stats.gpu_device.lock() {
            *d = Some(reason.to_string());
        }
        stats
            .gpu_uploads_only
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Upload {
            outputs: DevicePool::new(dev.clone()),
            buffers: prefetch + BUFFERS_BEYOND_QUEUE,
            batch,
            staging: PinnedRing::new(dev.clone(), STAGING_SLOTS),
            streams: ConsumerStreams::new(dev.clone()),
            dev,
            stats,
            first_epoch: None,
        }
    }

    /// `t`, a finished batch of `epoch`, on the device: the copy is queued, not waited for.
    pub(super) fn upload(&mut self, t: BatchTensor, epoch: u64) -> Result<DeviceTensor, Error> {
        match self.first_epoch {
            None => {
                self.first_epoch = Some(epoch);
                // A full batch of the largest sample so far (a resumed run may start with a
                // short batch).
                let sample = t.shapes.iter().map(|s| s.iter().product::<usize>()).max();
                self.prefill(sample.unwrap_or(0) * t.dtype.size() * self.batch)?;
            }
            // The end of the warm-up: every staging slot gets the largest size (a first
            // epoch of one batch used one), and allocations after this are counted.
            Some(first) if epoch != first => {
                self.stats
                    .end_warm_up(self.dev.as_ref(), || self.staging.settle())?;
            }
            Some(_) => {}
        }
        let stream = streams::KERNELS;
        let bytes = t.data.as_bytes();
        let len = bytes.len();
        let mut slot = self.staging.lease(len, stream)?;
        slot.bytes()[..len].copy_from_slice(bytes);
        let what = || format!("a batch of {len} bytes uploaded from the CPU path");
        let buffer = self.outputs.take(len, stream, &what)?;
        // SAFETY: the slot's first `len` bytes are pinned memory of this device, left
        // unwritten until the event recorded below completes (`done_at`); the buffer holds at
        // least `len` bytes and is ours alone (the pool made the stream wait for its last
        // users) until the tensor built on it drops.
        unsafe {
            self.dev
                .copy_to_device(stream, buffer.ptr(), slot.ptr(0), len)?;
        }
        let ready = self.dev.record(stream, false)?;
        slot.done_at(ready.clone());
        // The tensor gives the buffer back with `ready` (and its consumers' release events).
        let tensor = DeviceTensor::new(
            buffer,
            t.dtype,
            t.layout,
            t.shapes.clone(),
            ready,
            self.streams.clone(),
        );
        // The host batch goes back to its pool now: its bytes are in the staging slot.
        drop(t);
        // Here, on the pipeline's thread: freeing waits for the whole device.
        self.outputs.trim_done();
        if let Ok(mut m) = self.stats.gpu_memory.lock() {
            *m = Some(self.dev.memory());
        }
        if let Ok(mut c) = self.stats.gpu_counters.lock() {
            *c = Some(self.dev.counters());
        }
        Ok(tensor)
    }

    /// Makes every device buffer steady state holds at once, each for batches of `len`
    /// bytes (the first, a full one unless the epoch is shorter): made on demand, a consumer
    /// slower in the first epoch than later would leave the later ones allocating.
    fn prefill(&self, len: usize) -> Result<(), Error> {
        let what = || format!("the device buffers of batches of {len} bytes");
        let made = (0..self.buffers)
            .map(|_| self.outputs.take(len, streams::KERNELS, &what))
            .collect::<Result<Vec<_>, Error>>()?;
        // Back to the pool unused: no work to wait for.
        drop(made);
        Ok(())
    }
}
