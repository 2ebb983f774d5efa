//! The skip log and its summary (docs/testing.md): lines appended by the tests' skip helper
//! from many threads come back whole, and `scripts/skip-summary.py` groups them by reason,
//! says what would run them, and fails on CI exactly when a skip could have run there.

use std::path::Path;
use std::process::{Command, Output};

mod common;

use common::skip::{append, skip, Need};

/// The summarizer run on `log`, with `CI` set or not; `None` (skipped) without python3.
fn summarize(log: &Path, ci: Option<&str>) -> Option<Output> {
    let mut cmd = Command::new("python3");
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/skip-summary.py"
    ))
    .arg(log)
    .env_remove("CI");
    if let Some(v) = ci {
        cmd.env("CI", v);
    }
    match cmd.output() {
        Ok(out) => Some(out),
        Err(e) => {
            skip(Need::Tool("python3"), format!("python3 not found ({e})"));
            None
        }
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn lines_appended_from_many_threads_come_back_whole() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("skipped.txt");
    std::thread::scope(|s| {
        for t in 0..8 {
            let log = &log;
            s.spawn(move || {
                for k in 0..50 {
                    let reason = format!("thread {t} line {k} {}", "x".repeat(300));
                    append(log, "tool:x", &format!("--lib t{t}::k{k}"), &reason).unwrap();
                }
            });
        }
    });
    // A tab or line break in a field would break the format: they become spaces.
    append(&log, "gpu", "--lib a\tb", "no\nGPU").unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 8 * 50 + 1);
    for line in &lines[..400] {
        let fields: Vec<&str> = line.split('\t').collect();
        assert_eq!(fields.len(), 3, "{line}");
        assert_eq!(fields[0], "tool:x");
        assert!(fields[2].ends_with(&"x".repeat(300)), "{line}");
    }
    assert_eq!(lines[400], "gpu\t--lib a b\tno GPU");
}

#[test]
fn the_summary_groups_by_reason_and_fails_on_ci_only_for_what_ci_can_run() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("skipped.txt");
    let shared = "/x/data not found (set STOKEHOLD_SHARED)";
    for k in 0..7 {
        append(&log, "shared-data", &format!("--lib decode::t{k}"), shared).unwrap();
    }
    // The same skip twice (a test asking twice) counts once.
    append(&log, "shared-data", "--lib decode::t0", shared).unwrap();
    append(&log, "gpu", "--test cli gpu_x", "no CUDA driver (none)").unwrap();
    append(
        &log,
        "extra:torch",
        "python/tests/test_torch.py",
        "torch is not installed",
    )
    .unwrap();
    let Some(out) = summarize(&log, None) else {
        return;
    };
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "skipped 9 checks:", "{text}");
    assert_eq!(lines[1], format!("  [shared-data] {shared} (7 tests)"));
    assert_eq!(lines[2], "      cargo test --lib decode::t0");
    // Five listed, the rest counted, then what would run them.
    assert_eq!(lines[7], "      ... and 2 more", "{text}");
    assert!(
        lines[8].starts_with("    to run: the shared data"),
        "{text}"
    );
    assert!(text.contains("  [gpu] no CUDA driver (none) (1 test)\n      cargo test --test cli gpu_x\n    to run: a GPU machine (docs/gpu-machine.md)"), "{text}");
    assert!(
        text.contains("      python/tests/test_torch.py\n"),
        "{text}"
    );
    assert!(
        lines
            .last()
            .unwrap()
            .starts_with("(7 of them can run on the CI machine"),
        "{text}"
    );

    // On CI: the shared-data skips fail the run, after the summary.
    let out = summarize(&log, Some("true")).unwrap();
    let ci_text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{ci_text}");
    assert!(ci_text.starts_with("skipped 9 checks:\n"), "{ci_text}");
    assert!(
        ci_text.trim_end().ends_with(
            "CI: 7 of the skipped checks can run on the CI machine (every kind but gpu and \
             extra): failing"
        ),
        "{ci_text}"
    );
    // CI=false is not CI.
    assert_eq!(
        summarize(&log, Some("false")).unwrap().status.code(),
        Some(0)
    );

    // GPU and optional extras only: CI passes, the skips still listed.
    let gpu_only = d.path().join("gpu-only.txt");
    append(&gpu_only, "gpu", "--lib cuda::x", "no CUDA driver (none)").unwrap();
    append(
        &gpu_only,
        "extra:torch",
        "python/tests/test_torch.py",
        "no torch",
    )
    .unwrap();
    let out = summarize(&gpu_only, Some("true")).unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).starts_with("skipped 2 checks:\n"));

    // A kind the summarizer doesn't know could be anything: it fails CI.
    let unknown = d.path().join("unknown.txt");
    append(&unknown, "untyped", "python/tests/test_x.py::t", "why").unwrap();
    let out = summarize(&unknown, Some("1")).unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("give the skip a kind"));
}

#[test]
fn no_skips_is_said_and_passes_on_ci() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("skipped.txt");
    std::fs::write(&log, "").unwrap();
    for path in [log.clone(), d.path().join("missing.txt")] {
        let Some(out) = summarize(&path, Some("true")) else {
            return;
        };
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(stdout(&out), "skipped 0 checks: no test skipped.\n");
    }
}

/// Set in the child process of the test below.
const CHILD: &str = "STOKEHOLD_SKIP_SUMMARY_CHILD";

#[test]
fn a_skip_says_why_and_logs_its_kind_test_and_reason() {
    let reason = "a check of the skip log itself";
    if std::env::var_os(CHILD).is_some() {
        skip(Need::Tool("none"), reason);
        return;
    }
    // This test again in a child process of its own, with a log of its own (the variable
    // is process-wide: setting it here would take other tests' skips from the real log).
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("skipped.txt");
    let name = "a_skip_says_why_and_logs_its_kind_test_and_reason";
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=2"])
        .env(CHILD, "1")
        .env("STOKEHOLD_SKIP_LOG", &log)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("skipped: {reason}\n")), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        format!("tool:none\t--test skip_summary {name}\t{reason}\n")
    );
}

/// `scripts/failed-tests.py` on a test.sh log: every failed test, Rust (unit, integration,
/// doc) and Python, as the command that runs it alone, and a test binary that died without
/// naming a test.
#[test]
fn the_failed_tests_are_listed_by_the_command_that_runs_each() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("test-output.txt");
    std::fs::write(
        &log,
        "     Running unittests src/lib.rs (target/release/deps/stokehold-1)\n\
         test a::ok ... ok\ntest pipeline::run::tests::late ... FAILED\n\n\
         failures:\n\n---- pipeline::run::tests::late stdout ----\npanicked\n\n\
         failures:\n    pipeline::run::tests::late\n\n\
         test result: FAILED. 1 passed; 1 failed\n\n\
         error: test failed, to rerun pass `--lib`\n\
         \x20    Running tests/shards.rs (target/release/deps/shards-2)\n\
         test x ... ok\n\
         \x20    Running tests/soak.rs (target/release/deps/soak-3)\n\
         error: test failed, to rerun pass `--test soak`\n\
         \x20  Doc-tests stokehold\n\
         failures:\n\n---- src/reader/schedule.rs - reader::schedule::rank_range (line 86) stdout ----\n\n\
         failures:\n    src/reader/schedule.rs - reader::schedule::rank_range (line 86)\n\n\
         test result: FAILED.\n\
         ===== short test summary info =====\n\
         FAILED python/tests/test_errors.py::test_x - AssertionError: no\n",
    )
    .unwrap();
    let out = match Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/failed-tests.py"
        ))
        .arg(&log)
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            skip(Need::Tool("python3"), format!("python3 not found ({e})"));
            return;
        }
    };
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        stdout(&out),
        "failed 3 tests:\n  cargo test-release --lib pipeline::run::tests::late\n  \
         cargo test-release --doc reader::schedule::rank_range\n  \
         .dev/venv/bin/python -m pytest python/tests/test_errors.py::test_x\n\
         and: the test binary `--test soak` failed without naming a test (see above)\n"
    );
    // A clean log: nothing.
    std::fs::write(&log, "test result: ok. 3 passed\n").unwrap();
    let out = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/failed-tests.py"
        ))
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "");
}
