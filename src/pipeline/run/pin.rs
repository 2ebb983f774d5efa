//! The CPU path's batches handed out in pinned host memory (`batch_memory = "pinned"`): the
//! assembler's last step copies each finished host batch into a buffer of the pipeline's
//! pinned pool (`cuda/pinned_pool.rs`) and hands it out as a [`PinnedTensor`], for a consumer
//! that copies it to its GPU itself, asynchronously.
//!
//! One copy per batch, on the assembler's thread: the workers keep writing their samples
//! straight into ordinary batch buffers (`placement.rs`), whose storage is a `Vec`, and the
//! copy gives that buffer back to its pool at once. (Building batches in pinned memory
//! directly would need the placement buffers, the fallback builder and `BatchTensor`'s public
//! `Pixels` to own foreign memory; the copy is a memcpy of the batch, as `batch_memory =
//! "gpu"` makes into its staging slot.)
//!
//! Steady state allocates nothing: the pinned buffers are made at the first batch for every
//! batch that can be out at once (`prefetch` + 3), grown to the largest batch at the second
//! epoch's first, and reused once the consumer's copies from them have run. `--stats` counts
//! it (`allocations after warm-up`).

use std::sync::Arc;

use crate::cuda::gpu_device::GpuDevice;
use crate::cuda::pinned_pool::PinnedPool;
use crate::error::Error;
use crate::pipeline::batch::{BatchTensor, PinnedTensor};
use crate::pipeline::device_tensor::ConsumerStreams;

use super::stats::Stats;

/// Pinned buffers made at the first batch beyond the batch queue (`prefetch`): the batch
/// the assembler is handing on, and two held by the consumer (the one it copies and the one
/// before, which a framework drops a step late).
const BUFFERS_BEYOND_QUEUE: usize = 3;

/// Pins the CPU path's finished batches (one per pipeline, on the assembler's thread).
pub(super) struct Pin {
    pool: Arc<PinnedPool>,
    streams: Arc<ConsumerStreams>,
    /// Buffers to make at the first batch (see [`BUFFERS_BEYOND_QUEUE`]).
    buffers: usize,
    /// Samples per batch.
    batch: usize,
    stats: Arc<Stats>,
    /// The epoch of the first batch: allocations are counted from the next epoch's first.
    first_epoch: Option<u64>,
}

impl std::fmt::Debug for Pin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pin").field("pool", &self.pool).finish()
    }
}

impl Pin {
    /// Pins batches of `batch` samples with `pool`'s device, for a batch queue of
    /// `prefetch`; `stats` get the device's figures, under `reason` (the device report).
    pub(super) fn new(
        pool: Arc<PinnedPool>,
        (batch, prefetch): (usize, usize),
        stats: Arc<Stats>,
        reason: &str,
    ) -> Pin {
        if let Ok(mut d) = stats.gpu_device.lock() {
            *d = Some(reason.to_string());
        }
        // The device decodes nothing and runs no kernels: it only pins.
        stats
            .gpu_uploads_only
            .store(true, std::sync::atomic::Ordering::Relaxed);
        stats
            .gpu_pinned_only
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Pin {
            streams: ConsumerStreams::new(pool.device().clone()),
            pool,
            buffers: prefetch + BUFFERS_BEYOND_QUEUE,
            batch,
            stats,
            first_epoch: None,
        }
    }

    fn dev(&self) -> &Arc<dyn GpuDevice> {
        self.pool.device()
    }

    /// `t`, a finished batch of `epoch`, copied into pinned memory; `t`'s buffer goes back
    /// to its pool.
    pub(super) fn pin(&mut self, t: BatchTensor, epoch: u64) -> Result<PinnedTensor, Error> {
        match self.first_epoch {
            None => {
                self.first_epoch = Some(epoch);
                // A full batch of the largest sample so far (a resumed run may start with a
                // short batch).
                let sample = t.shapes.iter().map(|s| s.iter().product::<usize>()).max();
                let len = sample.unwrap_or(0) * t.dtype.size() * self.batch;
                let what = || format!("the pinned buffers of batches of {len} bytes");
                self.pool.reserve(self.buffers, len, &what)?;
            }
            // The end of the warm-up: every pinned buffer gets the largest size, and
            // allocations after this are counted.
            Some(first) if epoch != first => {
                self.stats
                    .end_warm_up(self.dev().as_ref(), || self.pool.settle())?;
            }
            Some(_) => {}
        }
        let bytes = t.as_bytes();
        let len = bytes.len();
        let what = || format!("a pinned batch of {len} bytes");
        let mut buffer = self.pool.take(len, &what)?;
        buffer.as_mut_slice().copy_from_slice(bytes);
        let tensor = PinnedTensor::new(
            buffer,
            (t.dtype, t.layout),
            t.shapes.clone(),
            t.offsets.clone(),
            self.streams.clone(),
        );
        // The ordinary batch buffer goes back to its pool now: its bytes are pinned.
        drop(t);
        if let Ok(mut m) = self.stats.gpu_memory.lock() {
            *m = Some(self.dev().memory());
        }
        if let Ok(mut c) = self.stats.gpu_counters.lock() {
            *c = Some(self.dev().counters());
        }
        Ok(tensor)
    }
}
