//! Real and damaged files: unknown formats and limits, unsupported codings, truncation, the
//! jpeg-edge files, the Pillow golden, libjpeg's fatal errors, and robustness proptests.

use super::*;

#[test]
fn unknown_format_and_file_limit() {
    assert_eq!(decode(b"", &rgb_opts()), Err(DecodeError::UnknownFormat));
    assert_eq!(
        decode(b"GIF89a....", &rgb_opts()),
        Err(DecodeError::UnknownFormat)
    );
    assert_eq!(
        probe(&[0xFF, 0xD8], &rgb_opts()),
        Err(DecodeError::UnknownFormat)
    );
    let jpg = encode_jpeg(&pattern_rgb(8, 8), 8, 8, 3, 95, Sub::S444);
    let tiny = DecodeOptions {
        limits: Limits {
            max_file_bytes: 100,
            ..Limits::default()
        },
        ..rgb_opts()
    };
    let e = decode(&jpg, &tiny).unwrap_err();
    assert!(
        matches!(e, DecodeError::Limits(ref m) if m.contains("max_file_bytes")),
        "{e}"
    );
    // Junk before SOI is skipped.
    let mut junk = b"some container header".to_vec();
    junk.extend_from_slice(&jpg);
    assert_eq!(
        decode(&junk, &rgb_opts()).unwrap(),
        decode(&jpg, &rgb_opts()).unwrap()
    );
}

/// Offset of the first SOF0/SOF2 marker's height field.
fn sof_dims_offset(jpg: &[u8]) -> usize {
    let p = jpg
        .windows(2)
        .position(|w| w == [0xFF, 0xC0] || w == [0xFF, 0xC2])
        .expect("SOF");
    p + 5
}

#[test]
fn jpeg_header_limits_before_allocating() {
    let mut jpg = encode_jpeg(&pattern_rgb(16, 16), 16, 16, 3, 95, Sub::S420);
    let off = sof_dims_offset(&jpg);
    jpg[off..off + 2].copy_from_slice(&60000u16.to_be_bytes());
    jpg[off + 2..off + 4].copy_from_slice(&60000u16.to_be_bytes());
    let e = decode(&jpg, &rgb_opts()).unwrap_err();
    assert_eq!(
        e,
        DecodeError::Limits(
            "image is 60000x60000 = 3600 MP, over the limit of 179 MP (max_pixels)".into()
        )
    );
    assert!(matches!(
        probe(&jpg, &rgb_opts()),
        Err(DecodeError::Limits(_))
    ));
}

#[test]
fn jpeg_rejects_unsupported_codings() {
    let jpg = encode_jpeg(&pattern_rgb(16, 16), 16, 16, 3, 95, Sub::S444);
    let p = jpg.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
    for (m, needle) in [
        (0xCBu8, "arithmetic-coded lossless (SOF11)"),
        (0xC3, "lossless (SOF3)"),
        (0xCD, "SOF13"),
    ] {
        let mut b = jpg.clone();
        b[p + 1] = m;
        let e = decode(&b, &rgb_opts()).unwrap_err();
        assert!(
            matches!(e, DecodeError::Unsupported(ref s) if s.contains(needle)),
            "{e}"
        );
    }
    let mut b = jpg.clone();
    b[p + 4] = 12;
    let e = decode(&b, &rgb_opts()).unwrap_err();
    assert!(
        matches!(e, DecodeError::Unsupported(ref s) if s.contains("12-bit")),
        "{e}"
    );
}

#[test]
fn jpeg_truncation_is_rejected() {
    let jpg = encode_jpeg(&pattern_rgb(40, 40), 40, 40, 3, 95, Sub::S420);
    // Missing EOI only, half the scan, and inside the headers.
    for cut in [jpg.len() - 2, jpg.len() / 2, 30] {
        let e = decode(&jpg[..cut], &rgb_opts()).unwrap_err();
        assert!(
            matches!(e, DecodeError::Corrupt(ref s) if s.starts_with("truncated")),
            "{cut}: {e}"
        );
    }
}

/// Expected outcome of each file in jpeg-edge: Ok((width, height)) after orientation, or
/// the error category.
fn edge_expectation(name: &str) -> Option<Result<(usize, usize), &'static str>> {
    Some(match name {
        "app13-multiple.jpg" => Ok((256, 160)),
        "hopper_gray.jpg" => Ok((128, 128)),
        "hopper_orientation_6.jpg" => Ok((128, 128)),
        "iptc.jpg" => Ok((640, 480)),
        "jfif_unit_cm.jpg" => Ok((1, 1)),
        "junk_jpeg_header.jpg" => Ok((1024, 768)),
        "monkey12.jpg" => Err("decode:unsupported"),
        "pil_sample_cmyk.jpg" => Ok((100, 100)),
        "testimgari.jpg" => Ok((227, 149)),
        "testorig.jpg" => Ok((227, 149)),
        "truncated_jpeg.jpg" => Err("decode:corrupt"),
        _ => return None,
    })
}

#[test]
fn jpeg_edge_files() {
    let Some(data) = shared_data() else { return };
    let dir = data.join("jpeg-edge");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jpg"))
        .collect();
    names.sort();
    assert!(names.len() >= 11);
    for name in names {
        let bytes = std::fs::read(dir.join(&name)).unwrap();
        let want = edge_expectation(&name).unwrap_or_else(|| panic!("no expectation for {name}"));
        let got = decode(&bytes, &rgb_opts());
        println!(
            "{name}: {}",
            match &got {
                Ok(im) => format!("{}x{}", im.width, im.height),
                Err(e) => e.to_string(),
            }
        );
        match (want, got) {
            (Ok((w, h)), Ok(im)) => {
                assert_eq!((im.width, im.height, im.channels), (w, h, 3), "{name}");
                let info = probe(&bytes, &rgb_opts()).unwrap();
                assert_eq!((info.width, info.height), (w, h), "{name}");
            }
            (Err(cat), Err(e)) => {
                assert_eq!(
                    crate::error::SampleErrorKind::Decode(e).category(),
                    cat,
                    "{name}"
                )
            }
            (w, g) => panic!("{name}: expected {w:?}, got {g:?}"),
        }
    }
    let o6 = std::fs::read(dir.join("hopper_orientation_6.jpg")).unwrap();
    assert_eq!(probe(&o6, &rgb_opts()).unwrap().orientation, 6);
}

fn grid(im: &[u8], h: usize, w: usize) -> [u8; 192] {
    let mut out = [0u8; 192];
    for by in 0..8 {
        let y0 = (by * h / 8).min(h - 1);
        let y1 = ((by + 1) * h / 8).max(y0 + 1);
        for bx in 0..8 {
            let x0 = (bx * w / 8).min(w - 1);
            let x1 = ((bx + 1) * w / 8).max(x0 + 1);
            let mut sum = [0u64; 3];
            for y in y0..y1 {
                for x in x0..x1 {
                    for (c, s) in sum.iter_mut().enumerate() {
                        *s += u64::from(im[(y * w + x) * 3 + c]);
                    }
                }
            }
            let n = ((y1 - y0) * (x1 - x0)) as f64;
            for c in 0..3 {
                out[(by * 8 + bx) * 3 + c] = (sum[c] as f64 / n + 0.5).floor() as u8;
            }
        }
    }
    out
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// Tolerance of the golden comparison: mean absolute difference of the 192 grid values
/// of one file, and the largest single difference.
/// Both decoders are libjpeg-turbo with the same settings (islow IDCT, fancy upsampling), so
/// the measured difference is 0; the slack only allows for a different libjpeg-turbo release.
const GOLDEN_MEAN_TOL: f64 = 0.05;
const GOLDEN_MAX_TOL: u8 = 1;

#[test]
fn golden_against_pillow() {
    let Some(data) = shared_data() else { return };
    let golden = include_str!("../../../tests/golden/decode_thumbs.tsv");
    let (mut compared, mut pillow_err, mut ours_only_err) = (0, 0, Vec::new());
    let (mut worst_mean, mut worst_max, mut total) = (0.0f64, 0u8, 0.0f64);
    let mut worst_name = String::new();
    let start = std::time::Instant::now();
    let mut imagenet_ok = 0;
    for line in golden.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let bytes = std::fs::read(data.join(f[0])).unwrap();
        let ours = decode(&bytes, &rgb_opts());
        if f[1] == "ERR" {
            pillow_err += 1;
            assert!(ours.is_err(), "{}: Pillow fails, we decode", f[0]);
            continue;
        }
        let im = match ours {
            Ok(im) => im,
            Err(e) => {
                // Pillow decodes it, we don't: reported below.
                assert!(matches!(e, DecodeError::Unsupported(_)), "{}: {e}", f[0]);
                ours_only_err.push(f[0].to_string());
                continue;
            }
        };
        if f[0].starts_with("imagenet-400/") {
            imagenet_ok += 1;
        }
        let (w, h): (usize, usize) = (f[1].parse().unwrap(), f[2].parse().unwrap());
        assert_eq!((im.width, im.height), (w, h), "{}", f[0]);
        let want = unhex(f[3]);
        let got = grid(im.as_u8_hwc().unwrap(), h, w);
        let diffs: Vec<u8> = got.iter().zip(&want).map(|(a, b)| a.abs_diff(*b)).collect();
        let mean = diffs.iter().map(|&d| f64::from(d)).sum::<f64>() / 192.0;
        let max = *diffs.iter().max().unwrap();
        total += mean;
        compared += 1;
        if mean > worst_mean {
            worst_mean = mean;
            worst_name = f[0].to_string();
        }
        worst_max = worst_max.max(max);
        assert!(
            mean <= GOLDEN_MEAN_TOL && max <= GOLDEN_MAX_TOL,
            "{}: grid mean diff {mean:.3}, max {max}",
            f[0]
        );
    }
    println!(
        "golden: {compared} files compared (imagenet-400 decoded: {imagenet_ok}), {pillow_err} \
         Pillow failures matched, unsupported by us only: {ours_only_err:?}; grid |diff| mean \
         {:.3}, worst file mean {worst_mean:.3} ({worst_name}), max {worst_max}; took {:?}",
        total / compared as f64,
        start.elapsed()
    );
    assert!(compared >= 400);
    // The comparison sees orientation: without it, hopper_orientation_6 is far off.
    let line = golden
        .lines()
        .find(|l| l.starts_with("jpeg-edge/hopper_orientation_6.jpg"))
        .unwrap();
    let want = unhex(line.split('\t').nth(3).unwrap());
    let bytes = std::fs::read(data.join("jpeg-edge/hopper_orientation_6.jpg")).unwrap();
    let raw = decode(
        &bytes,
        &DecodeOptions {
            apply_exif: false,
            ..rgb_opts()
        },
    )
    .unwrap();
    let g = grid(raw.as_u8_hwc().unwrap(), raw.height, raw.width);
    let mean = g
        .iter()
        .zip(&want)
        .map(|(a, b)| f64::from(a.abs_diff(*b)))
        .sum::<f64>()
        / 192.0;
    println!("hopper_orientation_6 without EXIF: grid mean diff {mean:.1}");
    assert!(mean > 10.0);
    // libjpeg-turbo with arithmetic decoding reads everything Pillow reads (testimgari.jpg
    // included).
    assert!(ours_only_err.is_empty(), "{ours_only_err:?}");
}

#[test]
fn cmyk_matches_pillow_pixels() {
    // Values from Pillow 13: Image.open("pil_sample_cmyk.jpg").convert("RGB") (Pillow reads
    // Adobe CMYK as inverted, "CMYK;I"); (row, column) -> RGB, and the per-channel mean.
    let Some(data) = shared_data() else { return };
    let bytes = std::fs::read(data.join("jpeg-edge/pil_sample_cmyk.jpg")).unwrap();
    assert_eq!(probe(&bytes, &rgb_opts()).unwrap().components, 4);
    let im = decode(&bytes, &rgb_opts()).unwrap();
    assert_eq!((im.width, im.height, im.channels), (100, 100, 3));
    let px = im.as_u8_hwc().unwrap();
    let spots: [((usize, usize), [u8; 3]); 7] = [
        ((0, 0), [255, 13, 25]),
        ((5, 3), [1, 4, 5]),
        ((32, 54), [82, 16, 20]),
        ((41, 87), [255, 13, 23]),
        ((46, 64), [252, 15, 25]),
        ((51, 64), [255, 14, 21]),
        ((90, 5), [1, 4, 5]),
    ];
    for ((y, x), want) in spots {
        let got = &px[(y * 100 + x) * 3..(y * 100 + x) * 3 + 3];
        for c in 0..3 {
            assert!(
                got[c].abs_diff(want[c]) <= 3,
                "({y}, {x}): {got:?} vs Pillow {want:?}"
            );
        }
    }
    let want_mean = [30.232, 5.444, 7.386];
    for (c, want) in want_mean.iter().enumerate() {
        let m = px
            .iter()
            .skip(c)
            .step_by(3)
            .map(|&v| f64::from(v))
            .sum::<f64>()
            / 10_000.0;
        println!("cmyk channel {c}: mean {m:.3}, Pillow {want:.3}");
        assert!((m - want).abs() < 0.5);
    }
}

/// Decodes all of imagenet-400 and prints the time (run in release mode:
/// `cargo test --release --lib decode::tests::speed_imagenet -- --ignored --nocapture`).
#[test]
#[ignore = "timing; run explicitly in release mode"]
fn speed_imagenet() {
    let Some(data) = shared_data() else { return };
    let dir = data.join("imagenet-400");
    let files: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    let mb: usize = files.iter().map(Vec::len).sum();
    for round in 0..3 {
        let start = std::time::Instant::now();
        let mut px = 0usize;
        for f in &files {
            let im = decode(f, &rgb_opts()).unwrap();
            px += im.width * im.height;
        }
        let t = start.elapsed();
        println!(
            "round {round}: {} files, {:.1} MB encoded, {:.1} MP decoded in {:.3} s on one thread \
             ({:.0} images/s, {:.0} MP/s)",
            files.len(),
            mb as f64 / 1e6,
            px as f64 / 1e6,
            t.as_secs_f64(),
            files.len() as f64 / t.as_secs_f64(),
            px as f64 / 1e6 / t.as_secs_f64()
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn truncated_jpeg_never_panics(cut in 0usize..4000, progressive: bool) {
        let src = pattern_rgb(37, 29);
        let jpg = encode_jpeg_opts(&src, 37, 29, 3, &JpegOpts {
            quality: 90, sub: Sub::S420, progressive, exif_tiff: None,
        });
        let cut = cut.min(jpg.len());
        let r = decode(&jpg[..cut], &rgb_opts());
        if cut < jpg.len() {
            // Anything short of the full file is refused.
            prop_assert!(r.is_err());
        } else {
            prop_assert!(r.is_ok());
        }
        let _ = probe(&jpg[..cut], &rgb_opts());
    }

    #[test]
    fn bit_flips_never_panic(flips in proptest::collection::vec((0usize..100_000, 0u8..8), 1..6), png: bool) {
        let src = pattern_rgb(24, 40);
        let mut bytes = if png {
            encode_png(&src, 40, 24, ::png::ColorType::Rgb, ::png::BitDepth::Eight, None)
        } else {
            encode_jpeg(&src, 24, 40, 3, 90, Sub::S420)
        };
        for (pos, bit) in flips {
            let n = bytes.len();
            bytes[pos % n] ^= 1 << bit;
        }
        let opts = DecodeOptions {
            limits: Limits { max_pixels: 1 << 16, ..Limits::default() },
            ..rgb_opts()
        };
        if let Ok(im) = decode(&bytes, &opts) {
            prop_assert!((im.width * im.height) as u64 <= opts.limits.max_pixels);
            prop_assert_eq!(im.as_u8_hwc().unwrap().len(), im.width * im.height * 3);
        }
        let _ = probe(&bytes, &opts);
    }
}

#[test]
fn libjpeg_fatal_errors_unwind_to_an_error() {
    // Errors only libjpeg sees (the header walk records tables without judging them) go
    // through its error_exit, which must come back as an error: no abort, no longjmp, no
    // panic.
    let jpg = encode_jpeg(&pattern_rgb(16, 16), 16, 16, 3, 90, Sub::S420);
    let p = jpg.windows(2).position(|w| w == [0xFF, 0xC4]).unwrap();
    let mut bad_dht = jpg.clone();
    // Code counts of the first table (after length and class/id): 255 codes of length 1.
    bad_dht[p + 5] = 255;
    let mut bad_sos = jpg.clone();
    let s = jpg.windows(2).position(|w| w == [0xFF, 0xDA]).unwrap();
    bad_sos[s + 5] = 9; // a component id the frame does not have
    let mut bad_dqt = jpg.clone();
    let q = jpg.windows(2).position(|w| w == [0xFF, 0xDB]).unwrap();
    bad_dqt[q + 4] = 0x07; // quantization table id 7
    for (name, b) in [("DHT", bad_dht), ("SOS", bad_sos), ("DQT", bad_dqt)] {
        for _ in 0..3 {
            // Repeated: a decoder left in a bad state by the unwind would show.
            let e = decode(&b, &rgb_opts()).unwrap_err();
            assert!(
                matches!(e, DecodeError::Corrupt(ref m) if m.starts_with("JPEG: ")),
                "{name}: {e}"
            );
            println!("{name}: {e}");
            assert!(decode_window(&b, &rgb_opts(), (2, 2, 5, 5)).is_err());
        }
    }
    // The decoder still works afterwards.
    assert!(decode(&jpg, &rgb_opts()).is_ok());
}
