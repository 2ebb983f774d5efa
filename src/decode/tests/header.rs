//! The one JPEG header parser against every file we have (the committed fixtures, generated
//! ones, and `../shared`'s jpeg-edge and imagenet-400 when present), against damaged input
//! (every truncated prefix, bit flips), and the colour-space and irregularity rules the
//! decoders act on.

use super::*;
use crate::decode::header::ColorSpace;
use crate::testutil::{encode_rgb_stored_jpeg, RgbMark};

/// What must hold of every header read to EOI from `b`: offsets inside the file and in
/// order, tables defined before the scans that use them, the frame as accepted.
fn check_invariants(name: &str, b: &[u8], h: &JpegHeader) {
    let f = &h.frame;
    assert!(matches!(f.components.len(), 1 | 3 | 4), "{name}");
    assert!(f
        .components
        .iter()
        .all(|c| (1..=4).contains(&c.h) && (1..=4).contains(&c.v)));
    assert_eq!(f.precision, 8, "{name}");
    assert!(f.width > 0 && f.height > 0, "{name}");
    assert!((1..=8).contains(&h.orientation), "{name}");
    assert!(
        h.complete && h.end <= b.len() && b[h.end - 2..h.end] == [0xFF, 0xD9],
        "{name}"
    );
    assert!(!h.scans.is_empty(), "{name}");
    let mut at = h.soi;
    for (k, s) in h.scans.iter().enumerate() {
        let data = s.data.clone().expect("every scan's data");
        assert!(
            at <= s.header.start,
            "{name}: scan {k} overlaps what precedes it"
        );
        assert_eq!(
            b[s.header.start..s.header.start + 2],
            [0xFF, 0xDA],
            "{name}: scan {k}"
        );
        assert!(
            s.header.end == data.start && data.end <= h.end,
            "{name}: scan {k}"
        );
        at = data.end;
        for (slots, class) in [(&s.tables.dc, 0), (&s.tables.ac, 1)] {
            for t in slots.iter().flatten() {
                let t = &h.huffman_tables[usize::from(*t)];
                assert_eq!(t.class, class, "{name}");
                assert!(
                    t.bytes.end <= s.header.start,
                    "{name}: table after its scan"
                );
            }
        }
        for q in s.tables.quant.iter().flatten() {
            assert!(usize::from(*q) < h.quant_tables.len(), "{name}");
        }
    }
    for t in &h.huffman_tables {
        let counts = &b[t.bytes.start..t.bytes.start + 16];
        let n: usize = counts.iter().map(|&c| usize::from(c)).sum();
        assert_eq!(t.bytes.len(), 16 + n, "{name}: Huffman table bytes");
    }
    for r in &h.color_segments {
        assert!(r.end <= h.scans[0].header.start, "{name}");
        assert!(matches!(b[r.start + 1], 0xE0 | 0xEE), "{name}");
    }
}

/// The header up to the first scan says the same as the full one, as far as it goes.
fn check_first_scan_read(name: &str, b: &[u8], full: &JpegHeader) {
    let first = JpegHeader::read_to_first_scan(b, &Limits::default()).unwrap();
    assert!(!first.complete, "{name}");
    assert_eq!(first.frame, full.frame, "{name}");
    assert_eq!(
        (first.orientation, first.jfif, first.adobe_transform),
        (full.orientation, full.jfif, full.adobe_transform),
        "{name}"
    );
    assert_eq!(first.scans.len(), 1, "{name}");
    let (a, z) = (&first.scans[0], &full.scans[0]);
    assert_eq!((a.header.clone(), a.data.clone()), (z.header.clone(), None));
    assert_eq!(
        (&a.components, a.ss, a.se, a.ah, a.al, a.tables),
        (&z.components, z.ss, z.se, z.ah, z.al, z.tables),
        "{name}"
    );
}

/// The committed fixtures and a few generated files (EXIF, restarts, every subsampling,
/// progressive, RGB-stored), by name.
fn own_jpegs() -> Vec<(String, Vec<u8>)> {
    let mut files = golden_jpegs(
        "sequential",
        "optimised",
        &["420", "444-q100", "422-rst", "gray-rst", "cmyk"],
    );
    files.extend(golden_jpegs(
        "progressive",
        "progressive",
        &["420", "422", "444", "gray", "420-rst", "gray-rst"],
    ));
    let (h, w) = (45usize, 61usize);
    for (i, sub) in [Sub::S444, Sub::S422, Sub::S420, Sub::S440, Sub::S411]
        .into_iter()
        .enumerate()
    {
        for progressive in [false, true] {
            let orientation = 1 + i as u16;
            let o = JpegOpts {
                quality: 85,
                sub,
                progressive,
                exif_tiff: Some(exif_orientation_tiff(orientation, i % 2 == 0)),
            };
            files.push((
                format!("generated {sub:?} progressive={progressive} orientation={orientation}"),
                encode_jpeg_opts(&pattern_rgb(h, w), h, w, 3, &o),
            ));
        }
    }
    for mark in [RgbMark::Adobe, RgbMark::ComponentIds, RgbMark::Jfif] {
        files.push((
            format!("generated RGB-stored {mark:?}"),
            encode_rgb_stored_jpeg(&smooth_rgb(h, w), h, w, mark),
        ));
    }
    files
}

/// The files of `../shared/data/<folder>`, sorted, or `None` (said) without it.
fn shared_files(folder: &str) -> Option<Vec<(String, Vec<u8>)>> {
    let dir = shared_data()?.join(folder);
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    Some(
        paths
            .into_iter()
            .map(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                (name, std::fs::read(&p).unwrap())
            })
            .collect(),
    )
}

/// Reads `b`'s header and checks it against the invariants, the first-scan read and the
/// decoder: the same size (before orientation) and components, or the same error.
fn check_file(name: &str, b: &[u8]) -> Result<JpegHeader, DecodeError> {
    let stored = DecodeOptions {
        apply_exif: false,
        ..DecodeOptions::default()
    };
    let full = JpegHeader::read(b, &Limits::default());
    let decoded = decode(b, &stored);
    match &full {
        Ok(h) => {
            check_invariants(name, b, h);
            check_first_scan_read(name, b, h);
            let im = decoded.unwrap_or_else(|e| panic!("{name}: header read, decode fails: {e}"));
            assert_eq!((im.width, im.height), (h.width(), h.height()), "{name}");
            assert_eq!(probe(b, &stored).unwrap().components, h.components());
        }
        Err(e) => assert_eq!(decoded.as_ref().err(), Some(e), "{name}"),
    }
    full
}

#[test]
fn header_of_our_fixtures() {
    for (name, b) in own_jpegs() {
        let h = check_file(&name, &b).unwrap();
        // Their layouts, as written.
        let progressive = name.starts_with("progressive") || name.contains("progressive=true");
        assert_eq!(h.progressive(), progressive, "{name}");
        assert!(!h.arithmetic() && h.irregular_at.is_none(), "{name}");
        if progressive {
            assert!(h.scans.len() > 1, "{name}");
        }
        let want_color = match &name[..] {
            n if n.contains("gray") => ColorSpace::Gray,
            n if n.contains("cmyk") => ColorSpace::Cmyk,
            n if n.contains("RGB-stored Adobe") || n.contains("RGB-stored ComponentIds") => {
                ColorSpace::Rgb
            }
            _ => ColorSpace::YCbCr,
        };
        assert_eq!(h.color_space(), want_color, "{name}");
        let orientation = name
            .split("orientation=")
            .nth(1)
            .map_or(1, |o| o.parse().unwrap());
        assert_eq!(h.orientation, orientation, "{name}");
        if name.contains("rst") {
            assert!(h.restart_interval() > 0, "{name}");
        }
    }
}

/// jpeg-edge (one file per oddity) and imagenet-400 (photographs): every header read is
/// consistent with the decoder, and the oddities are what they are.
#[test]
fn header_of_the_shared_corpora() {
    let Some(edge) = shared_files("jpeg-edge") else {
        return;
    };
    for (name, b) in edge.iter().filter(|(n, _)| n.ends_with(".jpg")) {
        let got = check_file(name, b);
        println!("{name}: {:?}", got.as_ref().map(|h| h.color_space()));
        match &name[..] {
            "monkey12.jpg" => assert!(
                matches!(got, Err(DecodeError::Unsupported(ref m)) if m.contains("12-bit")),
                "{got:?}"
            ),
            "truncated_jpeg.jpg" => assert!(
                matches!(got, Err(DecodeError::Corrupt(ref m)) if m.starts_with("truncated")),
                "{got:?}"
            ),
            _ => {
                let h = got.unwrap();
                let want = match &name[..] {
                    "hopper_orientation_6.jpg" => (6, false, false, ColorSpace::YCbCr),
                    "pil_sample_cmyk.jpg" => (1, false, false, ColorSpace::Ycck),
                    "testimgari.jpg" => (1, true, false, ColorSpace::YCbCr),
                    "app13-multiple.jpg" => (1, false, true, ColorSpace::YCbCr),
                    "hopper_gray.jpg" | "jfif_unit_cm.jpg" => (1, false, false, ColorSpace::Gray),
                    _ => (1, false, false, ColorSpace::YCbCr),
                };
                let got = (
                    h.orientation,
                    h.arithmetic(),
                    h.progressive(),
                    h.color_space(),
                );
                assert_eq!(got, want, "{name}");
                // Garbage between segments is the one irregularity here.
                assert_eq!(
                    h.irregular_at.is_some(),
                    name == "junk_jpeg_header.jpg",
                    "{name}"
                );
            }
        }
    }
    let Some(photos) = shared_files("imagenet-400") else {
        return;
    };
    let (mut progressive, mut gray) = (0, 0);
    for (name, b) in &photos {
        let h = check_file(name, b).unwrap();
        progressive += usize::from(h.progressive());
        gray += usize::from(h.components() == 1);
        assert!(h.irregular_at.is_none(), "{name}");
        assert!(
            h.own_sequential_fit() || h.own_progressive_fit(),
            "{name}: one of our entropy decoders takes every photograph"
        );
    }
    println!(
        "{} jpeg-edge files and {} photographs ({progressive} progressive, {gray} gray) read",
        edge.len(),
        photos.len()
    );
}

#[test]
fn truncated_prefixes_and_bit_flips_never_panic() {
    let mut rng = crate::rng::SampleRng::from_key(20);
    for (name, b) in own_jpegs() {
        let h = JpegHeader::read(&b, &Limits::default()).unwrap();
        let first_scan_end = h.scans[0].header.end;
        // Every prefix of the small files, every 7th of the others.
        let step = if b.len() < 12_000 { 1 } else { 7 };
        for cut in (0..h.end).step_by(step) {
            let p = &b[..cut];
            let r = JpegHeader::read(p, &Limits::default());
            assert!(r.is_err(), "{name}: a prefix of {cut} bytes read as whole");
            let first = JpegHeader::read_to_first_scan(p, &Limits::default());
            assert_eq!(
                first.is_ok(),
                cut >= first_scan_end,
                "{name}: prefix of {cut}"
            );
        }
        for _ in 0..500 {
            let mut d = b.clone();
            for _ in 0..1 + rng.below(3) {
                let i = rng.below(d.len() as u64) as usize;
                d[i] ^= 1 << rng.below(8);
            }
            let _ = JpegHeader::read_to_first_scan(&d, &Limits::default());
            if let Ok(h) = JpegHeader::read(&d, &Limits::default()) {
                // Offsets stay in the file; the rest may be anything a flipped bit made.
                assert!(h.end <= d.len() && h.scans.iter().all(|s| s.header.end <= h.end));
                for t in &h.huffman_tables {
                    assert!(t.bytes.end <= d.len());
                }
                let _ = (
                    h.own_sequential_fit(),
                    h.own_progressive_fit(),
                    h.subsampling(),
                );
            }
        }
    }
}

/// A 56x40 4:2:0 JPEG of quality 90, sequential or progressive.
fn small_420(progressive: bool) -> Vec<u8> {
    let (h, w) = (40usize, 56usize);
    let o = JpegOpts {
        quality: 90,
        sub: Sub::S420,
        progressive,
        exif_tiff: None,
    };
    encode_jpeg_opts(&pattern_rgb(h, w), h, w, 3, &o)
}

/// Bytes between segments (which libjpeg skips with a warning) and malformed tables are
/// noted, and leave the file to libjpeg alone: the pixels of a file with garbage between
/// segments are those of the clean file.
#[test]
fn irregular_files_are_left_to_libjpeg() {
    for progressive in [false, true] {
        let clean = small_420(progressive);
        let hc = header(&clean);
        assert!(hc.irregular_at.is_none());
        assert!(hc.own_sequential_fit() != progressive);
        assert!(hc.own_progressive_fit() == progressive);
        // "junk" after the JFIF APP0 (2 + 18 bytes).
        let mut junk = clean.clone();
        junk.splice(20..20, b"junk".iter().copied());
        let hj = header(&junk);
        assert_eq!(hj.irregular_at, Some(20));
        assert!(!hj.own_sequential_fit() && !hj.own_progressive_fit());
        let (a, b) = (decode(&clean, &rgb_opts()), decode(&junk, &rgb_opts()));
        assert_eq!(a.unwrap(), b.unwrap());
        assert_eq!(jpeg::ENTROPY_DECODED_BY.get(), "libjpeg");
        // A DHT with a table slot libjpeg refuses: read, noted, refused by libjpeg.
        let dht = clean.windows(2).position(|x| x == [0xFF, 0xC4]).unwrap();
        let mut bad = clean.clone();
        bad[dht + 4] = 0x07;
        let hb = header(&bad);
        assert_eq!(hb.irregular_at, Some(dht));
        assert!(!hb.own_sequential_fit() && !hb.own_progressive_fit());
        assert!(
            matches!(decode(&bad, &rgb_opts()), Err(DecodeError::Corrupt(ref m)) if m.starts_with("JPEG: "))
        );
    }
}

/// The offset (its `0xFF`) of the first segment with marker `m`.
fn segment_at(b: &[u8], m: u8) -> usize {
    b.windows(2).position(|x| x == [0xFF, m]).unwrap()
}

/// `b` with `extra` appended to the payload of the segment at `at`, its length grown.
fn lengthened(b: &[u8], at: usize, extra: &[u8]) -> Vec<u8> {
    let len = usize::from(u16::from_be_bytes([b[at + 2], b[at + 3]]));
    let mut v = b.to_vec();
    v.splice(at + 2 + len..at + 2 + len, extra.iter().copied());
    v[at + 2..at + 4].copy_from_slice(&u16::try_from(len + extra.len()).unwrap().to_be_bytes());
    v
}

/// What libjpeg refuses in a header when it decodes — a frame or scan header or restart
/// interval of the wrong length ("Bogus marker length"), a side above 65500 pixels, a Huffman table whose codes
/// overflow their lengths or a DC table with a symbol above 15 ("Bogus Huffman table
/// definition"), a scan naming a table slot not defined or a component the frame doesn't
/// have — is noted as irregular by the walk, and so left to libjpeg on both paths: the CPU
/// path reports libjpeg's error and the nvJPEG routing sends the file to the CPU (the JPEG
/// engines report no error per image, and would have written garbage for a sample the CPU
/// path skips).
#[test]
fn segments_libjpeg_refuses_are_irregular_and_go_to_libjpeg() {
    use crate::nvjpeg::fallback::{route_header, FallbackReason, Route};
    for progressive in [false, true] {
        let clean = small_420(progressive);
        assert!(header(&clean).irregular_at.is_none());
        let (sof, sos) = (
            segment_at(&clean, if progressive { 0xC2 } else { 0xC0 }),
            segment_at(&clean, 0xDA),
        );
        let mut dri = clean.clone();
        dri.splice(sos..sos, [0xFF, 0xDD, 0x00, 0x05, 0x00, 0x04, 0x00]);
        // The first DHT's first table, a DC table: its codes or symbols spoiled, its size kept.
        let dht = segment_at(&clean, 0xC4);
        assert_eq!(clean[dht + 4] >> 4, 0, "the first table is a DC table");
        let counts = &clean[dht + 5..dht + 21];
        let n: u8 = counts.iter().sum();
        assert!(n >= 3);
        let mut overflowing = clean.clone();
        // Two codes of length 1 leave none for longer codes.
        let mut spoiled = [0u8; 16];
        (spoiled[0], spoiled[15]) = (2, n - 2);
        overflowing[dht + 5..dht + 21].copy_from_slice(&spoiled);
        let mut dc_symbol = clean.clone();
        dc_symbol[dht + 21] = 16;
        let mut slot4 = clean.clone();
        slot4[sos + 6] = 0x44;
        let mut too_wide = clean.clone();
        too_wide[sof + 7..sof + 9].copy_from_slice(&65501u16.to_be_bytes());
        let mut stranger = clean.clone();
        stranger[sos + 5] = 0x7F;
        // The scan's first two components swapped (Y after Cb).
        let mut swapped = clean.clone();
        let first = [clean[sos + 5], clean[sos + 6]];
        swapped.copy_within(sos + 7..sos + 9, sos + 5);
        swapped[sos + 7..sos + 9].copy_from_slice(&first);
        let variants = [
            ("a frame 65501 pixels wide", too_wide),
            ("a scan naming Huffman table slot 4", slot4),
            ("a scan naming a component the frame doesn't have", stranger),
            (
                "a frame header one byte long",
                lengthened(&clean, sof, &[0]),
            ),
            ("a scan header one byte long", lengthened(&clean, sos, &[0])),
            ("a restart interval of three bytes", dri),
            ("a Huffman table whose codes overflow", overflowing),
            ("a DC table with symbol 16", dc_symbol),
        ];
        let mut variants = variants.to_vec();
        // (The progressive file's first scan holds one component.)
        if clean[sos + 4] >= 2 {
            variants.push((
                "a scan with its components out of the frame's order",
                swapped,
            ));
        }
        for (what, bad) in variants {
            let hb = header(&bad);
            let at = hb.irregular_at;
            assert!(at.is_some(), "{what} (progressive {progressive})");
            assert!(
                !hb.own_sequential_fit() && !hb.own_progressive_fit(),
                "{what}"
            );
            assert_eq!(
                route_header(&hb, true),
                Route::Cpu(FallbackReason::Irregular(at.unwrap())),
                "{what}"
            );
            let got = decode(&bad, &rgb_opts());
            assert!(
                matches!(got, Err(DecodeError::Corrupt(ref m)) if m.starts_with("JPEG: ")),
                "{what} (progressive {progressive}): {got:?}"
            );
        }
    }
}

/// libjpeg refuses a bad Huffman table only when a scan decodes with it: one defined in a
/// slot no scan uses leaves the file regular (our decoders and the JPEG engines take it).
#[test]
fn an_unused_bad_huffman_table_leaves_the_file_regular() {
    use crate::nvjpeg::fallback::{route_header, Route};
    let clean = small_420(false);
    let sos = segment_at(&clean, 0xDA);
    // An AC table in slot 3 with two codes of length 1 (the second all ones).
    let mut table = vec![0xFF, 0xC4, 0x00, 0x15, 0x13, 2];
    table.extend([0u8; 15]);
    table.extend([0x01, 0x02]);
    let mut with = clean.clone();
    with.splice(sos..sos, table);
    let h = header(&with);
    assert!(h.irregular_at.is_none());
    assert!(h.huffman_tables.iter().any(|t| t.refused && t.slot == 3));
    assert!(matches!(route_header(&h, true), Route::Gpu(..)));
    assert_eq!(
        decode(&with, &rgb_opts()).unwrap(),
        decode(&clean, &rgb_opts()).unwrap()
    );
}

/// 3-component JPEGs stored as RGB (Adobe transform 0, or ids R G B without JFIF) decode
/// as libjpeg reads them, which is what Pillow gives (it lets libjpeg guess the colour space
/// and asks for RGB out): the stored samples are the pixels, not converted from YCbCr.
#[test]
fn rgb_stored_jpegs_decode_as_libjpeg_reads_them() {
    let (h, w) = (48usize, 64usize);
    let src = smooth_rgb(h, w);
    let libjpeg = DecodeOptions {
        sequential_decoder: EntropyDecoder::Libjpeg,
        ..rgb_opts()
    };
    for mark in [RgbMark::Adobe, RgbMark::ComponentIds, RgbMark::Jfif] {
        let jpg = encode_rgb_stored_jpeg(&src, h, w, mark);
        let hd = header(&jpg);
        let rgb = mark != RgbMark::Jfif;
        assert_eq!(hd.color_space() == ColorSpace::Rgb, rgb, "{mark:?}");
        let ours = decode(&jpg, &rgb_opts()).unwrap();
        assert_eq!(jpeg::ENTROPY_DECODED_BY.get(), "stokehold sequential");
        let theirs = decode(&jpg, &libjpeg).unwrap();
        assert_eq!(jpeg::ENTROPY_DECODED_BY.get(), "libjpeg");
        assert_eq!(
            ours, theirs,
            "{mark:?}: our entropy decoding changed pixels"
        );
        let p = psnr_u8(ours.as_u8_hwc().unwrap(), &src);
        println!("{mark:?}: PSNR {p:.1} dB against the stored R G B");
        if rgb {
            assert!(p >= 35.0, "{mark:?}: {p:.1} dB");
        } else {
            // The control: read as Y Cb Cr, the samples come out as other colours.
            assert!(p < 20.0, "{mark:?}: {p:.1} dB");
        }
    }
}
