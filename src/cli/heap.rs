//! Heap allocations counted while `bench --stats` runs: the program's global allocator,
//! [`CountingAllocator`] (the system allocator, counting), calls [`note_allocation`] on
//! each allocation and reallocation, which counts only while a bench asks for it. The
//! `stokehold` binary and the Python package's native module install it; the library alone
//! never does. Where no allocator counts (another program running [`crate::cli::main`]), the
//! bench finds that out and `--stats` says so rather than print zero. libjpeg's own pools
//! (`malloc` from C) are not Rust allocations and are not counted.
//!
//! A program that runs [`crate::cli::main`] and wants the count:
//!
//! ```
//! #[global_allocator]
//! static ALLOCATOR: stokehold::cli::heap::CountingAllocator =
//!     stokehold::cli::heap::CountingAllocator;
//! # fn main() { let _ = Box::new(1u8); }
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Counters alive: counting is on while there is one (two benches in one process don't
/// turn each other's off).
static COUNTING: AtomicUsize = AtomicUsize::new(0);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// Counts one allocation or reallocation, while counting is on. It must not allocate: the
/// global allocator calls it.
#[inline]
pub fn note_allocation() {
    // A load that stays in every core's cache while counting is off (all but `--stats`).
    if COUNTING.load(Ordering::Relaxed) > 0 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

/// Heap allocations counted while it lives (by every thread of the process), where the
/// program's allocator is [`CountingAllocator`]: what `bench --stats` reads, and a test's
/// count of a pipeline's steady state.
#[derive(Debug)]
pub struct Counter;

impl Counter {
    /// Turns counting on; None where no allocator calls [`note_allocation`].
    pub fn start() -> Option<Counter> {
        COUNTING.fetch_add(1, Ordering::Relaxed);
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        // An allocation the optimiser can't remove: the allocator counts it or none counts.
        drop(std::hint::black_box(Box::new(0u64)));
        if ALLOCATIONS.load(Ordering::Relaxed) == before {
            COUNTING.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(Counter)
    }

    /// Allocations and reallocations counted so far (by every thread of the process).
    pub fn read(&self) -> u64 {
        ALLOCATIONS.load(Ordering::Relaxed)
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        COUNTING.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The system allocator, calling [`note_allocation`] on each allocation and reallocation: a
/// relaxed load when no bench counts, a relaxed add when one does.
pub struct CountingAllocator;

// SAFETY: every call goes to the system allocator with the caller's arguments unchanged;
// counting only adds to an atomic and never allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        // SAFETY: the caller keeps `GlobalAlloc::alloc`'s contract, which is System's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        // SAFETY: as `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation();
        // SAFETY: `ptr` came from this allocator, which is System's, with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, which is System's, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}
