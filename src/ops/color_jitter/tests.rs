//! Tests of `color_jitter`: Pillow/torchvision goldens (scripts/golden/color.py), exhaustive
//! checksums over every 24-bit color, properties, the jitter kernels on the host, and GPU
//! parity through the fused chain.

use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;

use super::gpu::jitter_desc;
use super::*;
use crate::cuda::test_support::{image_u8, run_jitter_emu, Emu, SHAPES};
use crate::fusion::chain::on_device::{check_ops, devices};
use crate::image::Image;
use crate::ops::testing::{assert_setup_matches_run, key};
use crate::ops::SampleContext;
use crate::testutil::{golden, golden_input};
use crate::value::{smallvec, ImageType, Values};

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn op_index(name: &str) -> u8 {
    match name {
        "brightness" => 0,
        "contrast" => 1,
        "saturation" => 2,
        "hue" => 3,
        other => panic!("unknown op {other}"),
    }
}

fn run_single(rgb: &mut [u8], op: &str, f: f64) {
    match op_index(op) {
        0 => adjust_brightness(rgb, f),
        1 => adjust_contrast(rgb, f),
        2 => adjust_saturation(rgb, f),
        _ => adjust_hue(rgb, f),
    }
}

#[test]
fn matches_pillow_golden_exactly() {
    let g = golden();
    let cases = g["cases"].as_array().expect("cases");
    assert!(cases.len() > 100, "too few golden cases");
    let (mut max_diff, mut mismatched) = (0i32, 0usize);
    for case in cases {
        let h = case["h"].as_u64().unwrap() as usize;
        let w = case["w"].as_u64().unwrap() as usize;
        let want = unhex(case["out"].as_str().unwrap());
        let mut got = golden_input(h, w);
        let op = case["op"].as_str().unwrap();
        if op == "jitter" {
            let f: Vec<f64> = case["factors"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect();
            let o: Vec<u8> = case["order"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap() as u8)
                .collect();
            let p = JitterParams {
                order: [o[0], o[1], o[2], o[3]],
                brightness: Some(f[0]),
                contrast: Some(f[1]),
                saturation: Some(f[2]),
                hue: Some(f[3]),
            };
            apply(&mut got, &p);
        } else {
            run_single(&mut got, op, case["factor"].as_f64().unwrap());
        }
        assert_eq!(got.len(), want.len());
        let d = got
            .iter()
            .zip(&want)
            .map(|(&a, &b)| (i32::from(a) - i32::from(b)).abs())
            .max()
            .unwrap_or(0);
        if d > 0 {
            mismatched += 1;
            eprintln!("mismatch: {case:.80}");
        }
        max_diff = max_diff.max(d);
    }
    eprintln!("{} golden cases, max |diff| = {max_diff}", cases.len());
    assert_eq!((mismatched, max_diff), (0, 0));
}

/// The checksum of scripts/golden/color.py: (sum, Σ byte · (((i · 2654435761) mod 2^32) | 1)).
fn checksum(bytes: &[u8]) -> (u64, u64) {
    let mut sum = 0u64;
    let mut weighted = 0u64;
    for (i, &b) in bytes.iter().enumerate() {
        let w = ((i as u64).wrapping_mul(2_654_435_761) & 0xFFFF_FFFF) | 1;
        sum += u64::from(b);
        weighted = weighted.wrapping_add(u64::from(b).wrapping_mul(w));
    }
    (sum, weighted)
}

/// Every 24-bit color once: pixel i = (i >> 16, (i >> 8) & 255, i & 255).
fn cube() -> Vec<u8> {
    (0u32..1 << 24)
        .flat_map(|i| [(i >> 16) as u8, (i >> 8) as u8, i as u8])
        .collect()
}

#[test]
fn every_rgb_color_matches_pillow() {
    let g = golden();
    let src = cube();
    let mut buf = vec![0u8; src.len()];
    for case in g["cube"].as_array().expect("cube") {
        let op = case["op"].as_str().unwrap();
        let f = case["factor"].as_f64().unwrap();
        let want: Vec<u64> = case["checksum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap().parse().unwrap())
            .collect();
        buf.copy_from_slice(&src);
        run_single(&mut buf, op, f);
        assert_eq!(
            checksum(&buf),
            (want[0], want[1]),
            "{op} {f} over all colors"
        );
    }
}

#[test]
fn hue_shift_matches_numpy() {
    // np.int32(h * 255).astype(np.uint8), measured with numpy 2.4 on x86-64.
    for (h, s) in [
        (-0.5, 129),
        (-0.2, 205),
        (0.05, 12),
        (0.3, 76),
        (0.5, 127),
        (-0.001, 0),
    ] {
        assert_eq!(hue_shift(h), s, "{h}");
    }
}

#[test]
fn hsv_of_grays_and_primaries() {
    assert_eq!(rgb_to_hsv(7, 7, 7), [0, 0, 7]);
    assert_eq!(rgb_to_hsv(255, 0, 0), [0, 255, 255]);
    assert_eq!(rgb_to_hsv(0, 255, 0), [85, 255, 255]);
    assert_eq!(hsv_to_rgb(0, 255, 255), [255, 0, 0]);
    assert_eq!(hsv_to_rgb(200, 0, 9), [9, 9, 9]);
}

fn naive_blend(a: u8, b: u8, alpha: f32) -> u8 {
    let t: f32 = a as f32 + alpha * (b as f32 - a as f32);
    t.clamp(0.0, 255.0).floor() as u8
}

fn params(order: [u8; 4], b: Option<f64>, c: Option<f64>, s: Option<f64>) -> JitterParams {
    JitterParams {
        order,
        brightness: b,
        contrast: c,
        saturation: s,
        hue: None,
    }
}

proptest! {
    #[test]
    fn blend_matches_naive_f32(a: u8, b: u8, alpha in -3.0f32..4.0) {
        prop_assert_eq!(blend(a, b, alpha), naive_blend(a, b, alpha));
        // Against exact arithmetic: truncation of a value at most one f32 rounding away.
        let exact = (f64::from(a) + f64::from(alpha) * (f64::from(b) - f64::from(a))).clamp(0.0, 255.0);
        prop_assert!((f64::from(blend(a, b, alpha)) - exact.floor()).abs() <= 1.0);
    }

    #[test]
    fn blend_endpoints(a: u8, b: u8) {
        prop_assert_eq!(blend(a, b, 0.0), a);
        prop_assert_eq!(blend(a, b, 1.0), b);
    }

    #[test]
    fn factor_one_and_disabled_hue_are_identities(h in 1usize..9, w in 1usize..9, seed: u64) {
        let mut rng = SampleRng::from_key(seed);
        let src: Vec<u8> = (0..h * w * 3).map(|_| rng.next_u64() as u8).collect();
        let mut order = [0u8, 1, 2, 3];
        rng.shuffle(&mut order);
        let mut img = src.clone();
        apply(&mut img, &params(order, Some(1.0), Some(1.0), Some(1.0)));
        prop_assert_eq!(&img, &src);
        apply(&mut img, &params(order, None, None, None));
        prop_assert_eq!(&img, &src);
    }

    #[test]
    fn hsv_tables_match_the_reference(r: u8, g: u8, b: u8, h: u8, s: u8, v: u8) {
        let t = HsvTables::get();
        prop_assert_eq!(t.rgb_to_hsv(r, g, b), rgb_to_hsv(r, g, b));
        prop_assert_eq!(t.hsv_to_rgb(h, s, v), hsv_to_rgb(h, s, v));
    }

    #[test]
    fn hsv_round_trip_is_close(r: u8, g: u8, b: u8) {
        let [h, s, v] = rgb_to_hsv(r, g, b);
        let back = hsv_to_rgb(h, s, v);
        for (x, y) in back.iter().zip([r, g, b]) {
            // H and S are truncated to 8 bits, so the round trip is lossy but close.
            prop_assert!((i32::from(*x) - i32::from(y)).abs() <= 8, "{:?} -> {:?}", [r, g, b], back);
        }
    }

    #[test]
    fn contrast_mean_matches_pillow_float_formula(h in 1usize..20, w in 1usize..20, seed: u64) {
        let mut rng = SampleRng::from_key(seed);
        let src: Vec<u8> = (0..h * w * 3).map(|_| rng.next_u64() as u8).collect();
        let sum: u64 = src.chunks_exact(3).map(|p| u64::from(luma(p[0], p[1], p[2]))).sum();
        let float = (sum as f64 / (h * w) as f64 + 0.5) as u8; // int(mean + 0.5)
        prop_assert_eq!(contrast_mean(&src), float);
    }

    #[test]
    fn choose_is_in_range(seed: u64, b in 0.0f64..3.0, c in 0.0f64..1.0, s in 0.0f64..2.0, hu in 0.0f64..0.5) {
        let op = ColorJitter::new(b, c, s, hu).unwrap();
        let p = op.choose(&mut SampleRng::from_key(seed));
        let mut o = p.order;
        o.sort_unstable();
        prop_assert_eq!(o, [0, 1, 2, 3]);
        for (v, f) in [(b, p.brightness), (c, p.contrast), (s, p.saturation)] {
            match f {
                None => prop_assert!(v == 0.0),
                Some(f) => prop_assert!(f >= (1.0 - v).max(0.0) && f <= 1.0 + v),
            }
        }
        match p.hue {
            None => prop_assert!(hu == 0.0),
            Some(x) => prop_assert!(x.abs() <= hu),
        }
    }
}

#[test]
fn enabling_one_factor_does_not_change_another() {
    let a = ColorJitter::new(0.4, 0.0, 0.0, 0.0).unwrap();
    let b = ColorJitter::new(0.4, 0.4, 0.4, 0.1).unwrap();
    for i in 0..200 {
        let pa = a.choose(&mut SampleRng::for_sample(3, 0, i, 5));
        let pb = b.choose(&mut SampleRng::for_sample(3, 0, i, 5));
        assert_eq!(pa.order, pb.order);
        assert_eq!(pa.brightness, pb.brightness);
        assert_eq!((pa.contrast, pa.hue), (None, None));
    }
}

#[test]
fn factors_cover_their_range() {
    let op = ColorJitter::new(0.5, 0.0, 0.0, 0.2).unwrap();
    let n = 20_000;
    let (mut lo, mut hi, mut hsum) = (f64::MAX, f64::MIN, 0.0);
    let mut first = [0usize; 4];
    for i in 0..n {
        let p = op.choose(&mut SampleRng::for_sample(1, 2, i, 9));
        let f = p.brightness.unwrap();
        lo = lo.min(f);
        hi = hi.max(f);
        hsum += p.hue.unwrap();
        first[usize::from(p.order[0])] += 1;
    }
    assert!(lo < 0.51 && hi > 1.49, "{lo} {hi}");
    assert!((hsum / n as f64).abs() < 0.01);
    assert!(
        first
            .iter()
            .all(|&k| (k as f64 / n as f64 - 0.25).abs() < 0.02),
        "{first:?}"
    );
}

#[test]
fn build_validates_arguments() {
    let args = |pairs: &[(&str, f64)]| {
        let given = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), crate::ops::ArgValue::Float(*v)))
            .collect();
        crate::ops::Args::validate(&SCHEMA, &given)
    };
    let ok = args(&[("brightness", 0.4), ("hue", 0.1)]).unwrap();
    assert!(build(&ok).is_ok());
    assert_eq!(
        args(&[("hue", 0.6)]).unwrap_err().arg.as_deref(),
        Some("hue")
    );
    assert_eq!(
        args(&[("contrast", -0.1)]).unwrap_err().arg.as_deref(),
        Some("contrast")
    );
    assert!(ColorJitter::new(f64::NAN, 0.0, 0.0, 0.0).is_err());
}

#[test]
fn infer_wants_u8_hwc_rgb() {
    let op = ColorJitter::new(0.4, 0.4, 0.4, 0.1).unwrap();
    let ok = ImageType::decoded(3);
    assert_eq!(
        op.infer(&[ValueType::Image(ok)]),
        Ok(vec![ValueType::Image(ok)])
    );
    let unknown = ImageType {
        channels: None,
        ..ok
    };
    assert!(op.infer(&[ValueType::Image(unknown)]).is_ok());
    for bad in [
        ImageType {
            dtype: DType::F32,
            ..ok
        },
        ImageType {
            layout: Layout::Chw,
            ..ok
        },
    ] {
        let e = op.infer(&[ValueType::Image(bad)]).unwrap_err();
        assert!(e.contains("before normalize"), "{e}");
    }
    // Gray images: the decoder's colour is what to change.
    let e = op
        .infer(&[ValueType::Image(ImageType::decoded(1))])
        .unwrap_err();
    assert!(
        e.contains("u8 HWC images, 1 channel;") && e.contains("`color = \"rgb\"`"),
        "{e}"
    );
    assert!(op.infer(&[ValueType::Label]).is_err());
}

/// What one `run_cpu` call gives: its result and the parameters it recorded.
type RunResult = (Result<Values, SampleErrorKind>, crate::ops::SampleParams);

fn run(op: &ColorJitter, im: Image, index: usize) -> RunResult {
    let name: Arc<str> = Arc::from("jitter");
    let mut params = crate::ops::SampleParams::new();
    let mut ctx = SampleContext {
        seed: 11,
        epoch: 0,
        index,
        path: Path::new("x.png"),
        op_key: crate::rng::hash_str("jitter"),
        op_name: &name,
        params: &mut params,
    };
    let r = op.run_cpu(smallvec![Value::Image(im)], &mut ctx);
    (r, params)
}

#[test]
fn run_cpu_applies_and_records_the_choice() {
    let op = ColorJitter::new(0.4, 0.4, 0.4, 0.1).unwrap();
    let src = golden_input(13, 17);
    let (out, params) = run(&op, Image::from_u8_hwc(13, 17, 3, src.clone()), 4);
    let Value::Image(im) = out.unwrap().remove(0) else {
        panic!("not an image")
    };
    let p = op.choose(&mut SampleRng::for_sample(
        11,
        0,
        4,
        crate::rng::hash_str("jitter"),
    ));
    let mut want = src;
    apply(&mut want, &p);
    assert_eq!(im.as_u8_hwc().unwrap(), &want[..]);
    assert_eq!(params.len(), 1);
    assert_eq!(params[0].1, p.to_op_params());

    let mut f = Image::from_u8_hwc(2, 2, 3, vec![0; 12]);
    f.pixels = Pixels::F32(vec![0.0; 12]);
    assert!(run(&op, f, 0).0.is_err());
    assert!(run(&op, Image::from_u8_hwc(2, 2, 1, vec![0; 4]), 0)
        .0
        .is_err());
}

#[test]
fn disabled_factors_are_recorded_as_neutral() {
    let op = ColorJitter::new(0.0, 0.0, 0.3, 0.0).unwrap();
    let p = op.choose(&mut SampleRng::from_key(1));
    let OpParams::ColorJitter(ColorJitterParams {
        brightness,
        contrast,
        saturation,
        hue,
        ..
    }) = p.to_op_params()
    else {
        panic!("wrong params")
    };
    assert_eq!((brightness, contrast, hue), (1.0, 1.0, 0.0));
    assert!((0.7..=1.3).contains(&saturation));
}

#[test]
fn setup_draws_what_run_cpu_records() {
    for (b, c, s, h) in [
        (0.4, 0.4, 0.4, 0.1),
        (0.0, 0.9, 0.0, 0.0),
        (0.0, 0.0, 0.0, 0.3),
    ] {
        let op = ColorJitter::new(b, c, s, h).unwrap();
        for k in 0..16 {
            assert_setup_matches_run(&op, image_u8(4, 5, 3, k as u64), key(k, 21));
        }
        // What was recorded gives the choice back exactly.
        let p = op.choose(&mut SampleRng::from_key(5));
        let OpParams::ColorJitter(r) = p.to_op_params() else {
            panic!("wrong params")
        };
        assert_eq!(op.from_recorded(&r), p);
    }
}

/// GPU parity through the fused chain (geometry, the jitter kernels between two chain
/// launches, the rest), on every device; odd shapes and one large image.
#[test]
fn gpu_color_jitter_matches_cpu() {
    let devs = devices();
    let ims: Vec<Image> = SHAPES
        .iter()
        .map(|&(hh, ww)| image_u8(hh, ww, 3, (hh * 3 + ww) as u64))
        .chain([image_u8(300, 401, 3, 77)])
        .collect();
    for (b, c, s, h) in [
        (0.4, 0.4, 0.4, 0.1),
        (0.0, 0.9, 0.0, 0.0),
        (2.0, 0.0, 1.5, 0.5),
        (0.0, 0.0, 0.0, 0.3),
    ] {
        let op = ColorJitter::new(b, c, s, h).unwrap();
        check_ops(
            &devs,
            &[("color_jitter", &op)],
            &ims,
            &format!("color_jitter {b} {c} {s} {h}"),
        );
    }
}

fn run_jitter(emu: &Emu, images: &mut [Vec<u8>], params: &[JitterParams]) {
    let descs = images
        .iter()
        .zip(params)
        .map(|(im, p)| jitter_desc(im.len() / 3, p).unwrap())
        .collect();
    run_jitter_emu(emu, images, descs);
}
#[test]
fn color_jitter_kernels_match_cpu_on_the_host() {
    let Some(emu) = Emu::load() else { return };
    for (b, c, s, h) in [
        (0.4, 0.4, 0.4, 0.1),
        (0.0, 0.9, 0.0, 0.0),
        (2.0, 0.5, 1.5, 0.5),
        (0.0, 0.0, 0.0, 0.3),
    ] {
        let op = ColorJitter::new(b, c, s, h).unwrap();
        let ims: Vec<Image> = (0..16)
            .map(|k| image_u8(1 + k * 5 % 37, 1 + k * 11 % 41, 3, k as u64))
            .collect();
        let params: Vec<_> = (0..ims.len())
            .map(|k| op.choose(&mut SampleRng::from_key(k as u64 + 7)))
            .collect();
        let mut got: Vec<Vec<u8>> = ims
            .iter()
            .map(|im| im.as_u8_hwc().unwrap().to_vec())
            .collect();
        run_jitter(&emu, &mut got, &params);
        for (k, ((g, im), p)) in got.iter().zip(&ims).zip(&params).enumerate() {
            let mut want = im.as_u8_hwc().unwrap().to_vec();
            apply(&mut want, p);
            assert!(g == &want, "jitter {b} {c} {s} {h}, sample {k} ({p:?})");
        }
    }
}
/// Hue and saturation over every 24-bit colour, against the CPU's tables.
#[test]
fn hue_and_saturation_match_cpu_for_every_colour() {
    let Some(emu) = Emu::load() else { return };
    let all: Vec<u8> = (0u32..1 << 24)
        .flat_map(|v| [(v >> 16) as u8, (v >> 8) as u8, v as u8])
        .collect();
    for (sat, hue) in [
        (None, Some(-0.5)),
        (None, Some(0.1337)),
        (Some(1.7), None),
        (Some(0.3), Some(0.45)),
    ] {
        let p = JitterParams {
            order: [3, 2, 0, 1],
            brightness: None,
            contrast: None,
            saturation: sat,
            hue,
        };
        let mut got = vec![all.clone()];
        run_jitter(&emu, &mut got, std::slice::from_ref(&p));
        let mut want = all.clone();
        apply(&mut want, &p);
        if let Some(i) = got[0].iter().zip(&want).position(|(a, b)| a != b) {
            let px = i / 3;
            panic!(
                "{p:?}: colour {:06x} gives {:?}, cpu {:?}",
                px,
                &got[0][px * 3..px * 3 + 3],
                &want[px * 3..px * 3 + 3]
            );
        }
    }
}
