//! Regressions from fuzzing (scripts/fuzz.sh) and hand-made hostile inputs.
//!
//! Every input under `tests/bad/decode/` goes through `probe` and `decode` (default options,
//! small limits, no EXIF), every one under `tests/bad/pipeline_file/` through the pipeline-file
//! parser and the graph validator: each must give a typed error, never a panic. A crash found
//! by the fuzzer is minimized (`cargo fuzz tmin`), committed there when small, and gets a test
//! of its own below saying what it was.
//!
//! Found by fuzzing: `exif-after-first-scan.jpg` (probe and decode disagreed on the size).
//! The other inputs below are hostile headers built by hand around the paths the fuzzer
//! reaches least often (limits, EXIF offsets, PNG chunk lengths, deep TOML nesting).

use std::path::{Path, PathBuf};

use stokehold::decode::{decode, probe, DecodeError, DecodeOptions};
use stokehold::pipeline::file;
use stokehold::pipeline::graph::Graph;
use stokehold::Error;

mod common;

/// The fuzz targets' checks (`fuzz/checks.rs`): what they assert on every input holds here
/// on the committed and real inputs, and compiles in every test run.
#[path = "../fuzz/checks.rs"]
mod checks;

fn bad_dir(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/bad")
        .join(kind)
}

fn files(kind: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(bad_dir(kind))
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Probes and decodes `bytes` with every option set; returns the default decode's result.
fn decode_all(bytes: &[u8]) -> Result<(usize, usize), DecodeError> {
    let mut first = None;
    for opts in checks::option_sets() {
        let info = probe(bytes, &opts);
        let img = decode(bytes, &opts);
        if let (Ok(i), Ok(m)) = (&info, &img) {
            assert_eq!((i.width, i.height), (m.width, m.height));
        }
        if first.is_none() {
            first = Some(img.map(|m| (m.width, m.height)));
        }
    }
    first.unwrap()
}

/// The pipeline-file parser and validator on `text`; a typed error or a graph, never a panic.
fn pipeline_file(text: &str) -> Result<(), Error> {
    let path = Path::new("fuzz.toml");
    let loaded = file::parse(text, path)?;
    Graph::build(&loaded.spec)
        .map(|_| ())
        .map_err(|e| file::config_error(path, &loaded.locations, e))
}

#[test]
fn committed_decode_inputs_give_typed_errors() {
    let all = files("decode");
    assert!(!all.is_empty());
    for p in all {
        let bytes = std::fs::read(&p).unwrap();
        let r = std::panic::catch_unwind(|| {
            let _ = decode_all(&bytes);
            let _ = checks::decode_checks(&bytes);
            let _ = checks::gpu_route_checks(&bytes);
        });
        assert!(r.is_ok(), "{} panics", p.display());
    }
}

/// The fuzz targets' checks on good and odd real files: the built-in sample set (every
/// subsampling, progressive, gray, PNG), `jpeg-edge` (CMYK, 12-bit, truncated, arithmetic,
/// EXIF-rotated, junk before SOI) and a few ImageNet photos. A window decodes to exactly that
/// window of the whole decode; the GPU path's routes and regions hold.
#[test]
fn the_fuzz_checks_hold_on_real_files() {
    let (_dir, samples) = common::samples();
    let mut inputs: Vec<PathBuf> = Vec::new();
    let mut add_folder = |dir: &Path, at_most: usize| {
        inputs.extend(common::files_under(dir).into_iter().take(at_most));
    };
    add_folder(&samples, usize::MAX);
    if let Some(data) = common::shared_data_part() {
        add_folder(&data.join("jpeg-edge"), usize::MAX);
        add_folder(&data.join("imagenet-400"), 16);
    }
    assert!(inputs.len() > 10, "{inputs:?}");
    // (windows compared, regions checked): every good file gives some.
    let mut done = (0, 0);
    for p in &inputs {
        let bytes = std::fs::read(p).unwrap();
        for (k, pick) in [[0u8, 0, 255, 255], [200, 10, 30, 255], [255, 255, 0, 0]]
            .iter()
            .enumerate()
        {
            // The checks choose their window from the input's last four bytes.
            let mut b = bytes.clone();
            if k > 0 {
                b.extend_from_slice(pick);
            }
            let r = std::panic::catch_unwind(|| {
                (checks::decode_checks(&b), checks::gpu_route_checks(&b))
            });
            let (windows, regions) =
                r.unwrap_or_else(|_| panic!("{} (window {k}) fails a check", p.display()));
            done = (done.0 + windows, done.1 + regions);
        }
    }
    // Each good photo: 4 option sets, a window at full and at half size, 3 picks; 8
    // orientations, 2 paddings, 2 decoders, 3 picks.
    assert!(
        done.0 >= inputs.len() * 8 && done.1 >= inputs.len() * 32,
        "only {done:?} compared for {} files",
        inputs.len()
    );
}

#[test]
fn committed_pipeline_files_give_typed_errors() {
    let all = files("pipeline_file");
    assert!(!all.is_empty());
    for p in all {
        let text = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
        let r = std::panic::catch_unwind(|| pipeline_file(&text));
        match r {
            Err(_) => panic!("{} panics", p.display()),
            Ok(Err(Error::Config { line, .. })) => {
                assert!(
                    line >= 1 && line <= text.lines().count().max(1),
                    "{}",
                    p.display()
                )
            }
            Ok(other) => panic!("{}: expected a config error, got {other:?}", p.display()),
        }
    }
}

/// Fuzz crash (decode target, -max_len=2048): a progressive JPEG with an EXIF block
/// (orientation 5..8) between its scans. `decode` walked every scan and applied it, `probe`
/// stopped at the first SOS and did not, so the probed size was the transpose of the decoded
/// one. Fixed in the JPEG header walk (now src/decode/header.rs): only EXIF before the first
/// scan counts (as in Pillow).
#[test]
fn fuzz_exif_after_first_scan_probe_agrees_with_decode() {
    let bytes = std::fs::read(bad_dir("decode").join("exif-after-first-scan.jpg")).unwrap();
    for apply_exif in [true, false] {
        let opts = DecodeOptions {
            apply_exif,
            ..DecodeOptions::default()
        };
        let info = probe(&bytes, &opts).unwrap();
        let img = decode(&bytes, &opts).unwrap();
        assert_eq!((info.width, info.height), (img.width, img.height));
        assert_eq!((img.width, img.height), (207, 192));
        assert_eq!(info.orientation, 1);
    }
}

/// The shard fuzz target's checks on a shard written here (images, `.cls` and `.json` labels,
/// a long name, a member without its image, a big image) and on it cut every 61 bytes,
/// with each header's bytes flipped in turn, and with junk in front: the reader ends, and the
/// items (and where a cut stream ended) are the same whether images are loaded or not.
#[test]
fn the_fuzz_checks_hold_on_damaged_shards() {
    use stokehold::reader::shards::tar::{TarWriter, BLOCK};
    let mut w = TarWriter::new(Vec::new());
    for n in 0..4 {
        w.append(&format!("s{n}.jpg"), &common::shards::jpeg(n))
            .unwrap();
        w.append(&format!("s{n}.cls"), n.to_string().as_bytes())
            .unwrap();
        w.append(
            &format!("s{n}.json"),
            format!("{{\"a\": {{\"b\": {n}}}}}").as_bytes(),
        )
        .unwrap();
    }
    w.append(
        &format!("{}/long.jpg", "d".repeat(150)),
        &common::shards::jpeg(9),
    )
    .unwrap();
    w.append("alone.cls", b"3").unwrap();
    w.append("big.jpg", &vec![7u8; 70_000]).unwrap();
    let shard = w.finish().unwrap();
    // The intact shard's items: the four samples with their labels (by `.cls`, by `.json`),
    // the long-named image, the label without an image, the image over `max_bytes`.
    let rules = checks::shard_checks(&shard);
    for (rule, items) in rules.iter().enumerate() {
        assert_eq!(items.len(), 7, "rule {rule}: {items:?}");
        for (n, (member, label)) in items[..4].iter().enumerate() {
            let want = if rule == 0 { -1 } else { n as i64 };
            assert_eq!(
                (member.as_str(), *label),
                (format!("s{n}.jpg").as_str(), Some(want))
            );
        }
        assert_eq!(items[5].1, None, "rule {rule}: {items:?}");
        assert_eq!(items[6], ("big.jpg".to_string(), None), "rule {rule}");
    }
    // Cut inside headers, data and padding.
    for end in (0..shard.len()).step_by(61) {
        let _ = checks::shard_checks(&shard[..end]);
    }
    for at in (0..shard.len()).step_by(BLOCK as usize) {
        for k in [0, 100, 124, 148, 156, 257] {
            let mut bad = shard.clone();
            bad[at + k] ^= 0x5A;
            let _ = checks::shard_checks(&bad);
        }
    }
    let mut junk = vec![b'<'; 700];
    junk.extend_from_slice(&shard);
    let _ = checks::shard_checks(&junk);
    assert!(checks::shard_checks(&[]).iter().all(Vec::is_empty));
}

/// A tar member whose size field says u64::MAX (GNU base-256, checksum right): the reader
/// reports the shard cut where it ends, rather than overflowing the data and padding to skip
/// (found by review: `left + pad` wrapped to 0 and the data was read as headers).
#[test]
fn a_shard_member_of_u64_max_bytes_is_a_cut_stream() {
    use stokehold::reader::shards::tar::TarWriter;
    let mut w = TarWriter::new(Vec::new());
    w.append("a.jpg", &common::shards::jpeg(1)).unwrap();
    w.append("b.jpg", &common::shards::jpeg(2)).unwrap();
    let mut shard = w.finish().unwrap();
    // The second header: its size field (124..136) in base-256, then its checksum (148..156).
    let at = 512 + common::shards::jpeg(1).len().div_ceil(512) * 512;
    let size = &mut shard[at + 124..at + 136];
    size.fill(0xFF);
    size[..4].copy_from_slice(&[0x80, 0, 0, 0]);
    shard[at + 148..at + 156].fill(b' ');
    let sum: u32 = shard[at..at + 512].iter().map(|&b| u32::from(b)).sum();
    shard[at + 148..at + 156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    let rules = checks::shard_checks(&shard);
    assert_eq!(rules[0].len(), 2, "{rules:?}");
    assert_eq!(rules[0][1], ("b.jpg".to_string(), None));
}

/// A minimal baseline JPEG header: SOI, SOF0 of `w`x`h` with 3 components, then `tail`.
fn jpeg_header(w: u16, h: u16, tail: &[u8]) -> Vec<u8> {
    let mut v = vec![0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 0x08];
    v.extend_from_slice(&h.to_be_bytes());
    v.extend_from_slice(&w.to_be_bytes());
    v.extend_from_slice(&[3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]);
    v.extend_from_slice(tail);
    v
}

#[test]
fn jpeg_huge_frame_with_no_data_is_a_limits_error() {
    // 65535 x 65535 with a scan of two bytes: refused from the header.
    let sos = [
        0xFF, 0xDA, 0x00, 0x0C, 3, 1, 0, 2, 0x11, 3, 0x11, 0, 63, 0, 0, 0, 0xFF, 0xD9,
    ];
    let bytes = jpeg_header(65535, 65535, &sos);
    assert!(matches!(decode_all(&bytes), Err(DecodeError::Limits(_))));
}

/// A real 8x6 JPEG with `segment` (marker + length + payload) inserted after SOI.
fn jpeg_with_segment(marker: u8, payload: &[u8]) -> Vec<u8> {
    let rgb: Vec<u8> = (0..8 * 6 * 3).map(|i| (i * 7) as u8).collect();
    let mut jpeg = Vec::new();
    jpeg_encoder::Encoder::new(&mut jpeg, 90)
        .encode(&rgb, 8, 6, jpeg_encoder::ColorType::Rgb)
        .unwrap();
    let len = u16::try_from(payload.len() + 2).unwrap();
    let mut seg = vec![0xFF, marker];
    seg.extend_from_slice(&len.to_be_bytes());
    seg.extend_from_slice(payload);
    jpeg.splice(2..2, seg);
    jpeg
}

#[test]
fn jpeg_exif_with_offsets_past_the_end() {
    // Broken EXIF never fails the image: the orientation falls back to 1.
    let hostile: [&[u8]; 4] = [
        // Big-endian, IFD offset far past the end.
        b"Exif\0\0MM\0\x2a\xff\xff\xff\xf0",
        // Little-endian, IFD at 8 claiming 0xFFFF entries.
        b"Exif\0\0II\x2a\0\x08\0\0\0\xff\xff",
        // One orientation entry whose value is out of range, then a dangling next-IFD.
        b"Exif\0\0MM\0\x2a\0\0\0\x08\0\x01\x01\x12\0\x03\0\0\0\x01\xff\xff\0\0\xff\xff\xff\xff",
        // Not even a TIFF header.
        b"Exif\0\0",
    ];
    for exif in hostile {
        let bytes = jpeg_with_segment(0xE1, exif);
        assert_eq!(decode_all(&bytes), Ok((8, 6)), "{exif:?}");
        let info = probe(&bytes, &DecodeOptions::default()).unwrap();
        assert_eq!(info.orientation, 1);
    }
}

#[test]
fn png_chunk_lengths_near_u32_max() {
    let mut png = Vec::new();
    {
        let mut enc = ::png::Encoder::new(&mut png, 4, 4);
        enc.set_color(::png::ColorType::Rgb);
        let mut w = enc.write_header().unwrap();
        w.write_image_data(&[9u8; 4 * 4 * 3]).unwrap();
    }
    // An eXIf chunk claiming 0xFFFFFFF8 bytes, right after IHDR (8 + 25 bytes).
    let mut hostile = png.clone();
    let mut chunk = vec![0xFF, 0xFF, 0xFF, 0xF8];
    chunk.extend_from_slice(b"eXIfMM\0\x2a");
    hostile.splice(33..33, chunk);
    assert!(matches!(decode_all(&hostile), Err(DecodeError::Corrupt(_))));
    // IHDR at the i32 limit: a limits error, not an allocation.
    let mut big = png.clone();
    big[16..24].copy_from_slice(&[0x7F, 0xFF, 0xFF, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF]);
    assert!(matches!(decode_all(&big), Err(DecodeError::Limits(_))));
    assert_eq!(decode_all(&png), Ok((4, 4)));
}

#[test]
fn deeply_nested_pipeline_file_values() {
    // Deep arrays and inline tables: the TOML parser's recursion must not overflow the stack.
    for open in ["[", "{a="] {
        let text = format!(
            "[pipeline]\noutputs = [\"x\"]\n[[op]]\nkind = \"flip\"\nv = {}1\n",
            open.repeat(5000)
        );
        let r = pipeline_file(&text);
        assert!(matches!(r, Err(Error::Config { .. })), "{r:?}");
    }
}
