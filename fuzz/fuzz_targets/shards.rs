//! Fuzz target: arbitrary bytes as a tar shard, through the tar reader and the shard's
//! samples (`checks.rs`). Any panic, abort or hang is a bug; damage is reported per item.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| {
    let _ = checks::shard_checks(data);
});
