//! Window decodes equal the crop of the full decode; DCT-scaled decodes that drop the AC
//! scans a 1/8 decode never reads.

use super::*;
use crate::decode::header::Scan;

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
                // Chroma repeated, as the emulated JPEG engines decode.
                DecodeOptions {
                    upsampling: crate::decode::Upsampling::Nearest,
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
fn a_window_comes_with_the_columns_decoded_beside_it() {
    // A baseline RGB JPEG our entropy decoder takes: the window's rows come as libjpeg wrote
    // them (no copy), whole iMCUs and a margin either side; anything else comes packed.
    let (h, w) = (64usize, 160usize);
    let jpg = encode_jpeg_opts(
        &pattern_rgb(h, w),
        h,
        w,
        3,
        &JpegOpts {
            quality: 85,
            sub: Sub::S420,
            progressive: false,
            exif_tiff: None,
        },
    );
    let win = (5, 50, 20, 30);
    let (im, at) = ParsedImage::parse(&jpg, &rgb_opts())
        .unwrap()
        .decode_window_within(win)
        .unwrap();
    // 16-pixel iMCUs: columns 32..96 (the window's iMCUs and one more either side).
    assert_eq!((im.height, im.width, at), (20, 64, (0, 18, 20, 30)));
    let gray = DecodeOptions {
        color: ColorMode::Gray,
        ..rgb_opts()
    };
    let (im, at) = ParsedImage::parse(&jpg, &gray)
        .unwrap()
        .decode_window_within(win)
        .unwrap();
    assert_eq!((im.height, im.width, at), (20, 30, (0, 0, 20, 30)));
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
            let (within, at) = ParsedImage::parse(&jpg, &rgb_opts()).unwrap()
                .decode_window_within((t, l, wh, ww)).unwrap();
            prop_assert!(crop_of(&within, at) == crop_of(&full, (t, l, wh, ww)),
                "{sub:?} p={progressive} o={o} {h}x{w}: window {:?} at {at:?}", (t, l, wh, ww));
        }
    }
}

/// A progression that stops before the AC coefficients are exact (the fixtures without their
/// AC refinement scans; generated files in the other layouts without the AC bands that start
/// at coefficients 1 to 9: legal, the bits a writer that stops early leaves): libjpeg smooths
/// blocks there (jdcoefct.c), estimating each block's first AC coefficients from the DC
/// values of the blocks up to two away, and takes a crop's first block column as the image's
/// edge. The windows still equal the full decode's, at full and half size (found by fuzzing:
/// `fuzz/checks.rs`).
#[test]
fn window_decode_is_bit_exact_where_libjpeg_smooths_blocks() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/progressive");
    // Each file, and which of its scans to leave out.
    type LeftOut = fn(&Scan) -> bool;
    let mut files: Vec<(String, Vec<u8>, LeftOut)> = ["420", "422", "444", "gray"]
        .iter()
        .map(|n| {
            let name = format!("progressive-{n}.jpg");
            let jpg = std::fs::read(dir.join(&name)).unwrap();
            let refinement: LeftOut = |s| s.ss > 0 && s.ah > 0;
            (name, jpg, refinement)
        })
        .collect();
    let (h, w) = (133usize, 171usize);
    for sub in [Sub::S440, Sub::S411, Sub::S422] {
        let o = JpegOpts {
            quality: 85,
            sub,
            progressive: true,
            exif_tiff: None,
        };
        let low_ac: LeftOut = |s| (1..=9).contains(&s.ss);
        let jpg = encode_jpeg_opts(&pattern_rgb(h, w), h, w, 3, &o);
        files.push((format!("generated {sub:?}"), jpg, low_ac));
    }
    for (name, jpg, left_out) in &files {
        let hd = header(jpg);
        let mut coarse = Vec::with_capacity(jpg.len());
        let mut from = hd.soi;
        for s in hd.scans.iter().filter(|s| left_out(s)) {
            coarse.extend_from_slice(&jpg[from..s.header.start]);
            from = s.data.as_ref().unwrap().end;
        }
        assert!(from > hd.soi, "{name}: no scan to leave out");
        coarse.extend_from_slice(&jpg[from..hd.end]);
        let opts = rgb_opts();
        let full = decode(&coarse, &opts).unwrap();
        // libjpeg smooths these: without smoothing the pixels differ.
        let h = header(&coarse);
        let req = turbo::Request {
            width: h.width(),
            height: h.height(),
            components: h.components(),
            region: None,
            scale_denom: 1,
            block_smoothing: false,
            fancy_upsampling: true,
        };
        let (unsmoothed, ..) = turbo::decode(&coarse[h.soi..], &req).unwrap();
        let smoothed: Vec<u8> = match h.components() {
            1 => full
                .as_u8_hwc()
                .unwrap()
                .iter()
                .step_by(3)
                .copied()
                .collect(),
            _ => full.as_u8_hwc().unwrap().to_vec(),
        };
        assert!(unsmoothed != smoothed, "{name}: libjpeg did not smooth");
        let nearest = DecodeOptions {
            upsampling: crate::decode::Upsampling::Nearest,
            ..opts
        };
        let full_nearest = decode(&coarse, &nearest).unwrap();
        for win in windows_for(full.height, full.width) {
            assert_window_exact(&coarse, &opts, &full, win, name);
            assert_window_exact(&coarse, &nearest, &full_nearest, win, name);
        }
        // At half size in the DCT domain (`dct_downscale`).
        let half = decode_scaled(&coarse, &opts, 2, None).unwrap();
        for win in windows_for(half.height, half.width) {
            let part = decode_scaled(&coarse, &opts, 2, Some(win)).unwrap();
            assert!(
                part.as_u8_hwc().unwrap() == &crop_of(&half, win)[..],
                "{name}: half-size window {win:?} differs from the half-size decode"
            );
        }
    }
}

/// Every scan decoded, at 1/8 (the reference for the dropped-scan path).
fn decode_eighth_every_scan(jpg: &[u8]) -> (Vec<u8>, usize) {
    let hd = header(jpg);
    let (width, height) = jpeg::scaled_size(hd.width(), hd.height(), 8);
    let req = turbo::Request {
        width,
        height,
        components: hd.components(),
        region: None,
        scale_denom: 8,
        block_smoothing: true,
        fancy_upsampling: true,
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
        let Some(fewer) = without_unused_ac_scans(jpg) else {
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
    assert!(without_unused_ac_scans(&jpg).is_none());
    let cut = &jpg[..jpg.len() / 2];
    assert!(without_unused_ac_scans(cut).is_none());
}

/// [`jpeg::without_unused_ac_scans`] of `jpg` with its header read here; `None` as well when
/// the header can't be read.
fn without_unused_ac_scans(jpg: &[u8]) -> Option<Vec<u8>> {
    let hd = JpegHeader::read(jpg, &Limits::default()).ok()?;
    jpeg::without_unused_ac_scans(jpg, &hd)
}
