//! One flipped bit in a JPEG's image data: decoded or refused as Pillow does
//! (tests/golden/bit_flips.tsv, written by scripts/golden/bit_flips.py with Pillow).

use super::*;

/// Every flip of the golden list, with each entropy decoder, whole and as a window (the
/// crop operators' decode), and the header read the GPU path decides by: a file Pillow
/// decodes decodes, one it refuses is refused.
#[test]
fn one_flipped_bit_is_judged_as_pillow_judges_it() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let golden = include_str!("../../../tests/golden/bit_flips.tsv");
    let libjpeg = DecodeOptions {
        sequential_decoder: EntropyDecoder::Libjpeg,
        progressive_decoder: EntropyDecoder::Libjpeg,
        ..rgb_opts()
    };
    let mut files: std::collections::HashMap<&str, Vec<u8>> = Default::default();
    let (mut refused, mut disagreements) = (0, Vec::new());
    for line in golden.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let (name, at, bit, pillow) = (f[0], f[1].parse::<usize>().unwrap(), f[2], f[3]);
        let original = files
            .entry(name)
            .or_insert_with(|| std::fs::read(root.join(name)).expect("a golden JPEG"));
        let mut bytes = original.clone();
        bytes[at] ^= 1 << bit.parse::<u32>().unwrap();
        let pillow_ok = pillow == "ok";
        refused += usize::from(!pillow_ok);
        let (w, h) = (8.min(probe_size(original).0), 8.min(probe_size(original).1));
        let verdicts = [
            ("decode", decode(&bytes, &rgb_opts()).map(|_| ())),
            ("decode, libjpeg", decode(&bytes, &libjpeg).map(|_| ())),
            (
                "window",
                decode_window(&bytes, &rgb_opts(), (0, 0, h, w)).map(|_| ()),
            ),
            (
                "header",
                ParsedImage::parse(&bytes, &rgb_opts()).map(|_| ()),
            ),
        ];
        for (how, v) in verdicts {
            let agrees = v.is_ok() == pillow_ok;
            if !agrees {
                disagreements.push(format!(
                    "{name} byte {at} bit {bit}, {how}: {v:?}, Pillow: {pillow}"
                ));
            }
        }
    }
    assert!(
        refused > 1000,
        "the list has {refused} files Pillow refuses"
    );
    assert!(
        disagreements.is_empty(),
        "{} disagreements with Pillow, e.g.\n{}",
        disagreements.len(),
        disagreements[..disagreements.len().min(20)].join("\n")
    );
}

fn probe_size(bytes: &[u8]) -> (usize, usize) {
    let i = probe(bytes, &rgb_opts()).expect("the original decodes");
    (i.width, i.height)
}
