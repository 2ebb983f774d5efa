//! The command line's devices: what `check` says of a GPU pipeline without a GPU, and the
//! emulated device (`--device emu`, the GPU stage without a GPU): the shipped pipelines give
//! the CPU's batches (within compare's tolerance; bit for bit with nearest chroma, whatever
//! the decoders' split), `check` says where they run, simulated device failures from the
//! environment are errors, not hangs, and a run with a real GPU's timing reports its limit
//! and allocates nothing after its warm-up. And what the device line says of the JPEG
//! decoder.

mod common;

use common::skip::{skip, Need};
use common::{compare, edited_train, stokehold};

/// The built-in sample data (in a temporary folder, kept while the first value lives), or
/// `None` after saying why when this build has no emulated device.
fn emu_and_samples() -> Option<(tempfile::TempDir, std::path::PathBuf)> {
    if stokehold::cuda::emu::kernels::unavailable().is_some() {
        skip(Need::Emu, "no emulated device in this build");
        return None;
    }
    let samples = tempfile::tempdir().unwrap();
    let data = stokehold::builtin_data::ensure(&samples.path().join("s")).unwrap();
    Some((samples, data))
}

/// What `stokehold run FILE --batch 16 --print-batches ARGS --data DATA`, with `env` set,
/// printed.
struct Printed {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    /// The `batch …` lines (each batch's samples, positions and digest).
    batches: Vec<String>,
}

fn print_batches(
    file: &std::path::Path,
    args: &[&str],
    data: &std::path::Path,
    env: &[(&str, &str)],
) -> Printed {
    let out = stokehold()
        .arg("run")
        .arg(file)
        .args(["--batch", "16", "--print-batches"])
        .args(args)
        .arg("--data")
        .arg(data)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let batches = stdout
        .lines()
        .filter(|l| l.starts_with("batch "))
        .map(str::to_string)
        .collect();
    Printed {
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).to_string(),
        stdout,
        batches,
    }
}

#[test]
fn the_shipped_pipelines_run_on_the_emulated_device_with_the_cpu_batches() {
    if let Some(why) = stokehold::cuda::emu::kernels::unavailable() {
        assert!(
            std::env::var("STOKEHOLD_REQUIRE_EMU").as_deref() != Ok("1"),
            "{why}"
        );
        skip(Need::Emu, why);
        return;
    }
    let samples = tempfile::tempdir().unwrap();
    let data = stokehold::builtin_data::ensure(&samples.path().join("s")).unwrap();
    for name in ["resnet50-train.toml", "resnet50-eval.toml"] {
        let lines = |device: &str| -> Vec<String> {
            let file = std::path::PathBuf::from(format!("pipelines/{name}"));
            let p = print_batches(&file, &["--device", device, "--stats"], &data, &[]);
            let (stdout, stderr) = (&p.stdout, &p.stderr);
            assert_eq!(p.code, Some(0), "{device}: {stderr}");
            if device == "emu" {
                assert!(stderr.contains("device: emu (device = \"emu\""), "{stderr}");
                assert!(
                    stdout.contains("decoded by device-decoder:hardware"),
                    "{stdout}"
                );
            }
            // The pixels' digest aside: the emulated engines decode as the real ones do
            // (repeated chroma, rebuilt by the chroma kernels), so a few values differ.
            p.batches
                .iter()
                .map(|l| {
                    l.split(' ')
                        .filter(|w| !w.starts_with("digest="))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect()
        };
        let (cpu, emu) = (lines("cpu"), lines("emu"));
        assert_eq!(cpu.len(), 4, "{cpu:?}");
        // The same samples in the same batches and positions...
        assert_eq!(cpu, emu, "{name}");
        // ... and the same pixels within compare's tolerance for the rebuilt chroma.
        let out = compare(name, "cpu,emu", &["--batch", "16"], &data);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("within tolerance"),
            "{name}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // `check` says the truth about the test device too.
    let d = tempfile::tempdir().unwrap();
    let emu = edited_train(d.path(), &[("device = \"auto\"", "device = \"emu\"")]);
    let out = stokehold().arg("check").arg(&emu).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("runs on: emu (device = \"emu\": emulated device"),
        "{stdout}"
    );
}

#[test]
fn a_simulated_device_failure_from_the_environment_is_an_error_not_a_hang() {
    let Some((_samples, data)) = emu_and_samples() else {
        return;
    };
    for (var, value, says) in [
        ("STOKEHOLD_EMU_LOSE_AFTER", "2", "lost"),
        ("STOKEHOLD_EMU_MEMORY", "2M", "device out of memory"),
    ] {
        let out = stokehold()
            .args(["run", "pipelines/resnet50-train.toml", "--device", "emu"])
            .args(["--batch", "8", "--data"])
            .arg(&data)
            .env(var, value)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{var}: {stderr}");
        assert!(stderr.contains(says), "{var}: {stderr}");
    }
}

/// `STOKEHOLD_DECODE_WHOLE=1` (a diagnostic for GPU machines: the decoder's regions of
/// interest told apart from the rest) decodes whole images and crops in the chain, says so,
/// and gives the same pixels within compare's tolerance.
#[test]
fn whole_image_decodes_give_the_cpu_batches_too() {
    let Some((_samples, data)) = emu_and_samples() else {
        return;
    };
    // Said on stderr (a diagnostic that changes what the device decodes).
    let out = stokehold()
        .args(["run", "pipelines/resnet50-train.toml", "--device", "emu"])
        .args(["--batch", "16", "--data"])
        .arg(&data)
        .env("STOKEHOLD_DECODE_WHOLE", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("STOKEHOLD_DECODE_WHOLE=1: the GPU path decodes whole images"),
        "{stderr}"
    );
    let out = stokehold()
        .args([
            "compare",
            "pipelines/resnet50-train.toml",
            "--devices",
            "cpu,emu",
        ])
        .args(["--batch", "16", "--data"])
        .arg(&data)
        .env("STOKEHOLD_DECODE_WHOLE", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("within tolerance"),
        "{stdout}"
    );
}

#[test]
fn check_on_a_gpu_pipeline_says_what_run_will_do() {
    if stokehold::cuda::probe(0).is_ok() {
        skip(
            Need::NoGpu,
            "this machine has a GPU (the test checks the reasons given without one)",
        );
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let gpu = edited_train(d.path(), &[("device = \"auto\"", "device = \"gpu\"")]);
    let out = stokehold().arg("check").arg(&gpu).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("ok"));
    assert!(stderr.contains("edited.toml:"), "{stderr}");
    assert!(
        stderr.contains("`stokehold run` would stop here"),
        "{stderr}"
    );
    // The real reason: what the probe found on this machine.
    assert!(stderr.contains("device = \"gpu\": "), "{stderr}");
    assert!(stderr.contains("help: use device = \"auto\""), "{stderr}");
    // `auto` runs, and says where and why.
    let out = stokehold()
        .args(["check", "pipelines/resnet50-train.toml"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("runs on: cpu (device = \"auto\": no usable GPU: "),
        "{stdout}"
    );
    // A pipeline the GPU path couldn't take anyway (a batch over its limit): the missing GPU
    // is the reason given first.
    for device in ["auto", "gpu"] {
        let d = tempfile::tempdir().unwrap();
        let big = edited_train(
            d.path(),
            &[
                ("device = \"auto\"", &format!("device = \"{device}\"")),
                ("batch = 64", "batch = 100000"),
            ],
        );
        let out = stokehold().arg("check").arg(&big).output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
        let absent = stokehold::cuda::probe(0).unwrap_err().to_string();
        let absent = absent.trim_start_matches("GPU unavailable: ");
        let why = said
            .split(&format!("device = \"{device}\": "))
            .nth(1)
            .unwrap_or("");
        let why = why.trim_start_matches("no usable GPU: ");
        assert!(why.starts_with(absent), "{device}: {said}");
    }
}

/// The device line and `--stats` say which SIMD the JPEG decoder uses, as the library's
/// probe does; without SIMD a warning says what it costs and what to do.
#[test]
fn run_says_which_simd_the_jpeg_decoder_uses() {
    let samples = tempfile::tempdir().unwrap();
    let data = stokehold::builtin_data::ensure(&samples.path().join("s")).unwrap();
    let out = stokehold()
        .args(["run", "pipelines/resnet50-eval.toml", "--device", "cpu"])
        .args(["--batch", "16", "--stats", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let simd = stokehold::decode::jpeg_simd();
    let device_line = stderr.lines().find(|l| l.starts_with("device: ")).unwrap();
    assert!(
        device_line.ends_with(&format!("; JPEG SIMD: {simd}")),
        "{device_line}"
    );
    assert!(
        stdout.contains(&format!("JPEG decoder SIMD: {simd}")),
        "{stdout}"
    );
    let warned = stderr.contains("JPEG decoding runs without SIMD, about 25% slower");
    assert_eq!(
        warned,
        simd == stokehold::decode::JpegSimd::None,
        "{stderr}"
    );
}

/// `batch_memory = "emu-pinned"` in a pipeline file and `--batch-memory` on the command line:
/// the CPU path's batches in the emulated device's pinned memory, the same digests as host
/// batches, nothing allocated after the first epoch; `pinned` without a GPU is refused at the
/// start, naming the setting.
#[test]
fn pinned_batches_from_the_file_and_the_command_line() {
    let Some((_samples, data)) = emu_and_samples() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let file = edited_train(
        d.path(),
        &[(
            "device = \"auto\"",
            "device = \"auto\"\nbatch_memory = \"emu-pinned\"",
        )],
    );
    let out = stokehold().arg("check").arg(&file).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("runs on: cpu (device = \"auto\": the CPU path, as batch_memory = \"emu-pinned\" asks for its host batches; host batches pinned by emulated device"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = |args: &[&str]| {
        let args = [&["--epochs", "2", "--stats"], args].concat();
        let p = print_batches(&file, &args, &data, &[]);
        (p.code, p.stdout, p.stderr, p.batches)
    };
    // From the file.
    let (code, pinned, stderr, pinned_batches) = run(&[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        pinned.contains("batches pinned by the CPU path"),
        "{pinned}"
    );
    assert!(pinned.contains("allocations after warm-up: 0 "), "{pinned}");
    // The command line overrides the file.
    let (code, host, stderr, host_batches) = run(&["--batch-memory", "auto"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!host.contains("pinned by"), "{host}");
    assert_eq!(pinned_batches.len(), 8, "{pinned}");
    assert_eq!(pinned_batches, host_batches, "the same batches and digests");
    if stokehold::cuda::probe(0).is_err() {
        let (code, _, stderr, _) = run(&["--batch-memory", "pinned"]);
        assert_eq!(code, Some(1), "{stderr}");
        assert!(
            stderr.contains("batch_memory = \"pinned\": the CPU path's batches can't be pinned"),
            "{stderr}"
        );
    }
}

/// Which decoder takes a sample changes nothing about it: with `upsampling = "nearest"` (the
/// engines' chroma, which the CPU decoder then writes too) the GPU path's batches are the
/// CPU path's bit for bit — samples, positions and pixels — whatever share of them the split
/// gives the CPU decoder (`STOKEHOLD_CPU_DECODE_SHARE` fixes it: none, half, all).
#[test]
fn the_decoders_split_changes_no_batch() {
    let Some((_samples, data)) = emu_and_samples() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let nearest = edited_train(
        d.path(),
        &[(
            "output = \"decoded\"\n",
            "output = \"decoded\"\nupsampling = \"nearest\"\n",
        )],
    );
    let batches = |device: &str, share: Option<&str>| -> (Vec<String>, String) {
        let env: Vec<(&str, &str)> = share
            .map(|s| ("STOKEHOLD_CPU_DECODE_SHARE", s))
            .into_iter()
            .collect();
        let args = ["--device", device, "--epochs", "2", "--stats"];
        let p = print_batches(&nearest, &args, &data, &env);
        assert_eq!(p.code, Some(0), "{device} {share:?}: {}", p.stderr);
        (p.batches, p.stdout)
    };
    let (cpu, _) = batches("cpu", None);
    assert_eq!(cpu.len(), 8, "{cpu:?}");
    for share in ["0", "0.5", "1"] {
        let (emu, stdout) = batches("emu", Some(share));
        assert_eq!(cpu, emu, "share {share}: {stdout}");
        // The share was what it was told: the CPU decoder took that part of the engines'.
        let took_cpu = stdout.contains("decoded by cpu-decoder:share");
        assert_eq!(took_cpu, share != "0", "share {share}: {stdout}");
        let took_engines = stdout.contains("decoded by device-decoder:hardware");
        assert_eq!(took_engines, share != "1", "share {share}: {stdout}");
    }
}

/// The emulated device with a real GPU's timing (`STOKEHOLD_EMU_MODEL=h100`): `bench --stats`
/// says how close the run came to the modelled limit, keeps several batches in flight, and
/// allocates nothing after the warm-up, which `bench` waits for before timing — with
/// batches of 16, whose decode areas vary the most from group to group (25,600 images: they
/// grew past what the warm-up saw three times in every such run before the decode areas
/// were sized for the images' spread).
#[test]
fn the_timing_model_run_reports_its_limit_and_allocates_nothing_after_the_warm_up() {
    let Some((_samples, data)) = emu_and_samples() else {
        return;
    };
    let out = stokehold()
        .args(["bench", "pipelines/resnet50-train.toml", "--device", "emu"])
        .args(["--batch", "16", "--epochs", "400", "--stats", "--data"])
        .arg(&data)
        .env("STOKEHOLD_EMU_MODEL", "h100")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = |start: &str| -> &str {
        stdout
            .lines()
            .find(|l| l.trim_start().starts_with(start))
            .unwrap_or_else(|| panic!("no `{start}` line: {stdout}"))
    };
    assert!(
        line("allocations after warm-up:").contains("after warm-up: 0 ("),
        "{stdout}"
    );
    let in_flight: usize = line("batches in flight: max ")
        .trim_start()
        .trim_start_matches("batches in flight: max ")
        .split(';')
        .next()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(in_flight >= 2, "{stdout}");
    // The timing starts once the pools have settled (after 16 batches: 4 epochs of 64
    // photos) and an epoch began after it: at least 5 epochs of warm-up.
    let warm_up: u64 = line("timed 400 epochs after ")
        .split(' ')
        .nth(4)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!((5..=20).contains(&warm_up), "{stdout}");
    // The limit's line, before the throughput line that ends the run.
    let limit = line("modelled limit: ");
    assert!(limit.contains("img/s, reached "), "{limit}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[lines.len() - 1].starts_with("device=emu ") && lines[lines.len() - 2] == limit,
        "{stdout}"
    );
}

/// The GPU path's default on a real device — nvJPEG interpolating chroma for `upsampling =
/// "fancy"`, no rebuild by our kernels — on the emulated device (`STOKEHOLD_EMU_INTERPOLATE=1`:
/// its decoder interpolates as libjpeg does): the CPU path's batches bit for bit, both
/// shipped pipelines, digests included; the device line says which chroma it decodes.
#[test]
fn the_interpolating_emulated_decoder_gives_the_cpu_batches_bit_for_bit() {
    let Some((_samples, data)) = emu_and_samples() else {
        return;
    };
    for name in ["resnet50-train.toml", "resnet50-eval.toml"] {
        let lines = |device: &str| -> Vec<String> {
            let file = std::path::PathBuf::from(format!("pipelines/{name}"));
            let env = [("STOKEHOLD_EMU_INTERPOLATE", "1")];
            let p = print_batches(&file, &["--device", device, "--epochs", "2"], &data, &env);
            assert_eq!(p.code, Some(0), "{device}: {}", p.stderr);
            if device == "emu" {
                assert!(
                    p.stderr.contains("chroma interpolated by the decoder"),
                    "{}",
                    p.stderr
                );
            }
            p.batches
        };
        let cpu = lines("cpu");
        assert_eq!(cpu.len(), 8, "{cpu:?}");
        assert_eq!(cpu, lines("emu"), "{name}");
    }
}

/// A GPU without JPEG engines (most GPUs; the emulated device with
/// `STOKEHOLD_EMU_NO_ENGINES=1`): every JPEG is decoded by the CPU decoder on the workers —
/// the GPU path leaves nvJPEG's CUDA decoders, whose Huffman stage is one host thread's,
/// alone — so the workers take every core by default, as on the CPU path; the batches are
/// the CPU path's bit for bit, and the warm-up ends without a split to wait for.
#[test]
fn a_device_without_jpeg_engines_leaves_every_jpeg_to_the_workers_on_every_core() {
    let Some((_samples, data)) = emu_and_samples() else {
        return;
    };
    let file = std::path::PathBuf::from("pipelines/resnet50-train.toml");
    let cpu = print_batches(&file, &["--device", "cpu", "--epochs", "2"], &data, &[]);
    assert_eq!(cpu.code, Some(0), "{}", cpu.stderr);
    assert_eq!(cpu.batches.len(), 8, "{:?}", cpu.batches);
    let env = [("STOKEHOLD_EMU_NO_ENGINES", "1")];
    let args = ["--device", "emu", "--epochs", "2", "--stats"];
    let emu = print_batches(&file, &args, &data, &env);
    assert_eq!(emu.code, Some(0), "{}", emu.stderr);
    assert_eq!(cpu.batches, emu.batches);
    assert!(
        emu.stderr.contains("without JPEG engines"),
        "{}",
        emu.stderr
    );
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        emu.stderr.contains(&format!("; {cores} worker threads;")),
        "{cores} cores: {}",
        emu.stderr
    );
    assert!(
        emu.stdout
            .contains("decoded by cpu-decoder:not-for-jpeg-engines"),
        "{}",
        emu.stdout
    );
    assert!(
        !emu.stdout.contains("decoded by device-decoder"),
        "{}",
        emu.stdout
    );
    // The warm-up, which waits for the decoders' split where there is one to make, ends
    // without one: the pools settle and nothing is allocated after it.
    let out = stokehold()
        .args(["bench", "pipelines/resnet50-train.toml", "--device", "emu"])
        .args(["--batch", "16", "--epochs", "20", "--stats", "--data"])
        .arg(&data)
        .env("STOKEHOLD_EMU_NO_ENGINES", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("allocations after warm-up: 0 ("),
        "{stdout}"
    );
}

#[test]
fn compare_without_a_gpu_suggests_the_emulated_device_only_where_the_gpu_path_runs() {
    if stokehold::cuda::probe(0).is_ok() {
        skip(
            Need::NoGpu,
            "this machine has a GPU (the test checks the advice given without one)",
        );
        return;
    }
    let Some((_samples, data)) = emu_and_samples() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let padded = d.path().join("padded.toml");
    // pad fills borders: the fused GPU chain can't run it, on a GPU or the emulated device.
    std::fs::write(
        &padded,
        "[pipeline]\nbatch = 4\noutputs = [\"images\"]\n\
         [[op]]\nkind = \"file_reader\"\noutputs = [\"jpegs\"]\n\
         [[op]]\nkind = \"decode\"\ninput = \"jpegs\"\noutput = \"d\"\n\
         [[op]]\nkind = \"resize\"\ninput = \"d\"\noutput = \"r\"\nsize = [32, 32]\n\
         [[op]]\nkind = \"pad\"\ninput = \"r\"\noutput = \"images\"\ntop = 4\n",
    )
    .unwrap();
    let advice = |file: &std::path::Path| {
        let out = stokehold()
            .arg("compare")
            .arg(file)
            .args(["--devices", "cpu,gpu", "--batches", "1", "--data"])
            .arg(&data)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let shipped = advice(std::path::Path::new("pipelines/resnet50-eval.toml"));
    assert!(shipped.contains("--devices cpu,emu compares"), "{shipped}");
    let padded = advice(&padded);
    assert!(
        padded.contains("the GPU path can't run this pipeline") && !padded.contains("cpu,emu"),
        "{padded}"
    );
}
