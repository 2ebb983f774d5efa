//! The GPU stage's decode on the emulated device, which has nvJPEG's shape (submit, then
//! finish at the batch's fence): ROIs padded as nvJPEG before 13.3 pads them and exact ones
//! give the CPU's batches, and images the decoder fails on at the fence are decoded again on
//! the CPU.

use super::gpu_tests::{
    assert_same_runs, builtin, corpus, corpus_spec, emu, emu_pipeline,
    nothing_allocated_after_warm_up, on, run, shipped, slow_emu,
};
use crate::cuda::gpu_device::GpuDevice;
use crate::cuda::{EmuDevice, EmuOptions};
use crate::decode::{JpegHeader, Limits};
use crate::nvjpeg::Roi;
use crate::pipeline::spec::DeviceChoice;

/// A decode area is written again only once the host has seen the kernels that read it
/// done, however slow the kernel stream (each launch waits 15 ms): the emulated device lets
/// the JPEG engines' writes wait for nothing but the host, as nvJPEG's do (`docs/gpu.md`,
/// "The JPEG engines and stream order"), so an area reused behind a device-side wait would
/// fault; the run gives the CPU's batches, several epochs over the pool's settling.
#[test]
fn decode_areas_are_reused_only_once_the_host_saw_their_kernels_done() {
    let (_d, data) = builtin();
    let Some(dev) = slow_emu(std::time::Duration::from_millis(15)) else {
        return;
    };
    let mut spec = shipped("resnet50-train.toml", &data);
    spec.settings.batch = 4;
    spec.settings.epochs = Some(3);
    let cpu = run(&on(&spec, DeviceChoice::Cpu));
    let slow: Vec<_> = emu_pipeline(&spec, dev).unwrap().collect();
    assert_same_runs(&cpu, &slow, "a slow kernel stream");
}

/// The device times of a finished run count every batch, the last ones too, whose kernels
/// may still run when the consumer has its batches (reading the time between events the
/// device has not reached is an error, on a real device one that compute-sanitizer reports):
/// each launch waits 30 ms on the kernel stream, inside some batch's timed span.
#[test]
fn a_finished_runs_kernel_time_counts_every_launch() {
    let (_d, data) = builtin();
    let delay = std::time::Duration::from_millis(30);
    let Some(dev) = slow_emu(delay) else { return };
    let mut spec = shipped("resnet50-eval.toml", &data);
    spec.settings.batch = 4;
    spec.settings.epochs = Some(1);
    let mut p = emu_pipeline(&spec, dev.clone()).unwrap();
    // Kept, not waited for: the last batches' kernels still run when the epoch ends.
    let _kept: Vec<_> = p.by_ref().map(Result::unwrap).collect();
    let gpu = p.stats().gpu.expect("the GPU stage's stats");
    let launches = dev.launches() as u32;
    assert!(launches >= 2, "{launches} launches");
    assert!(
        gpu.kernels >= delay * launches,
        "kernel time {:?} for {launches} launches of at least {delay:?}",
        gpu.kernels
    );
    let feed = gpu
        .decoders
        .engine_feed
        .expect("the feeding thread's times");
    // The feeding thread submits every image the engines decode, in groups of at most a
    // batch's worth (`engine_chunk`), so that no decode area is larger.
    let engines = gpu.sources.get("device-decoder:hardware").copied();
    assert_eq!(Some(feed.engine_images), engines, "{feed:?}");
    assert!(
        feed.calls * 4 >= feed.engine_images,
        "{feed:?}: a group of more than 4"
    );
}

/// The workers copy what the engines decode into pinned slabs, and the decoder reads it
/// there: none is copied on the feeding thread, and the pixels are the CPU path's (over
/// three epochs: slabs reused once their images are decoded, none made after the warm-up).
#[test]
fn the_engines_read_the_workers_pinned_copies() {
    let (_d, data) = builtin();
    let Some(dev) = emu() else { return };
    let mut spec = shipped("resnet50-train.toml", &data);
    spec.settings.batch = 4;
    spec.settings.epochs = Some(3);
    let cpu = run(&on(&spec, DeviceChoice::Cpu));
    let mut p = emu_pipeline(&spec, dev).unwrap();
    let got: Vec<_> = p.by_ref().collect();
    assert_same_runs(&cpu, &got, "decoded from pinned copies");
    let gpu = p.stats().gpu.expect("GPU figures");
    let engines = gpu
        .sources
        .get("device-decoder:hardware")
        .copied()
        .unwrap_or(0);
    let feed = gpu
        .decoders
        .engine_feed
        .expect("the feeding thread's times");
    assert!(engines > 0, "{:?}", gpu.sources);
    assert_eq!(
        feed.pinned_images, engines,
        "every image the engines took: {feed:?}"
    );
    let after = gpu.after_warm_up.expect("three epochs end the warm-up");
    assert_eq!(
        after.pinned_allocs, 0,
        "no slab made after the warm-up: {after:?}"
    );
}

#[test]
fn padded_and_exact_rois_both_give_the_cpu_batches() {
    let Some(padded) = emu() else { return };
    let exact = EmuDevice::new(EmuOptions {
        exact_roi: true,
        ..EmuOptions::default()
    })
    .unwrap();
    // A ROI of subsampled chroma is decoded with an MCU around it either way (the chroma
    // rebuild reads the neighbouring blocks); of full chroma, only where the decoder pads
    // ROIs, and the region is read from inside that.
    let jpeg = crate::testutil::encode_jpeg_opts(
        &crate::testutil::pattern_rgb(64, 96),
        64,
        96,
        3,
        &crate::testutil::JpegOpts {
            quality: 90,
            sub: crate::testutil::Sub::S420,
            progressive: false,
            exif_tiff: None,
        },
    );
    let header = JpegHeader::read(&jpeg, &Limits::default()).unwrap();
    let roi = Some(Roi {
        x: 40,
        y: 24,
        width: 20,
        height: 10,
    });
    let p = padded.region_to_decode(&header, roi, true).unwrap();
    assert_eq!((p.width, p.height), (20 + 2 * 16, 10 + 2 * 16), "{p:?}");
    assert_eq!((p.window.x, p.window.y), (16, 16), "{p:?}");
    let e = exact.region_to_decode(&header, roi, true).unwrap();
    assert_eq!(e, p, "subsampled chroma: the margin either way");
    // Repeated chroma kept as it is (`upsampling = "nearest"`) needs no margin.
    let e = exact.region_to_decode(&header, roi, false).unwrap();
    assert_eq!((e.width, e.height, e.window.x, e.window.y), (20, 10, 0, 0));
    let full = crate::testutil::encode_jpeg(
        &crate::testutil::pattern_rgb(64, 96),
        64,
        96,
        3,
        90,
        crate::testutil::Sub::S444,
    );
    let full = JpegHeader::read(&full, &Limits::default()).unwrap();
    let p = padded.region_to_decode(&full, roi, true).unwrap();
    assert_eq!((p.width, p.height), (20 + 2 * 8, 10 + 2 * 8), "{p:?}");
    let e = exact.region_to_decode(&full, roi, true).unwrap();
    assert_eq!((e.width, e.height, e.window.x, e.window.y), (20, 10, 0, 0));
    // Every orientation, random crops: the same batches as the CPU either way.
    let d = corpus();
    let spec = corpus_spec(d.path(), 5);
    let cpu = run(&on(&spec, DeviceChoice::Cpu));
    for (dev, what) in [(padded, "padded ROIs"), (exact, "exact ROIs")] {
        let mut p = emu_pipeline(&spec, dev).unwrap();
        let got: Vec<_> = p.by_ref().collect();
        assert_same_runs(&cpu, &got, what);
        // Decoded by the device as planned, none sent back to the CPU.
        let gpu = p.stats().gpu.expect("GPU figures");
        assert!(
            gpu.sources.get("device-decoder:hardware") > Some(&0),
            "{what}"
        );
        assert_eq!(gpu.sources.get("device-decoder-refused"), None, "{what}");
    }
}

/// Refusals the emulated device is told to make (`refuse`, five or three of them) cost
/// nothing but the CPU decoding those images: the same batches as the CPU path, each refusal
/// counted under `source`, for both shipped pipelines.
fn refusals_give_the_cpu_batches(refuse: impl Fn(&EmuDevice) -> u64, source: &str) {
    let (_d, data) = builtin();
    let Some(dev) = emu() else { return };
    for name in ["resnet50-train.toml", "resnet50-eval.toml"] {
        let mut spec = shipped(name, &data);
        spec.settings.batch = 8;
        spec.settings.epochs = Some(1);
        let cpu = run(&on(&spec, DeviceChoice::Cpu));
        let n = refuse(&dev);
        let mut p = emu_pipeline(&spec, dev.clone()).unwrap();
        let got: Vec<_> = p.by_ref().collect();
        assert_same_runs(&cpu, &got, name);
        let gpu = p.stats().gpu.expect("GPU figures");
        assert_eq!(
            gpu.sources.get(source).copied(),
            Some(n),
            "{name}: {:?}",
            gpu.sources
        );
    }
}

/// Images the decoder refuses when their batch is submitted (the first five it is given) are
/// decoded on the CPU then.
#[test]
fn images_the_decoder_refuses_are_decoded_on_the_cpu() {
    refusals_give_the_cpu_batches(
        |dev| {
            dev.fail_decodes(5);
            5
        },
        "device-decoder-refused",
    );
}

/// What the JPEG engines refuse at the support check (asked on the prep workers) the worker
/// decodes then and there.
#[test]
fn images_the_engines_refuse_at_the_check_are_decoded_on_the_workers() {
    refusals_give_the_cpu_batches(
        |dev| {
            dev.refuse_engine_checks(3);
            3
        },
        "cpu-decoder:refused-by-jpeg-engines",
    );
}

/// The real device opened with chroma repeated, as `upsampling = "nearest"` opens it (our CPU
/// decoder's pixels), or `None` after a visible skip: no GPU, or `lacks` says what the device
/// lacks for the test.
fn nearest_real_device(
    lacks: impl Fn(&crate::cuda::gpu_device::DeviceDescription) -> Option<String>,
) -> Option<std::sync::Arc<crate::cuda::RealDevice>> {
    crate::cuda::test_support::real_device()?;
    let nearest = crate::decode::Upsampling::Nearest;
    let dev =
        crate::cuda::RealDevice::with_upsampling(0, 8, nearest, &crate::cuda::Kernel::ALL).unwrap();
    let described = dev.describe();
    eprintln!("GPU stage decoder: {}", described.decoder);
    if let Some(why) = lacks(&described) {
        crate::testutil::skip::skip(crate::testutil::skip::Need::Gpu, why);
        return None;
    }
    Some(dev)
}

/// What a device without nvJPEG lacks (for [`nearest_real_device`]).
fn without_nvjpeg(d: &crate::cuda::gpu_device::DeviceDescription) -> Option<String> {
    d.decoder
        .starts_with("no nvJPEG")
        .then(|| format!("no nvJPEG ({})", d.decoder))
}

/// The real device's decode (a GPU machine: `scripts/gpu-check.sh`): nvJPEG through the seam
/// as the stage drives it — the header read once and passed in, the plan's output (padded
/// ROIs before nvJPEG 13.3), submit on the decode stream, then wait for its event — gives
/// each region within 40 dB of our CPU decoder's crop; a JPEG nvJPEG doesn't take comes back
/// at submission. Skips visibly without a GPU (fails under `STOKEHOLD_REQUIRE_GPU=1`) or
/// without nvJPEG.
#[test]
fn gpu_the_real_device_decodes_through_the_seam() {
    use crate::cuda::gpu_device::{streams, DecodeJob};
    use crate::decode::{decode_window, ColorMode, DecodeOptions};
    use crate::nvjpeg::{DeviceOutput, FallbackReason, NvjpegError};
    use crate::pipeline::compare::psnr;
    use crate::testutil::{encode_jpeg, encode_rgb_stored_jpeg, pattern_rgb, RgbMark, Sub};

    let Some(dev) = nearest_real_device(without_nvjpeg) else {
        return;
    };
    let mut files = Vec::new();
    for (k, (h, w, sub)) in [
        (64, 96, Sub::S420),
        (123, 77, Sub::S444),
        (200, 300, Sub::S422),
        (90, 90, Sub::S420),
    ]
    .into_iter()
    .enumerate()
    {
        let jpeg = encode_jpeg(&pattern_rgb(h, w), h, w, 3, 90, sub);
        // Odd regions away from the corners (an MCU of padding fits), and one whole image.
        let roi = (k != 3).then(|| Roi {
            x: w / 3 + 1,
            y: h / 4 + 1,
            width: w / 2 - 1,
            height: h / 2 - 1,
        });
        files.push((jpeg, roi));
    }
    let rgb = encode_rgb_stored_jpeg(&pattern_rgb(40, 40), 40, 40, RgbMark::Adobe);
    files.push((rgb, None));
    let headers: Vec<JpegHeader> = files
        .iter()
        .map(|(b, _)| JpegHeader::read(b, &Limits::default()).unwrap())
        .collect();
    let plans: Vec<_> = files
        .iter()
        .zip(&headers)
        .map(|((_, roi), h)| dev.region_to_decode(h, *roi, false).unwrap())
        .collect();
    let outs: Vec<u64> = plans
        .iter()
        .map(|p| dev.alloc(p.width * p.height * 3).unwrap())
        .collect();
    let jobs: Vec<DecodeJob<'_>> = files
        .iter()
        .zip(&headers)
        .zip(plans.iter().zip(&outs))
        .map(|(((bytes, roi), header), (p, &ptr))| DecodeJob {
            engines_checked: false,
            pinned: false,
            bytes,
            header,
            roi: *roi,
            rebuilt: false,
            out: DeviceOutput {
                ptr,
                pitch: p.width * 3,
                len: p.width * p.height * 3,
            },
        })
        .collect();
    // SAFETY: each output is a live allocation sized by its plan, and each job's bytes
    // stay as they are, until the event waited for below.
    let results = unsafe { dev.submit_decode(streams::DECODE, &jobs).unwrap() };
    dev.synchronize(&dev.record(streams::DECODE, false).unwrap())
        .unwrap();
    // The engines repeat chroma over each block, as the CPU decoder does with `Nearest`.
    let opts = DecodeOptions {
        color: ColorMode::Rgb,
        apply_exif: false,
        upsampling: crate::decode::Upsampling::Nearest,
        ..DecodeOptions::default()
    };
    for (k, r) in results.iter().enumerate().take(4) {
        let info = r.as_ref().unwrap_or_else(|e| panic!("image {k}: {e}"));
        let p = &plans[k];
        assert_eq!(
            (info.width, info.height, info.window),
            (p.width, p.height, p.window)
        );
        let mut px = vec![0u8; p.width * p.height * 3];
        // SAFETY: the output holds exactly these bytes; the decode has finished.
        unsafe { dev.copy_to_host(streams::DECODE, &mut px, outs[k]).unwrap() };
        let h = &headers[k];
        let want_rect = match files[k].1 {
            Some(r) => (r.y, r.x, r.height, r.width),
            None => (0, 0, h.height(), h.width()),
        };
        let want = decode_window(&files[k].0, &opts, want_rect).unwrap();
        let want = want.as_u8_hwc().unwrap();
        let (w0, row) = (p.window, 3 * p.window.width);
        let mut sum_sq = 0f64;
        for y in 0..p.window.height {
            let at = ((w0.y + y) * p.width + w0.x) * 3;
            for (a, b) in px[at..at + row].iter().zip(&want[y * row..(y + 1) * row]) {
                sum_sq += (f64::from(*a) - f64::from(*b)).powi(2);
            }
        }
        let db = psnr(sum_sq, (row * p.window.height) as u64, 255.0);
        eprintln!("GPU stage decode {k}: plan {p:?}: {db:.1} dB against the CPU's crop");
        assert!(db >= 40.0, "image {k}: {db:.1} dB");
    }
    assert!(
        matches!(
            &results[4],
            Err(NvjpegError::CpuFallback(FallbackReason::RgbStored))
        ),
        "{:?}",
        results[4]
    );
    for ptr in outs {
        // SAFETY: no work uses them any more (finished and copied back).
        unsafe { dev.free(ptr) };
    }
}

/// The JPEG engines and stream order on a real device (`docs/gpu.md`, "The JPEG engines and
/// stream order"): with about 20 ms of copies and then a memset of the output queued ahead
/// of it on its stream, the engines' decode is said to write when it is called, so the
/// memset lands after it; the test prints which order this nvJPEG kept (the fact the
/// emulated device's model and the decode areas' pool rest on). Then the guard's contract:
/// after the host has waited for the stream, a decode into the same output gives the
/// image (≥ 40 dB against our CPU decoder).
#[test]
fn gpu_the_jpeg_engines_write_when_called() {
    use crate::cuda::gpu_device::streams;
    use crate::decode::{ColorMode, DecodeOptions, ParsedImage};
    use crate::pipeline::compare::psnr;
    use crate::testutil::{encode_jpeg, pattern_rgb, whole_image_job, Sub};

    let nearest = crate::decode::Upsampling::Nearest;
    let Some(dev) = nearest_real_device(|d| {
        (!d.hardware_decoder).then(|| "no JPEG engines on this device".to_string())
    }) else {
        return;
    };
    let (h, w) = (256, 384);
    let jpeg = encode_jpeg(&pattern_rgb(h, w), h, w, 3, 90, Sub::S420);
    let header = JpegHeader::read(&jpeg, &Limits::default()).unwrap();
    let len = h * w * 3;
    let out = dev.alloc(len).unwrap();
    let job = whole_image_job((&jpeg, &header), out);
    let decode = || {
        // SAFETY: `out` holds the whole image; the bytes outlive the waits below.
        let r = unsafe { dev.submit_decode(streams::DECODE, &[job]).unwrap() };
        assert!(r[0].is_ok(), "{:?}", r[0]);
        dev.synchronize(&dev.record(streams::DECODE, false).unwrap())
            .unwrap();
        let mut px = vec![0u8; len];
        // SAFETY: `out` holds `len` bytes; the stream's work is done.
        unsafe { dev.copy_to_host(streams::DECODE, &mut px, out).unwrap() };
        px
    };
    // Slow work ahead on the decode stream: 64 copies of 256 MB (about 20 ms on an H100).
    let big = 256 << 20;
    let (a, b) = (dev.alloc(big).unwrap(), dev.alloc(big).unwrap());
    // SAFETY: live allocations of `big` and `len` bytes, waited for before they are freed.
    unsafe {
        for _ in 0..64 {
            dev.copy_on_device(streams::DECODE, b, a, big).unwrap();
        }
        dev.zero(streams::DECODE, out, len).unwrap();
    }
    let raced = decode();
    let zeros = raced.iter().filter(|&&v| v == 0).count();
    let opts = DecodeOptions {
        color: ColorMode::Rgb,
        apply_exif: false,
        upsampling: nearest,
        ..DecodeOptions::default()
    };
    let want = ParsedImage::parse(&jpeg, &opts).unwrap().decode().unwrap();
    let want = want.as_u8_hwc().unwrap();
    let db = |px: &[u8]| {
        let sum_sq: f64 = px
            .iter()
            .zip(want)
            .map(|(a, b)| (f64::from(*a) - f64::from(*b)).powi(2))
            .sum();
        psnr(sum_sq, len as u64, 255.0)
    };
    eprintln!(
        "JPEG engines and stream order: {}: {zeros} of {len} bytes zero, {:.1} dB against the CPU",
        if zeros == len {
            "the memset queued ahead ran after the engines wrote (they wrote when called)"
        } else if db(&raced) >= 40.0 {
            "the decode ran after the work queued ahead of it (stream order kept)"
        } else {
            "the engines wrote while the work queued ahead ran (not in stream order)"
        },
        db(&raced)
    );
    // SAFETY: allocated above; the stream's work is done.
    unsafe {
        dev.free(a);
        dev.free(b);
    }
    // After a host wait (as the decode areas' pool waits): the image.
    let after_wait = decode();
    let d = db(&after_wait);
    eprintln!("JPEG engines after a host wait: {d:.1} dB against the CPU");
    assert!(d >= 40.0, "{d:.1} dB");
    // SAFETY: allocated above; the stream's work is done.
    unsafe { dev.free(out) };
}

/// A group whose decode area is larger than the areas the pool settled on — here every
/// photo, after the warm-up, replaced by one twice its area — is decoded in parts, each into
/// a settled area, and its chroma rebuilt in parts: nothing is allocated, and the batches
/// are the CPU's on the new photos.
#[test]
fn a_group_past_the_settled_area_is_decoded_in_parts_without_allocating() {
    use crate::testutil::{encode_jpeg, pattern_rgb, Sub};
    let Some(dev) = emu() else { return };
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("photos");
    std::fs::create_dir(&data).unwrap();
    let write_all = |h: usize, w: usize| {
        let jpeg = encode_jpeg(&pattern_rgb(h, w), h, w, 3, 90, Sub::S422);
        for k in 0..48 {
            let tmp = d.path().join("next.jpg");
            std::fs::write(&tmp, &jpeg).unwrap();
            // Renamed into place: a worker reads the old photo or the new one, whole.
            std::fs::rename(&tmp, data.join(format!("{k:02}.jpg"))).unwrap();
        }
    };
    write_all(96, 128);
    let mut spec = shipped("resnet50-eval.toml", &data);
    spec.settings.batch = 16;
    spec.settings.epochs = Some(12);
    let last = spec.settings.epochs.unwrap() - 1;
    let mut p = emu_pipeline(&spec, dev).unwrap();
    let mut swapped_in = None;
    let mut got = Vec::new();
    while let Some(b) = p.next() {
        let b = b.unwrap();
        let epoch = b.epoch;
        if b.epoch == last {
            got.push(Ok(b));
        }
        if swapped_in.is_none() && p.stats().gpu.is_some_and(|g| g.after_warm_up.is_some()) {
            write_all(136, 180);
            swapped_in = Some(epoch);
        }
    }
    let swapped_in = swapped_in.expect("the warm-up ended");
    assert!(
        swapped_in + 2 < last,
        "swapped in epoch {swapped_in} of {last}"
    );
    let gpu = nothing_allocated_after_warm_up(&p, "larger photos after the warm-up");
    assert!(gpu.decode_groups_split > 0, "{gpu:?}");
    assert!(gpu.chroma_rebuilt_in_parts > 0, "{gpu:?}");
    // The CPU's last epoch on the new photos.
    let cpu: Vec<_> = run(&on(&spec, DeviceChoice::Cpu))
        .into_iter()
        .filter(|b| b.as_ref().map_or(true, |b| b.epoch == last))
        .collect();
    assert_same_runs(&cpu, &got, "groups decoded in parts");
}

/// Asks `dev` for its feeding times while a call decoding `copies` copies of `jpeg` holds its
/// decoder, and says whether they came before the call ended. The statistics read them on
/// the assembling thread after every batch: on the H200 (2026-11-27) that read waited for the
/// feeding thread's call to end, 7–9 ms a batch (a whole training step beside a training
/// loop), and the groups the assembler would have sent meanwhile left the engines idle
/// 16–38% of the time.
fn feed_times_during_a_call(dev: &dyn GpuDevice, jpeg: &[u8], copies: usize) -> bool {
    use crate::cuda::gpu_device::streams;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

    let header = JpegHeader::read(jpeg, &Limits::default()).unwrap();
    let len = header.width() * header.height() * 3;
    let out = dev.alloc(len * copies).unwrap();
    let jobs: Vec<_> = (0..copies)
        .map(|k| crate::testutil::whole_image_job((jpeg, &header), out + (k * len) as u64))
        .collect();
    let (started, ended) = (AtomicBool::new(false), AtomicBool::new(false));
    let answered = std::thread::scope(|s| {
        s.spawn(|| {
            started.store(true, SeqCst);
            // SAFETY: each job's output is its own part of `out`; the bytes and `out` outlive
            // the wait for the stream below.
            let r = unsafe { dev.submit_decode(streams::DECODE, &jobs) }.unwrap();
            ended.store(true, SeqCst);
            assert!(r.iter().all(Result::is_ok), "{:?}", r.first());
        });
        while !started.load(SeqCst) {
            std::thread::yield_now();
        }
        // Into the call (it takes the decoder first thing).
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(dev.feed_times().is_some());
        !ended.load(SeqCst)
    });
    dev.synchronize(&dev.record(streams::DECODE, false).unwrap())
        .unwrap();
    // SAFETY: the stream's work is done.
    unsafe { dev.free(out) };
    answered
}

/// The emulated device holds its decoder for a whole call, as the real one does; its
/// feeding times answer during a call of 300 ms (the timing model's).
#[test]
fn the_decoders_feeding_times_answer_during_its_call() {
    use crate::cuda::TimingModel;
    use crate::testutil::{encode_jpeg, pattern_rgb, Sub};

    if emu().is_none() {
        return;
    }
    let options = EmuOptions {
        model: Some(TimingModel {
            submit_us: 300_000.0,
            ..TimingModel::named("h100").unwrap()
        }),
        ..EmuOptions::default()
    };
    let dev = EmuDevice::new(options).unwrap();
    let jpeg = encode_jpeg(&pattern_rgb(32, 48), 32, 48, 3, 90, Sub::S420);
    assert!(
        feed_times_during_a_call(dev.as_ref(), &jpeg, 1),
        "the feeding times waited for the call"
    );
}

/// The real device's feeding times answer while nvJPEG's call decodes 512 megapixel photos
/// (tens of milliseconds on an H100 or H200) holding the decoder.
#[test]
fn gpu_the_decoders_feeding_times_answer_during_its_call() {
    use crate::testutil::{encode_jpeg, pattern_rgb, Sub};

    let Some(dev) = nearest_real_device(without_nvjpeg) else {
        return;
    };
    let jpeg = encode_jpeg(&pattern_rgb(1024, 1024), 1024, 1024, 3, 90, Sub::S420);
    assert!(
        feed_times_during_a_call(dev.as_ref(), &jpeg, 512),
        "the feeding times waited for nvJPEG's call"
    );
}
