//! Host batches in pinned memory: [`PinnedTensor`], one image output of a batch in
//! page-locked host memory (`batch_memory = "pinned"`), for a consumer that copies it to its
//! GPU itself.
//!
//! Its pixels are complete when the batch is handed out: read them on the host
//! ([`PinnedTensor::as_bytes`]), or queue a copy from [`PinnedTensor::as_ptr`] — pinned, so
//! the copy is a true asynchronous DMA (`torch.from_dlpack(t).cuda(non_blocking=True)`; DLPack
//! says `kDLCPU`, as the memory is host memory).
//!
//! The memory belongs to the pipeline's pinned pool. It goes back when the last clone of the
//! tensor drops (for DLPack: when the capsule's deleter runs; nothing waits on that thread),
//! and is written again only after the copies queued from it before that moment have run: those
//! on CUDA's legacy default stream and every blocking stream (PyTorch's default stream) always,
//! and those on any other stream the consumer named with [`PinnedTensor::use_on_stream`]
//! (`cuda/pinned_pool.rs`).
//!
//! Batches are copied into the pinned buffer once, when the assembler finishes them (the
//! workers write into ordinary batch buffers, which go back to their pool at once).

use std::sync::Arc;

use crate::cuda::gpu_device::GpuDevice;
use crate::cuda::pinned_pool::PinnedBuffer;
use crate::error::Error;
use crate::image::{DType, Layout};
use crate::pipeline::device_tensor::{ConsumerStreams, StreamUsers};
use crate::pipeline::tensor_meta::{tensor_meta_accessors, TensorMeta};

#[derive(Debug)]
struct Inner {
    buffer: Option<PinnedBuffer>,
    meta: TensorMeta,
    /// Streams the consumer copies on.
    users: StreamUsers,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let Some(mut buf) = self.buffer.take() else {
            return;
        };
        if let Err(e) = self.users.release(|e| buf.used_until(e)) {
            // Without the event the buffer can't be reused safely: leak it.
            tracing::warn!("a pinned batch's release event could not be recorded: {e}");
            std::mem::forget(buf);
        }
    }
}

/// One image output of a batch in pinned host memory (see the module docs). Clones share
/// the memory, which goes back to the pipeline's pinned pool when the last one drops.
#[derive(Debug, Clone)]
pub struct PinnedTensor {
    inner: Arc<Inner>,
}

impl PartialEq for PinnedTensor {
    /// The same memory.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl PinnedTensor {
    /// A tensor of samples of `shapes` (starting at `offsets`, in elements) copied into
    /// `buffer` (which holds all of them).
    pub(crate) fn new(
        buffer: PinnedBuffer,
        (dtype, layout): (DType, Layout),
        shapes: Vec<[usize; 3]>,
        offsets: Vec<usize>,
        streams: Arc<ConsumerStreams>,
    ) -> PinnedTensor {
        PinnedTensor {
            inner: Arc::new(Inner {
                buffer: Some(buffer),
                meta: TensorMeta {
                    dtype,
                    layout,
                    shapes,
                    offsets,
                },
                users: StreamUsers::new(streams),
            }),
        }
    }

    /// The samples' element type, layout, shapes and offsets.
    pub(crate) fn meta(&self) -> &TensorMeta {
        &self.inner.meta
    }

    fn buffer(&self) -> &PinnedBuffer {
        self.inner
            .buffer
            .as_ref()
            .expect("a live tensor has its buffer")
    }

    fn dev(&self) -> &Arc<dyn GpuDevice> {
        self.inner.users.device()
    }

    tensor_meta_accessors!("PinnedTensor::as_ptr");

    /// Bytes of all samples.
    pub fn nbytes(&self) -> usize {
        self.buffer().len()
    }

    /// Every sample's elements, back to back, as bytes in native endianness.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer().as_slice()
    }

    /// The host address of the first element (page-locked memory).
    pub fn as_ptr(&self) -> *const u8 {
        self.buffer().as_ptr()
    }

    /// The ordinal of the GPU that pinned the memory.
    pub fn device_id(&self) -> usize {
        self.dev().describe().device_id
    }

    /// True when the emulated device pinned it (a test device: ordinary host memory that the
    /// emulation counts as pinned).
    pub fn is_emulated(&self) -> bool {
        self.dev().describe().emulated
    }

    /// Keeps the memory from being written again until the work of the consumer's stream
    /// `raw` (a framework's `CUstream`; on the emulated device a number from
    /// [`GpuDevice::raw_stream`]) queued before this tensor drops has run: for copies queued
    /// on a stream other than CUDA's default ones (which the pool orders after on its own).
    ///
    /// # Safety
    /// On a real device, `raw` is a live `CUstream` of the pinning device's context, kept
    /// alive by its owner until this tensor and its clones have dropped.
    pub unsafe fn use_on_stream(&self, raw: u64) -> Result<(), Error> {
        // SAFETY: forwarded contract.
        let s = unsafe { self.inner.users.streams().adopt(raw)? };
        self.inner.users.add(s);
        Ok(())
    }
}
