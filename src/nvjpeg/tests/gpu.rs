//! Decoding on a GPU against the CPU decoder (skipped without a driver, GPU and nvJPEG).

use super::*;
use crate::pipeline::compare::psnr;

/// A driver with a current context and a decoder bound to it, or `None` (skip), or a
/// failure when `STOKEHOLD_REQUIRE_GPU=1` (a GPU machine: nothing may skip there).
fn gpu_setup(max_batch: usize) -> Option<(Cuda, GpuJpegDecoder)> {
    gpu_setup_with(DecoderConfig {
        max_batch,
        ..DecoderConfig::default()
    })
}

/// [`gpu_setup`] with a decoder of `config`.
fn gpu_setup_with(config: DecoderConfig) -> Option<(Cuda, GpuJpegDecoder)> {
    let skip = |why: String| {
        if std::env::var("STOKEHOLD_REQUIRE_GPU").as_deref() == Ok("1") {
            panic!("STOKEHOLD_REQUIRE_GPU=1 but {why}");
        }
        crate::testutil::skip::skip(
            crate::testutil::skip::Need::Gpu,
            format!("no nvJPEG / no GPU ({why})"),
        );
        None
    };
    let Some(cuda) = Cuda::open() else {
        return skip("no CUDA driver or device".into());
    };
    let ctx = match CudaGpuContext::new(0) {
        Ok(c) => Arc::new(c),
        Err(e) => return skip(e.to_string()),
    };
    match GpuJpegDecoder::probe_with(ctx, config) {
        Ok(d) => {
            eprintln!("{}", d.describe());
            Some((cuda, d))
        }
        Err(e) => skip(e.to_string()),
    }
}

/// Host copy of a GPU-decoded image: (pixels, width, height).
type Decoded = (Vec<u8>, usize, usize);

/// Decodes `images` on the GPU (as stored; `rois[i]` in stored coordinates) and returns the
/// host copies of the regions asked for (the window of a padded ROI decode, as the kernel
/// reads it). Images the host sends to the CPU are the fallback error, as a string.
fn gpu_decode(
    cuda: &Cuda,
    dec: &mut GpuJpegDecoder,
    images: &[&[u8]],
    rois: &[Option<Roi>],
) -> Vec<Result<Decoded, String>> {
    let limits = Limits::default();
    let mut results: Vec<Option<Result<Decoded, String>>> = vec![None; images.len()];
    let mut headers = Vec::new();
    for (i, b) in images.iter().enumerate() {
        match dec.route(b) {
            Route::Cpu(reason) => {
                results[i] = Some(Err(NvjpegError::CpuFallback(reason).to_string()))
            }
            Route::Gpu(..) => match crate::decode::JpegHeader::read(b, &limits) {
                Ok(h) => headers.push((i, h)),
                Err(e) => results[i] = Some(Err(e.to_string())),
            },
        }
    }
    let mut bufs = Vec::new();
    let mut encoded = Vec::new();
    for (i, h) in &headers {
        let region = match dec.region_to_decode(h, rois[*i], false) {
            Ok(p) => p,
            Err(e) => {
                results[*i] = Some(Err(e.to_string()));
                continue;
            }
        };
        let buf = cuda
            .alloc(region.width * region.height * 3)
            .expect("device memory");
        encoded.push((
            *i,
            EncodedImage {
                engines_checked: false,
                pinned: false,
                bytes: images[*i],
                header: h,
                roi: rois[*i],
                chroma_margin: false,
                output: DeviceOutput {
                    ptr: buf.ptr,
                    pitch: region.width * 3,
                    len: buf.len,
                },
            },
        ));
        bufs.push(buf);
    }
    let batch: Vec<EncodedImage<'_>> = encoded.iter().map(|(_, e)| *e).collect();
    // SAFETY: null stream = the legacy default stream of the current (primary) context, the
    // decoder's; the buffers are live device memory of that context, sized by the region, and
    // `decode_batch` waits for the batch before they are read or dropped.
    let res =
        unsafe { dec.decode_batch(std::ptr::null_mut(), &batch) }.expect("not a lost context");
    cuda.sync().expect("synchronise");
    for (((i, _), buf), r) in encoded.iter().zip(&bufs).zip(res) {
        results[*i] = Some(match r {
            Ok(info) => cuda.download(buf).map(|px| {
                let w = info.window;
                (crop(&px, info.width, 3, w), w.width, w.height)
            }),
            Err(e) => Err(e.to_string()),
        });
    }
    results
        .into_iter()
        .map(|r| r.expect("every image answered"))
        .collect()
}

fn imagenet_files() -> Option<Vec<PathBuf>> {
    let dir = crate::testutil::skip::shared_folder(&shared_data()?, "imagenet-400")?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    Some(files)
}

#[test]
fn gpu_decode_matches_cpu_on_imagenet_400() {
    // The GPU first: without one, the missing photos are not what keeps it from running.
    let Some((cuda, mut dec)) = gpu_setup(64) else {
        return;
    };
    let Some(files) = imagenet_files() else {
        return;
    };
    let opts = DecodeOptions {
        apply_exif: false,
        ..DecodeOptions::default()
    };
    let (mut sum_abs, mut sum_sq, mut n_px) = (0u64, 0u64, 0u64);
    let (mut on_gpu, mut on_cpu, mut worst) = (0usize, 0usize, (f64::INFINITY, PathBuf::new()));
    for chunk in files.chunks(64) {
        let bytes: Vec<Vec<u8>> = chunk.iter().map(|p| std::fs::read(p).unwrap()).collect();
        let refs: Vec<&[u8]> = bytes.iter().map(|b| b.as_slice()).collect();
        let rois = vec![None; refs.len()];
        let got = gpu_decode(&cuda, &mut dec, &refs, &rois);
        for ((path, b), g) in chunk.iter().zip(&bytes).zip(got) {
            if let Route::Cpu(reason) = dec.route(b) {
                eprintln!("{}: CPU fallback ({reason})", path.display());
                on_cpu += 1;
                continue;
            }
            let (px, w, h) = g.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let reference = decode::decode(b, &opts).expect("CPU decode");
            assert_eq!(
                (reference.width, reference.height),
                (w, h),
                "{}",
                path.display()
            );
            let r = reference.as_u8_hwc().expect("u8 image");
            let (mut a, mut s) = (0u64, 0u64);
            for (&x, &y) in px.iter().zip(r) {
                let d = u64::from(x.abs_diff(y));
                a += d;
                s += d * d;
            }
            let p = psnr(s as f64, px.len() as u64, 255.0);
            if p < worst.0 {
                worst = (p, path.clone());
            }
            sum_abs += a;
            sum_sq += s;
            n_px += px.len() as u64;
            on_gpu += 1;
        }
    }
    let mad = sum_abs as f64 / n_px.max(1) as f64;
    let total = psnr(sum_sq as f64, n_px, 255.0);
    eprintln!(
        "nvJPEG vs CPU on imagenet-400: {on_gpu} on GPU, {on_cpu} CPU fallback; \
         mean abs diff {mad:.4}, PSNR {total:.2} dB, worst {:.2} dB ({})",
        worst.0,
        worst.1.display()
    );
    assert!(on_gpu > 0);
    assert!(total >= 40.0, "PSNR {total:.2} dB < 40 dB");
}

#[test]
fn gpu_bad_image_in_a_batch_fails_alone() {
    let Some((cuda, mut dec)) = gpu_setup(8) else {
        return;
    };
    let (h, w) = (48, 64);
    let good = encode_jpeg(&pattern_rgb(h, w), h, w, 3, 90, Sub::S420);
    let good_prog = fixture(Sub::S444, true);
    let truncated = good[..good.len() / 2].to_vec();
    // Valid markers, scrambled entropy-coded data: passes the host checks.
    let mut scrambled = good.clone();
    let sos = scrambled
        .windows(2)
        .rposition(|w| w == [0xFF, 0xDA])
        .expect("SOS");
    let end = scrambled.len() - 2;
    for b in &mut scrambled[sos + 20..end] {
        if *b != 0xFF && *b != 0x00 {
            *b = b.rotate_left(3) ^ 0x21;
            if *b == 0xFF {
                *b = 0xFE;
            }
        }
    }
    let images: Vec<&[u8]> = vec![&good, &truncated, &scrambled, &good_prog, b"not a jpeg"];
    let got = gpu_decode(&cuda, &mut dec, &images, &[None; 5]);
    let opts = DecodeOptions {
        apply_exif: false,
        ..DecodeOptions::default()
    };
    for i in [0, 3] {
        let (px, _, _) = got[i].as_ref().expect("good image decodes");
        let reference = decode::decode(images[i], &opts).unwrap();
        let r = reference.as_u8_hwc().unwrap();
        let s: u64 = px
            .iter()
            .zip(r)
            .map(|(&a, &b)| u64::from(a.abs_diff(b)).pow(2))
            .sum();
        assert!(psnr(s as f64, px.len() as u64, 255.0) >= 35.0, "image {i}");
    }
    assert!(got[1]
        .as_ref()
        .is_err_and(|e| e.contains("not decoded on the GPU")));
    assert!(got[4].as_ref().is_err_and(|e| e.contains("not a JPEG")));
    eprintln!(
        "scrambled entropy data: {:?}",
        got[2].as_ref().map(|(_, w, h)| (w, h))
    );
}

/// Regions of interest against the CPU decoder's crop of the same upsampling, chroma
/// interpolated and repeated (`upsampling = "nearest"`); ROIs padded on nvJPEG before 13.3.
#[test]
fn gpu_roi_decode_matches_cpu_crop() {
    for interpolate in [true, false] {
        let config = DecoderConfig {
            max_batch: 4,
            interpolate,
            ..DecoderConfig::default()
        };
        let Some((cuda, mut dec)) = gpu_setup_with(config) else {
            return;
        };
        eprintln!(
            "interpolated chroma: {}",
            dec.batch_decoder().interpolated()
        );
        roi_decodes_match_cpu_crops(&cuda, &mut dec);
    }
}

fn roi_decodes_match_cpu_crops(cuda: &Cuda, dec: &mut GpuJpegDecoder) {
    let (h, w) = (96, 128);
    let jpegs = [
        encode_jpeg(&pattern_rgb(h, w), h, w, 3, 95, Sub::S444),
        fixture(Sub::S420, true),
    ];
    let upsampling = if dec.batch_decoder().interpolated() {
        crate::decode::Upsampling::Fancy
    } else {
        crate::decode::Upsampling::Nearest
    };
    let opts = DecodeOptions {
        apply_exif: false,
        upsampling,
        ..DecodeOptions::default()
    };
    for j in &jpegs {
        let full = decode::decode(j, &opts).unwrap();
        let (fw, fh) = (full.width, full.height);
        let roi = Roi {
            x: fw / 4,
            y: fh / 3,
            width: fw / 2,
            height: fh / 2,
        };
        let got = gpu_decode(cuda, dec, &[j], &[Some(roi)]);
        let (px, gw, gh) = got[0].as_ref().expect("ROI decode");
        assert_eq!((*gw, *gh), (roi.width, roi.height));
        let want = crop(full.as_u8_hwc().unwrap(), fw, 3, roi);
        let s: u64 = px
            .iter()
            .zip(&want)
            .map(|(&a, &b)| u64::from(a.abs_diff(b)).pow(2))
            .sum();
        let p = psnr(s as f64, px.len() as u64, 255.0);
        eprintln!("ROI {roi:?} of {fw}x{fh}: PSNR {p:.2} dB");
        assert!(p >= 35.0, "ROI PSNR {p:.2}");
    }
}

/// The engines' support checks, asked from worker threads at once as the prep workers ask
/// them: a baseline 4:2:0 photo is the engines', whole and by region; what they say of a
/// progressive one is printed (routed to the CPU by its header before anyone asks).
#[test]
fn gpu_the_engines_support_checks_answer_on_worker_threads() {
    let Some((_cuda, mut dec)) = gpu_setup(8) else {
        return;
    };
    let Some(checks) = dec.batch_decoder().support_checks() else {
        assert!(
            std::env::var("STOKEHOLD_REQUIRE_GPU").as_deref() != Ok("1"),
            "no JPEG engines on a GPU machine that must have them"
        );
        eprintln!("skipped: this GPU has no JPEG engines");
        return;
    };
    let (h, w) = (96, 128);
    let baseline = encode_jpeg(&pattern_rgb(h, w), h, w, 3, 90, Sub::S420);
    let progressive = fixture(Sub::S420, true);
    let roi = Some(Roi {
        x: 16,
        y: 16,
        width: 64,
        height: 48,
    });
    let answers: Vec<(bool, bool, bool)> = std::thread::scope(|s| {
        let asks: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    (
                        checks.accepts(&baseline, None).expect("an answer"),
                        checks.accepts(&baseline, roi).expect("an answer"),
                        checks.accepts(&progressive, None).unwrap_or(false),
                    )
                })
            })
            .collect();
        asks.into_iter().map(|a| a.join().unwrap()).collect()
    });
    eprintln!("answers (whole, region, progressive) per thread: {answers:?}");
    assert!(answers.iter().all(|&(whole, region, _)| whole && region));
}
