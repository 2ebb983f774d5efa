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
    // 64 built-in images: one epoch unless --epochs says more, whatever the file's `epochs`
    // (for `run`) says.
    let samples = tempfile::tempdir().unwrap();
    let data = stokehold::builtin_data::ensure(&samples.path().join("s")).unwrap();
    let text = std::fs::read_to_string(common::shipped("resnet50-eval.toml")).unwrap();
    let pipeline = samples.path().join("three-epochs.toml");
    std::fs::write(
        &pipeline,
        text.replacen("[pipeline]", "[pipeline]\nepochs = 3", 1),
    )
    .unwrap();
    for (epochs, want) in [(None, 64), (Some("2"), 128)] {
        let mut args = vec!["--batch", "32", "--threads", "2", "--no-decode"];
        args.extend(epochs.iter().flat_map(|e| ["--epochs", e]));
        let out = common::stokehold()
            .args(["compare", "--devices", "cpu,cpu"])
            .arg(&pipeline)
            .args(&args)
            .arg("--data")
            .arg(&data)
            .output()
            .unwrap();
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

#[test]
fn the_workers_own_gpu_decoder_gives_the_cpu_batches_on_the_emulated_device() {
    // `STOKEHOLD_GPU_HUFFMAN=1`: photos of a megapixel or more that the split gives the
    // workers go to each worker's own GPU decoder (emulated: our decoder on a stream of its
    // own), their areas held until the batch's kernels are done, the kernels waiting for the
    // worker's stream; two epochs, past the warm-up. Chroma repeated: exact.
    let dir = tempfile::tempdir().unwrap();
    for k in 0..8u8 {
        let class = dir.path().join(if k % 2 == 0 { "a" } else { "b" });
        std::fs::create_dir_all(&class).unwrap();
        common::write_jpeg(&class.join(format!("{k}.jpg")), 1280, 880, k * 31);
    }
    let pipeline = common::edited_train(
        dir.path(),
        &[(
            "output = \"decoded\"",
            "output = \"decoded\"\nupsampling = \"nearest\"",
        )],
    );
    let with_worker_decoder = |args: &[&str]| {
        let out = common::stokehold()
            .args(args)
            .arg(&pipeline)
            .arg("--data")
            .arg(dir.path().join("."))
            .args(["--batch", "4", "--threads", "2", "--epochs", "2"])
            .env("STOKEHOLD_GPU_HUFFMAN", "1")
            .env("STOKEHOLD_CPU_DECODE_SHARE", "0.5")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    };
    let (ok, text) = with_worker_decoder(&["compare", "--devices", "cpu,emu"]);
    if text.contains("the emulated device is not built in") {
        skip(Need::Emu, "no emulated device in this build");
        return;
    }
    assert!(ok && text.contains("compared 16 samples"), "{text}");
    assert!(text.trim_end().ends_with("within tolerance"), "{text}");
    for row in ["images ", "decoded "] {
        let line = text.lines().find(|l| l.starts_with(row)).unwrap();
        let max_abs = line.split_whitespace().nth(2);
        assert!(max_abs == Some("0") && line.ends_with(" ok"), "{line}");
    }
    // The workers' decoder took its share (counted as nvJPEG's CUDA decoder's).
    let (ok, text) = with_worker_decoder(&["run", "--device", "emu", "--stats"]);
    let by_workers = text
        .lines()
        .find_map(|l| l.trim().strip_suffix(" decoded by device-decoder:hybrid"))
        .and_then(|n| n.trim().parse::<u64>().ok());
    assert!(ok && by_workers > Some(0), "{text}");
}
