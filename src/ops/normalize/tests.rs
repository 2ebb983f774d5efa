//! Tests of `normalize`: the torchvision golden, f16 rounding, argument checks, properties,
//! the host setup against `run_cpu`, and GPU parity through the fused chain.

use proptest::prelude::*;

use super::*;
use crate::cuda::test_support::{image_u8, SHAPES};
use crate::fusion::chain::on_device::{check_ops, devices};
use crate::ops::testing::{assert_setup_matches_run, key};
use crate::testutil::{golden, golden_input, to_layout};
use crate::value::ImageType;

fn imagenet() -> Normalize {
    Normalize::new(
        &[123.675, 116.28, 103.53],
        &[58.395, 57.12, 57.375],
        DType::F32,
    )
    .unwrap()
}

fn f32s(im: &Image) -> &[f32] {
    match &im.pixels {
        Pixels::F32(v) => v,
        other => panic!("not f32: {:?}", other.dtype()),
    }
}

#[test]
fn matches_torchvision_golden() {
    let g = golden();
    let n = &g["normalize"];
    let (h, w) = (
        n["h"].as_u64().unwrap() as usize,
        n["w"].as_u64().unwrap() as usize,
    );
    let pix = |k: &str| -> Vec<f64> {
        n[k].as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    let mean: Vec<f64> = pix("mean").iter().map(|m| 255.0 * m).collect();
    let std: Vec<f64> = pix("std").iter().map(|s| 255.0 * s).collect();
    let op = Normalize::new(&mean, &std, DType::F32).unwrap();
    let im = Image::from_u8_hwc(h, w, 3, golden_input(h, w));
    let out = op.apply(im).unwrap();
    let got = f32s(&out);
    let ours = pix("ours");
    let tv = pix("torchvision");
    assert_eq!(got.len(), tv.len());
    // Our formula, evaluated by numpy in f32: bit-exact. (JSON holds the f32 values as
    // shortest f64 decimals; rounding the parsed f64 to f32 recovers them exactly.)
    for (a, b) in got.iter().zip(&ours) {
        assert_eq!(a.to_bits(), (*b as f32).to_bits(), "{a} vs {b}");
    }
    let max = got
        .iter()
        .zip(&tv)
        .map(|(a, b)| (f64::from(*a) - b).abs())
        .fold(0.0, f64::max);
    eprintln!("normalize: max |ours - torchvision| = {max:e}");
    assert!(max < 1e-5, "{max}");
}

#[test]
fn f16_output_rounds_the_f32_result() {
    let src = golden_input(5, 7);
    let f32_out = imagenet()
        .apply(Image::from_u8_hwc(5, 7, 3, src.clone()))
        .unwrap();
    let mut op = imagenet();
    op.dtype = DType::F16;
    let f16_out = op.apply(Image::from_u8_hwc(5, 7, 3, src)).unwrap();
    let Pixels::F16(h) = &f16_out.pixels else {
        panic!("not f16")
    };
    let want: Vec<f16> = f32s(&f32_out).iter().map(|&x| f16::from_f32(x)).collect();
    assert_eq!(h, &want);
}

#[test]
fn channel_count_errors_name_the_argument() {
    let op = imagenet();
    let e = op
        .infer(&[ValueType::Image(ImageType::decoded(1))])
        .unwrap_err();
    assert!(
        e.contains("'mean'") && e.contains("1 channel (gray)"),
        "{e}"
    );
    let one_mean = Normalize::new(&[0.5], &[1.0, 2.0, 3.0], DType::F16).unwrap();
    let e = one_mean
        .apply(Image::from_u8_hwc(1, 1, 4, vec![1; 4]))
        .unwrap_err();
    assert!(e.contains("'std'"), "{e}");
    let t = one_mean
        .infer(&[ValueType::Image(ImageType::decoded(3))])
        .unwrap();
    assert!(matches!(
        t[0],
        ValueType::Image(ImageType {
            dtype: DType::F16,
            ..
        })
    ));
    assert!(Normalize::new(&[0.0, 1.0], &[1.0, 1.0, 1.0], DType::F32).is_err());
    assert!(Normalize::new(&[0.0], &[0.0], DType::F32).is_err());
    assert!(Normalize::new(&[f64::NAN], &[1.0], DType::F32).is_err());
}

#[test]
fn schema_rejects_nonpositive_std() {
    let given = [("std".to_string(), crate::ops::ArgValue::Float(0.0))].into();
    let e = crate::ops::Args::validate(&SCHEMA, &given).unwrap_err();
    assert_eq!(e.arg.as_deref(), Some("std"));
    let args = crate::ops::Args::validate(&SCHEMA, &Default::default()).unwrap();
    let op = build(&args).unwrap();
    let t = op
        .infer(&[ValueType::Image(ImageType::decoded(3))])
        .unwrap();
    assert!(matches!(
        t[0],
        ValueType::Image(ImageType {
            dtype: DType::F32,
            ..
        })
    ));
}

proptest! {
    #[test]
    fn layout_independent(h in 1usize..6, w in 1usize..6, c in 1usize..5, seed: u64) {
        let mut rng = crate::rng::SampleRng::from_key(seed);
        let src: Vec<u8> = (0..h * w * c).map(|_| rng.next_u64() as u8).collect();
        let mean: Vec<f64> = (0..c).map(|_| rng.uniform_range(-50.0, 200.0)).collect();
        let std: Vec<f64> = (0..c).map(|_| rng.uniform_range(0.1, 80.0)).collect();
        let op = Normalize::new(&mean, &std, DType::F32).unwrap();
        let hwc = Image::from_u8_hwc(h, w, c, src.clone());
        let chw = to_layout(&hwc, Layout::Chw);
        let a = op.apply(hwc).unwrap();
        let b = op.apply(chw).unwrap();
        prop_assert_eq!(to_layout(&b, Layout::Hwc), a.clone());
        // And each element follows the formula for its channel.
        for (i, y) in f32s(&a).iter().enumerate() {
            let k = i % c;
            let want = (f32::from(src[i]) - mean[k] as f32) * (1.0f32 / std[k] as f32);
            prop_assert_eq!(y.to_bits(), want.to_bits());
        }
    }

    #[test]
    fn one_value_broadcasts(v in proptest::collection::vec(any::<f32>(), 6), m in -10.0f64..10.0, s in 0.5f64..4.0) {
        let v: Vec<f32> = v.into_iter().map(|x| if x.is_finite() { x } else { 0.0 }).collect();
        let im = Image { height: 1, width: 2, channels: 3, layout: Layout::Hwc, pixels: Pixels::F32(v.clone()) };
        let a = Normalize::new(&[m], &[s], DType::F32).unwrap().apply(im.clone()).unwrap();
        let b = Normalize::new(&[m; 3], &[s; 3], DType::F32).unwrap().apply(im).unwrap();
        prop_assert_eq!(a, b);
    }
}

#[test]
fn f16_input_is_widened_exactly() {
    let vals = [0.5f32, -3.25, 1000.0, 0.0];
    let im = Image {
        height: 2,
        width: 2,
        channels: 1,
        layout: Layout::Chw,
        pixels: Pixels::F16(vals.iter().map(|&x| f16::from_f32(x)).collect()),
    };
    let out = Normalize::new(&[0.5], &[2.0], DType::F32)
        .unwrap()
        .apply(im)
        .unwrap();
    assert_eq!(f32s(&out), &[0.0, -1.875, 499.75, -0.25]);
}

#[test]
fn setup_draws_what_run_cpu_records() {
    let op = imagenet();
    for k in 0..3 {
        assert_setup_matches_run(&op, image_u8(3 + k, 7, 3, k as u64), key(k, 4));
    }
}

/// GPU parity through the fused chain, on every device.
#[test]
fn gpu_normalize_matches_cpu() {
    let devs = devices();
    for (mean, std, channels) in [
        (
            vec![123.675, 116.28, 103.53],
            vec![58.395, 57.12, 57.375],
            &[3][..],
        ),
        (vec![127.5], vec![0.3], &[1, 3, 4][..]),
    ] {
        for out in [DType::F32, DType::F16] {
            let op = Normalize::new(&mean, &std, out).unwrap();
            for &c in channels {
                let ims: Vec<Image> = SHAPES
                    .iter()
                    .map(|&(h, w)| image_u8(h, w, c, (h ^ w) as u64))
                    .collect();
                check_ops(
                    &devs,
                    &[("normalize", &op)],
                    &ims,
                    &format!("normalize ->{out:?} c={c} {mean:?}"),
                );
            }
        }
    }
}
