//! Shared bench inputs: JPEGs from `$STOKEHOLD_SHARED/data/imagenet-400` (first 24 files) when
//! present, else the built-in sample set's JPEGs.

#![allow(dead_code)] // each bench uses part of it

use std::path::PathBuf;

/// Encoded JPEG files to decode, and where they came from.
pub fn jpeg_files() -> (Vec<Vec<u8>>, String) {
    if let Some(dir) = std::env::var_os("STOKEHOLD_SHARED")
        .map(|s| PathBuf::from(s).join("data/imagenet-400"))
        .filter(|d| d.is_dir())
    {
        let mut paths: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        paths.sort();
        let files = paths
            .iter()
            .take(24)
            .map(|p| std::fs::read(p).unwrap())
            .collect();
        return (files, dir.display().to_string());
    }
    let dir = samples_dir();
    let mut files = Vec::new();
    for e in walk(&dir) {
        let b = std::fs::read(&e).unwrap();
        if b.starts_with(&[0xFF, 0xD8]) {
            files.push(b);
        }
    }
    (files, dir.display().to_string())
}

/// The built-in sample set, generated on first use.
pub fn samples_dir() -> PathBuf {
    stokehold::builtin_data::ensure(&stokehold::builtin_data::default_dir()).expect("sample set")
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}
