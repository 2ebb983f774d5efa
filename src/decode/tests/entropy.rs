//! Our entropy decoders (progressive and sequential) give libjpeg's pixels exactly, and
//! decline what they cannot match.

use super::*;

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
        hd.progressive()
    }));
    files
}

/// The JPEGs of `../shared`'s imagenet-400 and jpeg-edge (when it is there) and of the
/// folder in environment variable `extra_dir` whose headers `keep` accepts, by path.
fn jpegs_beside(extra_dir: &str, keep: impl Fn(&JpegHeader) -> bool) -> Vec<(String, Vec<u8>)> {
    let mut dirs: Vec<std::path::PathBuf> = Vec::new();
    if let Some(shared) = crate::testutil::shared_data_part() {
        dirs.push(shared.join("imagenet-400"));
        dirs.push(shared.join("jpeg-edge"));
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
            if JpegHeader::read(&bytes, &Limits::default()).is_ok_and(|hd| keep(&hd)) {
                files.push((p.display().to_string(), bytes));
            }
        }
    }
    files
}

/// libjpeg decoding the original (its own progressive decoder), the reference.
fn libjpeg_decode(jpg: &[u8], region: Option<turbo::Rect>) -> (Vec<u8>, usize) {
    let hd = header(jpg);
    let req = turbo::Request {
        width: hd.width(),
        height: hd.height(),
        components: hd.components(),
        region,
        scale_denom: 1,
        block_smoothing: true,
        fancy_upsampling: true,
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
    let (mut checked, mut expected) = (0, 0);
    for (name, jpg) in &files {
        let hd = header(jpg);
        // Our own fixtures must all take the fast path; other files when their headers
        // say it takes them (not CMYK...).
        let fixture = name.starts_with("progressive-") || name.starts_with("generated");
        let must = fixture || hd.own_progressive_fit();
        expected += usize::from(must);
        let t = progressive::coefficients(jpg, &hd, None);
        let Some(t) = t else {
            assert!(!must, "{name}: not decoded by us");
            println!("{name}: left to libjpeg");
            continue;
        };
        checked += 1;
        assert_eq!(
            (t.width, t.height, t.region),
            (hd.width(), hd.height(), None)
        );
        let (want, c) = libjpeg_decode(jpg, None);
        let (got, _) = t.decode(hd.components(), true).unwrap();
        assert!(got == want, "{name}: whole image differs");
        let (h, w) = (hd.height(), hd.width());
        for win in windows_sampled(h, w, 37) {
            let (top, left, wh, ww) = win;
            let t = progressive::coefficients(jpg, &hd, Some(win))
                .unwrap_or_else(|| panic!("{name}: window {win:?} not decoded by us"));
            let (got, _) = t.decode(hd.components(), true).unwrap();
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
    // What the files present can give (our fixtures, and the others whose headers our
    // decoder takes), no fewer.
    assert!(
        checked >= expected && expected > 0,
        "only {checked} files decoded by us, {expected} expected"
    );
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
    let (mut checked, mut expected) = (0, 0);
    for (name, jpg) in &progressive_files() {
        let hd = header(jpg);
        expected += usize::from(hd.own_progressive_fit());
        let Some(t) = progressive::coefficients(jpg, &hd, None) else {
            continue;
        };
        let (want, _) = libjpeg_decode(jpg, None);
        let (got, _) = t.decode(hd.components(), true).unwrap();
        assert!(got == want, "{name}: whole image differs");
        checked += 1;
    }
    progressive::NO_PDEP.with(|n| n.set(false));
    assert!(
        checked >= expected && expected > 0,
        "only {checked} files decoded by us, {expected} expected"
    );
}

/// The public decode functions use it, and say the same as libjpeg: `decode` and
/// `decode_window` with our progressive decoder on and off.
#[test]
fn progressive_decode_paths_agree() {
    let (h, w) = (157usize, 203usize);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/progressive");
    let jpg = std::fs::read(dir.join("progressive-420-rst.jpg")).unwrap();
    for (opts, by) in [
        (rgb_opts(), "stokehold progressive"),
        (
            DecodeOptions {
                progressive_decoder: EntropyDecoder::Libjpeg,
                ..rgb_opts()
            },
            "libjpeg",
        ),
    ] {
        let full = decode(&jpg, &opts).unwrap();
        assert_eq!(jpeg::ENTROPY_DECODED_BY.get(), by);
        let (want, _) = libjpeg_decode(&jpg, None);
        assert_eq!((full.height, full.width), (h, w));
        assert!(full.as_u8_hwc().unwrap() == want.as_slice());
        let win = (37, 51, 90, 101);
        let part = decode_window(&jpg, &opts, win).unwrap();
        assert_eq!(jpeg::ENTROPY_DECODED_BY.get(), by);
        assert!(part.as_u8_hwc().unwrap() == crop_of(&full, win).as_slice());
    }
}

/// The entropy decoder is chosen per call (per pipeline), not per process: two threads
/// decoding the same files at the same time, one with each choice, each get the decoder
/// they asked for, and the same pixels.
#[test]
fn entropy_decoder_choice_is_per_pipeline() {
    let mut files = golden_jpegs("progressive", "progressive", &["420", "gray-rst"]);
    files.extend(golden_jpegs("sequential", "optimised", &["420", "cmyk"]));
    let choices = [
        (EntropyDecoder::Stokehold, EntropyDecoder::Stokehold),
        (EntropyDecoder::Libjpeg, EntropyDecoder::Libjpeg),
        (EntropyDecoder::Libjpeg, EntropyDecoder::Stokehold),
        (EntropyDecoder::Stokehold, EntropyDecoder::Libjpeg),
    ];
    let decoded: Vec<Vec<Image>> = std::thread::scope(|s| {
        let threads: Vec<_> = choices
            .iter()
            .map(|&(sequential_decoder, progressive_decoder)| {
                let files = &files;
                s.spawn(move || {
                    let opts = DecodeOptions {
                        sequential_decoder,
                        progressive_decoder,
                        ..rgb_opts()
                    };
                    let mut out = Vec::new();
                    for _ in 0..5 {
                        out.clear();
                        for (name, jpg) in files {
                            out.push(decode(jpg, &opts).unwrap());
                            let progressive = name.starts_with("progressive");
                            let want = match (progressive, progressive_decoder, sequential_decoder)
                            {
                                (true, EntropyDecoder::Stokehold, _) => "stokehold progressive",
                                (false, _, EntropyDecoder::Stokehold) => "stokehold sequential",
                                _ => "libjpeg",
                            };
                            assert_eq!(jpeg::ENTROPY_DECODED_BY.get(), want, "{name}");
                        }
                    }
                    out
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    for d in &decoded[1..] {
        assert!(*d == decoded[0], "the pixels depend on the decoder choice");
    }
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
    let hc = header(&cut);
    assert!(progressive::coefficients(&cut, &hc, None).is_none());
    // ... but a window near the top never reads the missing part.
    assert!(progressive::coefficients(&cut, &hc, Some((0, 0, 16, 16))).is_some());
    // Bit flips anywhere: never a panic; when we decode, libjpeg agrees.
    let mut rng = crate::rng::SampleRng::from_key(7);
    for _ in 0..300 {
        let mut b = jpg.clone();
        for _ in 0..3 {
            let i = 2 + (rng.next_u64() as usize) % (b.len() - 4);
            b[i] ^= 1 << (rng.next_u64() % 8);
        }
        let Ok(hd) = JpegHeader::read(&b, &Limits::default()) else {
            continue;
        };
        let Some(t) = progressive::coefficients(&b, &hd, None) else {
            continue;
        };
        let req = turbo::Request {
            width: hd.width(),
            height: hd.height(),
            components: hd.components(),
            region: None,
            scale_denom: 1,
            block_smoothing: true,
            fancy_upsampling: true,
        };
        let (Ok(want), Ok(got)) = (turbo::decode(&b, &req), t.decode(hd.components(), true)) else {
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
    // Stored as R G B (libjpeg reads them so; no colour conversion).
    for mark in [
        crate::testutil::RgbMark::Adobe,
        crate::testutil::RgbMark::ComponentIds,
    ] {
        let px = noisy_pattern(h, w, 3, 9);
        files.push((
            format!("generated RGB-stored {mark:?}"),
            crate::testutil::encode_rgb_stored_jpeg(&px, h, w, mark),
        ));
    }
    files.extend(jpegs_beside("STOKEHOLD_SEQUENTIAL_DIR", |hd| {
        !hd.progressive() && !hd.arithmetic()
    }));
    files
}

fn scaled_request(hd: &JpegHeader, region: Option<turbo::Rect>, scale: u8) -> turbo::Request {
    let (width, height) = jpeg::scaled_size(hd.width(), hd.height(), scale);
    turbo::Request {
        width,
        height,
        components: hd.components(),
        region,
        scale_denom: scale,
        block_smoothing: true,
        fancy_upsampling: true,
    }
}

/// Our entropy decoding gives libjpeg's pixels exactly: whole images at every DCT scale,
/// and windows at every edge and alignment (which make libjpeg skip rows, passing over
/// their MCUs, and crop columns).
#[test]
fn sequential_entropy_decoding_matches_libjpeg() {
    let files = sequential_files();
    let (mut checked, mut expected) = (0, 0);
    for (name, jpg) in &files {
        let hd = header(jpg);
        let soi = &jpg[hd.soi..];
        let one_scan = name.contains("Luma") || !name.contains("R_4_1_1");
        let fixture = name.starts_with("generated") || name.starts_with("optimised-");
        let ours = (name.starts_with("generated") && one_scan) || name.starts_with("optimised-");
        // Our fixtures must take our path unless they have a scan per component; other
        // files when their headers say it takes them (not with bytes between segments...).
        let must = ours || (!fixture && hd.own_sequential_fit());
        expected += usize::from(must);
        if baseline::scan(jpg, &hd).is_none() {
            assert!(!must, "{name}: not decoded by us");
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
            let mut source = baseline::scan(jpg, &hd).unwrap();
            let got = turbo::decode_from_source(soi, &req, &mut source)
                .unwrap_or_else(|e| panic!("{name}: declined at scale 1/{scale}: {e}"));
            assert!(got == want, "{name}: whole image at 1/{scale} differs");
        }
        let (h, w) = (hd.height(), hd.width());
        for win in windows_sampled(h, w, 53) {
            let req = scaled_request(&hd, Some(win), 1);
            let want = turbo::decode(soi, &req).unwrap();
            let mut source = baseline::scan(jpg, &hd).unwrap();
            let got = turbo::decode_from_source(soi, &req, &mut source)
                .unwrap_or_else(|e| panic!("{name}: window {win:?} declined: {e}"));
            assert!(got == want, "{name}: window {win:?} differs");
        }
    }
    println!(
        "{checked} of {} sequential files decoded by us and checked",
        files.len()
    );
    // What the files present can give (our fixtures, and the others whose headers our
    // decoder takes), no fewer: without ../shared, our fixtures alone.
    assert!(
        checked >= expected && expected > 0,
        "only {checked} files decoded by us, {expected} expected"
    );
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
        let hd = header(&jpg);
        let req = scaled_request(&hd, None, 1);
        // Data cut short: libjpeg fills with zeros and stops decoding; we decline.
        let mut cut = jpg[..jpg.len() - 300].to_vec();
        cut.extend_from_slice(&[0xFF, 0xD9]);
        let hc = header(&cut);
        let mut source = baseline::scan(&cut, &hc).unwrap();
        assert!(turbo::decode_from_source(&cut, &req, &mut source).is_err());
        // ... but a window near the top never reads the missing part.
        let top = scaled_request(&hd, Some((0, 0, 16, 16)), 1);
        let mut source = baseline::scan(&cut, &hc).unwrap();
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
            let Ok(hd) = JpegHeader::read(&b, &Limits::default()) else {
                continue;
            };
            let Some(mut source) = baseline::scan(&b, &hd) else {
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
