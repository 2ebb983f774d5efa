//! Memory for nvJPEG, allocated once and reused: the device and pinned allocators nvJPEG is
//! created with (`nvjpegCreateExV2`), and the pinned blocks the staging ring copies encoded
//! images into.
//!
//! Why our own: nvJPEG's defaults call `cudaMalloc`/`cudaFree` and `cudaHostAlloc`/
//! `cudaFreeHost` whenever a buffer grows, in the middle of a run, and a free synchronises
//! the whole device (a training step on another stream included). Here a block nvJPEG frees
//! goes to an idle list with a fence recorded on the stream it was freed on (nvJPEG's V2
//! allocators are stream-ordered: queued work may still read it), and is handed out again
//! only once that fence is done. Blocks are sized by [`size_class`] (at most 1/8 waste, so a
//! block serves the next slightly larger request), at most [`MAX_IDLE`] idle blocks are kept,
//! and memory goes back to CUDA only when the cache is dropped, after every fence.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex};

use super::super::result::NvjpegError;
use super::super::sys;
use super::context::{Fence, GpuContext, MemoryKind};
use crate::size_class::size_class;

/// Idle blocks kept per cache; beyond that a finished idle block is freed.
pub const MAX_IDLE: usize = 32;

/// What a cache did, for statistics and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Blocks allocated from CUDA.
    pub allocated: u64,
    /// Requests served by an idle block.
    pub reused: u64,
    /// Blocks given back to CUDA (only beyond [`MAX_IDLE`], and at drop).
    pub released: u64,
    /// Bytes held now (handed out and idle).
    pub bytes: usize,
    /// Blocks handed out now.
    pub live: usize,
}

#[derive(Debug)]
struct Idle {
    addr: u64,
    len: usize,
    /// Done once nothing queued before the block was given back uses it; `None`: no work.
    fence: Option<Arc<dyn Fence>>,
}

impl Idle {
    fn ready(&self) -> bool {
        self.fence
            .as_ref()
            .is_none_or(|f| f.is_done().unwrap_or(false))
    }
}

#[derive(Debug, Default)]
struct Blocks {
    idle: Vec<Idle>,
    /// Address → size of the blocks handed out.
    live: HashMap<u64, usize>,
    stats: CacheStats,
}

/// A cache of `kind` memory blocks of one context.
#[derive(Debug)]
pub struct BlockCache {
    ctx: Arc<dyn GpuContext>,
    kind: MemoryKind,
    blocks: Mutex<Blocks>,
}

impl BlockCache {
    /// An empty cache.
    pub fn new(ctx: Arc<dyn GpuContext>, kind: MemoryKind) -> BlockCache {
        BlockCache {
            ctx,
            kind,
            blocks: Mutex::new(Blocks::default()),
        }
    }

    /// A block of at least `len` (> 0) bytes: the smallest idle one that fits and whose work
    /// is done, else a new one of `len`'s size class. Returns (address, size).
    pub fn take(&self, len: usize) -> Result<(u64, usize), NvjpegError> {
        let class = size_class(len.max(1)).ok_or_else(|| {
            NvjpegError::InvalidArgument(format!("{len} bytes of {:?} memory", self.kind))
        })?;
        let mut b = self.blocks.lock().unwrap_or_else(|p| p.into_inner());
        let best = b
            .idle
            .iter()
            .enumerate()
            .filter(|(_, i)| i.len >= class && i.len <= class.saturating_mul(2) && i.ready())
            .min_by_key(|(_, i)| i.len)
            .map(|(k, _)| k);
        if let Some(k) = best {
            let i = b.idle.swap_remove(k);
            b.live.insert(i.addr, i.len);
            b.stats.reused += 1;
            b.stats.live += 1;
            return Ok((i.addr, i.len));
        }
        let addr = self.ctx.alloc(self.kind, class)?;
        b.live.insert(addr, class);
        b.stats.allocated += 1;
        b.stats.bytes += class;
        b.stats.live += 1;
        Ok((addr, class))
    }

    /// Takes back a block from [`Self::take`]; it is reused once `fence` (work queued before
    /// this call that may still read or write it) is done. An address this cache did not
    /// hand out is ignored (and logged): it is never freed.
    pub fn give(&self, addr: u64, fence: Option<Arc<dyn Fence>>) {
        let mut b = self.blocks.lock().unwrap_or_else(|p| p.into_inner());
        let Some(len) = b.live.remove(&addr) else {
            tracing::warn!(
                "nvJPEG gave back {:?} memory it did not get here",
                self.kind
            );
            return;
        };
        b.stats.live -= 1;
        b.idle.push(Idle { addr, len, fence });
        if b.idle.len() > MAX_IDLE {
            if let Some(k) = b.idle.iter().position(Idle::ready) {
                let old = b.idle.swap_remove(k);
                b.stats.released += 1;
                b.stats.bytes -= old.len;
                // SAFETY: the block came from `alloc` of this kind with this size, was given
                // back (no user holds it) and its fence is done (no queued work uses it).
                unsafe { self.ctx.free(self.kind, old.addr, old.len) };
            }
        }
    }

    /// What the cache did so far.
    pub fn stats(&self) -> CacheStats {
        self.blocks.lock().map(|b| b.stats).unwrap_or_default()
    }

    /// The context the memory belongs to.
    pub fn context(&self) -> &Arc<dyn GpuContext> {
        &self.ctx
    }
}

impl Drop for BlockCache {
    fn drop(&mut self) {
        let b = self.blocks.get_mut().unwrap_or_else(|p| p.into_inner());
        if !b.live.is_empty() {
            // Never free what someone may still use: leak it, and say so.
            tracing::warn!(
                "{} {:?} block(s) for nvJPEG still in use when the cache was dropped; leaked",
                b.live.len(),
                self.kind
            );
        }
        if b.idle.is_empty() {
            return;
        }
        if let Err(e) = self.ctx.bind() {
            tracing::warn!("nvJPEG memory not freed: {e}");
            return;
        }
        for i in b.idle.drain(..) {
            if let Some(f) = &i.fence {
                if let Err(e) = f.wait() {
                    tracing::warn!("nvJPEG memory not freed: {e}");
                    continue;
                }
            }
            // SAFETY: allocated by this cache with this size, idle, and its fence done.
            unsafe { self.ctx.free(self.kind, i.addr, i.len) };
        }
    }
}

/// The device and pinned caches a handle's nvJPEG allocations come from. Boxed behind an
/// `Arc` that the handle holds, so the context pointer given to nvJPEG stays valid for as
/// long as nvJPEG may call back.
#[derive(Debug)]
pub struct Allocators {
    /// Device memory.
    pub device: BlockCache,
    /// Pinned host memory.
    pub pinned: BlockCache,
}

impl Allocators {
    /// Empty caches of `ctx`.
    pub fn new(ctx: Arc<dyn GpuContext>) -> Arc<Allocators> {
        Arc::new(Allocators {
            device: BlockCache::new(ctx.clone(), MemoryKind::Device),
            pinned: BlockCache::new(ctx, MemoryKind::Pinned),
        })
    }

    fn cache(&self, kind: MemoryKind) -> &BlockCache {
        match kind {
            MemoryKind::Device => &self.device,
            MemoryKind::Pinned => &self.pinned,
        }
    }

    /// The device allocator to give nvJPEG; valid while `self` is.
    pub fn device_v2(self: &Arc<Self>) -> sys::nvjpegDevAllocatorV2_t {
        sys::nvjpegDevAllocatorV2_t {
            dev_malloc: Some(device_malloc),
            dev_free: Some(device_free),
            dev_ctx: Arc::as_ptr(self) as *mut c_void,
        }
    }

    /// The pinned allocator to give nvJPEG; valid while `self` is.
    pub fn pinned_v2(self: &Arc<Self>) -> sys::nvjpegPinnedAllocatorV2_t {
        sys::nvjpegPinnedAllocatorV2_t {
            pinned_malloc: Some(pinned_malloc),
            pinned_free: Some(pinned_free),
            pinned_ctx: Arc::as_ptr(self) as *mut c_void,
        }
    }

    /// `malloc` for nvJPEG: 0 on success, 1 on failure (nvJPEG reports
    /// `NVJPEG_STATUS_ALLOCATOR_FAILURE`). Never unwinds into C.
    fn malloc(&self, kind: MemoryKind, out: *mut *mut c_void, len: usize) -> c_int {
        if out.is_null() {
            return 1;
        }
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if len == 0 {
                Ok(0)
            } else {
                self.cache(kind).take(len).map(|(addr, _)| addr)
            }
        }));
        match r {
            Ok(Ok(addr)) => {
                // SAFETY: nvJPEG passes a valid out-pointer (checked non-null above).
                unsafe { *out = addr as usize as *mut c_void };
                0
            }
            Ok(Err(e)) => {
                tracing::warn!("nvJPEG allocation of {len} {kind:?} bytes: {e}");
                1
            }
            Err(_) => 1,
        }
    }

    /// `free` for nvJPEG: the block is reused after the work queued on `stream` so far.
    fn free(&self, kind: MemoryKind, ptr: *mut c_void, stream: sys::cudaStream_t) -> c_int {
        if ptr.is_null() {
            return 0;
        }
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let cache = self.cache(kind);
            let fence = match cache.context().record(stream.cast()) {
                Ok(f) => Some(f),
                Err(e) => {
                    // Without a fence the block can't be known free: it stays out of use
                    // (and is leaked, with a warning, when the cache drops).
                    tracing::warn!("nvJPEG free: {e}; the block is not reused");
                    return Err(e);
                }
            };
            cache.give(ptr as u64, fence);
            Ok(())
        }));
        match r {
            Ok(Ok(())) => 0,
            _ => 1,
        }
    }
}

/// Reads the [`Allocators`] behind nvJPEG's context pointer.
///
/// # Safety
/// `ctx` is the pointer [`Allocators::device_v2`] / [`Allocators::pinned_v2`] put in the
/// allocator, and the `Arc` it came from is alive (the handle holds it until after
/// `nvjpegDestroy`).
unsafe fn allocators<'a>(ctx: *mut c_void) -> &'a Allocators {
    // SAFETY: per the function's contract.
    unsafe { &*(ctx as *const Allocators) }
}

unsafe extern "C" fn device_malloc(
    ctx: *mut c_void,
    ptr: *mut *mut c_void,
    size: usize,
    _stream: sys::cudaStream_t,
) -> c_int {
    // SAFETY: nvJPEG passes back the context pointer of the allocator we created it with.
    unsafe { allocators(ctx) }.malloc(MemoryKind::Device, ptr, size)
}

unsafe extern "C" fn device_free(
    ctx: *mut c_void,
    ptr: *mut c_void,
    _size: usize,
    stream: sys::cudaStream_t,
) -> c_int {
    // SAFETY: as for `device_malloc`.
    unsafe { allocators(ctx) }.free(MemoryKind::Device, ptr, stream)
}

unsafe extern "C" fn pinned_malloc(
    ctx: *mut c_void,
    ptr: *mut *mut c_void,
    size: usize,
    _stream: sys::cudaStream_t,
) -> c_int {
    // SAFETY: as for `device_malloc`.
    unsafe { allocators(ctx) }.malloc(MemoryKind::Pinned, ptr, size)
}

unsafe extern "C" fn pinned_free(
    ctx: *mut c_void,
    ptr: *mut c_void,
    _size: usize,
    stream: sys::cudaStream_t,
) -> c_int {
    // SAFETY: as for `device_malloc`.
    unsafe { allocators(ctx) }.free(MemoryKind::Pinned, ptr, stream)
}
