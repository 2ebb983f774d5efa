//! Tests of `cast`: the conversion rules, the host setup against `run_cpu`, and GPU parity
//! through the fused chain.

use proptest::prelude::*;

use super::*;
use crate::cuda::test_support::{image_u8, SHAPES};
use crate::fusion::chain::on_device::{check_ops, devices};
use crate::image::Layout;
use crate::ops::testing::{assert_setup_matches_run, key};
use crate::value::ImageType;

#[test]
fn float_to_u8_rounds_half_even_and_saturates() {
    let cases = [
        (0.5, 0),
        (1.5, 2),
        (2.5, 2),
        (3.5, 4),
        (254.5, 254),
        (254.51, 255),
        (0.49, 0),
        (-0.5, 0),
        (-3.0, 0),
        (255.4, 255),
        (300.0, 255),
        (f32::INFINITY, 255),
        (f32::NEG_INFINITY, 0),
        (f32::NAN, 0),
        (127.0, 127),
    ];
    for (x, want) in cases {
        assert_eq!(f32_to_u8(x), want, "{x}");
    }
    let p = cast_pixels(
        Pixels::F16(vec![f16::from_f32(2.5), f16::NAN, f16::from_f32(-7.0)]),
        DType::U8,
    );
    assert_eq!(p, Pixels::U8(vec![2, 0, 0]));
}

#[test]
fn f32_to_f16_rounds_to_nearest_even() {
    // 1 + 2^-11 is halfway between 1 and the next f16 (1 + 2^-10): ties to even gives 1.
    let p = cast_pixels(
        Pixels::F32(vec![1.0 + 2f32.powi(-11), 1.0 + 3.0 * 2f32.powi(-11), 1e6]),
        DType::F16,
    );
    let Pixels::F16(v) = p else { panic!("not f16") };
    assert_eq!(v[0].to_f32(), 1.0);
    assert_eq!(v[1].to_f32(), 1.0 + 2.0 * 2f32.powi(-10));
    assert!(v[2].is_infinite());
}

proptest! {
    #[test]
    fn u8_round_trips(v in proptest::collection::vec(any::<u8>(), 0..64)) {
        for mid in [DType::F16, DType::F32] {
            let back = cast_pixels(cast_pixels(Pixels::U8(v.clone()), mid), DType::U8);
            prop_assert_eq!(back, Pixels::U8(v.clone()));
        }
    }

    #[test]
    fn f16_round_trips_through_f32(bits in proptest::collection::vec(any::<u16>(), 0..64)) {
        let v: Vec<f16> = bits.into_iter().map(f16::from_bits).filter(|x| !x.is_nan()).collect();
        let back = cast_pixels(cast_pixels(Pixels::F16(v.clone()), DType::F32), DType::F16);
        prop_assert_eq!(back, Pixels::F16(v));
    }

    #[test]
    fn f32_to_u8_is_nearest(x in -50.0f32..400.0) {
        let y = f32::from(f32_to_u8(x));
        let c = x.clamp(0.0, 255.0);
        prop_assert!((y - c).abs() <= 0.5);
    }
}

#[test]
fn keeps_layout_and_shape_and_infers_dtype() {
    let mut im = Image::from_u8_hwc(2, 3, 1, vec![0, 1, 2, 3, 4, 255]);
    im.layout = Layout::Chw;
    let out = cast_image(&im, DType::F32);
    assert_eq!(
        (out.height, out.width, out.channels, out.layout),
        (2, 3, 1, Layout::Chw)
    );
    assert_eq!(
        out.pixels,
        Pixels::F32(vec![0.0, 1.0, 2.0, 3.0, 4.0, 255.0])
    );
    let op = Cast { dtype: DType::F16 };
    let t = op
        .infer(&[ValueType::Image(ImageType::decoded(3))])
        .unwrap();
    assert!(matches!(
        t[0],
        ValueType::Image(ImageType {
            dtype: DType::F16,
            ..
        })
    ));
    assert!(op.infer(&[ValueType::Label]).is_err());
}

#[test]
fn dtype_is_required() {
    let e = crate::ops::Args::validate(&SCHEMA, &Default::default()).unwrap_err();
    assert_eq!(e.arg.as_deref(), Some("dtype"));
    let given = [("dtype".to_string(), crate::ops::ArgValue::Str("f16".into()))].into();
    let args = crate::ops::Args::validate(&SCHEMA, &given).unwrap();
    assert!(build(&args).is_ok());
}

#[test]
fn setup_draws_what_run_cpu_records() {
    for (k, dtype) in [DType::U8, DType::F16, DType::F32].into_iter().enumerate() {
        assert_setup_matches_run(&Cast { dtype }, image_u8(4, 6, 3, k as u64), key(k, 9));
    }
}

/// GPU parity through the fused chain: a cast of the decoded u8 images, and a cast after a
/// normalize whose values exercise rounding half to even and saturation (`2x - 0.5`: halves,
/// past 255, below 0), on every device.
#[test]
fn gpu_cast_matches_cpu() {
    let devs = devices();
    let ims: Vec<Image> = SHAPES
        .iter()
        .enumerate()
        .map(|(k, &(h, w))| image_u8(h, w, 1 + k % 3, k as u64))
        .collect();
    let halves = crate::ops::normalize::Normalize::new(&[0.25], &[0.5], DType::F32).unwrap();
    for to in [DType::U8, DType::F16, DType::F32] {
        let op = Cast { dtype: to };
        check_ops(&devs, &[("cast", &op)], &ims, &format!("cast u8->{to:?}"));
        if to != DType::F32 {
            check_ops(
                &devs,
                &[("normalize", &halves), ("cast", &op)],
                &ims,
                &format!("normalize then cast ->{to:?}"),
            );
        }
    }
}
