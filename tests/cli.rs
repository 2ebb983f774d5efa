//! The command line, run as a user would.

mod common;
use common::{edited_train, stokehold};

use std::process::Command;

/// `stokehold run` of the shipped training pipeline on the CPU, batch 16, 2 threads, on the
/// built-in sample set made under `samples`.
fn train_on_builtin(samples: &std::path::Path) -> Command {
    let mut c = stokehold();
    c.args([
        "run",
        "pipelines/resnet50-train.toml",
        "--batch",
        "16",
        "--threads",
        "2",
        "--device",
        "cpu",
    ])
    .env("STOKEHOLD_SAMPLES", samples.join("s"));
    c
}

#[test]
fn run_with_no_data_uses_the_builtin_samples() {
    let samples = tempfile::tempdir().unwrap();
    let out = train_on_builtin(samples.path()).output().unwrap();
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

/// `STOKEHOLD_LIBJPEG_SEQUENTIAL` / `STOKEHOLD_LIBJPEG_PROGRESSIVE` set the decode
/// operators' `sequential_decoder` / `progressive_decoder` arguments (a misnamed argument
/// would fail the pipeline's validation); "0" leaves them alone.
#[test]
fn libjpeg_switches_set_the_decode_arguments() {
    let samples = tempfile::tempdir().unwrap();
    let mut images = Vec::new();
    for on in ["1", "0"] {
        let out = train_on_builtin(samples.path())
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
fn asking_for_the_gpu_path_without_one_is_a_clear_error() {
    let samples = tempfile::tempdir().unwrap();
    let out = stokehold()
        .args(["run", "pipelines/resnet50-train.toml", "--device", "gpu"])
        .env("STOKEHOLD_SAMPLES", samples.path().join("s"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("GPU"));
}

#[test]
fn check_reports_every_problem_with_its_place_and_help() {
    let d = tempfile::tempdir().unwrap();
    let bad = edited_train(
        d.path(),
        &[
            ("batch = 64", "batch = 0"),
            ("size = 224", "size = \"224\""),
            ("antialias = true", "antialias = 1"),
            ("horizontal = 0.5", "horizontal = 5"),
        ],
    );
    let out = stokehold().arg("check").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("error: ") && l.contains("edited.toml:"))
        .filter(|l| !l.ends_with("problems found"))
        .collect();
    assert_eq!(errors.len(), 4, "{stderr}");
    for (e, what) in errors
        .iter()
        .zip(["`batch` = 0", "'size'", "'antialias'", "'horizontal'"])
    {
        assert!(e.contains(what), "{e}");
        // file:line:column
        let place = e.split(": ").nth(1).unwrap();
        assert_eq!(place.split(':').count(), 3, "{e}");
    }
    assert_eq!(stderr.matches("\n  help: ").count(), 4, "{stderr}");
    assert!(
        stderr.contains("help: write it without quotes, e.g. `size = 224`"),
        "{stderr}"
    );
    assert!(stderr.contains("4 problems found"), "{stderr}");
    assert_eq!(
        stderr.matches("horizontal").count(),
        1,
        "said once: {stderr}"
    );
}

/// A folder of files that are not images.
fn junk_data() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for i in 0..3 {
        std::fs::write(d.path().join(format!("x{i}.jpg")), b"not a jpeg").unwrap();
    }
    d
}

#[test]
fn a_missing_file_is_reported_once() {
    let out = stokehold()
        .args(["check", "no/such/pipeline.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: no/such/pipeline.toml: "),
        "{stderr}"
    );
    assert_eq!(stderr.matches("os error").count(), 1, "{stderr}");
}

#[test]
fn a_run_that_delivers_nothing_fails() {
    let junk = junk_data();
    let out = stokehold()
        .args([
            "run",
            "pipelines/resnet50-eval.toml",
            "--batch",
            "2",
            "--data",
        ])
        .arg(junk.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr
            .contains("error: the run delivered no image: every sample it read was bad (3 skipped"),
        "{stderr}"
    );
    assert!(!stderr.contains("stokehold check"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("images=0 skipped=3"));
}

#[test]
fn logs_off_a_terminal_have_no_colour_or_time_stamps() {
    let junk = junk_data();
    let out = stokehold()
        .args([
            "run",
            "pipelines/resnet50-eval.toml",
            "--batch",
            "2",
            "--data",
        ])
        .arg(junk.path())
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains('\x1b'), "{stderr:?}");
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("x1.jpg")).collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].starts_with("warning: skipped "),
        "the look of the other lines, no time stamp: {}",
        warnings[0]
    );
}

#[test]
fn setting_flags_are_checked_as_file_values_are() {
    let out = stokehold()
        .args(["run", "pipelines/resnet50-eval.toml", "--batch", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Said as the command line writes it, not as the file does.
    assert!(stderr.contains("--batch 0 is out of range"), "{stderr}");
    assert!(
        stderr.contains("help: use an integer ≥ 1, e.g. `--batch 32`"),
        "{stderr}"
    );
    let out = stokehold()
        .args([
            "run",
            "pipelines/resnet50-eval.toml",
            "--on-error",
            "ignore",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is not one of \"skip\", \"fail\", \"replace\""),
        "{stderr}"
    );
    let help = stokehold().args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for s in stokehold::pipeline::settings::SETTINGS {
        assert!(help.contains(&format!("--{}", s.flag.long)), "{help}");
    }
}

/// `run` arguments for a paced run over the built-in samples, printing every batch.
fn paced_run(samples: &std::path::Path, consumer_ms: Option<&str>) -> Command {
    let mut c = stokehold();
    c.args([
        "run",
        "pipelines/resnet50-eval.toml",
        "--epochs",
        "3",
        "--batch",
        "8",
        "--threads",
        "1",
        "--print-batches",
        "--data",
    ])
    .arg(samples);
    if let Some(ms) = consumer_ms {
        c.args(["--consumer-ms", ms]);
    }
    c
}

fn batch_lines(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| l.starts_with("batch "))
        .map(str::to_string)
        .collect()
}

/// Starts `c` with stdout piped and returns it once it printed `n` lines, with those lines.
fn spawn_until_lines(
    c: &mut Command,
    n: usize,
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStdout>,
    Vec<String>,
) {
    use std::io::BufRead;
    let mut child = c
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    while lines.len() < n {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "ended early: {lines:?}"
        );
        lines.push(line.trim_end().to_string());
    }
    (child, out, lines)
}

fn sigint(child: &std::process::Child) {
    let ok = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

/// What a finished child wrote to its standard error.
fn stderr_of(child: &mut std::process::Child) -> String {
    use std::io::Read;
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    stderr
}

#[test]
fn ctrl_c_stops_cleanly_and_resume_gives_the_remaining_batches() {
    use std::io::Read;
    let (_d, samples) = common::samples();
    let whole = paced_run(&samples, None).output().unwrap();
    assert!(whole.status.success());
    let whole = batch_lines(&String::from_utf8_lossy(&whole.stdout));
    assert_eq!(whole.len(), 24);

    let (mut child, mut out, mut lines) =
        spawn_until_lines(&mut paced_run(&samples, Some("100")), 3);
    sigint(&child);
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    let stderr = stderr_of(&mut child);
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    lines.extend(rest.lines().map(str::to_string));
    let stdout = lines.join("\n");
    let done = batch_lines(&stdout);
    assert!(done.len() >= 3 && done.len() < 24, "{stdout}");
    assert_eq!(done, whole[..done.len()], "{stdout}");
    assert!(
        stdout.contains(&format!("images={} skipped=0", 8 * done.len())),
        "{stdout}"
    );
    let position = stdout
        .lines()
        .find_map(|l| l.strip_prefix("stopped at position "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(stdout.contains(&format!("--resume {position}")), "{stdout}");
    assert!(done
        .last()
        .unwrap()
        .ends_with(&format!("resume={position}")));

    let resumed = paced_run(&samples, None)
        .args(["--resume", position])
        .output()
        .unwrap();
    assert!(resumed.status.success());
    let resumed = batch_lines(&String::from_utf8_lossy(&resumed.stdout));
    assert_eq!(resumed, whole[done.len()..]);
}

#[test]
fn a_second_ctrl_c_quits_at_once_saying_where_to_resume() {
    let (_d, samples) = common::samples();
    // A 5-second training step: the first Ctrl-C waits for it, the second doesn't.
    let (mut child, _out, _) = spawn_until_lines(&mut paced_run(&samples, Some("5000")), 1);
    let t0 = std::time::Instant::now();
    sigint(&child);
    std::thread::sleep(std::time::Duration::from_millis(1000));
    sigint(&child);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(t0.elapsed().as_secs_f64() < 4.0, "{:?}", t0.elapsed());
    let stderr = stderr_of(&mut child);
    assert!(
        stderr.contains("interrupted again: quitting now; to continue after the last batch handed out, run the same command with --resume "),
        "{stderr}"
    );
}

#[test]
fn one_ctrl_c_delivered_twice_stops_cleanly() {
    use std::io::Read;
    let (_d, samples) = common::samples();
    // As from a wrapper that forwards the signal while the terminal signals the group.
    let (mut child, mut out, _) = spawn_until_lines(&mut paced_run(&samples, Some("300")), 1);
    sigint(&child);
    sigint(&child);
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert!(rest.contains("stopped at position "), "{rest}");
}

#[test]
fn a_closed_pipe_ends_the_run_quietly() {
    let (_d, samples) = common::samples();
    let (mut child, out, _) = spawn_until_lines(&mut paced_run(&samples, None), 1);
    drop(out);
    let status = child.wait().unwrap();
    let stderr = stderr_of(&mut child);
    assert!(status.success(), "{status:?} {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("error"), "{stderr}");
}

#[test]
fn bench_takes_stats_and_warns_when_too_short() {
    let (_d, samples) = common::samples();
    let out = stokehold()
        .args([
            "bench",
            "pipelines/resnet50-eval.toml",
            "--batch",
            "16",
            "--epochs",
            "1",
            "--stats",
            "--data",
        ])
        .arg(&samples)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("stage times"), "{stdout}");
    // The binary's allocator counts: a number per image, not "not counted".
    let heap = stdout
        .lines()
        .find(|l| l.starts_with("heap allocations during the timed epochs: "))
        .unwrap_or_else(|| panic!("no heap allocations line in {stdout}"));
    let per_image = number_in(heap, "(", " an image");
    assert!(per_image > 0.0 && per_image < 1000.0, "{heap}");
    // One epoch of 64 images in 4 batches can't be timed meaningfully.
    assert!(stderr.contains("warning: the timed part took"), "{stderr}");
    assert!(stderr.contains("too short to mean much"), "{stderr}");
}

/// The number in `line` between `before` and `after`.
fn number_in(line: &str, before: &str, after: &str) -> f64 {
    let rest = &line[line
        .find(before)
        .unwrap_or_else(|| panic!("{before:?} in {line}"))
        + before.len()..];
    rest[..rest
        .find(after)
        .unwrap_or_else(|| panic!("{after:?} in {line}"))]
        .parse()
        .unwrap_or_else(|e| panic!("{line}: {e}"))
}

#[test]
fn bench_with_a_busy_consumer_says_how_much_the_pipeline_slowed_it() {
    let (_d, samples) = common::samples();
    let out = stokehold()
        .args([
            "bench",
            "pipelines/resnet50-eval.toml",
            "--batch",
            "16",
            "--threads",
            "1",
            "--epochs",
            "2",
            "--device",
            "cpu",
            "--consumer-busy-ms",
            "5",
            "--data",
        ])
        .arg(&samples)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    let find = |start: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no line starting {start:?} in\n{stdout}"))
    };
    // 2 timed epochs of 64 images in batches of 16.
    let fed = lines[find("consumer: 8 steps fed by the pipeline took ")];
    assert!(number_in(fed, "took ", " ms each") > 0.0, "{fed}");
    assert!(number_in(fed, "already made ", " ms each") > 0.0, "{fed}");
    let full = lines[find("pipeline threads while the queue was full: ")];
    assert!(number_in(full, "full: ", " ms CPU") >= 0.0, "{full}");
    assert!(number_in(full, "CPU and ", " wake-ups") >= 0.0, "{full}");
    let per_batch = lines[find("pipeline threads during the timed epochs: ")];
    if cfg!(target_os = "linux") {
        // Readers, the worker and the assembler, counted from /proc.
        assert!(number_in(full, "s (", " threads)") >= 3.0, "{full}");
        assert!(
            number_in(per_batch, "epochs: ", " ms CPU") > 0.0,
            "{per_batch}"
        );
    }
    // The figure, before the throughput line that ends every bench.
    let slowed = find("consumer slowed by ");
    number_in(lines[slowed], "slowed by ", "%");
    assert!(slowed < lines.len() - 1, "{stdout}");
    assert!(
        lines[lines.len() - 1].starts_with("device=cpu threads=1 batch=16 images=128 "),
        "{stdout}"
    );
}

#[test]
fn bench_and_tune_repeat_small_epochs_and_show_the_spread() {
    let (_d, samples) = common::samples();
    let out = stokehold()
        .args([
            "bench",
            "pipelines/resnet50-eval.toml",
            "--batch",
            "16",
            "--min-seconds",
            "0.5",
            "--data",
        ])
        .arg(&samples)
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let timed = stdout.lines().find(|l| l.starts_with("timed ")).unwrap();
    let epochs: usize = timed.split(' ').nth(1).unwrap().parse().unwrap();
    assert!(epochs >= 3, "{timed}");
    assert!(
        timed.contains("lowest") && timed.contains("highest"),
        "{timed}"
    );
    let last = stdout.lines().last().unwrap();
    assert!(last.contains(&format!("images={} ", 64 * epochs)), "{last}");

    let out = stokehold()
        .args([
            "tune",
            "pipelines/resnet50-eval.toml",
            "--batch",
            "16",
            "--thread-counts",
            "1",
            "--prefetch-depths",
            "1,2",
            "--epochs",
            "2",
            "--data",
        ])
        .arg(&samples)
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<&str> = stdout.lines().filter(|l| l.contains(" – ")).collect();
    assert_eq!(rows.len(), 2, "a spread per trial: {stdout}");
    assert!(
        stdout.contains("no clear winner")
            || stdout.contains("clear of the other settings")
            || stdout.contains("its median more than 10% above the others'"),
        "{stdout}"
    );
    assert!(stdout.contains("--threads 1 --prefetch "), "{stdout}");
}

#[test]
fn resuming_at_the_end_says_nothing_is_left() {
    let (_d, samples) = common::samples();
    let out = paced_run(&samples, None)
        .args(["--resume", "1:3:0:0"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("nothing left to run: position 1:3:0:0"),
        "{stdout}"
    );
    let out = paced_run(&samples, None)
        .args(["--resume", "7:0:0:0"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("recorded with seed 7"), "{stderr}");
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

/// An epoch's summary follows its last batch's `--print-batches` line, however far ahead
/// the pipeline works (stdout and stderr into one file keep the order of the writes).
#[test]
fn an_epochs_summary_follows_its_last_batch_line() {
    let (d, _) = common::samples();
    let data = common::small_folder(12, &[5]);
    let log = d.path().join("both.txt");
    let file = std::fs::File::create(&log).unwrap();
    let status = stokehold()
        .args(["run", "pipelines/resnet50-eval.toml", "--epochs", "3"])
        .args(["--batch", "4", "--threads", "2", "--prefetch", "4"])
        .args(["--print-batches", "--data"])
        .arg(data.path())
        // The later epochs' summaries repeat the first's bad sample: logged as information.
        .env("STOKEHOLD_LOG", "info")
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .status()
        .unwrap();
    assert!(status.success());
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    for epoch in 0..3 {
        let summary = lines
            .iter()
            .position(|l| l.contains(&format!("epoch {epoch}: 11 images in 3 batches")))
            .unwrap_or_else(|| panic!("no summary of epoch {epoch}:\n{text}"));
        let last_batch = lines
            .iter()
            .rposition(|l| l.starts_with(&format!("batch epoch={epoch} ")))
            .unwrap();
        assert!(last_batch < summary, "epoch {epoch}:\n{text}");
        let next = format!("batch epoch={} ", epoch + 1);
        if let Some(first_next) = lines.iter().position(|l| l.starts_with(&next)) {
            assert!(summary < first_next, "epoch {epoch}:\n{text}");
        }
    }
    // Only the first epoch's summary warns: the others have the same bad sample again.
    let warned: Vec<&&str> = lines
        .iter()
        .filter(|l| l.starts_with("warning: epoch "))
        .collect();
    assert_eq!(warned.len(), 1, "{text}");
    assert!(text.contains("epoch 2: 11 images in 3 batches; the bad samples of epoch 1 again"));
}

/// Without a training step `tune` tries the file's prefetch depth only, says why, and
/// advises threads alone; with `--consumer-ms` it tries depths 1, 2 and 4.
#[test]
fn tune_tries_prefetch_depths_only_beside_a_training_step() {
    let (_d, samples) = common::samples();
    let tune = |extra: &[&str]| {
        let out = stokehold()
            .args(["tune", "pipelines/resnet50-eval.toml", "--batch", "16"])
            .args(["--thread-counts", "1", "--epochs", "1", "--data"])
            .arg(&samples)
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let rows = |s: &str| {
        s.lines()
            .filter(|l| l.trim_start().starts_with("1 "))
            .count()
    };
    let alone = tune(&[]);
    assert_eq!(rows(&alone), 1, "{alone}");
    assert!(
        alone.contains("prefetch: without a training step"),
        "{alone}"
    );
    assert!(alone.contains("or pass --threads 1\n"), "{alone}");
    let stepping = tune(&["--consumer-ms", "1"]);
    assert_eq!(rows(&stepping), 3, "{stepping}");
    assert!(!stepping.contains("prefetch: without"), "{stepping}");
}

/// Ctrl-C on `tune` stops after the trial in hand and advises on the trials run.
#[cfg(unix)]
#[test]
fn ctrl_c_on_bench_reports_what_was_timed() {
    use std::io::{BufRead, Read};
    let (_d, samples) = common::samples();
    let mut bench = stokehold();
    bench
        .args(["bench", "pipelines/resnet50-eval.toml", "--batch", "16"])
        .args(["--threads", "1", "--min-seconds", "120", "--data"])
        .arg(&samples)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let started = std::time::Instant::now();
    let mut child = bench.spawn().unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("device:") {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "ended early");
    }
    // Epochs of 4 batches: the warm-up is long over.
    std::thread::sleep(std::time::Duration::from_secs(2));
    sigint(&child);
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(130), "{out}{rest}");
    assert!(started.elapsed().as_secs() < 60, "ran on: {out}");
    assert!(
        rest.contains("stopping after this batch, then reporting"),
        "{rest}"
    );
    assert!(
        out.contains("epochs and part of another after")
            && out.contains("interrupted: the throughput below counts the batches taken"),
        "{out}"
    );
    let last = out.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("device=cpu threads=1 batch=16 images="),
        "{out}"
    );
    let images: u64 = last
        .split_whitespace()
        .find_map(|f| f.strip_prefix("images="))
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(images > 0, "{out}");
}

#[test]
fn ctrl_c_on_tune_advises_on_the_trials_run() {
    use std::io::Read;
    let (_d, samples) = common::samples();
    let mut tune = stokehold();
    tune.args(["tune", "pipelines/resnet50-eval.toml", "--batch", "16"])
        .args(["--thread-counts", "1,2,1", "--min-seconds", "1", "--data"])
        .arg(&samples);
    // The table's header and its first row: the second trial is running.
    let (mut child, mut out, _) = spawn_until_lines(&mut tune, 2);
    sigint(&child);
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(130), "{rest}");
    assert!(rest.contains("interrupted: 2 of 3 trials run"), "{rest}");
    assert!(rest.contains("or pass --threads "), "{rest}");
}
