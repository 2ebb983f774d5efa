//! Fuzz target: arbitrary bytes through the GPU path's host decisions — the header read to
//! EOI, the route to nvJPEG's decoders or the CPU, the region of interest of a window under
//! each EXIF orientation and the region nvJPEG decodes for it (`checks.rs`). Any panic or
//! abort is a bug; errors are fine.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| {
    let _ = checks::gpu_route_checks(data);
});
