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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

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

/// What a device allocated and created, counted where it happens: the figures behind
/// `allocations after warm-up` (`--stats`), which a steady state keeps at zero.
#[derive(Debug, Default)]
pub struct Counters {
    /// Device allocations (`cuMemAlloc`).
    pub device_allocs: AtomicU64,
    /// Device frees (`cuMemFree`).
    pub device_frees: AtomicU64,
    /// Pinned host allocations (`cuMemHostAlloc`).
    pub pinned_allocs: AtomicU64,
    /// Pinned host frees.
    pub pinned_frees: AtomicU64,
    /// Events created (`cuEventCreate`); recording a pooled one creates none.
    pub events_created: AtomicU64,
}

impl Counters {
    /// The counts now: (device allocations, device frees, pinned allocations, events
    /// created).
    pub fn read(&self) -> CountersSnapshot {
        CountersSnapshot {
            device_allocs: self.device_allocs.load(Ordering::Relaxed),
            device_frees: self.device_frees.load(Ordering::Relaxed),
            pinned_allocs: self.pinned_allocs.load(Ordering::Relaxed),
            pinned_frees: self.pinned_frees.load(Ordering::Relaxed),
            events_created: self.events_created.load(Ordering::Relaxed),
        }
    }
}

/// A copy of [`Counters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CountersSnapshot {
    /// Device allocations.
    pub device_allocs: u64,
    /// Device frees.
    pub device_frees: u64,
    /// Pinned host allocations.
    pub pinned_allocs: u64,
    /// Pinned host frees.
    pub pinned_frees: u64,
    /// Events created.
    pub events_created: u64,
}

impl CountersSnapshot {
    /// Allocations, frees and event creations of every kind, summed.
    pub fn total(&self) -> u64 {
        self.device_allocs
            + self.device_frees
            + self.pinned_allocs
            + self.pinned_frees
            + self.events_created
    }

    /// What happened between `earlier` and `self` (none of a kind where `self` was read
    /// before `earlier`: snapshots read on different threads may come in either order).
    pub fn since(&self, earlier: &CountersSnapshot) -> CountersSnapshot {
        CountersSnapshot {
            device_allocs: self.device_allocs.saturating_sub(earlier.device_allocs),
            device_frees: self.device_frees.saturating_sub(earlier.device_frees),
            pinned_allocs: self.pinned_allocs.saturating_sub(earlier.pinned_allocs),
            pinned_frees: self.pinned_frees.saturating_sub(earlier.pinned_frees),
            events_created: self.events_created.saturating_sub(earlier.events_created),
        }
    }
}

/// Events created once and recorded again and again: an event goes back to the pool when
/// its last [`PooledEvent`] handle drops, so recording one in steady state creates nothing
/// (`cuEventCreate` takes a lock the training loop's launches wait for). Every event has
/// `CU_EVENT_BLOCKING_SYNC` (a host waiting on one sleeps instead of spinning on a core the
/// workers need) and keeps timing.
#[derive(Debug)]
pub struct EventPool {
    ctx: Arc<CudaContext>,
    free: Mutex<Vec<usize>>,
    counters: Arc<Counters>,
}

impl EventPool {
    /// An empty pool of `ctx`'s events, counting creations in `counters`.
    pub fn new(ctx: Arc<CudaContext>, counters: Arc<Counters>) -> Arc<EventPool> {
        Arc::new(EventPool {
            ctx,
            free: Mutex::new(Vec::new()),
            counters,
        })
    }

    /// An event recorded on `stream` (after the work queued there so far); the context is
    /// current.
    ///
    /// # Safety
    /// `stream` is a live stream of the pool's context, or null.
    pub unsafe fn record(
        self: &Arc<Self>,
        stream: cu::CUstream,
    ) -> Result<PooledEvent, DriverError> {
        let reused = self.free.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let raw = match reused {
            Some(raw) => raw as cu::CUevent,
            None => {
                self.ctx.bind_to_thread()?;
                self.counters.events_created.fetch_add(1, Ordering::Relaxed);
                drv::event::create(cu::CUevent_flags::CU_EVENT_BLOCKING_SYNC)?
            }
        };
        let event = PooledEvent {
            raw: raw as usize,
            pool: self.clone(),
        };
        // SAFETY: `raw` is an event of this context that no other handle holds (it was free
        // or new); `stream` per the contract. Recording again is allowed whatever waited on
        // its earlier recording: a wait captures the state at the time it is queued.
        unsafe { drv::event::record(raw, stream) }?;
        Ok(event)
    }
}

impl Drop for EventPool {
    fn drop(&mut self) {
        for raw in self
            .free
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            // SAFETY: a free event is held by no handle and waited on by nothing queued
            // after the pool is dropped (its owner synchronised the context first).
            unsafe {
                let _ = drv::event::destroy(raw as cu::CUevent);
            }
        }
    }
}

/// An event of an [`EventPool`], back to the pool when dropped.
#[derive(Debug)]
pub struct PooledEvent {
    raw: usize,
    pool: Arc<EventPool>,
}

impl PooledEvent {
    /// The raw `CUevent`.
    pub fn raw(&self) -> cu::CUevent {
        self.raw as cu::CUevent
    }

    /// Blocks (sleeping) until the event's work has run.
    pub fn synchronize(&self) -> Result<(), DriverError> {
        // SAFETY: the event is live while this handle is.
        unsafe { drv::event::synchronize(self.raw()) }
    }

    /// Whether the event's work has run, without waiting.
    pub fn is_complete(&self) -> Result<bool, DriverError> {
        // SAFETY: as above.
        match unsafe { drv::event::query(self.raw()) } {
            Ok(()) => Ok(true),
            Err(e) if e.0 == cu::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Milliseconds of device time from `start` to this event (both complete).
    pub fn elapsed_ms_since(&self, start: &PooledEvent) -> Result<f32, DriverError> {
        // SAFETY: both events are live while their handles are.
        unsafe { drv::event::elapsed(start.raw(), self.raw()) }
    }
}

impl Drop for PooledEvent {
    fn drop(&mut self) {
        self.pool
            .free
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(self.raw);
    }
}

/// The real context: a cudarc `CudaContext` (the device's primary context, shared with
/// frameworks in the same process), with its event pool and allocation counters.
#[derive(Debug, Clone)]
pub struct CudaGpuContext {
    ctx: Arc<CudaContext>,
    events: Arc<EventPool>,
    counters: Arc<Counters>,
}

impl CudaGpuContext {
    /// The primary context of device `ordinal`.
    pub fn new(ordinal: usize) -> Result<CudaGpuContext, NvjpegError> {
        CudaContext::new(ordinal)
            .map(|c| Self::from_context(c, Arc::default()))
            .map_err(|e| driver_error(&format!("context of device {ordinal}"), e))
    }

    /// Wraps an existing context, counting in `counters`.
    pub fn from_context(ctx: Arc<CudaContext>, counters: Arc<Counters>) -> CudaGpuContext {
        CudaGpuContext {
            events: EventPool::new(ctx.clone(), counters.clone()),
            ctx,
            counters,
        }
    }

    /// The context's event pool.
    pub fn events(&self) -> &Arc<EventPool> {
        &self.events
    }

    /// The allocation and event counters.
    pub fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }
}

fn driver_error(what: &str, e: DriverError) -> NvjpegError {
    NvjpegError::cuda(what, e.0 as u32)
}

#[derive(Debug)]
struct CudaFence {
    event: PooledEvent,
}

impl Fence for CudaFence {
    fn wait(&self) -> Result<(), NvjpegError> {
        self.event
            .synchronize()
            .map_err(|e| driver_error("waiting for nvJPEG work", e))
    }

    fn is_done(&self) -> Result<bool, NvjpegError> {
        self.event
            .is_complete()
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
        // SAFETY: `stream` is a stream of this context or null (the caller's contract with
        // the decoder); the context is current (this trait's contract).
        let event = unsafe { self.events.record(stream as cu::CUstream) }
            .map_err(|e| driver_error("recording an event", e))?;
        Ok(Arc::new(CudaFence { event }))
    }

    fn alloc(&self, kind: MemoryKind, len: usize) -> Result<u64, NvjpegError> {
        // nvJPEG may call its allocators from a thread of its own: make ours current there.
        self.bind()?;
        match kind {
            MemoryKind::Device => {
                self.counters.device_allocs.fetch_add(1, Ordering::Relaxed);
                // SAFETY: the context is current (the trait's contract); the memory is
                // uninitialised, which is what nvJPEG expects.
                unsafe { drv::malloc_sync(len) }
                    .map_err(|e| driver_error(&format!("allocating {len} device bytes"), e))
            }
            MemoryKind::Pinned => {
                self.counters.pinned_allocs.fetch_add(1, Ordering::Relaxed);
                // SAFETY: as above; flags 0 = page-locked, usable by this context's copies.
                unsafe { drv::malloc_host(len, 0) }
                    .map(|p| p as u64)
                    .map_err(|e| driver_error(&format!("allocating {len} pinned bytes"), e))
            }
        }
    }

    unsafe fn free(&self, kind: MemoryKind, addr: u64, _len: usize) {
        if let Err(e) = self.bind() {
            tracing::warn!("freeing {kind:?} memory for nvJPEG: {e}; leaked");
            return;
        }
        let counter = match kind {
            MemoryKind::Device => &self.counters.device_frees,
            MemoryKind::Pinned => &self.counters.pinned_frees,
        };
        counter.fetch_add(1, Ordering::Relaxed);
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
