//! The `stokehold` command line (the commands are in the library's `cli` module, which the
//! Python package's `stokehold` command runs too).

use std::alloc::{GlobalAlloc, Layout, System};

/// The system allocator, telling `bench --stats` of each allocation
/// (`stokehold::cli::heap`).
struct Counting;

// SAFETY: every call goes to the system allocator with the caller's arguments unchanged;
// counting only adds to an atomic and never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        stokehold::cli::heap::note_allocation();
        // SAFETY: the caller keeps `GlobalAlloc::alloc`'s contract, which is System's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        stokehold::cli::heap::note_allocation();
        // SAFETY: as `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        stokehold::cli::heap::note_allocation();
        // SAFETY: `ptr` came from this allocator, which is System's, with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, which is System's, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn main() -> std::process::ExitCode {
    stokehold::cli::main(std::env::args_os())
}
