//! Skipping a test visibly: says why on stderr and logs it for the test command's summary.
//!
//! One file for the unit tests (`crate::testutil::skip`) and the integration tests
//! (`tests/common/mod.rs` includes it by path), so both write the same log. When the
//! environment variable `STOKEHOLD_SKIP_LOG` names a file, every skip appends one line to it,
//! `kind<TAB>test<TAB>reason`, in one write (tests run on parallel threads and in several
//! processes); `scripts/skip-summary.py` reads it back (docs/testing.md).
#![allow(dead_code)]

use std::io::Write;
use std::panic::Location;
use std::path::{Path, PathBuf};

/// What a skipped check needed and did not find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// A CUDA driver and device, or the nvJPEG library: only a GPU machine has them, never CI.
    Gpu,
    /// A machine without a GPU or nvJPEG (the checks of the errors given without one).
    NoGpu,
    /// `../shared/data` beside the checkout, or `$STOKEHOLD_SHARED/data`.
    SharedData,
    /// The NVRTC library (the wheel `scripts/test.sh` installs) to compile the kernels.
    Nvrtc,
    /// The emulated device's kernels, built for the host by `build.rs` (a C++ compiler).
    Emu,
    /// A Python package in `.dev/venv` (`scripts/test.sh` installs it).
    Python(&'static str),
    /// A program on `PATH`.
    Tool(&'static str),
}

impl Need {
    /// The kind as the log writes it (`gpu`, `shared-data`, `python:webdataset` …).
    pub fn kind(self) -> String {
        match self {
            Need::Gpu => "gpu".into(),
            Need::NoGpu => "no-gpu".into(),
            Need::SharedData => "shared-data".into(),
            Need::Nvrtc => "nvrtc".into(),
            Need::Emu => "emu".into(),
            Need::Python(package) => format!("python:{package}"),
            Need::Tool(program) => format!("tool:{program}"),
        }
    }
}

/// Says `skipped: {reason}` on stderr (as `scripts/gpu-check.sh` reads it) and logs the skip
/// (see the module's doc). The caller then returns or leaves out the part that needed it.
#[track_caller]
pub fn skip(need: Need, reason: impl std::fmt::Display) {
    let reason = reason.to_string();
    eprintln!("skipped: {reason}");
    if let Some(log) = std::env::var_os("STOKEHOLD_SKIP_LOG").filter(|v| !v.is_empty()) {
        let test = test_name(Location::caller());
        if let Err(e) = append(Path::new(&log), &need.kind(), &test, &reason) {
            // A lost line would hide a skip: fail the test rather than pass quietly.
            panic!("cannot log the skip to {}: {e}", Path::new(&log).display());
        }
    }
}

/// Appends `kind<TAB>test<TAB>reason` to `log` in one write (tabs and line breaks in the
/// fields become spaces).
pub fn append(log: &Path, kind: &str, test: &str, reason: &str) -> std::io::Result<()> {
    let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
    let line = format!("{}\t{}\t{}\n", clean(kind), clean(test), clean(reason));
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?
        .write_all(line.as_bytes())
}

/// The test as `cargo test` takes it (`--lib path::to::test`, `--test target name`): libtest
/// names each test's thread after the test; elsewhere (a thread the test started) the
/// caller's file and line.
fn test_name(at: &Location) -> String {
    match std::thread::current().name() {
        Some(name) if name != "main" => {
            // This file is compiled into the library (crate `stokehold`) and into each
            // integration test target (crate named after its file).
            let target = env!("CARGO_CRATE_NAME");
            if target == "stokehold" {
                format!("--lib {name}")
            } else {
                format!("--test {target} {name}")
            }
        }
        _ => format!("{}:{}", at.file(), at.line()),
    }
}

/// `../shared/data` beside the checkout, or `$STOKEHOLD_SHARED/data` when that is set.
fn shared_data_dir() -> PathBuf {
    std::env::var_os("STOKEHOLD_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared")))
        .join("data")
}

/// The shared data (see [`Need::SharedData`]), or `None` after skipping: for a test that
/// needs it whole.
#[track_caller]
pub fn shared_data() -> Option<PathBuf> {
    let data = shared_data_dir();
    if data.is_dir() {
        return Some(data);
    }
    skip(
        Need::SharedData,
        format!("{} not found (set STOKEHOLD_SHARED)", data.display()),
    );
    None
}

/// The shared data, or `None` after logging that part of the test is skipped: for a test
/// that also runs on its own files without it.
#[track_caller]
pub fn shared_data_part() -> Option<PathBuf> {
    let data = shared_data_dir();
    if data.is_dir() {
        return Some(data);
    }
    skip(
        Need::SharedData,
        format!(
            "{} not found (set STOKEHOLD_SHARED): ran on its own files only",
            data.display()
        ),
    );
    None
}

/// A folder of the shared data, or `None` after skipping that part (the folder is missing
/// from this copy of the data).
#[track_caller]
pub fn shared_folder(data: &Path, folder: &str) -> Option<PathBuf> {
    let dir = data.join(folder);
    if dir.is_dir() {
        return Some(dir);
    }
    skip(Need::SharedData, format!("{} not found", dir.display()));
    None
}
