//! The command line, run as a user would.

mod common;

use std::process::Command;

fn stokehold() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_stokehold"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

#[test]
fn run_with_no_data_uses_the_builtin_samples() {
    let samples = tempfile::tempdir().unwrap();
    let out = stokehold()
        .args([
            "run",
            "pipelines/resnet50-train.toml",
            "--batch",
            "16",
            "--threads",
            "2",
            "--device",
            "cpu",
        ])
        .env("STOKEHOLD_SAMPLES", samples.path().join("s"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("built-in sample set"), "{stderr}");
    let last = stdout.lines().last().unwrap();
    let n = stokehold::samples::CLASSES.len() * stokehold::samples::PER_CLASS;
    assert!(
        last.starts_with(&format!("images={n} skipped=0 seconds=")),
        "{last}"
    );
    assert!(last.ends_with(" img/s"), "{last}");
}

#[test]
fn bench_prints_the_peer_format() {
    let samples = tempfile::tempdir().unwrap();
    let data = stokehold::samples::ensure(&samples.path().join("s")).unwrap();
    let out = stokehold()
        .args([
            "bench",
            "pipelines/resnet50-eval.toml",
            "--batch",
            "8",
            "--threads",
            "2",
            "--epochs",
            "1",
            "--device",
            "cpu",
            "--data",
        ])
        .arg(&data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap();
    let n = stokehold::samples::CLASSES.len() * stokehold::samples::PER_CLASS;
    assert!(
        last.starts_with(&format!("device=cpu threads=2 batch=8 images={n} seconds=")),
        "{last}"
    );
    assert!(last.ends_with(" img/s"), "{last}");
}

#[test]
fn check_prints_the_graph_or_the_error_location() {
    let out = stokehold()
        .args(["check", "pipelines/resnet50-train.toml"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("random_resized_crop"), "{stdout}");

    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("bad.toml");
    let text = std::fs::read_to_string(common::shipped("resnet50-train.toml"))
        .unwrap()
        .replace("horizontal = 0.5", "horizontal = 5");
    std::fs::write(&bad, &text).unwrap();
    let line = text
        .lines()
        .position(|l| l.starts_with("horizontal = 5"))
        .unwrap()
        + 1;
    let out = stokehold().arg("check").arg(&bad).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("bad.toml:{line}:")), "{stderr}");
    assert!(stderr.contains("help:"), "{stderr}");
}

/// `STOKEHOLD_LIBJPEG_SEQUENTIAL` / `STOKEHOLD_LIBJPEG_PROGRESSIVE` set the decode
/// operators' `sequential_decoder` / `progressive_decoder` arguments (a misnamed argument
/// would fail the pipeline's validation); "0" leaves them alone.
#[test]
fn libjpeg_switches_set_the_decode_arguments() {
    let samples = tempfile::tempdir().unwrap();
    let mut images = Vec::new();
    for on in ["1", "0"] {
        let out = stokehold()
            .args([
                "run",
                "pipelines/resnet50-train.toml",
                "--batch",
                "16",
                "--threads",
                "2",
                "--device",
                "cpu",
            ])
            .env("STOKEHOLD_SAMPLES", samples.path().join("s"))
            .env("STOKEHOLD_LIBJPEG_SEQUENTIAL", on)
            .env("STOKEHOLD_LIBJPEG_PROGRESSIVE", on)
            .env("STOKEHOLD_LOG", "info")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        for arg in ["sequential_decoder", "progressive_decoder"] {
            let said = stderr.contains(&format!("decode operators get {arg} = \"libjpeg\""));
            assert_eq!(said, on == "1", "{arg}: {stderr}");
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let last = stdout.lines().last().unwrap();
        assert!(
            last.starts_with("images=") && !last.starts_with("images=0 "),
            "{last}"
        );
        assert!(last.contains(" skipped=0 "), "{last}");
        images.push(last.split(' ').next().unwrap().to_string());
    }
    assert_eq!(images[0], images[1], "both decoders deliver every image");
}

#[test]
fn gpu_request_without_a_gpu_path_is_a_clear_error() {
    let samples = tempfile::tempdir().unwrap();
    let out = stokehold()
        .args(["run", "pipelines/resnet50-train.toml", "--device", "gpu"])
        .env("STOKEHOLD_SAMPLES", samples.path().join("s"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("GPU"));
}
