//! The staging ring: pinned host copies of the encoded images of the batches in flight.
//!
//! `nvjpegDecodeBatchedEx` (and the decoupled transfer phase) may read the encoded bytes after
//! the call returns: the copy to the device is queued on the stream. The caller's buffers
//! can't be trusted to live that long, so every image decoded on the GPU is first copied
//! into a pinned block of the ring slot of its batch, and a slot is refilled only after the
//! fence of the batch that last used it is done. Pinned source memory also lets the copies
//! run as DMA, without the driver's own staging. Bounded: `depth` blocks, each as large as
//! the largest batch seen (rounded to a size class), reused for the life of the decoder.

use std::sync::Arc;

use super::super::result::NvjpegError;
use super::alloc::Allocators;
use super::context::Fence;

/// Alignment of each image's copy in a block (cache lines; DMA likes it too).
const ALIGN: usize = 64;

/// One slot: a pinned block, the fence of the batch that last used it, and what else the
/// batch needs to keep until then (`T`: the hardware decoder's state and parameters).
#[derive(Debug)]
pub(crate) struct RingSlot<T> {
    block: Option<(u64, usize)>,
    fence: Option<Arc<dyn Fence>>,
    /// Kept with the slot until its fence is done.
    pub(crate) payload: T,
}

/// A ring of [`RingSlot`]s used in turn.
#[derive(Debug)]
pub(crate) struct StagingRing<T> {
    slots: Vec<RingSlot<T>>,
    next: usize,
    memory: Arc<Allocators>,
}

/// Where `lens` images go in a block: each image's offset, and the bytes needed.
pub(crate) fn layout(lens: &[usize]) -> (Vec<usize>, usize) {
    let mut offsets = Vec::with_capacity(lens.len());
    let mut end = 0usize;
    for &len in lens {
        offsets.push(end);
        end = (end + len).next_multiple_of(ALIGN);
    }
    (offsets, end.max(1))
}

impl<T> StagingRing<T> {
    /// A ring of `payloads.len()` (≥ 1) slots, blocks taken from `memory`'s pinned cache
    /// when first needed.
    pub(crate) fn new(memory: Arc<Allocators>, payloads: Vec<T>) -> StagingRing<T> {
        StagingRing {
            slots: payloads
                .into_iter()
                .map(|payload| RingSlot {
                    block: None,
                    fence: None,
                    payload,
                })
                .collect(),
            next: 0,
            memory,
        }
    }

    /// The next slot, once the batch that last used it is done. A non-fatal error of that
    /// batch is its own (its [`super::Submitted`] reports it); a lost context is returned.
    pub(crate) fn begin(&mut self) -> Result<usize, NvjpegError> {
        let k = self.next;
        self.next = (self.next + 1) % self.slots.len();
        if let Some(f) = self.slots[k].fence.take() {
            if let Err(e) = f.wait() {
                if e.is_fatal() {
                    return Err(e);
                }
            }
        }
        Ok(k)
    }

    /// Copies `images` into slot `k`'s block (grown when too small) and returns where each
    /// copy is, as (address, length). The slot must come from [`Self::begin`].
    pub(crate) fn stage(
        &mut self,
        k: usize,
        images: &[&[u8]],
    ) -> Result<Vec<(*const u8, usize)>, NvjpegError> {
        let lens: Vec<usize> = images.iter().map(|b| b.len()).collect();
        let (offsets, need) = layout(&lens);
        let slot = &mut self.slots[k];
        if slot.block.is_none_or(|(_, cap)| cap < need) {
            if let Some((addr, _)) = slot.block.take() {
                // Its last batch is done (`begin` waited on it): no fence needed.
                self.memory.pinned.give(addr, None);
            }
            slot.block = Some(self.memory.pinned.take(need)?);
        }
        let (addr, cap) = slot.block.expect("set above");
        // SAFETY: the block is `cap` ≥ `need` bytes of pinned host memory from the cache,
        // owned by this slot alone, and no queued work reads it (the slot's fence was waited
        // on in `begin`).
        let block = unsafe { std::slice::from_raw_parts_mut(addr as usize as *mut u8, cap) };
        Ok(images
            .iter()
            .zip(&offsets)
            .map(|(b, &off)| {
                block[off..off + b.len()].copy_from_slice(b);
                (block[off..].as_ptr(), b.len())
            })
            .collect())
    }

    /// Marks slot `k` in use until `fence` is done.
    pub(crate) fn seal(&mut self, k: usize, fence: Arc<dyn Fence>) {
        self.slots[k].fence = Some(fence);
    }

    /// The payload of slot `k`.
    pub(crate) fn payload_mut(&mut self, k: usize) -> &mut T {
        &mut self.slots[k].payload
    }

    /// Waits for every slot's batch (errors are the batches' own, and logged).
    pub(crate) fn wait_all(&mut self) {
        for s in &mut self.slots {
            if let Some(f) = s.fence.take() {
                if let Err(e) = f.wait() {
                    tracing::debug!("nvJPEG batch ended with an error: {e}");
                }
            }
        }
    }
}

impl<T> Drop for StagingRing<T> {
    fn drop(&mut self) {
        for s in &mut self.slots {
            if let Some((addr, _)) = s.block.take() {
                // The cache waits for the fence before freeing or reusing the block.
                self.memory.pinned.give(addr, s.fence.take());
            }
        }
    }
}
