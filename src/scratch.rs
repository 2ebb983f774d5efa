//! Recycled sample-sized buffers, so that the steady state of a pipeline allocates no large
//! block per sample.
//!
//! Every sample makes a few buffers of tens to hundreds of kilobytes (decoded window,
//! resize intermediate, resized image, normalized output). Allocating and freeing them per
//! sample costs page faults and, above the allocator's mmap threshold, an `munmap` with a
//! TLB shootdown on every core — measurable at two threads (`perf stat`: 116k page faults
//! for 1,600 images before this module, 30k after). Buffers given back here are handed out
//! again by [`buffer`], from any thread.
//!
//! A buffer from [`buffer`] has the requested length but **unspecified contents** (old
//! values, never uninitialised memory): callers overwrite every element.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use half::f16;

use crate::image::{Image, Pixels};

/// Bytes kept in each pool at most; buffers beyond this are freed. Large enough for a batch
/// of samples in flight (the assembler gives a whole batch of sample images back at once).
const MAX_POOLED_BYTES: usize = 256 << 20;
/// Buffers kept in each pool at most, whatever [`keep_up_to`] asks.
const MAX_POOLED_BUFFERS: usize = 1024;
/// Buffers kept in each pool while no pipeline has said how many samples it keeps in flight.
const DEFAULT_POOLED_BUFFERS: usize = 16;

/// Buffers each pool keeps now (see [`keep_up_to`]).
static POOLED_BUFFERS: AtomicUsize = AtomicUsize::new(DEFAULT_POOLED_BUFFERS);

/// Lets each pool keep up to `buffers` buffers (a pipeline passes the number of samples it
/// keeps in flight, so a whole batch given back at once can be reused; more would only pile
/// up). The largest request of the pipelines alive wins; [`release`] resets it.
pub fn keep_up_to(buffers: usize) {
    POOLED_BUFFERS.fetch_max(buffers.min(MAX_POOLED_BUFFERS), Ordering::Relaxed);
}
/// Larger buffers are never kept (rare huge images would pin memory).
const MAX_BUFFER_BYTES: usize = 16 << 20;

/// A free list of buffers of one element type.
pub struct Pool<T> {
    free: Mutex<Free<T>>,
    max_bytes: usize,
}

struct Free<T> {
    buffers: Vec<Vec<T>>,
    bytes: usize,
}

impl<T> Pool<T> {
    const fn new() -> Pool<T> {
        Pool::with_limit(MAX_POOLED_BYTES)
    }

    const fn with_limit(max_bytes: usize) -> Pool<T> {
        Pool {
            free: Mutex::new(Free {
                buffers: Vec::new(),
                bytes: 0,
            }),
            max_bytes,
        }
    }
}

/// Element types with a buffer pool.
pub trait Recyclable: Copy + Default + Send + 'static {
    /// This type's pool.
    fn pool() -> &'static Pool<Self>;
}

/// Bytes kept in the `u8` pool at most. Byte buffers (file contents, decoded windows) vary in
/// size from sample to sample, so a pool as large as the float one would fill with the
/// largest sizes ever seen; a small one keeps only the common working set.
const MAX_POOLED_U8_BYTES: usize = 32 << 20;

static U8: Pool<u8> = Pool::with_limit(MAX_POOLED_U8_BYTES);
static F16: Pool<f16> = Pool::new();
static F32: Pool<f32> = Pool::new();

impl Recyclable for u8 {
    fn pool() -> &'static Pool<u8> {
        &U8
    }
}

impl Recyclable for f16 {
    fn pool() -> &'static Pool<f16> {
        &F16
    }
}

impl Recyclable for f32 {
    fn pool() -> &'static Pool<f32> {
        &F32
    }
}

/// A buffer of `len` elements with unspecified contents: a recycled one when one is large
/// enough (the smallest such), else a new zeroed one.
pub fn buffer<T: Recyclable>(len: usize) -> Vec<T> {
    take(T::pool(), len)
}

/// An empty buffer with room for at least `capacity` elements (recycled when possible).
pub fn empty<T: Recyclable>(capacity: usize) -> Vec<T> {
    match take_fitting(T::pool(), capacity) {
        Some(mut v) => {
            v.clear();
            v
        }
        None => Vec::with_capacity(capacity),
    }
}

/// Gives back the bytes of an encoded sample once nothing else holds them.
pub fn recycle_encoded(bytes: std::sync::Arc<Vec<u8>>) {
    if let Ok(v) = std::sync::Arc::try_unwrap(bytes) {
        recycle(v);
    }
}

/// Gives `v` back for reuse (or frees it when the pool is full or `v` is very large).
pub fn recycle<T: Recyclable>(v: Vec<T>) {
    give(T::pool(), v)
}

fn take<T: Copy + Default>(pool: &Pool<T>, len: usize) -> Vec<T> {
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
fn take_fitting<T>(pool: &Pool<T>, len: usize) -> Option<Vec<T>> {
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

fn give<T>(pool: &Pool<T>, v: Vec<T>) {
    let bytes = v.capacity() * std::mem::size_of::<T>();
    if bytes == 0 || bytes > MAX_BUFFER_BYTES {
        return;
    }
    if let Ok(mut free) = pool.free.lock() {
        let limit = POOLED_BUFFERS.load(Ordering::Relaxed);
        if free.buffers.len() < limit && free.bytes + bytes <= pool.max_bytes {
            free.bytes += bytes;
            free.buffers.push(v);
        }
    }
}

/// Frees every pooled buffer (a pipeline does this when it is dropped, so an idle process
/// keeps nothing).
pub fn release() {
    fn clear<T>(pool: &Pool<T>) {
        if let Ok(mut free) = pool.free.lock() {
            free.buffers = Vec::new();
            free.bytes = 0;
        }
    }
    clear(&U8);
    clear(&F16);
    clear(&F32);
    POOLED_BUFFERS.store(DEFAULT_POOLED_BUFFERS, Ordering::Relaxed);
}

/// Gives an image's pixel buffer back for reuse.
pub fn recycle_image(im: Image) {
    match im.pixels {
        Pixels::U8(v) => recycle(v),
        Pixels::F16(v) => recycle(v),
        Pixels::F32(v) => recycle(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_have_the_asked_length_and_are_reused() {
        let pool = Pool::<f32>::new();
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
        // …and is a new buffer when it does not (the pooled one, too small, is freed).
        let d = take(&pool, 1 << 20);
        assert_eq!(d.len(), 1 << 20);
        assert_ne!(d.as_ptr(), ptr);
        assert_eq!(pool.free.lock().unwrap().buffers.len(), 0);
    }

    #[test]
    fn the_smallest_fitting_buffer_is_taken() {
        let pool = Pool::<u8>::new();
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
        let pool = Pool::<u8>::new();
        for _ in 0..100 {
            give(&pool, vec![0u8; 1 << 10]);
        }
        give(&pool, vec![0u8; MAX_BUFFER_BYTES + 1]);
        let free = pool.free.lock().unwrap();
        let limit = POOLED_BUFFERS.load(Ordering::Relaxed);
        assert!(limit >= DEFAULT_POOLED_BUFFERS);
        assert_eq!(free.buffers.len(), limit.min(100));
        assert!(free.bytes <= MAX_POOLED_BYTES);
        assert!(free
            .buffers
            .iter()
            .all(|b| b.capacity() <= MAX_BUFFER_BYTES));
        drop(free);
        let small = Pool::<u8>::with_limit(4 << 10);
        for _ in 0..10 {
            give(&small, vec![0u8; 1 << 10]);
        }
        assert_eq!(small.free.lock().unwrap().bytes, 4 << 10);
    }
}
