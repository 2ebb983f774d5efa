//! nvJPEG layer tests. Host-only ones (loader errors, status names, the fallback
//! classifier, the ROI/orientation mapping) run everywhere; library tests run when
//! `STOKEHOLD_NVJPEG` points at a libnvjpeg; GPU tests print "skipped: no nvJPEG / no GPU"
//! and return when there is no driver, GPU or library.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::fallback::{classify, facts, FallbackReason, GpuRoute, Route, Subsampling};
use super::result::{check, status_name, Nvjpeg, NvjpegError};
use super::safe::{BackendPreference, BatchDecoder, DeviceOutput, Handle, Roi};
use super::testcuda::Cuda;
use super::*;
use crate::decode::{self, exif, DecodeError, DecodeOptions, Limits};
use crate::testutil::{
    encode_jpeg, encode_jpeg_opts, exif_orientation_tiff, pattern_rgb, shared_data, JpegOpts, Sub,
};

// ---------------------------------------------------------------- loading, status codes

#[test]
fn bindgen_loader_on_a_missing_library_is_an_error() {
    // SAFETY: the file does not exist, so nothing is loaded.
    let r = unsafe { sys::NvjpegLib::new("libnvjpeg-stokehold-missing.so.99") };
    assert!(r.is_err());
}

#[test]
fn loader_lists_every_candidate_tried() {
    let cands = [
        PathBuf::from("libnvjpeg-stokehold-missing.so.99"),
        PathBuf::from("/nonexistent/dir/libnvjpeg.so.13"),
    ];
    match Nvjpeg::load_from(&cands) {
        Err(NvjpegError::LibraryNotFound { name, tried }) => {
            assert!(name.contains("nvJPEG"));
            assert_eq!(tried.len(), 2);
            assert_eq!(tried[0], "libnvjpeg-stokehold-missing.so.99");
            assert!(
                tried[1].starts_with("/nonexistent/dir/libnvjpeg.so.13 ("),
                "{tried:?}"
            );
            let e: crate::Error = NvjpegError::LibraryNotFound { name, tried }.into();
            assert!(matches!(e, crate::Error::LibraryNotFound { .. }));
            assert!(e
                .to_string()
                .contains("not found (tried: libnvjpeg-stokehold-missing"));
        }
        other => panic!("expected LibraryNotFound, got {other:?}"),
    }
}

#[test]
fn default_candidates_start_with_the_sonames() {
    let c = result::candidates();
    let names: Vec<String> = c.iter().map(|p| p.display().to_string()).collect();
    let start = usize::from(std::env::var_os("STOKEHOLD_NVJPEG").is_some_and(|v| !v.is_empty()));
    assert_eq!(
        &names[start..start + 3],
        &["libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so"]
    );
}

#[test]
fn probe_without_a_library_is_an_error_not_a_panic() {
    if Nvjpeg::load().is_ok() {
        eprintln!("skipped: an nvJPEG library is loadable here");
        return;
    }
    match GpuJpegDecoder::probe() {
        Err(crate::Error::LibraryNotFound { tried, .. }) => assert!(tried.len() >= 3),
        other => panic!("expected LibraryNotFound, got {other:?}"),
    }
}

#[test]
fn status_codes_are_named() {
    assert_eq!(status_name(0), "NVJPEG_STATUS_SUCCESS");
    assert_eq!(status_name(3), "NVJPEG_STATUS_BAD_JPEG");
    assert_eq!(status_name(4), "NVJPEG_STATUS_JPEG_NOT_SUPPORTED");
    assert_eq!(status_name(7), "NVJPEG_STATUS_ARCH_MISMATCH");
    assert_eq!(status_name(9), "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED");
    assert_eq!(status_name(10), "NVJPEG_STATUS_INCOMPLETE_BITSTREAM");
    assert_eq!(status_name(11), "NVJPEG_STATUS_UNKNOWN");
    assert_eq!(status_name(u32::MAX), "NVJPEG_STATUS_UNKNOWN");
    assert!(check("nvjpegDecode", sys::NVJPEG_STATUS_SUCCESS).is_ok());
    let e = check("nvjpegDecode", sys::NVJPEG_STATUS_BAD_JPEG).unwrap_err();
    assert_eq!(e.status(), Some(3));
    assert_eq!(
        e.to_string(),
        "nvjpegDecode failed: NVJPEG_STATUS_BAD_JPEG (3)"
    );
    let ce: crate::Error = e.into();
    assert_eq!(
        ce.to_string(),
        "nvJPEG: nvjpegDecode failed: NVJPEG_STATUS_BAD_JPEG (3)"
    );
}

/// The library named by `STOKEHOLD_NVJPEG`, or `None` (skip).
fn env_library() -> Option<Nvjpeg> {
    let Some(p) = std::env::var_os("STOKEHOLD_NVJPEG").filter(|v| !v.is_empty()) else {
        eprintln!("skipped: STOKEHOLD_NVJPEG not set");
        return None;
    };
    Some(Nvjpeg::load_from(&[PathBuf::from(p)]).expect("STOKEHOLD_NVJPEG must load"))
}

#[test]
fn library_from_env_loads_with_every_symbol() {
    let Some(lib) = env_library() else { return };
    assert_eq!(lib.missing_symbols(), Vec::<&str>::new());
    let (major, minor, patch) = lib.version().expect("nvjpegGetProperty needs no GPU");
    eprintln!("nvJPEG {major}.{minor}.{patch} from {}", lib.path());
    assert!(major >= 12, "major version {major}");
    assert!(minor >= 0 && patch >= 0);
}

#[test]
fn handle_without_a_gpu_is_a_named_error() {
    let Some(lib) = env_library() else { return };
    if Cuda::open().is_some() {
        eprintln!("skipped: a GPU is present (this checks the no-GPU error)");
        return;
    }
    let lib = Arc::new(lib);
    for backend in [sys::NVJPEG_BACKEND_DEFAULT, sys::NVJPEG_BACKEND_HARDWARE] {
        match Handle::new(lib.clone(), backend) {
            Err(e @ NvjpegError::Status { .. }) => {
                eprintln!("backend {backend}: {e}");
                assert!(e
                    .to_string()
                    .contains("nvjpegCreateEx failed: NVJPEG_STATUS_"));
            }
            other => panic!("expected a status error without a GPU, got {other:?}"),
        }
    }
    match BatchDecoder::new(lib, BackendPreference::Auto, 8) {
        Err(NvjpegError::Status { call, .. }) => assert_eq!(call, "nvjpegCreateEx"),
        other => panic!("expected a status error without a GPU, got {other:?}"),
    }
    // The executor's entry point: the library loads (from $STOKEHOLD_NVJPEG), the GPU is
    // missing, and that is an error to fall back on.
    match GpuJpegDecoder::probe() {
        Err(crate::Error::Nvjpeg(m)) => assert!(m.contains("NVJPEG_STATUS_"), "{m}"),
        other => panic!("expected Error::Nvjpeg without a GPU, got {other:?}"),
    }
}

// ---------------------------------------------------------------- fallback classifier

fn limits() -> Limits {
    Limits::default()
}

fn gpu(route: Route) -> (GpuRoute, super::fallback::JpegFacts) {
    match route {
        Route::Gpu(r, f) => (r, f),
        Route::Cpu(reason) => panic!("expected a GPU route, got CPU: {reason}"),
    }
}

fn cpu(route: Route) -> FallbackReason {
    match route {
        Route::Cpu(r) => r,
        Route::Gpu(r, f) => panic!("expected CPU, got {r:?} {f:?}"),
    }
}

fn fixture(sub: Sub, progressive: bool) -> Vec<u8> {
    let (h, w) = (37, 53);
    encode_jpeg_opts(
        &pattern_rgb(h, w),
        h,
        w,
        3,
        &JpegOpts {
            quality: 90,
            sub,
            progressive,
            exif_tiff: None,
        },
    )
}

#[test]
fn baseline_fixtures_go_to_the_engines_when_present() {
    for (sub, css) in [
        (Sub::S444, Subsampling::S444),
        (Sub::S422, Subsampling::S422),
        (Sub::S420, Subsampling::S420),
        (Sub::S440, Subsampling::S440),
    ] {
        let j = fixture(sub, false);
        let (r, f) = gpu(classify(&j, &limits(), true));
        assert_eq!(r, GpuRoute::Hardware, "{sub:?}");
        assert_eq!(f.subsampling(), Some(css));
        assert_eq!((f.width, f.height, f.components), (53, 37, 3));
        assert_eq!((f.progressive, f.scans, f.orientation), (false, 1, 1));
        let (r, _) = gpu(classify(&j, &limits(), false));
        assert_eq!(r, GpuRoute::Hybrid, "no engines: CUDA decoders");
        assert_eq!(needs_cpu_fallback(&j, &limits()), None);
    }
}

#[test]
fn progressive_and_411_go_to_the_cuda_decoders() {
    let (r, f) = gpu(classify(&fixture(Sub::S420, true), &limits(), true));
    assert_eq!(r, GpuRoute::Hybrid);
    assert!(f.progressive && f.scans > 1);
    let (r, f) = gpu(classify(&fixture(Sub::S411, false), &limits(), true));
    assert_eq!(r, GpuRoute::Hybrid);
    assert_eq!(f.subsampling(), Some(Subsampling::S411));
}

#[test]
fn gray_and_exif_fixtures() {
    let (h, w) = (20, 30);
    let gray: Vec<u8> = pattern_rgb(h, w).chunks(3).map(|p| p[0]).collect();
    let j = encode_jpeg(&gray, h, w, 1, 90, Sub::S444);
    let (r, f) = gpu(classify(&j, &limits(), true));
    assert_eq!(r, GpuRoute::Hardware);
    assert_eq!(f.subsampling(), Some(Subsampling::Gray));
    for o in 1..=8u16 {
        let j = encode_jpeg_opts(
            &pattern_rgb(h, w),
            h,
            w,
            3,
            &JpegOpts {
                quality: 90,
                sub: Sub::S420,
                progressive: false,
                exif_tiff: Some(exif_orientation_tiff(o, o % 2 == 0)),
            },
        );
        let (_, f) = gpu(classify(&j, &limits(), true));
        assert_eq!(f.orientation, o as u8);
        assert_eq!((f.width, f.height), (w, h), "stored size, not oriented");
    }
}

#[test]
fn not_jpeg_limits_and_odd_sampling_go_to_the_cpu() {
    assert_eq!(
        cpu(classify(b"\x89PNG\r\n\x1a\nrest", &limits(), true)),
        FallbackReason::NotJpeg
    );
    assert_eq!(cpu(classify(b"", &limits(), true)), FallbackReason::NotJpeg);
    let j = fixture(Sub::S444, false);
    let small = Limits {
        max_pixels: 100,
        ..Limits::default()
    };
    assert!(matches!(
        cpu(classify(&j, &small, true)),
        FallbackReason::Rejected(DecodeError::Limits(_))
    ));
    let tiny_file = Limits {
        max_file_bytes: 10,
        ..Limits::default()
    };
    assert!(matches!(
        cpu(classify(&j, &tiny_file, true)),
        FallbackReason::Rejected(DecodeError::Limits(_))
    ));
    // Chroma with larger factors than luma: valid JPEG, no nvJPEG subsampling name.
    let mut odd = j.clone();
    let sof = odd
        .windows(2)
        .position(|w| w == [0xFF, 0xC0])
        .expect("SOF0");
    // payload: len(2) P(1) H(2) W(2) Nf(1), then (id, hv, tq) × 3.
    let comp = sof + 2 + 2 + 6;
    odd[comp + 1] = 0x11; // Y 1x1
    odd[comp + 4] = 0x21; // Cb 2x1
    odd[comp + 7] = 0x11; // Cr 1x1
    assert!(matches!(
        cpu(classify(&odd, &limits(), true)),
        FallbackReason::Sampling(s) if s == "1x1,2x1,1x1"
    ));
}

#[test]
fn truncated_prefixes_never_reach_the_gpu_and_never_panic() {
    let j = fixture(Sub::S420, false);
    for cut in 0..j.len() - 1 {
        let r = classify(&j[..cut], &limits(), true);
        assert!(
            matches!(r, Route::Cpu(_)),
            "prefix of {cut} bytes went to the GPU"
        );
        let _ = facts(&j[..cut]); // bounds-checked: must not panic
    }
    // Bit flips: whatever the route, no panic, and a GPU route only with sane facts.
    for i in (0..j.len()).step_by(7) {
        let mut b = j.clone();
        b[i] ^= 0x5A;
        if let Route::Gpu(_, f) = classify(&b, &limits(), true) {
            assert!(f.width > 0 && f.height > 0 && f.scans >= 1);
        }
    }
}

fn edge(name: &str) -> Option<Vec<u8>> {
    let p = shared_data()?.join("jpeg-edge").join(name);
    Some(std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
}

#[test]
fn jpeg_edge_files_are_routed() {
    let Some(_) = shared_data() else { return };
    let l = limits();
    let route = |n: &str| classify(&edge(n).expect("shared data"), &l, true);
    // What the CPU path rejects goes back to it, with the CPU's own error.
    // Arithmetic coding: the CPU decodes it (libjpeg-turbo), nvJPEG can't.
    assert_eq!(cpu(route("testimgari.jpg")), FallbackReason::Arithmetic);
    for (name, want) in [("monkey12.jpg", "12-bit")] {
        match cpu(route(name)) {
            FallbackReason::Rejected(DecodeError::Unsupported(m)) => {
                assert!(m.contains(want), "{name}: {m}")
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    assert!(matches!(
        cpu(route("truncated_jpeg.jpg")),
        FallbackReason::Rejected(DecodeError::Corrupt(m)) if m.contains("truncated")
    ));
    // "CMYK" sample: stored as YCCK (Adobe transform 2, as Pillow also reports); decoded on
    // the CPU (nvJPEG's CMYK conversion is not the reference's).
    assert_eq!(
        cpu(route("pil_sample_cmyk.jpg")),
        FallbackReason::FourComponents { ycck: true }
    );
    // The rest are for the GPU.
    let (r, f) = gpu(route("testorig.jpg"));
    assert_eq!(
        (r, f.subsampling()),
        (GpuRoute::Hardware, Some(Subsampling::S420))
    );
    let (r, f) = gpu(route("app13-multiple.jpg"));
    assert!(f.progressive);
    assert_eq!(r, GpuRoute::Hybrid);
    let (_, f) = gpu(route("hopper_gray.jpg"));
    assert_eq!(f.subsampling(), Some(Subsampling::Gray));
    let (_, f) = gpu(route("hopper_orientation_6.jpg"));
    assert_eq!(f.orientation, 6);
    let (_, f) = gpu(route("iptc.jpg"));
    assert_eq!(f.subsampling(), Some(Subsampling::S422));
    let (_, f) = gpu(route("jfif_unit_cm.jpg"));
    assert_eq!((f.width, f.height, f.components), (1, 1, 1));
    gpu(route("junk_jpeg_header.jpg"));
    // Every file: the classifier agrees with the CPU decoder about what it rejects.
    for e in std::fs::read_dir(shared_data().unwrap().join("jpeg-edge")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "jpg") {
            let b = std::fs::read(&p).unwrap();
            let cpu_ok = decode::decode(&b, &DecodeOptions::default()).is_ok();
            if let Route::Cpu(FallbackReason::Rejected(_)) = classify(&b, &l, true) {
                assert!(
                    !cpu_ok,
                    "{}: rejected here, decoded by the CPU",
                    p.display()
                );
            } else {
                assert!(
                    cpu_ok,
                    "{}: CPU rejects it, classifier does not",
                    p.display()
                );
            }
        }
    }
}

// ---------------------------------------------------------------- orientation and ROI

fn crop(px: &[u8], w: usize, c: usize, r: Roi) -> Vec<u8> {
    let mut out = Vec::with_capacity(r.width * r.height * c);
    for y in r.y..r.y + r.height {
        out.extend_from_slice(&px[(y * w + r.x) * c..(y * w + r.x + r.width) * c]);
    }
    out
}

#[test]
fn stored_coords_inverts_apply_orientation() {
    let (h, w, c) = (5, 7, 1);
    let src: Vec<u8> = (0..(h * w) as u8).collect();
    for o in 1..=8u8 {
        let (out, oh, ow) = exif::apply_orientation(src.clone(), h, w, c, o);
        for y in 0..oh {
            for x in 0..ow {
                let (sy, sx) = stored_coords(o, y, x, h, w);
                assert_eq!(out[y * ow + x], src[sy * w + sx], "o={o} ({y},{x})");
            }
        }
    }
}

#[test]
fn roi_then_orient_equals_orient_then_crop() {
    let (h, w, c) = (9, 13, 3);
    let src = pattern_rgb(h, w);
    for o in 1..=8u8 {
        let (full, oh, ow) = exif::apply_orientation(src.clone(), h, w, c, o);
        for (x, y, ww, hh) in [
            (0, 0, 1, 1),
            (2, 1, 4, 3),
            (0, 0, ow, oh),
            (ow - 3, oh - 2, 3, 2),
        ] {
            let win = Roi {
                x,
                y,
                width: ww,
                height: hh,
            };
            let roi = roi_for_display_window(win, o, w, h).expect("window inside");
            let part = crop(&src, w, c, roi);
            let (oriented, ph, pw) = exif::apply_orientation(part, roi.height, roi.width, c, o);
            assert_eq!((ph, pw), (hh, ww), "o={o} {win:?}");
            assert_eq!(
                oriented,
                crop(&full, ow, c, win),
                "o={o} {win:?} -> {roi:?}"
            );
        }
        let outside = Roi {
            x: ow,
            y: 0,
            width: 1,
            height: 1,
        };
        assert_eq!(roi_for_display_window(outside, o, w, h), None);
        let empty = Roi {
            x: 0,
            y: 0,
            width: 0,
            height: 1,
        };
        assert_eq!(roi_for_display_window(empty, o, w, h), None);
    }
}

#[test]
fn output_and_roi_checks() {
    use super::safe::output_size;
    let out = |pitch: usize, len: usize| DeviceOutput {
        ptr: 0x1000,
        pitch,
        len,
    };
    let roi = |x, y, width, height| {
        Some(Roi {
            x,
            y,
            width,
            height,
        })
    };
    // Whole image: pitch ≥ 3w; the last row needs only 3w bytes.
    assert_eq!(output_size(10, 4, None, out(30, 120)).unwrap(), (10, 4));
    assert_eq!(
        output_size(10, 4, None, out(32, 32 * 3 + 30)).unwrap(),
        (10, 4)
    );
    assert!(output_size(10, 4, None, out(32, 32 * 3 + 29)).is_err());
    assert!(output_size(10, 4, None, out(29, 1000)).is_err());
    let null = DeviceOutput {
        ptr: 0,
        pitch: 30,
        len: 120,
    };
    assert!(output_size(10, 4, None, null).is_err());
    // ROI: inside, and the output sized for the ROI only.
    assert_eq!(
        output_size(10, 4, roi(2, 1, 5, 3), out(15, 45)).unwrap(),
        (5, 3)
    );
    assert_eq!(
        output_size(10, 4, roi(9, 3, 1, 1), out(3, 3)).unwrap(),
        (1, 1)
    );
    for bad in [
        roi(0, 0, 0, 1),
        roi(0, 0, 1, 0),
        roi(6, 0, 5, 1),
        roi(0, 2, 1, 3),
        roi(usize::MAX, 0, 2, 1),
    ] {
        let e = output_size(10, 4, bad, out(1000, 100_000)).unwrap_err();
        assert!(e.to_string().contains("not inside"), "{bad:?}: {e}");
    }
    // Overflowing sizes are errors, not panics.
    assert!(output_size(usize::MAX, 2, None, out(usize::MAX, usize::MAX)).is_err());
}

// ---------------------------------------------------------------- GPU tests

/// A driver with a current context and a decoder, or `None` (skip).
fn gpu_setup(max_batch: usize) -> Option<(Cuda, GpuJpegDecoder)> {
    let Some(cuda) = Cuda::open() else {
        eprintln!("skipped: no nvJPEG / no GPU (no CUDA driver or device)");
        return None;
    };
    match GpuJpegDecoder::probe_with(BackendPreference::Auto, max_batch) {
        Ok(d) => {
            eprintln!("{}", d.describe());
            Some((cuda, d))
        }
        Err(e) => {
            eprintln!("skipped: no nvJPEG / no GPU ({e})");
            None
        }
    }
}

/// Host copy of a GPU-decoded image: (pixels, width, height).
type Decoded = (Vec<u8>, usize, usize);

/// Decodes `images` on the GPU (whole images, as stored) and returns the host copies.
fn gpu_decode(
    cuda: &Cuda,
    dec: &mut GpuJpegDecoder,
    images: &[&[u8]],
    rois: &[Option<Roi>],
) -> Vec<Result<Decoded, String>> {
    let opts = DecodeOptions {
        apply_exif: false,
        ..DecodeOptions::default()
    };
    let mut bufs = Vec::new();
    let mut outs = Vec::new();
    for (b, roi) in images.iter().zip(rois) {
        let (w, h) = match (roi, decode::probe(b, &opts)) {
            (Some(r), _) => (r.width, r.height),
            (None, Ok(i)) => (i.width, i.height),
            (None, Err(_)) => (1, 1),
        };
        let buf = cuda.alloc(w * h * 3).expect("device memory");
        outs.push(DeviceOutput {
            ptr: buf.ptr,
            pitch: w * 3,
            len: buf.len,
        });
        bufs.push(buf);
    }
    // SAFETY: null stream = the legacy default stream of the current (primary) context;
    // the buffers are live device memory of that context, sized above, and the context is
    // synchronised before they are read or dropped.
    let res = unsafe { dec.decode_batch(std::ptr::null_mut(), images, &outs, rois) };
    cuda.sync().expect("synchronise");
    res.into_iter()
        .zip(&bufs)
        .map(|(r, buf)| match r {
            Ok(info) => Ok((cuda.download(buf)?, info.width, info.height)),
            Err(e) => Err(e.to_string()),
        })
        .collect()
}

fn imagenet_files() -> Option<Vec<PathBuf>> {
    let dir = shared_data()?.join("imagenet-400");
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
    let Some(files) = imagenet_files() else {
        return;
    };
    let Some((cuda, mut dec)) = gpu_setup(64) else {
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
            let p = psnr(s, px.len() as u64);
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
    let total = psnr(sum_sq, n_px);
    eprintln!(
        "nvJPEG vs CPU on imagenet-400: {on_gpu} on GPU, {on_cpu} CPU fallback; \
         mean abs diff {mad:.4}, PSNR {total:.2} dB, worst {:.2} dB ({})",
        worst.0,
        worst.1.display()
    );
    assert!(on_gpu > 0);
    assert!(total >= 40.0, "PSNR {total:.2} dB < 40 dB");
}

fn psnr(sum_sq: u64, n: u64) -> f64 {
    if sum_sq == 0 {
        return f64::INFINITY;
    }
    let mse = sum_sq as f64 / n as f64;
    10.0 * (255.0f64 * 255.0 / mse).log10()
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
        assert!(psnr(s, px.len() as u64) >= 35.0, "image {i}");
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

#[test]
fn gpu_roi_decode_matches_cpu_crop() {
    let Some((cuda, mut dec)) = gpu_setup(4) else {
        return;
    };
    let (h, w) = (96, 128);
    let jpegs = [
        encode_jpeg(&pattern_rgb(h, w), h, w, 3, 95, Sub::S444),
        fixture(Sub::S420, true),
    ];
    let opts = DecodeOptions {
        apply_exif: false,
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
        let got = gpu_decode(&cuda, &mut dec, &[j], &[Some(roi)]);
        let (px, gw, gh) = got[0].as_ref().expect("ROI decode");
        assert_eq!((*gw, *gh), (roi.width, roi.height));
        let want = crop(full.as_u8_hwc().unwrap(), fw, 3, roi);
        let s: u64 = px
            .iter()
            .zip(&want)
            .map(|(&a, &b)| u64::from(a.abs_diff(b)).pow(2))
            .sum();
        let p = psnr(s, px.len() as u64);
        eprintln!("ROI {roi:?} of {fw}x{fh}: PSNR {p:.2} dB");
        assert!(p >= 35.0, "ROI PSNR {p:.2}");
    }
}

#[allow(dead_code)]
fn _paths_are_paths(_: &Path) {}
