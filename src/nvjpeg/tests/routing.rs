//! Which images nvJPEG decodes, and which go to the CPU decoder, and why.

use super::*;

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
    // Bytes between segments, which libjpeg skips with a warning: left to it, like every
    // segment it judges (`JpegHeader::irregular_at`).
    assert!(matches!(
        cpu(route("junk_jpeg_header.jpg")),
        FallbackReason::Irregular(_)
    ));
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

/// Issue 16, defect 6: JPEGs whose three components are stored as R G B (Adobe transform
/// 0, or ids `R` `G` `B` without JFIF) go to the CPU, which reads them as libjpeg does;
/// nvJPEG documents 3-channel JPEGs as YCbCr only. With a JFIF marker libjpeg reads the
/// same samples as YCbCr, and so may nvJPEG.
#[test]
fn rgb_stored_jpegs_go_to_the_cpu() {
    use crate::testutil::{encode_rgb_stored_jpeg, RgbMark};
    let (h, w) = (24, 40);
    for mark in [RgbMark::Adobe, RgbMark::ComponentIds] {
        let j = encode_rgb_stored_jpeg(&pattern_rgb(h, w), h, w, mark);
        assert_eq!(
            cpu(classify(&j, &limits(), true)),
            FallbackReason::RgbStored,
            "{mark:?}"
        );
        assert_eq!(
            needs_cpu_fallback(&j, &limits()),
            Some(FallbackReason::RgbStored)
        );
        // The header read once (as a GPU stage would) routes the same way.
        let parsed = decode::ParsedImage::parse(&j, &DecodeOptions::default()).unwrap();
        let header = parsed.jpeg_header().expect("a JPEG");
        assert_eq!(
            route_header(header, true),
            Route::Cpu(FallbackReason::RgbStored)
        );
        assert!(decode::decode(&j, &DecodeOptions::default()).is_ok());
    }
    let j = encode_rgb_stored_jpeg(&pattern_rgb(h, w), h, w, RgbMark::Jfif);
    let (r, f) = gpu(classify(&j, &limits(), true));
    assert_eq!(
        (r, f.subsampling()),
        (GpuRoute::Hardware, Some(Subsampling::S444))
    );
}
