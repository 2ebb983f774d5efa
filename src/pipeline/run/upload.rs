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

use crate::cuda::gpu_device::{streams, GpuDevice};
use crate::cuda::pool::{DevicePool, PinnedRing};
use crate::error::Error;
use crate::pipeline::batch::BatchTensor;
use crate::pipeline::device_tensor::DeviceTensor;

use super::handoff::Handoff;
use super::stats::{DeviceRole, Stats};

/// Staging slots: the host waits for a slot only when the copy of the batch two before is
/// still queued (a copy of ~77 MB takes a few ms; a batch takes longer to make).
const STAGING_SLOTS: usize = 2;

/// Events created at the start, so that steady state recycles rather than creates them
/// (per batch in flight: its ready event and a consumer's release event).
const EVENTS_AHEAD: usize = 32;

/// Uploads the CPU path's finished batches (one per pipeline, on the assembler's thread).
pub(super) struct Upload {
    outputs: Arc<DevicePool>,
    staging: PinnedRing,
    handoff: Handoff,
}

impl std::fmt::Debug for Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upload")
            .field("dev", self.handoff.device())
            .finish()
    }
}

impl Upload {
    /// Uploads batches of `batch` samples to `dev`, for a batch queue of `prefetch`; `stats`
    /// get the device's figures, under `reason` (the device report).
    pub(super) fn new(
        dev: Arc<dyn GpuDevice>,
        (batch, prefetch): (usize, usize),
        stats: Arc<Stats>,
        reason: &str,
    ) -> Upload {
        dev.create_events_ahead(EVENTS_AHEAD);
        Upload {
            outputs: DevicePool::new(dev.clone()),
            staging: PinnedRing::new(dev.clone(), STAGING_SLOTS),
            handoff: Handoff::new(dev, (batch, prefetch), stats, (reason, DeviceRole::Uploads)),
        }
    }

    /// `t`, a finished batch of `epoch`, on the device: the copy is queued, not waited for.
    pub(super) fn upload(&mut self, t: BatchTensor, epoch: u64) -> Result<DeviceTensor, Error> {
        self.handoff.warm_up(
            &t,
            epoch,
            |count, len| prefill(&self.outputs, count, len),
            // Every staging slot gets the largest size (a first epoch of one batch used one).
            || self.staging.settle(),
        )?;
        let dev = self.handoff.device();
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
            dev.copy_to_device(stream, buffer.ptr(), slot.ptr(0), len)?;
        }
        let ready = dev.record(stream, false)?;
        slot.done_at(ready.clone());
        // The tensor gives the buffer back with `ready` (and its consumers' release events).
        let tensor = DeviceTensor::new(
            buffer,
            t.dtype,
            t.layout,
            t.shapes.clone(),
            ready,
            self.handoff.streams().clone(),
        );
        // The host batch goes back to its pool now: its bytes are in the staging slot.
        drop(t);
        // Here, on the pipeline's thread: freeing waits for the whole device.
        self.outputs.trim_done();
        self.handoff.handed_on();
        Ok(tensor)
    }
}

/// Makes `count` device buffers of `outputs` at once, each for batches of `len` bytes: made
/// on demand, a consumer slower in the first epoch than later would leave the later ones
/// allocating.
fn prefill(outputs: &Arc<DevicePool>, count: usize, len: usize) -> Result<(), Error> {
    let what = || format!("the device buffers of batches of {len} bytes");
    let made = (0..count)
        .map(|_| outputs.take(len, streams::KERNELS, &what))
        .collect::<Result<Vec<_>, Error>>()?;
    // Back to the pool unused: no work to wait for.
    drop(made);
    Ok(())
}
