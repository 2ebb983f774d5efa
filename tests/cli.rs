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
    let n = stokehold::builtin_data::CLASSES.len() * stokehold::builtin_data::PER_CLASS;
    assert!(
        last.starts_with(&format!("images={n} skipped=0 seconds=")),
        "{last}"
    );
    assert!(last.ends_with(" img/s"), "{last}");
}

#[test]
fn bench_prints_the_peer_format() {
    let samples = tempfile::tempdir().unwrap();
    let data = stokehold::builtin_data::ensure(&samples.path().join("s")).unwrap();
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
    let n = stokehold::builtin_data::CLASSES.len() * stokehold::builtin_data::PER_CLASS;
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

/// A list file naming the built-in images over and over, `lines` lines.
fn long_list(dir: &std::path::Path, lines: usize) -> std::path::PathBuf {
    let data = stokehold::builtin_data::ensure(&dir.join("s")).unwrap();
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    for class in stokehold::builtin_data::CLASSES {
        for e in std::fs::read_dir(data.join(class)).unwrap() {
            files.push(e.unwrap().path());
        }
    }
    files.sort();
    let mut text = String::new();
    for k in 0..lines {
        text.push_str(&format!("{} {}\n", files[k % files.len()].display(), k % 4));
    }
    let list = dir.join("long.txt");
    std::fs::write(&list, text).unwrap();
    list
}

#[test]
fn a_batch_too_big_for_memory_is_a_clear_error_with_exit_1_not_an_abort() {
    let d = tempfile::tempdir().unwrap();
    // 100 000 samples, each 224 x 224 x 3 floats: 60 GB a batch, several in flight.
    let list = long_list(d.path(), 100_000);
    let out = stokehold()
        .args([
            "run",
            "pipelines/resnet50-train.toml",
            "--batch",
            "100000",
            "--device",
            "cpu",
            "--data",
        ])
        .arg(&list)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("error: batches need"), "{stderr}");
    assert!(stderr.contains("100000 samples per batch"), "{stderr}");
    assert!(stderr.contains("help: lower batch to"), "{stderr}");
    assert!(!stderr.contains("memory allocation of"), "{stderr}");
}

#[test]
fn a_batch_larger_than_the_data_set_holds_the_data_set() {
    let samples = tempfile::tempdir().unwrap();
    let out = stokehold()
        .args([
            "run",
            "pipelines/resnet50-train.toml",
            "--batch",
            "100000",
            "--threads",
            "2",
            "--device",
            "cpu",
        ])
        .env("STOKEHOLD_SAMPLES", samples.path().join("s"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let n = stokehold::builtin_data::CLASSES.len() * stokehold::builtin_data::PER_CLASS;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap();
    assert!(
        last.starts_with(&format!("images={n} skipped=0 ")),
        "{last}"
    );
}

#[test]
fn a_settings_error_stops_the_run_once_with_exit_1() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("huge.toml");
    std::fs::write(
        &file,
        "[pipeline]\nbatch = 8\noutputs = [\"images\"]\n\n\
         [[op]]\nkind = \"file_reader\"\noutputs = [\"jpegs\"]\n\n\
         [[op]]\nkind = \"decode\"\ninput = \"jpegs\"\noutput = \"decoded\"\n\n\
         [[op]]\nkind = \"resize\"\ninput = \"decoded\"\noutput = \"images\"\nshorter = 20000\n",
    )
    .unwrap();
    let out = stokehold()
        .args(["run", "--device", "cpu"])
        .arg(&file)
        .env("STOKEHOLD_SAMPLES", d.path().join("s"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.matches("shorter = 20000").count(), 1, "{stderr}");
    assert!(stderr.contains("whatever its file"), "{stderr}");
    assert!(!stderr.contains("skipped"), "no file was blamed: {stderr}");
}

#[test]
fn an_output_size_over_the_limit_is_caught_by_check_and_run() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("huge.toml");
    let text = std::fs::read_to_string(common::shipped("resnet50-train.toml"))
        .unwrap()
        .replace("size = 224", "size = 32768");
    std::fs::write(&bad, &text).unwrap();
    let line = text
        .lines()
        .position(|l| l.starts_with("size = 32768"))
        .unwrap()
        + 1;
    for command in ["check", "run"] {
        let out = stokehold()
            .arg(command)
            .arg(&bad)
            .env("STOKEHOLD_SAMPLES", d.path().join("s"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command}: {stderr}");
        assert!(stderr.contains(&format!("huge.toml:{line}:")), "{stderr}");
        assert!(stderr.contains("32768x32768"), "{stderr}");
        assert!(stderr.contains("help:"), "{stderr}");
    }
}
