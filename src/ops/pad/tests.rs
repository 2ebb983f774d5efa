//! Tests of `pad`: sizes, fill values, the host setup against `run_cpu`, and the reason the
//! fused chain refuses it (it runs on the CPU only).

use proptest::prelude::*;

use super::*;
use crate::cuda::test_support::image_u8;
use crate::image::{Image, Layout, Pixels};
use crate::ops::testing::{assert_setup_matches_run, key};
use crate::ops::GpuOperator;

fn pad(top: usize, bottom: usize, left: usize, right: usize, fill: Vec<f64>, m: usize) -> Pad {
    Pad {
        top,
        bottom,
        left,
        right,
        fill,
        to_multiple: m,
    }
}

#[test]
fn known_values_per_channel_fill() {
    // 1x1 RGB pixel (1,2,3), one column on the left filled with (7,8,9), one row below.
    let im = Image::from_u8_hwc(1, 1, 3, vec![1, 2, 3]);
    let p = pad(0, 1, 1, 0, vec![7.0, 8.0, 9.0], 1);
    let out = crop_fill(&im, 0, -1, 2, 2, &p.fill).unwrap();
    assert_eq!(p.output_size(1, 1), (2, 2));
    assert_eq!(
        out.as_u8_hwc().unwrap(),
        &[7, 8, 9, 1, 2, 3, 7, 8, 9, 7, 8, 9]
    );
}

#[test]
fn to_multiple_rounds_bottom_right() {
    let p = pad(1, 0, 2, 0, vec![0.0], 32);
    assert_eq!(p.output_size(30, 30), (32, 32));
    assert_eq!(p.output_size(32, 30), (64, 32));
    assert_eq!(pad(0, 0, 0, 0, vec![0.0], 8).output_size(16, 8), (16, 8));
}

#[test]
fn fill_count_must_match() {
    let p = pad(1, 1, 1, 1, vec![1.0, 2.0], 1);
    let t = crate::value::ImageType::decoded(3);
    assert!(p.infer(&[ValueType::Image(t)]).is_err());
    assert!(p
        .infer(&[ValueType::Image(crate::value::ImageType::decoded(2))])
        .is_ok());
}

proptest! {
    #[test]
    fn original_is_inside(h in 1usize..8, w in 1usize..8, c in 1usize..4, t in 0usize..4, b in 0usize..4,
                          l in 0usize..4, r in 0usize..4, m in 1usize..6, chw: bool) {
        let src: Vec<u8> = (0..h * w * c).map(|i| (i % 250) as u8 + 1).collect();
        let mut im = Image::from_u8_hwc(h, w, c, src);
        if chw {
            im = crate::testutil::to_layout(&im, Layout::Chw);
        }
        let p = pad(t, b, l, r, vec![0.0], m);
        let (oh, ow) = p.output_size(h, w);
        prop_assert!(oh % m == 0 && ow % m == 0 && oh >= h + t + b && ow >= w + l + r);
        prop_assert!(oh < h + t + b + m && ow < w + l + r + m);
        let out = crop_fill(&im, -(t as i64), -(l as i64), oh, ow, &p.fill).unwrap();
        let out = crate::testutil::to_layout(&out, Layout::Hwc);
        let im = crate::testutil::to_layout(&im, Layout::Hwc);
        let (Pixels::U8(o), Pixels::U8(s)) = (&out.pixels, &im.pixels) else { unreachable!() };
        let nonzero = o.iter().filter(|&&v| v != 0).count();
        prop_assert_eq!(nonzero, h * w * c);
        for y in 0..h {
            for x in 0..w {
                for k in 0..c {
                    prop_assert_eq!(o[((y + t) * ow + x + l) * c + k], s[(y * w + x) * c + k]);
                }
            }
        }
    }
}

#[test]
fn setup_draws_what_run_cpu_records() {
    for (k, (h, w)) in [(1, 1), (5, 9), (30, 40)].into_iter().enumerate() {
        let p = pad(2, 1, 0, 3, vec![1.0, 250.4, 3.5], 4);
        assert_setup_matches_run(&p, image_u8(h, w, 3, k as u64), key(k, 5));
    }
}

/// `pad` has no GPU form: the GPU path refuses it, with this reason.
#[test]
fn the_fused_chain_has_no_padding() {
    let e = pad(1, 0, 0, 0, vec![0.0], 1).chain_step().unwrap_err();
    assert!(e.contains("border"), "{e}");
}
