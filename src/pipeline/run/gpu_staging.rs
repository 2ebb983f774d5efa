//! Pinned memory the GPU path's prep workers copy into, so that the serial threads (the
//! engines' feeding thread, the assembling thread) copy nothing.

use std::sync::Arc;

use crate::cuda::gpu_device::GpuDevice;
use crate::cuda::staging::StagingSlabs;

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
    /// the warm-up's last batch (the split holds the share it reached, the consumer's queue
    /// fills): its slabs get spares, or a batch's pixels would go through the upload ring,
    /// which would grow.
    pub(super) fn settle(&self) {
        self.files.settle();
        self.pixels.settle_with_spare();
    }
}
