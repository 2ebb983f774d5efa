//! Round trips of generated JPEGs and PNGs, Pillow's luma, and EXIF orientation.

use super::*;

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
                let p = psnr_u8(im.as_u8_hwc().unwrap(), &src);
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
        let p = psnr_u8(g.as_u8_hwc().unwrap(), &src);
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
    let bytes = include_bytes!("../../../tests/bad/decode/exif-after-first-scan.jpg");
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
