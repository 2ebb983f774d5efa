//! `stokehold compare`, run as a user would: two CPU runs agree; bad device lists and a
//! device that can't run are clear errors.

mod common;

use common::skip::{skip, Need};
use common::{compare, stokehold};

#[test]
fn cpu_against_cpu_is_within_tolerance() {
    let samples = tempfile::tempdir().unwrap();
    let data = stokehold::builtin_data::ensure(&samples.path().join("s")).unwrap();
    let args = ["--batch", "8", "--threads", "2", "--batches", "2"];
    let out = compare("resnet50-train.toml", "cpu,cpu", &args, &data);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("compared 16 samples in 2 batches"),
        "{stdout}"
    );
    for row in ["images ", "labels ", "decoded "] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("{stdout}"));
        assert!(line.ends_with(" ok"), "{line}");
    }
    assert!(
        stdout.contains("random parameters: 16 of 16 samples identical  ok"),
        "{stdout}"
    );
    assert_eq!(stdout.lines().last(), Some("within tolerance"));
}

#[test]
fn epochs_given_are_compared_and_the_files_are_not() {
    // 64 built-in images: one epoch unless --epochs says more (the file's `epochs` is run's).
    let samples = tempfile::tempdir().unwrap();
    let data = stokehold::builtin_data::ensure(&samples.path().join("s")).unwrap();
    for (epochs, want) in [(None, 64), (Some("2"), 128)] {
        let mut args = vec!["--batch", "32", "--threads", "2", "--no-decode"];
        args.extend(epochs.iter().flat_map(|e| ["--epochs", e]));
        let out = compare("resnet50-eval.toml", "cpu,cpu", &args, &data);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}");
        assert!(
            stdout.contains(&format!("compared {want} samples")),
            "{epochs:?}: {stdout}"
        );
    }
}

#[test]
fn devices_are_checked_before_anything_runs() {
    let out = stokehold()
        .args([
            "compare",
            "pipelines/resnet50-train.toml",
            "--devices",
            "cpu,tpu",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown device 'tpu'"));
    let out = stokehold()
        .args([
            "compare",
            "pipelines/resnet50-train.toml",
            "--device",
            "cpu",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--devices A,B, not --device"));
}

#[test]
fn a_device_that_cannot_run_is_an_error_not_a_verdict() {
    let samples = tempfile::tempdir().unwrap();
    let data = stokehold::builtin_data::ensure(&samples.path().join("s")).unwrap();
    let out = compare("resnet50-eval.toml", "cpu,gpu", &[], &data);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        skip(Need::NoGpu, "the GPU path runs here");
        return;
    }
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("GPU"), "{stderr}");
    // What to run instead.
    assert!(stderr.contains("--devices cpu,emu"), "{stderr}");
}

#[test]
fn cpu_against_the_emulated_device_is_within_tolerance_on_both_shipped_pipelines() {
    let samples = tempfile::tempdir().unwrap();
    let data = stokehold::builtin_data::ensure(&samples.path().join("s")).unwrap();
    for name in ["resnet50-train.toml", "resnet50-eval.toml"] {
        let out = compare(name, "cpu,emu", &["--batch", "8", "--threads", "2"], &data);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if stderr.contains("the emulated device is not built in") {
            assert!(
                std::env::var("STOKEHOLD_REQUIRE_EMU").as_deref() != Ok("1"),
                "STOKEHOLD_REQUIRE_EMU=1 but {stderr}"
            );
            skip(Need::Emu, "no emulated device in this build");
            return;
        }
        assert!(out.status.success(), "{name}: {stdout}{stderr}");
        assert!(stdout.contains("| emu (device = \"emu\""), "{stdout}");
        for row in ["images ", "labels ", "decoded "] {
            let line = stdout
                .lines()
                .find(|l| l.starts_with(row))
                .unwrap_or_else(|| panic!("{stdout}"));
            assert!(line.ends_with(" ok"), "{name}: {line}");
        }
        assert!(stdout.contains("samples identical  ok"), "{stdout}");
        assert_eq!(stdout.lines().last(), Some("within tolerance"), "{name}");
    }
}
