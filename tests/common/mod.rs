//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub mod shards;
/// Skipping visibly, the same file as the unit tests' `testutil::skip`.
#[path = "../../src/testutil/skip.rs"]
pub mod skip;

// Not every test target uses both.
#[allow(unused_imports)]
pub use skip::{shared_data, shared_data_part};

use stokehold::pipeline::{file, PipelineSpec};

/// A shipped pipeline file.
pub fn shipped(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("pipelines")
        .join(name)
}

/// The `stokehold` command, run from the checkout's root (where `pipelines/` is).
pub fn stokehold() -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_stokehold"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

/// `stokehold compare pipelines/<name> --devices <devices> <args> --data <data>`, run to the
/// end (the tests judge its output).
pub fn compare(name: &str, devices: &str, args: &[&str], data: &Path) -> std::process::Output {
    stokehold()
        .args([
            "compare",
            &format!("pipelines/{name}"),
            "--devices",
            devices,
        ])
        .args(args)
        .arg("--data")
        .arg(data)
        .output()
        .unwrap()
}

/// The text of the shipped training pipeline with `edits` (from, to) applied; each `from`
/// must be in it.
pub fn edited_train_text(edits: &[(&str, &str)]) -> String {
    let mut text = std::fs::read_to_string(shipped("resnet50-train.toml")).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "{from}");
        text = text.replace(from, to);
    }
    text
}

/// The shipped training pipeline with `edits` applied (see [`edited_train_text`]), written
/// into `dir` as `edited.toml`.
pub fn edited_train(dir: &Path, edits: &[(&str, &str)]) -> PathBuf {
    let path = dir.join("edited.toml");
    std::fs::write(&path, edited_train_text(edits)).unwrap();
    path
}

/// A shipped pipeline pointed at `data`, with a few settings changed.
pub fn spec_for(
    name: &str,
    data: &Path,
    batch: usize,
    threads: usize,
    epochs: u64,
) -> PipelineSpec {
    let mut spec = file::load(&shipped(name))
        .expect("shipped pipeline loads")
        .spec;
    spec.set_data(data);
    spec.settings.batch = batch;
    spec.settings.threads = Some(threads);
    spec.settings.epochs = Some(epochs);
    spec.settings.device = stokehold::pipeline::DeviceChoice::Cpu;
    spec
}

/// The built-in sample set in a fresh temporary folder.
pub fn samples() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = stokehold::builtin_data::ensure(&d.path().join("samples")).unwrap();
    (d, p)
}

/// Every file under `dir` and its sub-folders, sorted.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// Writes a small RGB JPEG with the given size.
pub fn write_jpeg(path: &Path, w: u16, h: u16, seed: u8) {
    let mut rgb = Vec::with_capacity(w as usize * h as usize * 3);
    for y in 0..h as usize {
        for x in 0..w as usize {
            rgb.extend_from_slice(&[(x * 3) as u8 ^ seed, (y * 5) as u8, seed.wrapping_mul(7)]);
        }
    }
    let enc = jpeg_encoder::Encoder::new_file(path, 90).unwrap();
    enc.encode(&rgb, w, h, jpeg_encoder::ColorType::Rgb)
        .unwrap();
}

/// Number of threads of this process (Linux), for leak checks.
pub fn thread_count() -> Option<usize> {
    std::fs::read_dir("/proc/self/task").ok().map(|d| d.count())
}

/// A folder of `n` small JPEGs named `img_000.jpg`…, those at `bad` not JPEGs at all.
pub fn small_folder(n: usize, bad: &[usize]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for i in 0..n {
        let p = d.path().join(format!("img_{i:03}.jpg"));
        if bad.contains(&i) {
            std::fs::write(&p, b"this is not a jpeg").unwrap();
        } else {
            write_jpeg(&p, 40 + i as u16, 30 + (i as u16 % 7), i as u8);
        }
    }
    d
}
