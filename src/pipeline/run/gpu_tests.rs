//! The GPU path end to end on the emulated device: the same batches, skips and parameters
//! as the CPU path, every operator, bad files under every `on_error` policy, the CPU
//! fallbacks, threads and prefetch, resume, dropping mid-flight, running out of device
//! memory, a lost device, and buffer lifetimes checked against a slow consumer stream.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::cuda::gpu_device::{streams, GpuDevice};
use crate::cuda::{EmuDevice, EmuOptions};
use crate::image::Pixels;
use crate::pipeline::batch::BatchOutput;
use crate::pipeline::spec::{DeviceChoice, OnError, OpSpec};
use crate::testutil::{encode_jpeg_opts, exif_orientation_tiff, pattern_rgb, JpegOpts, Sub};

/// The emulated device, or `None` after saying why the test is skipped.
pub(super) fn emu() -> Option<Arc<EmuDevice>> {
    crate::cuda::test_support::Emu::load()?;
    Some(EmuDevice::new(EmuOptions::default()).expect("emulated device"))
}

/// An emulated device whose every kernel launch waits `delay` on its stream (a slow kernel
/// stream), or `None` as [`emu`].
pub(super) fn slow_emu(delay: Duration) -> Option<Arc<EmuDevice>> {
    emu()?;
    let options = EmuOptions {
        launch_delay: Some(delay),
        ..EmuOptions::default()
    };
    Some(EmuDevice::new(options).expect("emulated device"))
}

/// A shipped pipeline file pointed at `data`, with two threads.
pub(super) fn shipped(name: &str, data: &Path) -> PipelineSpec {
    let mut spec = crate::testutil::shipped_pipeline(name);
    spec.set_data(data);
    spec.settings.threads = Some(2);
    spec
}

pub(super) fn on(spec: &PipelineSpec, device: DeviceChoice) -> PipelineSpec {
    let mut s = spec.clone();
    s.settings.device = device;
    s
}

/// Every result of a run (the error, if any, last).
pub(super) fn run(spec: &PipelineSpec) -> Vec<Result<Batch, Error>> {
    Pipeline::new(spec.clone()).expect("starts").collect()
}

/// A batch's image output as host pixels, whichever path made it.
pub(super) fn images_of(b: &Batch) -> crate::pipeline::batch::BatchTensor {
    let name = b
        .names
        .iter()
        .zip(&b.outputs)
        .find(|(_, o)| !matches!(o, BatchOutput::Labels(_)))
        .map(|(n, _)| n.clone())
        .expect("an image output");
    b.images_on_host(&name)
        .expect("images")
        .expect("on the host")
}

/// The CPU and emulated runs agree: same batches of the same samples with the same
/// parameters, labels and skips; pixels equal within the tolerance (u8 ±1, floats 1e-3).
pub(super) fn assert_same_runs(
    cpu: &[Result<Batch, Error>],
    emu: &[Result<Batch, Error>],
    what: &str,
) {
    assert_eq!(cpu.len(), emu.len(), "{what}: number of results");
    for (k, (c, e)) in cpu.iter().zip(emu).enumerate() {
        let (c, e) = match (c, e) {
            (Ok(c), Ok(e)) => (c, e),
            (Err(c), Err(e)) => {
                assert_eq!(c.to_string(), e.to_string(), "{what}: the error");
                continue;
            }
            (c, e) => panic!(
                "{what}: result {k}: cpu {:?} emu {:?}",
                c.is_ok(),
                e.is_ok()
            ),
        };
        assert!(
            e.outputs
                .iter()
                .any(|o| matches!(o, BatchOutput::Device(_))),
            "{what}: the emulated run's batches are on the device"
        );
        assert_eq!(
            (c.epoch, c.index, c.padded),
            (e.epoch, e.index, e.padded),
            "{what}"
        );
        assert_eq!(
            c.samples, e.samples,
            "{what}: batch {k}: samples and parameters"
        );
        assert_eq!(c.resume, e.resume, "{what}: batch {k}: resume position");
        let bad = |b: &Batch| -> [Vec<String>; 2] {
            [&b.skipped, &b.replaced].map(|v| v.iter().map(|s| s.to_string()).collect())
        };
        assert_eq!(bad(c), bad(e), "{what}: batch {k}: skipped and replaced");
        for (co, eo) in c.outputs.iter().zip(&e.outputs) {
            if let (BatchOutput::Labels(a), BatchOutput::Labels(b)) = (co, eo) {
                assert_eq!(a, b, "{what}: labels");
            }
        }
        let (ci, ei) = (images_of(c), images_of(e));
        assert_eq!(ci.shapes, ei.shapes, "{what}: batch {k}: shapes");
        assert_eq!((ci.dtype, ci.layout), (ei.dtype, ei.layout), "{what}");
        // The emulated device's chroma is rebuilt from repeated samples: exact but where a
        // block's every pixel is clamped (`crate::pipeline::compare`'s tolerance).
        let mut d = crate::pipeline::compare::OutputDiff::new("images");
        for (co, eo) in c.outputs.iter().zip(&e.outputs) {
            if !matches!(co, BatchOutput::Labels(_)) {
                d.add(co, eo);
            }
        }
        let floor = crate::pipeline::compare::Tolerance::default().rebuilt_min_psnr;
        assert!(
            d.min_psnr() >= floor,
            "{what}: batch {k}: a sample at {:.1} dB (max abs {})",
            d.min_psnr(),
            d.max_abs
        );
    }
}

fn to_f32(p: &Pixels) -> Vec<f32> {
    match p {
        Pixels::U8(v) => v.iter().map(|&x| f32::from(x)).collect(),
        Pixels::F16(v) => v.iter().map(|x| x.to_f32()).collect(),
        Pixels::F32(v) => v.clone(),
    }
}

fn compare(spec: &PipelineSpec, what: &str) -> Vec<Result<Batch, Error>> {
    if emu().is_none() {
        return Vec::new();
    }
    let cpu = run(&on(spec, DeviceChoice::Cpu));
    let emu = run(&on(spec, DeviceChoice::Emu));
    assert_same_runs(&cpu, &emu, what);
    emu
}

/// The built-in data (in a temporary folder, kept while the first value lives), then those of
/// `shared`'s folders that are here (each missing one skipped visibly).
pub(super) fn builtin_and_shared(shared: &[&str]) -> (tempfile::TempDir, Vec<PathBuf>) {
    let (d, data) = builtin();
    let mut folders = vec![data];
    if let Some(root) = crate::testutil::shared_data_part() {
        folders.extend(
            shared
                .iter()
                .filter_map(|f| crate::testutil::skip::shared_folder(&root, f)),
        );
    }
    (d, folders)
}

pub(super) fn builtin() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let data = crate::builtin_data::ensure(&d.path().join("s")).unwrap();
    (d, data)
}

/// A list file in `dir` naming each of the built-in photos in `data` (in class folders or
/// not) `k` times, label 0.
pub(super) fn builtin_times(dir: &Path, data: &Path, k: usize) -> PathBuf {
    let mut files: Vec<_> = std::fs::read_dir(data)
        .unwrap()
        .flat_map(|e| {
            let p = e.unwrap().path();
            if p.is_dir() {
                std::fs::read_dir(p)
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .collect()
            } else {
                vec![p]
            }
        })
        .filter(|p| {
            p.extension()
                .is_some_and(|x| x == "jpg" || x == "JPEG" || x == "jpeg")
        })
        .collect();
    files.sort();
    let list = dir.join("list.txt");
    let lines: Vec<String> = (0..k)
        .flat_map(|_| files.iter().map(|p| format!("{} 0", p.display())))
        .collect();
    std::fs::write(&list, lines.join("\n")).unwrap();
    list
}

/// A folder of JPEGs a GPU decoder meets: sizes and subsamplings, gray, progressive, every
/// EXIF orientation, a PNG, and files that are not images or end early.
pub(super) fn corpus() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| std::fs::write(d.path().join(name), bytes).unwrap();
    let mut k = 0;
    for (h, w, sub) in [
        (37, 53, Sub::S444),
        (64, 48, Sub::S420),
        (90, 71, Sub::S422),
        (40, 120, Sub::S440),
        (33, 65, Sub::S411),
        (300, 200, Sub::S420),
    ] {
        for progressive in [false, true] {
            let src = pattern_rgb(h, w);
            let o = JpegOpts {
                quality: 90,
                sub,
                progressive,
                exif_tiff: None,
            };
            write(
                &format!("c{k:02}.jpg"),
                &encode_jpeg_opts(&src, h, w, 3, &o),
            );
            k += 1;
        }
    }
    for o in 1..=8u16 {
        let src = pattern_rgb(45, 70);
        let opts = JpegOpts {
            quality: 92,
            sub: Sub::S420,
            progressive: false,
            exif_tiff: Some(exif_orientation_tiff(o, o % 2 == 0)),
        };
        write(
            &format!("r{o}.jpg"),
            &encode_jpeg_opts(&src, 45, 70, 3, &opts),
        );
    }
    let gray: Vec<u8> = pattern_rgb(50, 60).chunks(3).map(|p| p[1]).collect();
    let o = JpegOpts {
        quality: 90,
        sub: Sub::S444,
        progressive: false,
        exif_tiff: None,
    };
    write("gray.jpg", &encode_jpeg_opts(&gray, 50, 60, 1, &o));
    let mut png = Vec::new();
    {
        let mut enc = ::png::Encoder::new(&mut png, 20, 10);
        enc.set_color(::png::ColorType::Rgb);
        enc.set_depth(::png::BitDepth::Eight);
        let mut w = enc.write_header().unwrap();
        w.write_image_data(&pattern_rgb(10, 20)).unwrap();
    }
    write("p.png", &png);
    write("junk.jpg", b"not an image at all");
    let whole = encode_jpeg_opts(&pattern_rgb(80, 80), 80, 80, 3, &o);
    write("cut.jpg", &whole[..whole.len() / 2]);
    // What libjpeg refuses in a header when it decodes (its "Bogus marker length" and "Bogus
    // Huffman table definition"), which the JPEG engines would decode to garbage without an
    // error: a frame header one byte long, a DC table with symbol 16.
    let marker = |m: u8| whole.windows(2).position(|x| x == [0xFF, m]).unwrap();
    let sof = marker(0xC0);
    let mut long_sof = whole.clone();
    long_sof[sof + 3] += 1;
    long_sof.insert(sof + 2 + usize::from(whole[sof + 3]), 0);
    write("bogus-sof.jpg", &long_sof);
    let mut dc_symbol = whole.clone();
    dc_symbol[marker(0xC4) + 21] = 16;
    write("bogus-dht.jpg", &dc_symbol);
    d
}

pub(super) fn corpus_spec(dir: &Path, batch: usize) -> PipelineSpec {
    let mut spec = shipped("resnet50-train.toml", dir);
    spec.settings.batch = batch;
    spec
}

#[test]
fn shipped_pipelines_on_the_builtin_data_give_the_cpu_batches() {
    let (_d, data) = builtin();
    for name in ["resnet50-train.toml", "resnet50-eval.toml"] {
        let mut spec = shipped(name, &data);
        spec.settings.batch = 16;
        let got = compare(&spec, name);
        if got.is_empty() {
            return;
        }
        assert!(got.len() > 1, "{name}: several batches");
    }
}

#[test]
fn shipped_pipelines_on_the_shared_data_give_the_cpu_batches_and_skips() {
    let Some(shared) = crate::testutil::shared_data() else {
        return;
    };
    for folder in ["imagenet-400", "jpeg-edge"] {
        let Some(data) = crate::testutil::skip::shared_folder(&shared, folder) else {
            continue;
        };
        for name in ["resnet50-train.toml", "resnet50-eval.toml"] {
            compare(&shipped(name, &data), &format!("{name} on {folder}"));
        }
    }
}

#[test]
fn rotated_progressive_gray_png_and_bad_files_under_every_policy() {
    let d = corpus();
    for on_error in [OnError::Skip, OnError::Replace, OnError::Fail] {
        for name in ["resnet50-train.toml", "resnet50-eval.toml"] {
            let mut spec = shipped(name, d.path());
            spec.settings.batch = 5;
            spec.settings.on_error = on_error;
            let got = compare(&spec, &format!("{name}, on_error {}", on_error.name()));
            if got.is_empty() {
                return;
            }
            if on_error == OnError::Fail {
                assert!(got.last().unwrap().is_err(), "the run stops at a bad file");
            }
            if on_error == OnError::Skip {
                // The headers libjpeg refuses are skipped on both devices, with its error.
                let skips: Vec<String> = got
                    .iter()
                    .flat_map(|b| b.as_ref().unwrap().skipped.iter().map(|s| s.to_string()))
                    .collect();
                for file in ["bogus-sof.jpg", "bogus-dht.jpg"] {
                    assert!(
                        skips
                            .iter()
                            .any(|s| s.contains(file) && s.contains("JPEG: Bogus")),
                        "{name}: {file} skipped with libjpeg's error: {skips:?}"
                    );
                }
            }
        }
    }
    // Where the pixels came from: the decoder's routes and the CPU fallbacks, by cause.
    if emu().is_none() {
        return;
    }
    let mut p = Pipeline::new(on(&corpus_spec(d.path(), 4), DeviceChoice::Emu)).unwrap();
    for b in &mut p {
        b.unwrap();
    }
    let gpu = p.stats().gpu.expect("GPU figures");
    assert!(!gpu.uploads_only && !gpu.pinned_only, "the GPU path runs");
    let n = |k: &str| gpu.sources.get(k).copied().unwrap_or(0);
    assert_eq!(n("cpu-decoder:progressive"), 6, "{:?}", gpu.sources);
    assert_eq!(n("cpu-decoder:not-jpeg"), 1, "the PNG: {:?}", gpu.sources);
    // Five baseline sizes (4:1:1 aside), eight orientations, gray.
    assert_eq!(n("device-decoder:hardware"), 14, "{:?}", gpu.sources);
    assert_eq!(
        n("cpu-decoder:not-for-jpeg-engines"),
        1,
        "4:1:1 is not on the engines: {:?}",
        gpu.sources
    );
    // The 8 decoded on the CPU went up from their worker's pinned copy (the assembling
    // thread copied none), and the batches above were the CPU path's all the same.
    assert_eq!(gpu.host_images_pinned_by_workers, 8, "{:?}", gpu.sources);
    assert!(gpu.kernels > Duration::ZERO && gpu.decode > Duration::ZERO);
    assert!(gpu.memory.device_peak > 0);
}

fn op(kind: &str, input: &str, output: &str) -> OpSpec {
    OpSpec::new(kind).input(input).output(output)
}

#[test]
fn every_operator_of_the_chain_gives_the_cpu_results() {
    let d = corpus();
    let root = d.path().to_string_lossy().to_string();
    let reader = || {
        OpSpec::new("file_reader")
            .output("jpegs")
            .output("labels")
            .arg("root", root.as_str())
            .arg("shuffle", true)
    };
    let chains: Vec<Vec<OpSpec>> = vec![
        vec![
            op("resize", "decoded", "a").arg("shorter", 40),
            op("crop", "a", "b").arg("size", 32),
            op("flip", "b", "c").arg("vertical", 0.5),
            op("color_jitter", "c", "d")
                .arg("brightness", 0.4)
                .arg("contrast", 0.4)
                .arg("saturation", 0.4)
                .arg("hue", 0.1),
            op("normalize", "d", "e")
                .arg("mean", vec![120.0, 115.0, 100.0])
                .arg("std", vec![60.0, 58.0, 57.0])
                .arg("dtype", "f16"),
            op("layout", "e", "images").arg("layout", "CHW"),
        ],
        vec![
            op("random_resized_crop", "decoded", "a")
                .arg("size", vec![24, 30])
                .arg("interp", "nearest"),
            op("color_jitter", "a", "b").arg("contrast", 0.8),
            op("flip", "b", "c").arg("horizontal", 0.5),
            op("cast", "c", "images").arg("dtype", "f32"),
        ],
        vec![
            op("crop", "decoded", "a")
                .arg("size", 20)
                .arg("anchor", "position")
                .arg("pos", vec![0.25, 0.75]),
            op("resize", "a", "b")
                .arg("size", vec![28, 28])
                .arg("antialias", false),
            op("normalize", "b", "c")
                .arg("mean", 128.0)
                .arg("std", 64.0)
                .arg("dtype", "f32"),
            op("cast", "c", "images").arg("dtype", "u8"),
        ],
        // A crop larger than the images: the chain can't fill borders, so those samples run
        // on the CPU operators and are copied into their places.
        vec![op("crop", "decoded", "images")
            .arg("size", 100)
            .arg("fill", 7.0)],
    ];
    for (k, chain) in chains.into_iter().enumerate() {
        let mut b = PipelineSpec::builder()
            .batch(6)
            .threads(2)
            .op(reader())
            .op(op("decode", "jpegs", "decoded"));
        for o in chain {
            b = b.op(o);
        }
        let spec = b.outputs(&["images", "labels"]);
        let got = compare(&spec, &format!("chain {k}"));
        if got.is_empty() {
            return;
        }
    }
}

#[test]
fn gray_output_threads_and_prefetch_change_nothing() {
    let d = corpus();
    let mut gray = corpus_spec(d.path(), 7);
    for o in &mut gray.ops {
        if o.kind == "decode" {
            o.args.insert("color".into(), "gray".into());
        }
        if o.kind == "normalize" {
            o.args.insert("mean".into(), vec![120.0].into());
            o.args.insert("std".into(), vec![60.0].into());
        }
    }
    let base = compare(&gray, "gray output");
    if base.is_empty() {
        return;
    }
    for (threads, prefetch) in [(1, 1), (3, 3), (2, 6)] {
        let mut s = on(&gray, DeviceChoice::Emu);
        s.settings.threads = Some(threads);
        s.settings.prefetch = prefetch;
        assert_same_runs(
            &base,
            &run(&s),
            &format!("{threads} threads, prefetch {prefetch}"),
        );
    }
}

#[test]
fn resuming_on_the_gpu_path_gives_the_remaining_batches() {
    let (_d, data) = builtin();
    let Some(_) = emu() else { return };
    let mut spec = on(&shipped("resnet50-train.toml", &data), DeviceChoice::Emu);
    spec.settings.batch = 8;
    spec.settings.epochs = Some(2);
    let whole = run(&spec);
    let at = whole.len() / 2;
    let position = whole[at - 1].as_ref().unwrap().resume;
    let rest: Vec<_> = Pipeline::resume(spec, position).unwrap().collect();
    assert_same_runs(&whole[at..], &rest, "resumed");
}

#[test]
fn a_pipeline_the_chain_cant_run_is_refused_on_gpu_and_emu_and_runs_on_the_cpu_with_auto() {
    let (_d, data) = builtin();
    let spec = PipelineSpec::builder()
        .batch(4)
        .op(OpSpec::new("file_reader")
            .output("jpegs")
            .arg("root", data.to_string_lossy().as_ref()))
        .op(op("decode", "jpegs", "decoded"))
        .op(op("pad", "decoded", "images").arg("top", 2))
        .outputs(&["images"]);
    for d in [DeviceChoice::Emu, DeviceChoice::Gpu] {
        let e = Pipeline::new(on(&spec, d)).err().expect("refused");
        let msg = e.to_string();
        assert!(
            msg.contains("operator 'images'") && msg.contains("pad"),
            "{msg}"
        );
    }
    let p = Pipeline::new(on(&spec, DeviceChoice::Auto)).unwrap();
    assert_eq!(p.device().device, "cpu");
    assert!(
        p.device().reason.contains("can't run this pipeline"),
        "{}",
        p.device()
    );
}

pub(super) fn emu_pipeline(spec: &PipelineSpec, dev: Arc<EmuDevice>) -> Result<Pipeline, Error> {
    let graph = Graph::build(&on(spec, DeviceChoice::Emu)).unwrap();
    let seed = graph.spec.settings.seed;
    let start = crate::reader::schedule::Position::start(seed, graph.spec.settings.batch);
    Pipeline::start_on(graph, start, Some(dev))
}

#[test]
fn running_out_of_device_memory_is_an_error_naming_the_batch() {
    let (_d, data) = builtin();
    let Some(_) = emu() else { return };
    let mut spec = shipped("resnet50-train.toml", &data);
    spec.settings.batch = 16;
    spec.settings.epochs = Some(4);
    // Too small for the output batches alone: refused before anything starts.
    let tiny = EmuDevice::new(EmuOptions {
        memory: Some(1 << 20),
        ..EmuOptions::default()
    })
    .unwrap();
    match emu_pipeline(&spec, tiny) {
        Err(Error::DeviceOutOfMemory { what, bytes, .. }) => {
            assert!(what.contains("of 16 samples"), "{what}");
            assert!(bytes > 1 << 20, "{bytes}");
        }
        other => panic!("expected device out of memory, got {:?}", other.err()),
    }
    // Room for the outputs in flight, not for a consumer that keeps every batch: an error
    // for the consumer once the device is full, never an abort or a hang.
    let dev = EmuDevice::new(EmuOptions {
        memory: Some(40 << 20),
        ..EmuOptions::default()
    })
    .unwrap();
    let t0 = Instant::now();
    let results: Vec<_> = emu_pipeline(&spec, dev).unwrap().collect();
    assert!(results.len() > 1, "some batches fit");
    match results.last().unwrap() {
        Err(Error::DeviceOutOfMemory { what, bytes, .. }) => {
            assert!(what.contains("batch of 16"), "{what}");
            assert!(*bytes > 0);
        }
        other => panic!(
            "expected device out of memory, got {:?}",
            other.as_ref().err()
        ),
    }
    assert!(t0.elapsed() < Duration::from_secs(60), "no hang");
}

#[test]
fn a_lost_device_is_an_error_not_a_hang_and_dropping_mid_flight_frees_everything() {
    let (_d, data) = builtin();
    let Some(dev) = emu() else { return };
    let mut spec = shipped("resnet50-train.toml", &data);
    spec.settings.batch = 4;
    spec.settings.epochs = Some(3);
    let mut p = emu_pipeline(&spec, dev.clone()).unwrap();
    let first = p.next().unwrap().unwrap();
    dev.lose();
    let t0 = Instant::now();
    let rest: Vec<_> = p.by_ref().collect();
    assert!(
        rest.last()
            .is_some_and(|r| r.as_ref().is_err_and(|e| e.to_string().contains("lost"))),
        "the run ends with the device's error"
    );
    assert!(t0.elapsed() < Duration::from_secs(20), "no hang");
    assert!(
        first.images_on_host("images").unwrap().is_err(),
        "the device is gone"
    );
    drop((first, rest, p));

    // Dropping with work in flight is prompt, and frees the device memory.
    let dev = emu().unwrap();
    let mut p = emu_pipeline(&spec, dev.clone()).unwrap();
    let b = p.next().unwrap().unwrap();
    assert!(dev.memory().device > 0);
    let t0 = Instant::now();
    drop(p);
    drop(b);
    assert!(t0.elapsed() < Duration::from_secs(10), "dropped promptly");
    assert_eq!(dev.memory().device, 0, "every device buffer freed");
}

/// A buffer a consumer's stream still reads is handed out again only behind that read: the
/// pool's next user waits for the consumer's release event on the device. Driven through
/// the pool with one buffer in it, so the reuse is certain whatever the timing.
#[test]
fn a_batch_held_on_a_consumer_stream_is_not_overwritten_by_later_batches() {
    let Some(dev) = emu() else { return };
    let pool = crate::cuda::pool::DevicePool::new(dev.clone());
    let n = 64 << 10;
    let mut pinned = dev.alloc_pinned(2 * n).unwrap();
    pinned.as_mut_slice()[..n].fill(1);
    pinned.as_mut_slice()[n..].fill(2);
    let what = || "a batch".to_string();
    let mut batch = pool.take(n, streams::KERNELS, &what).unwrap();
    let ptr = batch.ptr();
    // SAFETY: `ptr` holds `n` bytes; the pinned bytes stay until the synchronisation below.
    unsafe {
        dev.copy_to_device(streams::KERNELS, ptr, pinned.as_ptr(), n)
            .unwrap()
    };
    let ready = dev.record(streams::KERNELS, false).unwrap();
    // A slow consumer: its stream waits for the batch, pauses, then reads it.
    let s = dev.new_stream().unwrap();
    dev.wait(s, &ready).unwrap();
    dev.delay(s, Duration::from_millis(200)).unwrap();
    let copy = dev.alloc(n).unwrap();
    // SAFETY: both ranges are live allocations of `n` bytes: the batch's (kept from reuse
    // until `s` has run this copy) and `copy`.
    unsafe { dev.copy_on_device(s, copy, ptr, n).unwrap() };
    batch.used_until(dev.record(s, false).unwrap());
    drop(batch);
    // The next batch gets the same buffer at once and writes it on the kernel stream.
    let next = pool.take(n, streams::KERNELS, &what).unwrap();
    assert_eq!(next.ptr(), ptr, "the pool's one buffer");
    // SAFETY: as above, the second half of the pinned bytes.
    unsafe {
        dev.copy_to_device(streams::KERNELS, ptr, pinned.as_ptr().wrapping_add(n), n)
            .unwrap()
    };
    dev.synchronize_all().unwrap();
    let mut got = vec![0u8; n];
    // SAFETY: `copy` holds `n` bytes; everything has run.
    unsafe { dev.copy_to_host(streams::KERNELS, &mut got, copy).unwrap() };
    assert!(
        got.iter().all(|&v| v == 1),
        "the consumer read the batch it was given"
    );
    // SAFETY: `ptr` holds `n` bytes.
    unsafe { dev.copy_to_host(streams::KERNELS, &mut got, ptr).unwrap() };
    assert!(
        got.iter().all(|&v| v == 2),
        "the next batch was written after"
    );
    drop(next);
    // SAFETY: allocated above, no work uses it any more.
    unsafe { dev.free(copy) };
}

/// The GPU path on a real device (a GPU machine: `scripts/gpu-check.sh`): the same samples,
/// parameters, labels and skips as the CPU path; pixels within nvJPEG's distance from our
/// decoder (PSNR ≥ 30 dB over each batch's values, decode and all). Skips visibly without a
/// GPU (fails under `STOKEHOLD_REQUIRE_GPU=1`).
#[test]
fn gpu_the_gpu_path_on_a_real_device_matches_the_cpu() {
    if crate::cuda::test_support::real_device().is_none() {
        return;
    }
    let (_d, folders) = builtin_and_shared(&["imagenet-400", "jpeg-edge"]);
    for data in &folders {
        for name in ["resnet50-train.toml", "resnet50-eval.toml"] {
            let spec = shipped(name, data);
            let cpu = run(&on(&spec, DeviceChoice::Cpu));
            let gpu = run(&on(&spec, DeviceChoice::Gpu));
            let what = format!("{name} on {}", data.display());
            assert_eq!(cpu.len(), gpu.len(), "{what}");
            for (c, g) in cpu.iter().zip(&gpu) {
                let (c, g) = (c.as_ref().unwrap(), g.as_ref().unwrap());
                assert_eq!(c.samples, g.samples, "{what}: samples and parameters");
                let skips = |b: &Batch| -> Vec<String> {
                    b.skipped.iter().map(|s| s.to_string()).collect()
                };
                assert_eq!(skips(c), skips(g), "{what}");
                let (a, b) = (to_f32(&images_of(c).data), to_f32(&images_of(g).data));
                let (lo, hi) = a
                    .iter()
                    .fold((f32::MAX, f32::MIN), |(l, h), &x| (l.min(x), h.max(x)));
                let mse = a
                    .iter()
                    .zip(&b)
                    .map(|(x, y)| f64::from(x - y).powi(2))
                    .sum::<f64>()
                    / a.len().max(1) as f64;
                let range = f64::from(hi - lo).max(1e-6);
                let psnr = 10.0 * (range * range / mse.max(1e-12)).log10();
                eprintln!("{what}: batch {} PSNR {psnr:.1} dB", c.index);
                assert!(psnr >= 30.0, "{what}: batch {}: PSNR {psnr:.1} dB", c.index);
            }
        }
    }
}

/// The device seam's contract on a real device (the emulated one is checked in
/// `crate::cuda::emu`): copies in stream order across events, timing, memory accounting,
/// running out of memory as an error.
#[test]
fn gpu_the_real_device_keeps_the_seam_contract() {
    if crate::cuda::test_support::real_device().is_none() {
        return;
    }
    let dev = crate::cuda::RealDevice::new(0, 64).unwrap();
    let n = 1 << 20;
    let a = dev.alloc(n).unwrap();
    let b = dev.alloc(n).unwrap();
    let mut host = dev.alloc_pinned(n).unwrap();
    for (i, x) in host.as_mut_slice().iter_mut().enumerate() {
        *x = (i % 251) as u8;
    }
    // SAFETY: live allocations of `n` bytes; `host` outlives the waits below.
    unsafe {
        dev.copy_to_device(streams::DECODE, a, host.as_ptr(), n)
            .unwrap()
    };
    let start = dev.record(streams::DECODE, true).unwrap();
    let written = dev.record(streams::DECODE, true).unwrap();
    dev.wait(streams::KERNELS, &written).unwrap();
    // SAFETY: as above.
    unsafe { dev.copy_on_device(streams::KERNELS, b, a, n).unwrap() };
    let mut got = vec![0u8; n];
    // SAFETY: `b` holds `n` bytes.
    unsafe { dev.copy_to_host(streams::KERNELS, &mut got, b).unwrap() };
    assert!(got == host.as_slice());
    assert!(dev.is_complete(&written).unwrap());
    assert!(dev.elapsed(&start, &written).is_ok());
    assert!(dev.memory().device >= 2 * n);
    match dev.alloc(1 << 52) {
        Err(Error::DeviceOutOfMemory { bytes, .. }) => assert_eq!(bytes, 1 << 52),
        other => panic!("{other:?}"),
    }
    // SAFETY: no work uses them any more (synchronised by the copy to the host).
    unsafe {
        dev.free(a);
        dev.free(b);
    }
}

/// The run's device figures, once checked: the warm-up allocated, nothing after it did.
pub(super) fn nothing_allocated_after_warm_up(p: &Pipeline, what: &str) -> super::stats::GpuStats {
    let gpu = p.stats().gpu.expect("the device's figures");
    let after = gpu.after_warm_up.expect("the warm-up ended");
    assert_eq!(
        after.total(),
        0,
        "{what}: {after:?} (since the start: {:?})",
        gpu.counters
    );
    assert!(
        gpu.counters.device_allocs > 0,
        "{what}: the warm-up allocated"
    );
    gpu
}

/// After the first epoch nothing is allocated or freed and no event is created, on the
/// device or in pinned memory: every buffer, slot and event of the later epochs is reused.
#[test]
fn nothing_is_allocated_after_the_first_epoch() {
    let (d, data) = builtin();
    let Some(dev) = emu() else { return };
    // An epoch of 16 batches of 16 (the built-in photos four times, by a list file): a
    // first epoch long enough to meet the sizes the later ones ask for.
    let list = builtin_times(d.path(), &data, 4);
    for name in ["resnet50-train.toml", "resnet50-eval.toml"] {
        let mut spec = shipped(name, &list);
        spec.settings.batch = 16;
        spec.settings.epochs = Some(4);
        let mut p = emu_pipeline(&spec, dev.clone()).unwrap();
        for b in p.by_ref() {
            // A consumer that reads each batch on its own stream and drops it.
            let b = b.unwrap();
            b.device_images("images").unwrap().wait().unwrap();
        }
        let gpu = nothing_allocated_after_warm_up(&p, name);
        assert!(gpu.batches_in_flight >= 1, "{name}");
    }
}

/// Dropping a batch whose consumer stream is still busy returns at once: the drop records a
/// (pooled) release event on that stream and puts the buffer on the idle list — no wait, no
/// free, no event created on the consumer's thread. (The fastest of five drops, so that one
/// preempted thread does not fail the test.)
#[test]
fn dropping_a_batch_on_a_busy_consumer_stream_returns_at_once() {
    let (_d, data) = builtin();
    let Some(dev) = slow_emu(Duration::from_millis(20)) else {
        return;
    };
    let mut spec = shipped("resnet50-eval.toml", &data);
    spec.settings.batch = 8;
    spec.settings.epochs = Some(1);
    let mut p = emu_pipeline(&spec, dev.clone()).unwrap();
    let s = dev.new_stream().unwrap();
    let mut fastest = Duration::MAX;
    for b in p.by_ref().take(5) {
        let b = b.unwrap();
        let t = b.device_images("images").unwrap().clone();
        // SAFETY: `s` is a stream of this emulated device.
        unsafe { t.use_on_stream(dev.raw_stream(s)).unwrap() };
        // The consumer's stream is busy long after the drop.
        dev.delay(s, Duration::from_millis(200)).unwrap();
        let created = dev.counters().events_created;
        let t0 = Instant::now();
        drop((t, b));
        fastest = fastest.min(t0.elapsed());
        assert_eq!(dev.counters().events_created, created, "no event created");
    }
    assert!(
        fastest < Duration::from_millis(1),
        "the fastest drop took {fastest:?}"
    );
}
