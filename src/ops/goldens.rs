//! The Pillow goldens of all geometric operators (`scripts/golden/geometry.py`, tolerance 0):
//! resize, random_resized_crop's window resize (through [`crate::resample`]) and crop.

use std::collections::BTreeMap;

use crate::image::Image;
use crate::ops::crop::center_offset;
use crate::ops::window::crop_fill;
use crate::resample::{
    bilinear_taps, resample_bilinear_u8, resize_u8, vertical_first, Interp, SourceU8, Window,
};

/// The golden input formula, identical to `pattern()` in `scripts/golden/geometry.py`.
pub(crate) fn golden_pattern(h: usize, w: usize, c: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(h * w * c);
    for y in 0..h {
        for x in 0..w {
            for k in 0..c {
                v.push(((x * 7 + y * 13 + k * 29 + (x * y) % 17) % 256) as u8);
            }
        }
    }
    v
}

fn fnv64(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

struct Case {
    family: String,
    h: usize,
    w: usize,
    c: usize,
    window: Window,
    out: (usize, usize),
    stored: Option<Vec<u8>>,
    hash: u64,
}

fn golden_cases() -> Vec<Case> {
    let index = include_str!("../../tests/golden/geometry_cases.txt");
    let blob = include_bytes!("../../tests/golden/geometry_outputs.bin");
    index
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 12, "bad golden line: {l}");
            let n = |i: usize| f[i].parse::<usize>().unwrap();
            let (h, w, c) = (n(1), n(2), n(3));
            let out = (n(8), n(9));
            let offset: i64 = f[10].parse().unwrap();
            let len = out.0 * out.1 * c;
            Case {
                family: f[0].to_string(),
                h,
                w,
                c,
                window: (n(4), n(5), n(6), n(7)),
                out,
                stored: (offset >= 0).then(|| blob[offset as usize..][..len].to_vec()),
                hash: u64::from_str_radix(f[11], 16).unwrap(),
            }
        })
        .collect()
}

fn compute(case: &Case) -> Vec<u8> {
    let src = golden_pattern(case.h, case.w, case.c);
    let (oh, ow) = case.out;
    let (h, w, c) = (case.h, case.w, case.c);
    let full = (0, 0, h, w);
    let bilinear = Interp::Bilinear;
    match case.family.as_str() {
        "bilinear" => resize_u8(&src, h, w, c, w, full, oh, ow, bilinear, true).unwrap(),
        "nearest" => resize_u8(&src, h, w, c, w, full, oh, ow, Interp::Nearest, true).unwrap(),
        "crop_bilinear" => {
            resize_u8(&src, h, w, c, w, case.window, oh, ow, bilinear, true).unwrap()
        }
        "crop_nearest" => {
            resize_u8(&src, h, w, c, w, case.window, oh, ow, Interp::Nearest, true).unwrap()
        }
        "box_bilinear" => {
            // Pillow's `box=`: coefficients over the full axis, so pixels just outside the
            // window contribute; built from the same taps function.
            let (t, l, wh, ww) = case.window;
            let ht = bilinear_taps(w, l as f32, (l + ww) as f32, ow, true);
            let vt = bilinear_taps(h, t as f32, (t + wh) as f32, oh, true);
            let source = SourceU8 {
                data: &src,
                height: h,
                width: w,
                channels: c,
                stride: w * c,
            };
            resample_bilinear_u8(
                source,
                full,
                Some(&ht),
                Some(&vt),
                vertical_first(h, w, oh, ow),
            )
            .unwrap()
        }
        "center_crop" => {
            let im = Image::from_u8_hwc(h, w, c, src);
            let (top, left) = (center_offset(h, oh), center_offset(w, ow));
            crop_fill(&im, top, left, oh, ow, &[0.0])
                .unwrap()
                .as_u8_hwc()
                .unwrap()
                .to_vec()
        }
        other => panic!("unknown golden family {other}"),
    }
}

/// Every golden case, bit-exact; also reports the largest difference per family on failure.
#[test]
fn pillow_goldens_exact() {
    let cases = golden_cases();
    assert!(cases.len() > 200, "{} cases", cases.len());
    let mut worst: BTreeMap<String, (u8, usize, usize)> = BTreeMap::new();
    let mut failures = Vec::new();
    for case in &cases {
        let got = compute(case);
        let entry = worst.entry(case.family.clone()).or_default();
        entry.2 += 1;
        let desc = format!(
            "{} {}x{}x{} window {:?} -> {}x{}",
            case.family, case.h, case.w, case.c, case.window, case.out.0, case.out.1
        );
        if got.len() != case.out.0 * case.out.1 * case.c {
            failures.push(format!("{desc}: length {}", got.len()));
            continue;
        }
        if let Some(exp) = &case.stored {
            let d = got
                .iter()
                .zip(exp)
                .map(|(a, b)| a.abs_diff(*b))
                .max()
                .unwrap_or(0);
            entry.0 = entry.0.max(d);
            if d != 0 {
                entry.1 += 1;
                failures.push(format!("{desc}: max diff {d}"));
            }
        }
        if fnv64(&got) != case.hash {
            failures.push(format!("{desc}: hash differs"));
        }
    }
    assert!(
        failures.is_empty(),
        "per family (max diff, failing, cases): {worst:?}\n{}",
        failures.join("\n")
    );
}
