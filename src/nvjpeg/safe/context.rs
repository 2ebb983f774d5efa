//! The CUDA context a decoder belongs to, as the decoder uses it: made current before every
//! nvJPEG call, events that say when queued work is done, and raw memory for the allocators
//! nvJPEG is given ([`GpuContext`]). [`CudaGpuContext`] is the real one (cudarc); the tests
//! put a fake in its place to check the bookkeeping without a GPU.
//!
//! Why: nvJPEG handles, states and buffers belong to the device whose context was current
//! when they were made, and nvJPEG (through the CUDA runtime) uses whatever context is
//! current on the calling thread. A [`super::BatchDecoder`] may move between threads (it is
//! `Send`), so it binds its context itself, at creation and before every call.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{result as drv, sys as cu, CudaContext, DriverError};

use super::super::result::NvjpegError;

/// Where an allocation lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryKind {
    /// Device memory.
    Device,
    /// Page-locked host memory (what asynchronous copies read from).
    Pinned,
}

/// Work queued on a stream up to some point; done once the GPU has run it.
pub trait Fence: Send + Sync + std::fmt::Debug {
    /// Blocks (sleeping, not spinning) until the work is done. Errors of that work that
    /// appear only now (a failed kernel, a lost context) are returned here.
    fn wait(&self) -> Result<(), NvjpegError>;
    /// Whether the work is done, without waiting (`Err` as for [`Fence::wait`]).
    fn is_done(&self) -> Result<bool, NvjpegError>;
}

/// What a decoder needs from its CUDA context.
pub trait GpuContext: Send + Sync + std::fmt::Debug {
    /// Makes the context current on the calling thread.
    fn bind(&self) -> Result<(), NvjpegError>;
    /// A fence after the work queued so far on `stream` (a `CUstream`; null is the legacy
    /// default stream). The context is current.
    fn record(&self, stream: *mut c_void) -> Result<Arc<dyn Fence>, NvjpegError>;
    /// `len` (> 0) bytes of `kind` memory; its address (the implementation makes its
    /// context current: nvJPEG may allocate from a thread of its own).
    fn alloc(&self, kind: MemoryKind, len: usize) -> Result<u64, NvjpegError>;
    /// Frees what [`GpuContext::alloc`] returned (making its context current).
    ///
    /// # Safety
    /// `addr` came from `alloc(kind, len)`, is freed once, and nothing uses it any more (no
    /// queued work either).
    unsafe fn free(&self, kind: MemoryKind, addr: u64, len: usize);
}

/// The real context: a cudarc `CudaContext` (the device's primary context, shared with
/// `crate::cuda::Device` and with frameworks in the same process).
#[derive(Debug, Clone)]
pub struct CudaGpuContext {
    ctx: Arc<CudaContext>,
}

impl CudaGpuContext {
    /// The primary context of device `ordinal`.
    pub fn new(ordinal: usize) -> Result<CudaGpuContext, NvjpegError> {
        CudaContext::new(ordinal)
            .map(Self::from_context)
            .map_err(|e| driver_error(&format!("context of device {ordinal}"), e))
    }

    /// An existing context (e.g. `crate::cuda::Device::context`).
    pub fn from_context(ctx: Arc<CudaContext>) -> CudaGpuContext {
        CudaGpuContext { ctx }
    }
}

fn driver_error(what: &str, e: DriverError) -> NvjpegError {
    NvjpegError::cuda(what, e.0 as u32)
}

/// A CUDA event recorded on a stream, created with `CU_EVENT_BLOCKING_SYNC` so that a
/// waiting thread sleeps.
#[derive(Debug)]
struct CudaFence {
    event: cudarc::driver::CudaEvent,
}

impl Fence for CudaFence {
    fn wait(&self) -> Result<(), NvjpegError> {
        self.event
            .synchronize()
            .map_err(|e| driver_error("waiting for nvJPEG work", e))
    }

    fn is_done(&self) -> Result<bool, NvjpegError> {
        self.event
            .try_is_complete()
            .map_err(|e| driver_error("querying nvJPEG work", e))
    }
}

impl GpuContext for CudaGpuContext {
    fn bind(&self) -> Result<(), NvjpegError> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| driver_error("making the decoder's CUDA context current", e))
    }

    fn record(&self, stream: *mut c_void) -> Result<Arc<dyn Fence>, NvjpegError> {
        let event = self
            .ctx
            .new_event(Some(cu::CUevent_flags::CU_EVENT_BLOCKING_SYNC))
            .map_err(|e| driver_error("creating an event", e))?;
        // SAFETY: the event was just created in this context; `stream` is a stream of this
        // context or null (the caller's contract with the decoder), on which recording an
        // event only marks a point in its queue.
        unsafe { drv::event::record(event.cu_event(), stream as cu::CUstream) }
            .map_err(|e| driver_error("recording an event", e))?;
        Ok(Arc::new(CudaFence { event }))
    }

    fn alloc(&self, kind: MemoryKind, len: usize) -> Result<u64, NvjpegError> {
        // nvJPEG may call its allocators from a thread of its own: make ours current there.
        self.bind()?;
        match kind {
            // SAFETY: the context is current (the trait's contract); the memory is
            // uninitialised, which is what nvJPEG and the staging ring expect.
            MemoryKind::Device => unsafe { drv::malloc_sync(len) }
                .map_err(|e| driver_error(&format!("allocating {len} device bytes"), e)),
            // SAFETY: as above; flags 0 = page-locked, usable by this context's copies.
            MemoryKind::Pinned => unsafe { drv::malloc_host(len, 0) }
                .map(|p| p as u64)
                .map_err(|e| driver_error(&format!("allocating {len} pinned bytes"), e)),
        }
    }

    unsafe fn free(&self, kind: MemoryKind, addr: u64, _len: usize) {
        if let Err(e) = self.bind() {
            tracing::warn!("freeing {kind:?} memory for nvJPEG: {e}; leaked");
            return;
        }
        // SAFETY: per the trait's contract the address came from `alloc` of this kind and
        // nothing uses it any more.
        let r = unsafe {
            match kind {
                MemoryKind::Device => drv::free_sync(addr),
                MemoryKind::Pinned => drv::free_host(addr as usize as *mut c_void),
            }
        };
        if let Err(e) = r {
            tracing::warn!("freeing {kind:?} memory for nvJPEG: {e}");
        }
    }
}
