//! Fuzz target: arbitrary bytes through `probe`, `decode` and `decode_window` with each of the
//! option sets of `checks.rs` (the checks are there, shared with the regression tests). Any
//! panic or abort is a bug; errors are fine.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| {
    let _ = checks::decode_checks(data);
});
