//! Heap allocations counted while `bench --stats` runs: the `stokehold` binary's global
//! allocator calls [`note_allocation`] on each allocation and reallocation, which counts
//! only while a bench asks for it. The library never installs an allocator; where none calls
//! this (the Python package's command, another program), the bench finds that out and
//! `--stats` says so rather than print zero. libjpeg's own pools (`malloc` from C) are not
//! Rust allocations and are not counted.
//!
//! A program that runs [`crate::cli::main`] and wants the count installs an allocator like
//! the binary's:
//!
//! ```
//! use std::alloc::{GlobalAlloc, Layout, System};
//!
//! struct Counting;
//!
//! // SAFETY: every call goes to the system allocator unchanged.
//! unsafe impl GlobalAlloc for Counting {
//!     unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
//!         stokehold::cli::heap::note_allocation();
//!         unsafe { System.alloc(layout) }
//!     }
//!     unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
//!         unsafe { System.dealloc(ptr, layout) }
//!     }
//! }
//!
//! #[global_allocator]
//! static ALLOCATOR: Counting = Counting;
//! # fn main() { let _ = Box::new(1u8); }
//! ```

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

/// Heap allocations counted since [`Counter::start`].
pub(crate) struct Counter;

impl Counter {
    /// Turns counting on; None where no allocator calls [`note_allocation`].
    pub(crate) fn start() -> Option<Counter> {
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
    pub(crate) fn read(&self) -> u64 {
        ALLOCATIONS.load(Ordering::Relaxed)
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        COUNTING.fetch_sub(1, Ordering::Relaxed);
    }
}
