//! Tests of the CPU decoder: round trips on generated fixtures, EXIF orientation, the
//! edge-case files, the Pillow golden, and robustness against damaged input.

use super::*;
use crate::testutil::{
    encode_jpeg, encode_jpeg_opts, exif_orientation_tiff, pattern_rgb, shared_data, JpegOpts, Sub,
};
use proptest::prelude::*;

fn psnr(a: &[u8], b: &[u8]) -> f64 {
    assert_eq!(a.len(), b.len());
    let mse: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2))
        .sum::<f64>()
        / a.len() as f64;
    if mse == 0.0 {
        return f64::INFINITY;
    }
    10.0 * (255.0f64 * 255.0 / mse).log10()
}

fn rgb_opts() -> DecodeOptions {
    DecodeOptions::default()
}

fn gray_of(rgb: &[u8]) -> Vec<u8> {
    rgb.chunks_exact(3)
        .map(|p| luma(p[0], p[1], p[2]))
        .collect()
}

/// A smooth RGB pattern (low-frequency in every channel, so that chroma subsampling
/// loses little): what photographs look like, unlike `pattern_rgb`'s blue channel.
fn smooth_rgb(h: usize, w: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(h * w * 3);
    for y in 0..h {
        for x in 0..w {
            // Features are ~10 pixels or more across, whatever the image size.
            let (fy, fx) = (y as f64, x as f64);
            v.push((128.0 + 100.0 * (fx / 14.0).sin()) as u8);
            v.push((128.0 + 100.0 * (fy / 12.0).cos()) as u8);
            v.push((128.0 + 90.0 * ((fx + fy) / 20.0).sin()) as u8);
        }
    }
    v
}

const SIZES: [(usize, usize); 5] = [(1, 1), (9, 17), (65, 33), (48, 64), (8, 8)];

#[test]
fn jpeg_round_trip_all_subsamplings() {
    for sub in [Sub::S444, Sub::S422, Sub::S420, Sub::S440, Sub::S411] {
        for progressive in [false, true] {
            for &(h, w) in &SIZES {
                let src = smooth_rgb(h, w);
                let jpg = encode_jpeg_opts(
                    &src,
                    h,
                    w,
                    3,
                    &JpegOpts {
                        quality: 95,
                        sub,
                        progressive,
                        exif_tiff: None,
                    },
                );
                let im = decode(&jpg, &rgb_opts())
                    .unwrap_or_else(|e| panic!("{sub:?} progressive={progressive} {h}x{w}: {e}"));
                assert_eq!((im.height, im.width, im.channels), (h, w, 3));
                let p = psnr(im.as_u8_hwc().unwrap(), &src);
                println!("jpeg {sub:?} progressive={progressive} {h}x{w}: PSNR {p:.1} dB");
                assert!(p >= 30.0, "{sub:?} {h}x{w}: PSNR {p:.1}");
                let info = probe(&jpg, &rgb_opts()).unwrap();
                assert_eq!((info.width, info.height, info.components), (w, h, 3));
                assert_eq!((info.format, info.orientation), (Format::Jpeg, 1));
            }
        }
    }
}

#[test]
fn jpeg_gray_round_trip_and_color_modes() {
    for &(h, w) in &SIZES {
        let src = gray_of(&pattern_rgb(h, w));
        let jpg = encode_jpeg(&src, h, w, 1, 95, Sub::S444);
        let g = decode(
            &jpg,
            &DecodeOptions {
                color: ColorMode::Gray,
                ..rgb_opts()
            },
        )
        .unwrap();
        assert_eq!((g.height, g.width, g.channels), (h, w, 1));
        let p = psnr(g.as_u8_hwc().unwrap(), &src);
        println!("jpeg gray {h}x{w}: PSNR {p:.1} dB");
        assert!(p >= 30.0);
        // RGB output replicates the gray channel.
        let c = decode(&jpg, &rgb_opts()).unwrap();
        let cpx = c.as_u8_hwc().unwrap();
        assert_eq!(c.channels, 3);
        for (i, px) in cpx.chunks_exact(3).enumerate() {
            assert_eq!(px, [g.as_u8_hwc().unwrap()[i]; 3]);
        }
    }
    // A colour JPEG decoded as gray is Pillow's L of the RGB decode.
    let src = pattern_rgb(31, 45);
    let jpg = encode_jpeg(&src, 31, 45, 3, 95, Sub::S420);
    let rgb = decode(&jpg, &rgb_opts()).unwrap();
    let g = decode(
        &jpg,
        &DecodeOptions {
            color: ColorMode::Gray,
            ..rgb_opts()
        },
    )
    .unwrap();
    assert_eq!(
        g.as_u8_hwc().unwrap(),
        &gray_of(rgb.as_u8_hwc().unwrap())[..]
    );
}

#[test]
fn luma_matches_pillow_formula() {
    // Values from Pillow: Image.new("RGB", (1, 1), c).convert("L").getpixel((0, 0)).
    assert_eq!(luma(255, 255, 255), 255);
    assert_eq!(luma(0, 0, 0), 0);
    assert_eq!(luma(255, 0, 0), 76);
    assert_eq!(luma(0, 255, 0), 150);
    assert_eq!(luma(0, 0, 255), 29);
    assert_eq!(luma(10, 200, 30), 124);
}

fn encode_png(
    data: &[u8],
    w: u32,
    h: u32,
    ct: ::png::ColorType,
    depth: ::png::BitDepth,
    palette: Option<Vec<u8>>,
) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut enc = ::png::Encoder::new(&mut out, w, h);
        enc.set_color(ct);
        enc.set_depth(depth);
        if let Some(p) = palette {
            enc.set_palette(p);
        }
        let mut wr = enc.write_header().unwrap();
        wr.write_image_data(data).unwrap();
    }
    out
}

#[test]
fn png_round_trip_every_color_type() {
    use ::png::{BitDepth as D, ColorType as C};
    let (h, w) = (13usize, 7usize);
    let rgb = pattern_rgb(h, w);
    let gray = gray_of(&rgb);
    let n = h * w;
    let widen = |v: &[u8]| -> Vec<u8> { v.iter().flat_map(|&x| [x, 255 - x]).collect() };
    let with_alpha = |v: &[u8], c: usize| -> Vec<u8> {
        v.chunks_exact(c)
            .enumerate()
            .flat_map(|(i, p)| p.iter().copied().chain([(i * 7) as u8]))
            .collect()
    };
    let gray_rgb: Vec<u8> = gray.iter().flat_map(|&g| [g, g, g]).collect();
    // (name, encoded, expected RGB)
    let mut cases: Vec<(&str, Vec<u8>, Vec<u8>)> = vec![
        (
            "gray8",
            encode_png(&gray, 7, 13, C::Grayscale, D::Eight, None),
            gray_rgb.clone(),
        ),
        (
            "gray16",
            encode_png(&widen(&gray), 7, 13, C::Grayscale, D::Sixteen, None),
            gray_rgb.clone(),
        ),
        (
            "graya8",
            encode_png(
                &with_alpha(&gray, 1),
                7,
                13,
                C::GrayscaleAlpha,
                D::Eight,
                None,
            ),
            gray_rgb.clone(),
        ),
        (
            "graya16",
            encode_png(
                &widen(&with_alpha(&gray, 1)),
                7,
                13,
                C::GrayscaleAlpha,
                D::Sixteen,
                None,
            ),
            gray_rgb.clone(),
        ),
        (
            "rgb8",
            encode_png(&rgb, 7, 13, C::Rgb, D::Eight, None),
            rgb.clone(),
        ),
        (
            "rgb16",
            encode_png(&widen(&rgb), 7, 13, C::Rgb, D::Sixteen, None),
            rgb.clone(),
        ),
        (
            "rgba8",
            encode_png(&with_alpha(&rgb, 3), 7, 13, C::Rgba, D::Eight, None),
            rgb.clone(),
        ),
        (
            "rgba16",
            encode_png(
                &widen(&with_alpha(&rgb, 3)),
                7,
                13,
                C::Rgba,
                D::Sixteen,
                None,
            ),
            rgb.clone(),
        ),
    ];
    // Palette: 16 colours, 8-bit and 4-bit indices.
    let palette: Vec<u8> = (0..16u8)
        .flat_map(|i| [i * 16, 255 - i * 16, i * 5])
        .collect();
    let idx: Vec<u8> = (0..n).map(|i| (i % 16) as u8).collect();
    let pal_rgb: Vec<u8> = idx
        .iter()
        .flat_map(|&i| palette[usize::from(i) * 3..usize::from(i) * 3 + 3].to_vec())
        .collect();
    cases.push((
        "pal8",
        encode_png(&idx, 7, 13, C::Indexed, D::Eight, Some(palette.clone())),
        pal_rgb.clone(),
    ));
    let pack4 = |v: &[u8]| -> Vec<u8> {
        v.chunks(w)
            .flat_map(|row| {
                row.chunks(2)
                    .map(|p| (p[0] << 4) | p.get(1).copied().unwrap_or(0) & 15)
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    cases.push((
        "pal4",
        encode_png(&pack4(&idx), 7, 13, C::Indexed, D::Four, Some(palette)),
        pal_rgb,
    ));
    // 4-bit gray scales v to v * 17.
    let g4: Vec<u8> = (0..n).map(|i| (i % 16) as u8).collect();
    let g4_rgb: Vec<u8> = g4.iter().flat_map(|&v| [v * 17; 3]).collect();
    cases.push((
        "gray4",
        encode_png(&pack4(&g4), 7, 13, C::Grayscale, D::Four, None),
        g4_rgb,
    ));

    for (name, bytes, want) in cases {
        let im = decode(&bytes, &rgb_opts()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!((im.height, im.width, im.channels), (h, w, 3), "{name}");
        assert_eq!(im.as_u8_hwc().unwrap(), &want[..], "{name}");
        let g = decode(
            &bytes,
            &DecodeOptions {
                color: ColorMode::Gray,
                ..rgb_opts()
            },
        )
        .unwrap();
        assert_eq!(g.as_u8_hwc().unwrap(), &gray_of(&want)[..], "{name} gray");
        let info = probe(&bytes, &rgb_opts()).unwrap();
        assert_eq!((info.format, info.width, info.height), (Format::Png, w, h));
    }
}

#[test]
fn png_truncated_and_limits() {
    let rgb = pattern_rgb(40, 40);
    let bytes = encode_png(
        &rgb,
        40,
        40,
        ::png::ColorType::Rgb,
        ::png::BitDepth::Eight,
        None,
    );
    for cut in [10, 20, 33, 50, bytes.len() / 2, bytes.len() - 13] {
        let r = decode(&bytes[..cut], &rgb_opts());
        assert!(
            matches!(r, Err(DecodeError::Corrupt(_))),
            "cut {cut}: {r:?}"
        );
    }
    let small = DecodeOptions {
        limits: Limits {
            max_pixels: 1599,
            ..Limits::default()
        },
        ..rgb_opts()
    };
    assert!(matches!(
        decode(&bytes, &small),
        Err(DecodeError::Limits(_))
    ));
    assert!(matches!(probe(&bytes, &small), Err(DecodeError::Limits(_))));
    // A header claiming 60000x60000.
    let mut huge = bytes.clone();
    huge[16..20].copy_from_slice(&60000u32.to_be_bytes());
    huge[20..24].copy_from_slice(&60000u32.to_be_bytes());
    let e = decode(&huge, &rgb_opts()).unwrap_err();
    assert!(matches!(e, DecodeError::Limits(_)), "{e}");
}

/// Naive orientation, written as a composition of simple steps (independent of
/// `exif::apply_orientation`'s index table).
fn naive_orient(src: &[u8], h: usize, w: usize, o: u8) -> (Vec<u8>, usize, usize) {
    let get = |v: &[u8], w: usize, y: usize, x: usize| -> [u8; 3] {
        let i = (y * w + x) * 3;
        [v[i], v[i + 1], v[i + 2]]
    };
    let mirror = |v: &[u8], h: usize, w: usize| -> Vec<u8> {
        (0..h)
            .flat_map(|y| (0..w).rev().flat_map(move |x| get(v, w, y, x)))
            .collect()
    };
    let rot_cw = |v: &[u8], h: usize, w: usize| -> Vec<u8> {
        // New image is w rows by h columns; new (y, x) = old (h-1-x, y).
        (0..w)
            .flat_map(|y| (0..h).flat_map(move |x| get(v, w, h - 1 - x, y)))
            .collect()
    };
    match o {
        2 => (mirror(src, h, w), h, w),
        3 => {
            let a = rot_cw(src, h, w);
            (rot_cw(&a, w, h), h, w)
        }
        4 => {
            let a = rot_cw(src, h, w);
            let b = rot_cw(&a, w, h);
            (mirror(&b, h, w), h, w)
        }
        5 => {
            let a = rot_cw(src, h, w);
            (mirror(&a, w, h), w, h)
        }
        6 => (rot_cw(src, h, w), w, h),
        7 => {
            let a = mirror(src, h, w);
            (rot_cw(&a, h, w), w, h)
        }
        8 => {
            let a = rot_cw(src, h, w);
            let b = rot_cw(&a, w, h);
            (rot_cw(&b, h, w), w, h)
        }
        _ => (src.to_vec(), h, w),
    }
}

#[test]
fn exif_orientations_in_jpeg() {
    let (h, w) = (17usize, 33usize);
    let src = pattern_rgb(h, w);
    for o in 1..=8u8 {
        for be in [false, true] {
            let jpg = encode_jpeg_opts(
                &src,
                h,
                w,
                3,
                &JpegOpts {
                    quality: 95,
                    sub: Sub::S420,
                    progressive: false,
                    exif_tiff: Some(exif_orientation_tiff(u16::from(o), be)),
                },
            );
            let raw = decode(
                &jpg,
                &DecodeOptions {
                    apply_exif: false,
                    ..rgb_opts()
                },
            )
            .unwrap();
            assert_eq!((raw.height, raw.width), (h, w));
            let im = decode(&jpg, &rgb_opts()).unwrap();
            let (want, wh, ww) = naive_orient(raw.as_u8_hwc().unwrap(), h, w, o);
            assert_eq!((im.height, im.width), (wh, ww), "orientation {o}");
            assert_eq!(im.as_u8_hwc().unwrap(), &want[..], "orientation {o}");
            let info = probe(&jpg, &rgb_opts()).unwrap();
            assert_eq!(info.orientation, o);
            assert_eq!((info.height, info.width), (wh, ww));
            let info = probe(
                &jpg,
                &DecodeOptions {
                    apply_exif: false,
                    ..rgb_opts()
                },
            )
            .unwrap();
            assert_eq!((info.height, info.width), (h, w));
        }
    }
}

/// Regression (fuzzing): an EXIF block between two scans of a progressive JPEG used to be
/// applied by `decode` (which walks every scan) but not seen by `probe` (which stops at the
/// first SOS), so the two disagreed on the size. Like Pillow, only EXIF before the first
/// scan counts now. The fuzzer's input is tests/bad/decode/exif-after-first-scan.jpg.
#[test]
fn exif_after_the_first_scan_is_ignored() {
    let (h, w) = (17usize, 33usize);
    let src = pattern_rgb(h, w);
    let mut jpg = encode_jpeg_opts(
        &src,
        h,
        w,
        3,
        &JpegOpts {
            quality: 95,
            sub: Sub::S420,
            progressive: true,
            exif_tiff: None,
        },
    );
    // 0xFF 0xDA appears only as a marker: 0xFF in entropy-coded data is stuffed.
    let sos: Vec<usize> = jpg
        .windows(2)
        .enumerate()
        .filter(|(_, m)| m == &[0xFF, 0xDA])
        .map(|(i, _)| i)
        .collect();
    assert!(sos.len() >= 2, "progressive JPEG with several scans");
    let mut app1 = b"Exif\0\0".to_vec();
    app1.extend_from_slice(&exif_orientation_tiff(6, true));
    let mut seg = vec![0xFF, 0xE1];
    seg.extend_from_slice(&((app1.len() + 2) as u16).to_be_bytes());
    seg.extend_from_slice(&app1);
    jpg.splice(sos[1]..sos[1], seg);
    let im = decode(&jpg, &rgb_opts()).unwrap();
    let info = probe(&jpg, &rgb_opts()).unwrap();
    assert_eq!(info.orientation, 1);
    assert_eq!((im.height, im.width), (h, w));
    assert_eq!((info.height, info.width), (h, w));
    // The fuzzer's input: probe and decode agree.
    let bytes = include_bytes!("../../tests/bad/decode/exif-after-first-scan.jpg");
    for apply_exif in [true, false] {
        let opts = DecodeOptions {
            apply_exif,
            ..rgb_opts()
        };
        if let (Ok(i), Ok(m)) = (probe(bytes, &opts), decode(bytes, &opts)) {
            assert_eq!((i.width, i.height), (m.width, m.height));
        }
    }
}

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
    let golden = include_str!("../../tests/golden/decode_thumbs.tsv");
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

/// The pixels of `win` (top, left, height, width) of an HWC image.
fn crop_of(im: &Image, win: Window) -> Vec<u8> {
    let (t, l, h, w) = win;
    let c = im.channels;
    let px = im.as_u8_hwc().unwrap();
    let mut out = Vec::with_capacity(h * w * c);
    for y in t..t + h {
        out.extend_from_slice(&px[(y * im.width + l) * c..(y * im.width + l + w) * c]);
    }
    out
}

/// Checks that `decode_window` equals the crop of the full decode on `win`.
fn assert_window_exact(bytes: &[u8], opts: &DecodeOptions, full: &Image, win: Window, what: &str) {
    let got = decode_window(bytes, opts, win).unwrap_or_else(|e| panic!("{what} {win:?}: {e}"));
    assert_eq!(
        (got.height, got.width, got.channels),
        (win.2, win.3, full.channels),
        "{what} {win:?}"
    );
    assert!(
        got.as_u8_hwc().unwrap() == &crop_of(full, win)[..],
        "{what}: window {win:?} differs from the full decode"
    );
}

/// Windows touching every edge and none, sizes from 1 pixel to the whole image.
fn windows_for(h: usize, w: usize) -> Vec<Window> {
    let mut v = Vec::new();
    let ys = [
        0,
        1,
        7,
        8,
        9,
        15,
        16,
        17,
        31,
        33,
        h / 2,
        h.saturating_sub(17),
        h - 1,
    ];
    let xs = [
        0,
        1,
        7,
        8,
        15,
        16,
        17,
        32,
        47,
        w / 3,
        w.saturating_sub(9),
        w - 1,
    ];
    for &t in &ys {
        for &l in &xs {
            for (dh, dw) in [(1, 1), (3, 40), (40, 3), (24, 24), (h, w)] {
                let (t, l) = (t.min(h - 1), l.min(w - 1));
                v.push((t, l, dh.min(h - t), dw.min(w - l)));
            }
        }
    }
    v.push((0, 0, h, w));
    v
}

/// [`windows_for`] of a photograph whose every window is a whole decode: the non-empty ones
/// inside the image, and on images over 300×300 only every `sample`th of them.
fn windows_sampled(h: usize, w: usize, sample: usize) -> Vec<Window> {
    let mut wins = windows_for(h, w);
    wins.retain(|&(t, l, wh, ww)| wh > 0 && ww > 0 && t + wh <= h && l + ww <= w);
    if h * w > 300 * 300 {
        wins = wins.into_iter().step_by(sample).collect();
    }
    wins
}

#[test]
fn window_decode_is_bit_exact_all_subsamplings() {
    // A textured image (sharp edges in every channel) so that any difference in upsampling
    // context at the window's edges shows.
    let (h, w) = (133usize, 171usize);
    let src = pattern_rgb(h, w);
    let mut n = 0;
    for sub in [Sub::S444, Sub::S422, Sub::S420, Sub::S440, Sub::S411] {
        for progressive in [false, true] {
            let jpg = encode_jpeg_opts(
                &src,
                h,
                w,
                3,
                &JpegOpts {
                    quality: 85,
                    sub,
                    progressive,
                    exif_tiff: None,
                },
            );
            for opts in [
                rgb_opts(),
                DecodeOptions {
                    color: ColorMode::Gray,
                    ..rgb_opts()
                },
            ] {
                let full = decode(&jpg, &opts).unwrap();
                for win in windows_for(h, w) {
                    assert_window_exact(
                        &jpg,
                        &opts,
                        &full,
                        win,
                        &format!("{sub:?} p={progressive}"),
                    );
                    n += 1;
                }
            }
        }
    }
    println!("{n} windows bit-exact");
}

#[test]
fn window_decode_through_every_orientation() {
    let (h, w) = (41usize, 70usize);
    let src = pattern_rgb(h, w);
    for o in 1..=8u8 {
        for sub in [Sub::S420, Sub::S422] {
            let jpg = encode_jpeg_opts(
                &src,
                h,
                w,
                3,
                &JpegOpts {
                    quality: 90,
                    sub,
                    progressive: false,
                    exif_tiff: Some(exif_orientation_tiff(u16::from(o), false)),
                },
            );
            for apply_exif in [true, false] {
                let opts = DecodeOptions {
                    apply_exif,
                    ..rgb_opts()
                };
                let full = decode(&jpg, &opts).unwrap();
                for win in windows_for(full.height, full.width) {
                    assert_window_exact(
                        &jpg,
                        &opts,
                        &full,
                        win,
                        &format!("o={o} exif={apply_exif}"),
                    );
                }
            }
        }
    }
}

#[test]
fn window_decode_gray_png_and_bad_windows() {
    let (h, w) = (30usize, 50usize);
    let src = pattern_rgb(h, w);
    let gray = gray_of(&src);
    let jpg = encode_jpeg(&gray, h, w, 1, 90, Sub::S444);
    let png = encode_png(
        &src,
        w as u32,
        h as u32,
        ::png::ColorType::Rgb,
        ::png::BitDepth::Eight,
        None,
    );
    for bytes in [&jpg, &png] {
        for color in [ColorMode::Rgb, ColorMode::Gray] {
            let opts = DecodeOptions {
                color,
                ..rgb_opts()
            };
            let full = decode(bytes, &opts).unwrap();
            for win in windows_for(h, w) {
                assert_window_exact(bytes, &opts, &full, win, "gray/png");
            }
        }
        for bad in [
            (0, 0, 0, 5),
            (0, 0, 5, 0),
            (25, 0, 6, 5),
            (0, 46, 5, 5),
            (usize::MAX, 0, 2, 2),
        ] {
            assert!(
                matches!(
                    decode_window(bytes, &rgb_opts(), bad),
                    Err(DecodeError::Window(_))
                ),
                "{bad:?}"
            );
        }
    }
    // Damaged input is refused as by `decode`, never panics.
    assert!(decode_window(&jpg[..jpg.len() - 10], &rgb_opts(), (0, 0, 2, 2)).is_err());
}

#[test]
fn window_decode_real_files() {
    // imagenet-400 (4:2:0 and 4:4:4 photographs, some progressive) and the edge files
    // (CMYK, gray, EXIF-rotated, arithmetic): random windows equal the full decode's.
    let Some(data) = shared_data() else { return };
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    for dir in ["imagenet-400", "jpeg-edge"] {
        let mut v: Vec<_> = std::fs::read_dir(data.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        files.extend(
            v.into_iter()
                .take(if dir == "imagenet-400" { 60 } else { 100 }),
        );
    }
    let mut rng = crate::rng::SampleRng::from_key(7);
    let mut n = 0;
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        let Ok(full) = decode(&bytes, &rgb_opts()) else {
            continue;
        };
        let (h, w) = (full.height, full.width);
        for _ in 0..6 {
            let wh = 1 + rng.below(h as u64) as usize;
            let ww = 1 + rng.below(w as u64) as usize;
            let t = rng.below((h - wh + 1) as u64) as usize;
            let l = rng.below((w - ww + 1) as u64) as usize;
            assert_window_exact(
                &bytes,
                &rgb_opts(),
                &full,
                (t, l, wh, ww),
                &f.display().to_string(),
            );
            n += 1;
        }
    }
    println!("{n} windows of real files bit-exact");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random image sizes, subsamplings, orientations and windows: the window decode is the
    /// crop of the full decode.
    #[test]
    fn window_decode_matches_full_decode(h in 1usize..80, w in 1usize..80, sub in 0usize..5,
                                         progressive: bool, o in 1u8..9, seeds in proptest::collection::vec(any::<u64>(), 4)) {
        let sub = [Sub::S444, Sub::S422, Sub::S420, Sub::S440, Sub::S411][sub];
        let src = pattern_rgb(h, w);
        let jpg = encode_jpeg_opts(&src, h, w, 3, &JpegOpts {
            quality: 80, sub, progressive, exif_tiff: Some(exif_orientation_tiff(u16::from(o), true)),
        });
        let full = decode(&jpg, &rgb_opts()).unwrap();
        let (fh, fw) = (full.height, full.width);
        for s in seeds {
            let wh = 1 + (s % fh as u64) as usize;
            let ww = 1 + ((s >> 16) % fw as u64) as usize;
            let t = ((s >> 32) % (fh - wh + 1) as u64) as usize;
            let l = ((s >> 48) % (fw - ww + 1) as u64) as usize;
            let got = decode_window(&jpg, &rgb_opts(), (t, l, wh, ww)).unwrap();
            prop_assert!(got.as_u8_hwc().unwrap() == &crop_of(&full, (t, l, wh, ww))[..],
                "{sub:?} p={progressive} o={o} {h}x{w}: window {:?}", (t, l, wh, ww));
        }
    }
}

#[test]
fn libjpeg_fatal_errors_unwind_to_an_error() {
    // Errors only libjpeg sees (the marker walk does not parse tables) go through its
    // error_exit, which must come back as an error: no abort, no longjmp, no panic.
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

/// Every scan decoded, at 1/8 (the reference for the dropped-scan path).
fn decode_eighth_every_scan(jpg: &[u8]) -> (Vec<u8>, usize) {
    let hd = jpeg::scan(jpg, true, &Limits::default()).unwrap();
    let (width, height) = jpeg::scaled_size(hd.width, hd.height, 8);
    let req = turbo::Request {
        width,
        height,
        components: hd.components,
        region: None,
        scale_denom: 8,
        block_smoothing: true,
    };
    let (px, _, _, c) = turbo::decode(&jpg[hd.soi..], &req).unwrap();
    (px, c)
}

/// Progressive JPEGs decoded at 1/8 without the AC scans the 1×1 IDCT never reads: the
/// same pixels as decoding every scan (whole image and windows), and fewer bytes decoded.
/// The fixtures carry libjpeg's standard script (successive approximation, DC and AC
/// refinement scans; scripts/make-progressive-fixtures.py); the generated ones, spectral
/// selection only.
#[test]
fn dropping_unused_ac_scans_at_one_eighth_changes_no_pixel() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/progressive");
    let mut files: Vec<(String, Vec<u8>)> = ["420", "422", "444", "gray"]
        .iter()
        .map(|n| {
            let name = format!("progressive-{n}.jpg");
            let bytes = std::fs::read(dir.join(&name)).unwrap();
            (name, bytes)
        })
        .collect();
    let (h, w) = (157usize, 203usize);
    for sub in [Sub::S444, Sub::S422, Sub::S420, Sub::S440] {
        let o = JpegOpts {
            quality: 90,
            sub,
            progressive: true,
            exif_tiff: None,
        };
        files.push((
            format!("generated {sub:?}"),
            encode_jpeg_opts(&pattern_rgb(h, w), h, w, 3, &o),
        ));
    }
    // Any other progressive files to hand (e.g. the wallpapers of scripts/photos-debian.sh).
    if let Ok(extra) = std::env::var("STOKEHOLD_PROGRESSIVE_DIR") {
        for e in std::fs::read_dir(extra).unwrap().flatten() {
            let bytes = std::fs::read(e.path()).unwrap();
            files.push((e.path().display().to_string(), bytes));
        }
    }
    let mut dropped = 0;
    for (name, jpg) in &files {
        let Some(fewer) = jpeg::without_unused_ac_scans(jpg) else {
            assert!(
                !name.contains("progressive-"),
                "{name}: nothing dropped from a fixture"
            );
            continue;
        };
        dropped += 1;
        assert!(fewer.len() < jpg.len(), "{name}");
        let (want, c) = decode_eighth_every_scan(jpg);
        let got = decode_scaled(jpg, &DecodeOptions::default(), 8, None).unwrap();
        let got_gray = decode_scaled(
            jpg,
            &DecodeOptions {
                color: ColorMode::Gray,
                ..DecodeOptions::default()
            },
            8,
            None,
        )
        .unwrap();
        let want_rgb = if c == 1 {
            want.iter().flat_map(|&g| [g, g, g]).collect()
        } else {
            want.clone()
        };
        assert!(
            got.as_u8_hwc().unwrap() == want_rgb.as_slice(),
            "{name}: pixels differ"
        );
        if c == 1 {
            assert!(got_gray.as_u8_hwc().unwrap() == want.as_slice(), "{name}");
        }
        // A window inside, as the fused crop asks for.
        let (sh, sw) = (got.height, got.width);
        let win = (sh / 4, sw / 5, sh / 2, sw / 2);
        let part = decode_scaled(jpg, &DecodeOptions::default(), 8, Some(win)).unwrap();
        for y in 0..win.2 {
            let a = &part.as_u8_hwc().unwrap()[y * win.3 * 3..(y + 1) * win.3 * 3];
            let s = ((win.0 + y) * sw + win.1) * 3;
            assert!(a == &want_rgb[s..s + win.3 * 3], "{name}: window row {y}");
        }
    }
    assert!(dropped >= 8, "only {dropped} files had scans to drop");
}

/// Baseline JPEGs and other scales are decoded as they are.
#[test]
fn baseline_jpegs_keep_every_scan() {
    let (h, w) = (40usize, 56usize);
    let jpg = encode_jpeg(&pattern_rgb(h, w), h, w, 3, 90, Sub::S420);
    assert!(jpeg::without_unused_ac_scans(&jpg).is_none());
    let cut = &jpg[..jpg.len() / 2];
    assert!(jpeg::without_unused_ac_scans(cut).is_none());
}

/// The committed fixtures `tests/golden/<folder>/<prefix>-<name>.jpg`, named by file name.
fn golden_jpegs(folder: &str, prefix: &str, names: &[&str]) -> Vec<(String, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(folder);
    names
        .iter()
        .map(|n| {
            let name = format!("{prefix}-{n}.jpg");
            let bytes = std::fs::read(dir.join(&name)).unwrap();
            (name, bytes)
        })
        .collect()
}

/// Progressive JPEGs to check our progressive decoder on: the Pillow fixtures (libjpeg's
/// standard script with refinement scans, with and without restart markers), generated ones
/// (spectral selection only, with and without restarts), the progressive files of
/// `../shared` when it is there, and any in `STOKEHOLD_PROGRESSIVE_DIR`.
fn progressive_files() -> Vec<(String, Vec<u8>)> {
    let mut files = golden_jpegs(
        "progressive",
        "progressive",
        &["420", "422", "444", "gray", "420-rst", "gray-rst"],
    );
    let (h, w) = (157usize, 203usize);
    for sub in [Sub::S444, Sub::S422, Sub::S420, Sub::S440, Sub::S411] {
        for restart in [0u16, 5] {
            let mut out = Vec::new();
            let mut enc = jpeg_encoder::Encoder::new(&mut out, 85);
            enc.set_sampling_factor(match sub {
                Sub::S444 => jpeg_encoder::SamplingFactor::R_4_4_4,
                Sub::S422 => jpeg_encoder::SamplingFactor::R_4_2_2,
                Sub::S420 => jpeg_encoder::SamplingFactor::R_4_2_0,
                Sub::S440 => jpeg_encoder::SamplingFactor::R_4_4_0,
                Sub::S411 => jpeg_encoder::SamplingFactor::R_4_1_1,
            });
            enc.set_progressive(true);
            if restart > 0 {
                enc.set_restart_interval(restart);
            }
            enc.encode(
                &pattern_rgb(h, w),
                w as u16,
                h as u16,
                jpeg_encoder::ColorType::Rgb,
            )
            .unwrap();
            files.push((format!("generated {sub:?} restart {restart}"), out));
        }
    }
    files.extend(jpegs_beside("STOKEHOLD_PROGRESSIVE_DIR", |hd| {
        hd.progressive
    }));
    files
}

/// The JPEGs of `../shared`'s imagenet-400 and jpeg-edge (when it is there) and of the
/// folder in environment variable `extra_dir` whose headers `keep` accepts, by path.
fn jpegs_beside(
    extra_dir: &str,
    keep: impl Fn(&jpeg::JpegHeader) -> bool,
) -> Vec<(String, Vec<u8>)> {
    let mut dirs: Vec<std::path::PathBuf> = Vec::new();
    if let Some(shared) = crate::testutil::shared_data() {
        dirs.push(shared.join("imagenet-400"));
        dirs.push(shared.join("jpeg-edge"));
    } else {
        println!("../shared not found: our own fixtures only");
    }
    if let Ok(extra) = std::env::var(extra_dir) {
        dirs.push(extra.into());
    }
    let mut files = Vec::new();
    for d in dirs {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for p in paths {
            let bytes = std::fs::read(&p).unwrap();
            if jpeg::scan(&bytes, true, &Limits::default()).is_ok_and(|hd| keep(&hd)) {
                files.push((p.display().to_string(), bytes));
            }
        }
    }
    files
}

/// libjpeg decoding the original (its own progressive decoder), the reference.
fn libjpeg_decode(jpg: &[u8], region: Option<turbo::Rect>) -> (Vec<u8>, usize) {
    let hd = jpeg::scan(jpg, true, &Limits::default()).unwrap();
    let req = turbo::Request {
        width: hd.width,
        height: hd.height,
        components: hd.components,
        region,
        scale_denom: 1,
        block_smoothing: true,
    };
    let (px, _, _, c) = turbo::decode(&jpg[hd.soi..], &req).unwrap();
    (px, c)
}

/// Our progressive decoder (coefficients, which libjpeg then turns into pixels as for a
/// sequential JPEG) gives libjpeg's pixels exactly: whole images and windows at every edge
/// and alignment.
#[test]
fn progressive_coefficients_match_libjpeg() {
    let files = progressive_files();
    let mut checked = 0;
    for (name, jpg) in &files {
        let hd = jpeg::scan(jpg, true, &Limits::default()).unwrap();
        let soi = &jpg[hd.soi..];
        let t = progressive::coefficients(soi, None);
        let Some(t) = t else {
            // Our own fixtures must all take the fast path; other files may not (CMYK...).
            assert!(
                !name.starts_with("progressive-") && !name.starts_with("generated"),
                "{name}: not decoded by us"
            );
            println!("{name}: left to libjpeg");
            continue;
        };
        checked += 1;
        assert_eq!((t.width, t.height, t.region), (hd.width, hd.height, None));
        let (want, c) = libjpeg_decode(jpg, None);
        let (got, _) = t.decode(hd.components).unwrap();
        assert!(got == want, "{name}: whole image differs");
        let (h, w) = (hd.height, hd.width);
        for win in windows_sampled(h, w, 37) {
            let (top, left, wh, ww) = win;
            let t = progressive::coefficients(soi, Some(win))
                .unwrap_or_else(|| panic!("{name}: window {win:?} not decoded by us"));
            let (got, _) = t.decode(hd.components).unwrap();
            for y in 0..wh {
                let s = ((top + y) * w + left) * c;
                let a = &got[y * ww * c..(y + 1) * ww * c];
                assert!(a == &want[s..s + ww * c], "{name}: window {win:?} row {y}");
            }
        }
    }
    println!(
        "{checked} of {} progressive files decoded by us and checked",
        files.len()
    );
    assert!(checked >= 16, "only {checked} files decoded by us");
}

/// The libjpeg binding has the layout whose `entropy` field the coefficient hand-over uses.
#[test]
#[cfg(target_pointer_width = "64")]
fn libjpeg_struct_layout_is_the_one_checked() {
    const { assert!(turbo::ENTROPY_FIELD_KNOWN) };
}

/// The refinement scans' zero skipping gives the same coefficients with the plain loop as
/// with `pdep` (which CPUs with a fast one use): whole images, against libjpeg.
#[test]
fn progressive_coefficients_without_pdep_match_libjpeg() {
    progressive::NO_PDEP.with(|n| n.set(true));
    let mut checked = 0;
    for (name, jpg) in &progressive_files() {
        let hd = jpeg::scan(jpg, true, &Limits::default()).unwrap();
        let Some(t) = progressive::coefficients(&jpg[hd.soi..], None) else {
            continue;
        };
        let (want, _) = libjpeg_decode(jpg, None);
        let (got, _) = t.decode(hd.components).unwrap();
        assert!(got == want, "{name}: whole image differs");
        checked += 1;
    }
    progressive::NO_PDEP.with(|n| n.set(false));
    assert!(checked >= 16, "only {checked} files decoded by us");
}

/// The public decode functions use it, and say the same as libjpeg: `decode` and
/// `decode_window` with our progressive decoder on and off.
#[test]
fn progressive_decode_paths_agree() {
    let (h, w) = (157usize, 203usize);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/progressive");
    let jpg = std::fs::read(dir.join("progressive-420-rst.jpg")).unwrap();
    let full = decode(&jpg, &rgb_opts()).unwrap();
    let (want, _) = libjpeg_decode(&jpg, None);
    assert_eq!((full.height, full.width), (h, w));
    assert!(full.as_u8_hwc().unwrap() == want.as_slice());
    let win = (37, 51, 90, 101);
    let part = decode_window(&jpg, &rgb_opts(), win).unwrap();
    assert!(part.as_u8_hwc().unwrap() == crop_of(&full, win).as_slice());
}

/// Corrupt or cut progressive data is never decoded by us into wrong pixels: either our
/// decoder hands the file to libjpeg (whose behaviour is the reference) or the pixels are
/// libjpeg's.
#[test]
fn progressive_coefficients_refuse_what_they_cannot_match() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/progressive");
    let jpg = std::fs::read(dir.join("progressive-420.jpg")).unwrap();
    // Cut inside the last scan: the data of the image's bottom is missing.
    let mut cut = jpg[..jpg.len() - 200].to_vec();
    cut.extend_from_slice(&[0xFF, 0xD9]);
    assert!(progressive::coefficients(&cut, None).is_none());
    // ... but a window near the top never reads the missing part.
    assert!(progressive::coefficients(&cut, Some((0, 0, 16, 16))).is_some());
    // Bit flips anywhere: never a panic; when we decode, libjpeg agrees.
    let mut rng = crate::rng::SampleRng::from_key(7);
    for _ in 0..300 {
        let mut b = jpg.clone();
        for _ in 0..3 {
            let i = 2 + (rng.next_u64() as usize) % (b.len() - 4);
            b[i] ^= 1 << (rng.next_u64() % 8);
        }
        let Some(t) = progressive::coefficients(&b, None) else {
            continue;
        };
        let Ok(hd) = jpeg::scan(&b, true, &Limits::default()) else {
            continue;
        };
        let req = turbo::Request {
            width: hd.width,
            height: hd.height,
            components: hd.components,
            region: None,
            scale_denom: 1,
            block_smoothing: true,
        };
        let (Ok(want), Ok(got)) = (turbo::decode(&b, &req), t.decode(hd.components)) else {
            continue;
        };
        assert!(
            want.0 == got.0,
            "a corrupt file decoded by us to other pixels"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Our entropy decoding of sequential JPEGs (decode/baseline.rs) against libjpeg's own.

/// A noisy image (large coefficients, long Huffman codes) with smooth parts (long zero
/// runs, end-of-block codes): h × w × c.
fn noisy_pattern(h: usize, w: usize, c: usize, seed: u64) -> Vec<u8> {
    let mut rng = crate::rng::SampleRng::from_key(seed);
    let mut v = Vec::with_capacity(h * w * c);
    for y in 0..h {
        for x in 0..w {
            for ch in 0..c {
                let smooth = ((x * 255) / w.max(1) + ch * 40 + y) as u64;
                let noise = if (x / 24 + y / 24) % 2 == 0 {
                    rng.next_u64() % 256
                } else {
                    rng.next_u64() % 9
                };
                v.push(((smooth + noise) % 256) as u8);
            }
        }
    }
    v
}

/// Sequential JPEGs to check our entropy decoding on: the Pillow fixtures (optimised
/// Huffman tables in one scan, restart markers, gray, CMYK), generated ones (every
/// subsampling, gray, CMYK, with and without restart markers, low to high quality; with
/// 4:1:1 jpeg-encoder writes a scan per component, which we leave to libjpeg; its
/// optimised tables are not used: it writes a scan per component with them, and 0.7.1 can
/// write data too short for them or trip a debug assertion at high quality), the sequential files of `../shared` when it is there, and any in
/// `STOKEHOLD_SEQUENTIAL_DIR`.
fn sequential_files() -> Vec<(String, Vec<u8>)> {
    use jpeg_encoder::{ColorType, Encoder, SamplingFactor};
    let mut files = golden_jpegs(
        "sequential",
        "optimised",
        &["420", "444-q100", "422-rst", "gray-rst", "cmyk"],
    );
    let (h, w) = (157usize, 203usize);
    let subs = [
        SamplingFactor::R_4_4_4,
        SamplingFactor::R_4_2_2,
        SamplingFactor::R_4_2_0,
        SamplingFactor::R_4_4_0,
        SamplingFactor::R_4_1_1,
        SamplingFactor::F_2_2,
    ];
    for (i, sub) in subs.into_iter().enumerate() {
        for (restart, quality) in [(0u16, 90u8), (3, 95), (7, 30)] {
            for (ct, c) in [
                (ColorType::Rgb, 3),
                (ColorType::Luma, 1),
                (ColorType::Cmyk, 4),
            ] {
                if c != 3 && i > 2 {
                    continue;
                }
                let mut out = Vec::new();
                let mut enc = Encoder::new(&mut out, quality);
                enc.set_sampling_factor(sub);
                enc.set_restart_interval(restart);
                let px = noisy_pattern(h, w, c, i as u64);
                enc.encode(&px, w as u16, h as u16, ct).unwrap();
                files.push((
                    format!("generated {sub:?} {ct:?} q{quality} restart {restart}"),
                    out,
                ));
            }
        }
    }
    files.extend(jpegs_beside("STOKEHOLD_SEQUENTIAL_DIR", |hd| {
        !hd.progressive && !hd.arithmetic
    }));
    files
}

fn scaled_request(hd: &jpeg::JpegHeader, region: Option<turbo::Rect>, scale: u8) -> turbo::Request {
    let (width, height) = jpeg::scaled_size(hd.width, hd.height, scale);
    turbo::Request {
        width,
        height,
        components: hd.components,
        region,
        scale_denom: scale,
        block_smoothing: true,
    }
}

/// Our entropy decoding gives libjpeg's pixels exactly: whole images at every DCT scale,
/// and windows at every edge and alignment (which make libjpeg skip rows, passing over
/// their MCUs, and crop columns).
#[test]
fn sequential_entropy_decoding_matches_libjpeg() {
    let files = sequential_files();
    let mut checked = 0;
    for (name, jpg) in &files {
        let hd = jpeg::scan(jpg, true, &Limits::default()).unwrap();
        let soi = &jpg[hd.soi..];
        let one_scan = name.contains("Luma") || !name.contains("R_4_1_1");
        let ours = (name.starts_with("generated") && one_scan) || name.starts_with("optimised-");
        if baseline::scan(soi).is_none() {
            // Our fixtures must take our path unless they have a scan per component;
            // other files may not (12-bit...).
            assert!(!ours, "{name}: not decoded by us");
            println!("{name}: left to libjpeg");
            continue;
        }
        assert!(
            !name.starts_with("generated") || one_scan,
            "{name}: a scan per component, decoded by us"
        );
        checked += 1;
        for scale in [1u8, 2, 4, 8] {
            let req = scaled_request(&hd, None, scale);
            let want = turbo::decode(soi, &req).unwrap();
            let mut source = baseline::scan(soi).unwrap();
            let got = turbo::decode_from_source(soi, &req, &mut source)
                .unwrap_or_else(|e| panic!("{name}: declined at scale 1/{scale}: {e}"));
            assert!(got == want, "{name}: whole image at 1/{scale} differs");
        }
        let (h, w) = (hd.height, hd.width);
        for win in windows_sampled(h, w, 53) {
            let req = scaled_request(&hd, Some(win), 1);
            let want = turbo::decode(soi, &req).unwrap();
            let mut source = baseline::scan(soi).unwrap();
            let got = turbo::decode_from_source(soi, &req, &mut source)
                .unwrap_or_else(|e| panic!("{name}: window {win:?} declined: {e}"));
            assert!(got == want, "{name}: window {win:?} differs");
        }
    }
    println!(
        "{checked} of {} sequential files decoded by us and checked",
        files.len()
    );
    assert!(checked >= 40, "only {checked} files decoded by us");
}

/// Corrupt or cut sequential data never decodes to other pixels than libjpeg's: our
/// entropy decoding either declines (and libjpeg decodes the file alone) or agrees.
#[test]
fn sequential_entropy_decoding_declines_what_it_cannot_match() {
    let (h, w) = (96usize, 120usize);
    let mut declined = 0;
    for (restart, sub) in [(0u16, Sub::S420), (4, Sub::S444)] {
        let mut out = Vec::new();
        let mut enc = jpeg_encoder::Encoder::new(&mut out, 85);
        enc.set_restart_interval(restart);
        enc.set_sampling_factor(match sub {
            Sub::S444 => jpeg_encoder::SamplingFactor::R_4_4_4,
            _ => jpeg_encoder::SamplingFactor::R_4_2_0,
        });
        enc.encode(
            &noisy_pattern(h, w, 3, 3),
            w as u16,
            h as u16,
            jpeg_encoder::ColorType::Rgb,
        )
        .unwrap();
        let jpg = out;
        let hd = jpeg::scan(&jpg, true, &Limits::default()).unwrap();
        let req = scaled_request(&hd, None, 1);
        // Data cut short: libjpeg fills with zeros and stops decoding; we decline.
        let mut cut = jpg[..jpg.len() - 300].to_vec();
        cut.extend_from_slice(&[0xFF, 0xD9]);
        let mut source = baseline::scan(&cut).unwrap();
        assert!(turbo::decode_from_source(&cut, &req, &mut source).is_err());
        // ... but a window near the top never reads the missing part.
        let top = scaled_request(&hd, Some((0, 0, 16, 16)), 1);
        let mut source = baseline::scan(&cut).unwrap();
        assert_eq!(
            turbo::decode_from_source(&cut, &top, &mut source).unwrap(),
            turbo::decode(&cut, &top).unwrap()
        );
        // Bit flips anywhere: never a panic; when we decode, libjpeg agrees.
        let mut rng = crate::rng::SampleRng::from_key(11 + u64::from(restart));
        for _ in 0..400 {
            let mut b = jpg.clone();
            for _ in 0..3 {
                let i = 2 + (rng.next_u64() as usize) % (b.len() - 4);
                b[i] ^= 1 << (rng.next_u64() % 8);
            }
            let Ok(hd) = jpeg::scan(&b, true, &Limits::default()) else {
                continue;
            };
            let Some(mut source) = baseline::scan(&b[hd.soi..]) else {
                continue;
            };
            let req = scaled_request(&hd, None, 1);
            match turbo::decode_from_source(&b[hd.soi..], &req, &mut source) {
                Ok(got) => assert!(
                    turbo::decode(&b[hd.soi..], &req).is_ok_and(|want| want == got),
                    "a corrupt file decoded by us to other pixels"
                ),
                Err(_) => declined += 1,
            }
        }
    }
    assert!(declined > 0, "no corrupt file was declined");
}
