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

use crate::cuda::pinned_pool::PinnedPool;
use crate::error::Error;
use crate::pipeline::batch::{BatchTensor, PinnedTensor};

use super::handoff::Handoff;
use super::stats::{DeviceRole, Stats};

/// Pins the CPU path's finished batches (one per pipeline, on the assembler's thread).
pub(super) struct Pin {
    pool: Arc<PinnedPool>,
    handoff: Handoff,
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
        // The device decodes nothing and runs no kernels: it only pins.
        let role = (reason, DeviceRole::Pins);
        let handoff = Handoff::new(pool.device().clone(), (batch, prefetch), stats, role);
        Pin { pool, handoff }
    }

    /// `t`, a finished batch of `epoch`, copied into pinned memory; `t`'s buffer goes back
    /// to its pool.
    pub(super) fn pin(&mut self, t: BatchTensor, epoch: u64) -> Result<PinnedTensor, Error> {
        self.handoff.warm_up(
            &t,
            epoch,
            |count, len| {
                let what = || format!("the pinned buffers of batches of {len} bytes");
                self.pool.reserve(count, len, &what)
            },
            // Every pinned buffer gets the largest size.
            || self.pool.settle(),
        )?;
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
            self.handoff.streams().clone(),
        );
        // The ordinary batch buffer goes back to its pool now: its bytes are pinned.
        drop(t);
        self.handoff.handed_on();
        Ok(tensor)
    }
}
