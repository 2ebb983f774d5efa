//! Pinned memory the GPU path's prep workers copy into, so that the serial threads (the
//! engines' feeding thread, the assembling thread) copy nothing.

use std::sync::Arc;

use crate::cuda::gpu_device::GpuDevice;
use crate::cuda::staging::StagingSlabs;

use super::gpu_split::Budget;

/// The pinned slabs the workers copy encoded files into for the JPEG engines
/// ([`StagingSlabs`]): 8 MB each, at most 32 (256 MB; what finds no room is copied by the
/// feeding thread).
const SLAB_LEN: usize = 8 << 20;
const MAX_SLABS: usize = 32;

/// The pinned slabs the workers copy the pixels they decode into: 16 MB each, at most 64
/// (1 GB, made only as the warm-up fills them: the CPU's share of the batches in flight;
/// what finds no room is copied by the assembling thread).
const PIXEL_SLAB_LEN: usize = 16 << 20;
const MAX_PIXEL_SLABS: usize = 64;

/// Batches' worth of CPU-decoded pixels the slabs hold at once where the warm-up did not
/// measure it (no CPU share then): the workers run about two batches ahead of the one being
/// assembled, the kernels of one or two more may still be reading theirs, and a slab is free
/// only once all of its images are.
const PIXEL_BATCHES_ALIVE: usize = 6;

/// Pinned memory the prep workers copy into (shared with them), so that the serial threads
/// copy nothing: the encoded files the JPEG engines read, and the pixels the workers decode
/// themselves, which go up with their batch straight from there.
pub(crate) struct WorkerStaging {
    pub(crate) files: StagingSlabs,
    pub(crate) pixels: StagingSlabs,
}

impl WorkerStaging {
    pub(super) fn new(dev: &Arc<dyn GpuDevice>) -> WorkerStaging {
        WorkerStaging {
            files: StagingSlabs::new(dev.clone(), SLAB_LEN, MAX_SLABS),
            pixels: StagingSlabs::new(dev.clone(), PIXEL_SLAB_LEN, MAX_PIXEL_SLABS),
        }
    }

    /// No more slabs (the warm-up is over). The CPU's share of the pixels may rise after
    /// the warm-up's last batch (to `budget`'s most a batch carries: the split's headroom;
    /// and the consumer's queue fills): its slabs get spares for the rise of each batch
    /// whose pixels may be alive at once (as many as the warm-up's slabs held of its largest
    /// batch, at most
    /// [`PIXEL_BATCHES_ALIVE`]); what finds no room goes through the upload ring, which the
    /// stage makes room in too.
    pub(super) fn settle(&self, budget: Budget) {
        self.files.settle();
        let held = self.pixels.made() * PIXEL_SLAB_LEN;
        // (A warm-up batch that carried little would make that ratio large: never more than
        // the default.)
        let alive = if held > 0 && budget.carried > 0 {
            held.div_ceil(budget.carried).min(PIXEL_BATCHES_ALIVE)
        } else {
            PIXEL_BATCHES_ALIVE
        };
        self.pixels
            .settle_with_spare(budget.rise().saturating_mul(alive));
    }
}
