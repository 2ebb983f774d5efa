//! Recycled sample-sized buffers, so that the steady state of a pipeline allocates no large
//! block per sample.
//!
//! Every sample makes a few buffers of tens to hundreds of kilobytes (decoded window,
//! resize intermediate, resized image, normalized output). Allocated and freed per sample,
//! each costs page faults and, above the allocator's mmap threshold, an `munmap` with a TLB
//! shootdown on every core, which the other workers pay too. So buffers given back here are
//! handed out again by [`buffer`] (`docs/performance.md` has what this saves).
//!
//! The pools belong to their owner: each running pipeline has its own [`ScratchPools`],
//! bound to each of its threads ([`ScratchPools::bind`]), so two pipelines in one process
//! never share, size or empty each other's pools, and a dropped pipeline frees its own. On a
//! thread with no pools bound (code calling operators directly), each thread has small pools
//! of its own. The functions below use whichever pools the calling thread has.
//!
//! A buffer from [`buffer`] has the requested length but **unspecified contents** (old
//! values, never uninitialised memory): callers overwrite every element.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use half::f16;

use crate::image::{Image, Pixels};

/// Bytes kept in each float pool of a pipeline at most; buffers beyond this are freed. Large
/// enough for a batch of samples in flight (the assembler gives a whole batch of sample
/// images back at once).
const MAX_POOLED_BYTES: usize = 256 << 20;
/// Bytes kept in the `u8` pool at most. Byte buffers (file contents, decoded windows) vary in
/// size from sample to sample, so a pool as large as the float one would fill with the
/// largest sizes ever seen; a small one keeps only the common working set.
const MAX_POOLED_U8_BYTES: usize = 32 << 20;
/// Buffers kept in each pool at most, whatever a pipeline asks.
const MAX_POOLED_BUFFERS: usize = 1024;
/// Buffers kept in each pool of a thread with no pipeline's pools bound.
const DEFAULT_POOLED_BUFFERS: usize = 16;
/// Bytes kept in each pool of a thread with no pipeline's pools bound.
const DEFAULT_POOLED_BYTES: usize = 32 << 20;
/// Larger buffers are never kept (rare huge images would pin memory).
const MAX_BUFFER_BYTES: usize = 16 << 20;

/// A free list of buffers of one element type.
#[derive(Debug)]
pub struct ScratchPool<T> {
    free: Mutex<Free<T>>,
    max_bytes: usize,
    max_buffers: usize,
}

#[derive(Debug)]
struct Free<T> {
    buffers: Vec<Vec<T>>,
    bytes: usize,
}

impl<T> ScratchPool<T> {
    const fn with_limits(max_bytes: usize, max_buffers: usize) -> ScratchPool<T> {
        ScratchPool {
            free: Mutex::new(Free {
                buffers: Vec::new(),
                bytes: 0,
            }),
            max_bytes,
            max_buffers,
        }
    }

    /// Buffers held now.
    fn len(&self) -> usize {
        self.free.lock().map(|f| f.buffers.len()).unwrap_or(0)
    }
}

/// The scratch pools of one owner (a pipeline): one per element type, and the shared
/// buffers' reference counts ([`encoded`]).
///
/// ```
/// use stokehold::scratch::{self, ScratchPools};
/// let pools = ScratchPools::new(64);
/// {
///     let _bound = pools.bind();
///     scratch::recycle(vec![0f32; 1000]);
///     assert_eq!(pools.pooled_buffers(), 1);
///     assert_eq!(scratch::buffer::<f32>(10).capacity(), 1000, "reused");
/// }
/// // Unbound again: this thread's own pools serve it, the pipeline's are untouched.
/// scratch::recycle(vec![0f32; 1000]);
/// assert_eq!(pools.pooled_buffers(), 0);
/// ```
#[derive(Debug)]
pub struct ScratchPools {
    u8: ScratchPool<u8>,
    f16: ScratchPool<f16>,
    f32: ScratchPool<f32>,
    /// Emptied `Arc`s of encoded files, reused with the `u8` pool's bytes ([`encoded`]).
    shells: Mutex<Vec<Arc<Vec<u8>>>>,
    max_shells: usize,
}

impl ScratchPools {
    /// Pools for an owner keeping about `buffers` samples in flight: each pool keeps up to
    /// that many buffers (so a whole batch given back at once can be reused; more would only
    /// pile up), within fixed byte limits.
    pub fn new(buffers: usize) -> Arc<ScratchPools> {
        let n = buffers.clamp(DEFAULT_POOLED_BUFFERS, MAX_POOLED_BUFFERS);
        Arc::new(ScratchPools {
            u8: ScratchPool::with_limits(MAX_POOLED_U8_BYTES, n),
            f16: ScratchPool::with_limits(MAX_POOLED_BYTES, n),
            f32: ScratchPool::with_limits(MAX_POOLED_BYTES, n),
            shells: Mutex::new(Vec::new()),
            max_shells: n,
        })
    }

    const fn thread_default() -> ScratchPools {
        ScratchPools {
            u8: ScratchPool::with_limits(DEFAULT_POOLED_BYTES, DEFAULT_POOLED_BUFFERS),
            f16: ScratchPool::with_limits(DEFAULT_POOLED_BYTES, DEFAULT_POOLED_BUFFERS),
            f32: ScratchPool::with_limits(DEFAULT_POOLED_BYTES, DEFAULT_POOLED_BUFFERS),
            shells: Mutex::new(Vec::new()),
            max_shells: DEFAULT_POOLED_BUFFERS,
        }
    }

    /// Makes these the calling thread's pools until the returned guard is dropped (then the
    /// thread's earlier pools are back).
    pub fn bind(self: &Arc<Self>) -> ScratchBinding {
        let previous = BOUND.with(|b| b.replace(Some(self.clone())));
        ScratchBinding {
            previous,
            _not_send: PhantomData,
        }
    }

    /// Buffers held now, over all element types.
    pub fn pooled_buffers(&self) -> usize {
        self.u8.len() + self.f16.len() + self.f32.len()
    }
}

/// The pools bound to the calling thread, if any: for a thread it starts to bind them too
/// (what it gives back then reaches the pipeline's other threads).
pub(crate) fn bound() -> Option<Arc<ScratchPools>> {
    BOUND.try_with(|b| b.borrow().clone()).ok().flatten()
}

/// Keeps a thread's pools bound (see [`ScratchPools::bind`]); stays on its thread.
#[derive(Debug)]
pub struct ScratchBinding {
    previous: Option<Arc<ScratchPools>>,
    _not_send: PhantomData<*const ()>,
}

impl Drop for ScratchBinding {
    fn drop(&mut self) {
        let previous = self.previous.take();
        // During thread teardown the thread-local may be gone already: nothing to restore.
        let _ = BOUND.try_with(|b| *b.borrow_mut() = previous);
    }
}

thread_local! {
    /// The pools of the pipeline this thread works for, if any.
    static BOUND: RefCell<Option<Arc<ScratchPools>>> = const { RefCell::new(None) };
    /// This thread's own small pools, for when none are bound.
    static OWN: ScratchPools = const { ScratchPools::thread_default() };
}

/// Runs `f` on the calling thread's pools (see the module docs); `None` only while the
/// thread is being torn down.
fn with_pools<R>(f: impl FnOnce(&ScratchPools) -> R) -> Option<R> {
    let mut f = Some(f);
    // Borrowed, not cloned: no reference count for the pipeline's threads to contend on.
    let bound = BOUND
        .try_with(|b| b.borrow().as_deref().map(|p| (f.take().expect("once"))(p)))
        .ok()
        .flatten();
    match (bound, f) {
        (Some(r), _) => Some(r),
        (None, Some(f)) => OWN.try_with(f).ok(),
        (None, None) => None,
    }
}

/// Element types with a buffer pool.
pub trait Recyclable: Copy + Default + Send + 'static {
    /// This type's pool among `pools`.
    fn pool(pools: &ScratchPools) -> &ScratchPool<Self>;
}

impl Recyclable for u8 {
    fn pool(pools: &ScratchPools) -> &ScratchPool<u8> {
        &pools.u8
    }
}

impl Recyclable for f16 {
    fn pool(pools: &ScratchPools) -> &ScratchPool<f16> {
        &pools.f16
    }
}

impl Recyclable for f32 {
    fn pool(pools: &ScratchPools) -> &ScratchPool<f32> {
        &pools.f32
    }
}

/// A buffer of `len` elements with unspecified contents: a recycled one when one is large
/// enough (the smallest such), else a new zeroed one.
pub fn buffer<T: Recyclable>(len: usize) -> Vec<T> {
    with_pools(|p| take(T::pool(p), len)).unwrap_or_else(|| vec![T::default(); len])
}

/// An empty buffer with room for at least `capacity` elements (recycled when possible).
pub fn empty<T: Recyclable>(capacity: usize) -> Vec<T> {
    match with_pools(|p| take_fitting(T::pool(p), capacity)).flatten() {
        Some(mut v) => {
            v.clear();
            v
        }
        None => Vec::with_capacity(capacity),
    }
}

/// An empty buffer for an encoded file of up to `capacity` bytes, to be shared (a reader
/// hands it on) and shared with no one yet, so [`Arc::get_mut`] gives its `Vec`: the bytes
/// and the reference count both recycled ([`recycle_encoded`]) when the pools have them.
///
/// ```
/// use std::sync::Arc;
/// use stokehold::scratch;
/// let mut file = scratch::encoded(100);
/// Arc::get_mut(&mut file).expect("not shared").extend_from_slice(b"JFIF");
/// let (count, bytes) = (Arc::as_ptr(&file), file.as_ptr());
/// scratch::recycle_encoded(file);
/// let again = scratch::encoded(10);
/// assert!(again.is_empty());
/// assert_eq!((Arc::as_ptr(&again), again.as_ptr()), (count, bytes), "nothing allocated");
/// // Still held elsewhere (the device reading it): not taken back.
/// let held = again.clone();
/// scratch::recycle_encoded(again);
/// assert_ne!(Arc::as_ptr(&scratch::encoded(10)), Arc::as_ptr(&held));
/// ```
pub fn encoded(capacity: usize) -> Arc<Vec<u8>> {
    let bytes = empty::<u8>(capacity);
    match with_pools(|p| p.shells.lock().ok()?.pop()).flatten() {
        Some(mut shell) => {
            *Arc::get_mut(&mut shell).expect("a pooled shell is shared with no one") = bytes;
            shell
        }
        None => Arc::new(bytes),
    }
}

/// Gives back the bytes of an encoded sample, and their reference count, once nothing else
/// holds them (else whoever lets go of them last may give them back).
pub fn recycle_encoded(mut shared: Arc<Vec<u8>>) {
    // A weak reference could upgrade later: only what no one else can reach is kept. (Two
    // holders letting go at once may both see the other: the buffer is then freed.)
    let Some(bytes) = Arc::get_mut(&mut shared) else {
        return;
    };
    recycle(std::mem::take(bytes));
    with_pools(|p| {
        if let Ok(mut shells) = p.shells.lock() {
            if shells.len() < p.max_shells {
                shells.push(shared);
            }
        }
    });
}

/// Gives `v` back for reuse (or frees it when the pool is full or `v` is very large).
pub fn recycle<T: Recyclable>(v: Vec<T>) {
    with_pools(|p| give(T::pool(p), v));
}

/// Gives an image's pixel buffer back for reuse.
pub fn recycle_image(im: Image) {
    match im.pixels {
        Pixels::U8(v) => recycle(v),
        Pixels::F16(v) => recycle(v),
        Pixels::F32(v) => recycle(v),
    }
}

fn take<T: Copy + Default>(pool: &ScratchPool<T>, len: usize) -> Vec<T> {
    match take_fitting(pool, len) {
        Some(mut b) => {
            // Within capacity: no reallocation; only a grown tail is written.
            b.resize(len, T::default());
            b
        }
        None => vec![T::default(); len],
    }
}

/// The smallest pooled buffer with room for `len` elements, if any.
///
/// When none is large enough, the largest pooled buffer is freed instead: buffers that no
/// longer fit what samples ask for do not accumulate, and the pool follows the working set.
fn take_fitting<T>(pool: &ScratchPool<T>, len: usize) -> Option<Vec<T>> {
    let mut free = pool.free.lock().ok()?;
    let best = free
        .buffers
        .iter()
        .enumerate()
        .filter(|(_, b)| b.capacity() >= len)
        .min_by_key(|(_, b)| b.capacity())
        .map(|(i, _)| i);
    let size = std::mem::size_of::<T>();
    match best {
        Some(i) => {
            let b = free.buffers.swap_remove(i);
            free.bytes -= b.capacity() * size;
            Some(b)
        }
        None => {
            let largest = free
                .buffers
                .iter()
                .enumerate()
                .max_by_key(|(_, b)| b.capacity())
                .map(|(i, _)| i);
            if let Some(i) = largest {
                let b = free.buffers.swap_remove(i);
                free.bytes -= b.capacity() * size;
                drop(free);
                drop(b);
            }
            None
        }
    }
}

fn give<T>(pool: &ScratchPool<T>, v: Vec<T>) {
    let bytes = v.capacity() * std::mem::size_of::<T>();
    if bytes == 0 || bytes > MAX_BUFFER_BYTES {
        return;
    }
    if let Ok(mut free) = pool.free.lock() {
        if free.buffers.len() < pool.max_buffers && free.bytes + bytes <= pool.max_bytes {
            free.bytes += bytes;
            free.buffers.push(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_have_the_asked_length_and_are_reused() {
        let pool = ScratchPool::<f32>::with_limits(MAX_POOLED_BYTES, DEFAULT_POOLED_BUFFERS);
        let mut a = take(&pool, 1000);
        assert_eq!(a.len(), 1000);
        a.fill(7.0);
        let ptr = a.as_ptr();
        give(&pool, a);
        // A smaller request reuses it: right length, old contents, no new allocation.
        let b = take(&pool, 10);
        assert_eq!((b.len(), b.as_ptr(), b[9]), (10, ptr, 7.0));
        give(&pool, b);
        // A larger one grows within the capacity when it fits…
        let c = take(&pool, 1000);
        assert_eq!((c.len(), c.as_ptr()), (1000, ptr));
        give(&pool, c);
        // …and is a new buffer when it does not (the pooled one, too small, is freed). Its
        // address is no evidence either way: the allocator may grow a block in place.
        let d = take(&pool, 1 << 20);
        assert_eq!(d.len(), 1 << 20);
        assert!(d.capacity() >= 1 << 20);
        assert_eq!(pool.free.lock().unwrap().buffers.len(), 0);
    }

    #[test]
    fn the_smallest_fitting_buffer_is_taken() {
        let pool = ScratchPool::<u8>::with_limits(MAX_POOLED_BYTES, DEFAULT_POOLED_BUFFERS);
        for n in [4000, 1000, 2000] {
            give(&pool, vec![0u8; n]);
        }
        assert!(take(&pool, 1500).capacity() < 4000);
        assert_eq!(pool.free.lock().unwrap().bytes, 5000);
        // A miss frees the largest pooled buffer: sizes nobody asks for do not pile up.
        assert_eq!(take(&pool, 9000).len(), 9000);
        assert_eq!(pool.free.lock().unwrap().bytes, 1000);
    }

    #[test]
    fn the_pool_is_bounded() {
        let pools = ScratchPools::new(0);
        let pool = &pools.u8;
        for _ in 0..100 {
            give(pool, vec![0u8; 1 << 10]);
        }
        give(pool, vec![0u8; MAX_BUFFER_BYTES + 1]);
        let free = pool.free.lock().unwrap();
        let limit = pool.max_buffers;
        assert!(limit >= DEFAULT_POOLED_BUFFERS);
        assert_eq!(free.buffers.len(), limit.min(100));
        assert!(free.bytes <= MAX_POOLED_BYTES);
        assert!(free
            .buffers
            .iter()
            .all(|b| b.capacity() <= MAX_BUFFER_BYTES));
        drop(free);
        let small = ScratchPool::<u8>::with_limits(4 << 10, DEFAULT_POOLED_BUFFERS);
        for _ in 0..10 {
            give(&small, vec![0u8; 1 << 10]);
        }
        assert_eq!(small.free.lock().unwrap().bytes, 4 << 10);
    }

    #[test]
    fn each_owner_keeps_its_own_pools() {
        let (train, eval) = (ScratchPools::new(64), ScratchPools::new(64));
        std::thread::scope(|s| {
            s.spawn(|| {
                let _bound = train.bind();
                recycle(vec![0f32; 4096]);
                recycle(vec![0u8; 4096]);
            });
            s.spawn(|| {
                let _bound = eval.bind();
                recycle(vec![0f32; 4096]);
            });
        });
        assert_eq!(train.pooled_buffers(), 2);
        assert_eq!(eval.pooled_buffers(), 1);
        // The eval pools going away leave the train pools alone.
        drop(eval);
        assert_eq!(train.pooled_buffers(), 2);
        // Bindings nest and come undone in order.
        let outer = train.bind();
        {
            let other = ScratchPools::new(0);
            let _inner = other.bind();
            recycle(vec![f16::ZERO; 64]);
            assert_eq!(other.pooled_buffers(), 1);
        }
        recycle(vec![0f32; 64]);
        assert_eq!(train.pooled_buffers(), 3);
        drop(outer);
        recycle(vec![0f32; 64]);
        assert_eq!(train.pooled_buffers(), 3, "unbound: the thread's own pools");
    }
}
