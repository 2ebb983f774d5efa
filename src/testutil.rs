//! Helpers shared by unit tests (compiled for tests only).
#![allow(dead_code)]

use std::path::PathBuf;

/// `../shared/data` beside the checkout (or `$STOKEHOLD_SHARED/data`), if present.
/// Tests that need it print a notice and return early when it is absent.
pub fn shared_data() -> Option<PathBuf> {
    let base = std::env::var_os("STOKEHOLD_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared")));
    let data = base.join("data");
    if data.is_dir() {
        Some(data)
    } else {
        eprintln!(
            "skipped: {} not found (set STOKEHOLD_SHARED)",
            data.display()
        );
        None
    }
}

/// A smooth, deterministic RGB test pattern (h × w × 3, row-major HWC).
pub fn pattern_rgb(h: usize, w: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(h * w * 3);
    for y in 0..h {
        for x in 0..w {
            v.push(((x * 255) / w.max(1)) as u8);
            v.push(((y * 255) / h.max(1)) as u8);
            v.push((((x + y) * 37) % 256) as u8);
        }
    }
    v
}
