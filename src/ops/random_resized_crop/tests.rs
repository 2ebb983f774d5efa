//! Tests of `random_resized_crop`: the window draws (torchvision's rules), crop-then-resize
//! equivalence, the host setup against `run_cpu`, and GPU parity through the fused chain.

use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::cuda::test_support::image_u8;
use crate::fusion::chain::on_device::{check_ops, devices};
use crate::image::Image;
use crate::ops::testing::{assert_setup_matches_run, key};
use crate::resample::resize_u8;
use crate::value::smallvec;

const SCALE: (f64, f64) = (0.08, 1.0);
const RATIO: (f64, f64) = (0.75, 4.0 / 3.0);

proptest! {
    #[test]
    fn window_inside_and_within_scale(h in 1usize..600, w in 1usize..600, key: u64) {
        let (top, left, ch, cw) = choose_window(h, w, SCALE, RATIO, &mut SampleRng::from_key(key));
        prop_assert!(ch >= 1 && cw >= 1 && top + ch <= h && left + cw <= w);
        let in_ratio = w as f64 / h as f64;
        let central = top == (h - ch) / 2 && left == (w - cw) / 2;
        let frac = (ch * cw) as f64 / (h * w) as f64;
        let ratio = cw as f64 / ch as f64;
        // A window from the tries has the drawn area and ratio up to rounding of each
        // side by at most half a pixel.
        let slack_area = (ch + cw) as f64 / (h * w) as f64 + 0.25 / (h * w) as f64;
        let in_scale = frac >= SCALE.0 - slack_area && frac <= SCALE.1 + 1e-12;
        let r_lo = (cw as f64 - 0.5) / (ch as f64 + 0.5);
        let r_hi = (cw as f64 + 0.5) / (ch as f64 - 0.5).max(1e-9);
        let in_ratio_range = r_hi >= RATIO.0 && r_lo <= RATIO.1;
        prop_assert!((in_scale && in_ratio_range) || (central && (ch == h || cw == w)),
            "{h}x{w}: window {ch}x{cw} at ({top}, {left}), fraction {frac}, ratio {ratio}, image ratio {in_ratio}");
    }

    #[test]
    fn crop_then_resize_equals_window_resize(h in 1usize..40, w in 1usize..40, c in 1usize..5,
                                             oh in 1usize..30, ow in 1usize..30, key: u64, nearest: bool, aa: bool) {
        let src: Vec<u8> = (0..h * w * c).map(|i| (i * 37 % 251) as u8).collect();
        let (top, left, ch, cw) = choose_window(h, w, SCALE, RATIO, &mut SampleRng::from_key(key));
        let interp = if nearest { Interp::Nearest } else { Interp::Bilinear };
        let direct = resize_u8(&src, h, w, c, w, (top, left, ch, cw), oh, ow, interp, aa).unwrap();
        let im = Image::from_u8_hwc(h, w, c, src);
        let cropped = crate::ops::window::crop_fill(&im, top as i64, left as i64, ch, cw, &[0.0]).unwrap();
        let copy = resize_u8(cropped.as_u8_hwc().unwrap(), ch, cw, c, cw, (0, 0, ch, cw), oh, ow, interp, aa).unwrap();
        prop_assert_eq!(direct, copy);
    }
}

#[test]
fn degenerate_images_fall_back() {
    let mut rng = SampleRng::from_key(3);
    assert_eq!(choose_window(1, 1, SCALE, RATIO, &mut rng), (0, 0, 1, 1));
    // 1x1000: far wider than 4/3, every try fails (height 1 allows width ≤ 1 only at
    // tiny areas that round to 0 or exceed the ratio): central crop, 1 high, round(4/3) wide.
    for k in 0..200 {
        let win = choose_window(1, 1000, SCALE, RATIO, &mut SampleRng::from_key(k));
        assert_eq!(win, (0, 499, 1, 1), "key {k}");
        let win = choose_window(1000, 1, SCALE, RATIO, &mut SampleRng::from_key(k));
        assert_eq!(win, (499, 0, 1, 1), "key {k}");
    }
    // Ratio far from the image's would round the short side to 0: kept at 1.
    let win = choose_window(1000, 3, (1.0, 1.0), (50.0, 100.0), &mut rng);
    assert_eq!(win, (499, 0, 1, 3));
    // Full area at ratio 1 on a square image: the first try takes the whole image.
    assert_eq!(
        choose_window(30, 30, (1.0, 1.0), (1.0, 1.0), &mut rng),
        (0, 0, 30, 30)
    );
}

#[test]
fn area_fraction_covers_the_scale_range() {
    // Large image: the tries nearly always succeed; the mean fraction of accepted windows
    // must be near the middle of the range (ratios reject a few large areas, so below it).
    let n = 4000;
    let fracs: Vec<f64> = (0..n)
        .map(|k| {
            let (_, _, ch, cw) = choose_window(480, 640, SCALE, RATIO, &mut SampleRng::from_key(k));
            (ch * cw) as f64 / (480.0 * 640.0)
        })
        .collect();
    let mean = fracs.iter().sum::<f64>() / n as f64;
    assert!(mean > 0.4 && mean < 0.56, "{mean}");
    assert!(fracs.iter().any(|&f| f < 0.1) && fracs.iter().any(|&f| f > 0.9));
}

#[test]
fn run_records_the_window_and_matches_choose() {
    let op = RandomResizedCrop {
        height: 16,
        width: 12,
        scale: SCALE,
        ratio: RATIO,
        interp: Interp::Bilinear,
        antialias: true,
        dct_downscale: false,
    };
    let (h, w) = (50, 70);
    let src: Vec<u8> = (0..h * w * 3).map(|i| (i % 256) as u8).collect();
    let name: Arc<str> = Arc::from("rrc");
    let mut params = crate::ops::SampleParams::new();
    let mut ctx = SampleContext {
        seed: 5,
        epoch: 1,
        index: 9,
        path: Path::new("x.jpg"),
        op_key: 77,
        op_name: &name,
        params: &mut params,
    };
    let expected_window = op.choose(h, w, &mut ctx.rng());
    let out = op
        .run_cpu(
            smallvec![Value::Image(Image::from_u8_hwc(h, w, 3, src.clone()))],
            &mut ctx,
        )
        .unwrap();
    let Value::Image(out) = &out[0] else {
        panic!("not an image")
    };
    let expected = resize_u8(
        &src,
        h,
        w,
        3,
        w,
        expected_window,
        16,
        12,
        Interp::Bilinear,
        true,
    )
    .unwrap();
    assert_eq!(out.as_u8_hwc().unwrap(), &expected[..]);
    let (top, left, ch, cw) = expected_window;
    assert_eq!(
        params[0].1,
        OpParams::Crop(CropParams {
            top: top as i64,
            left: left as i64,
            height: ch,
            width: cw,
            source_height: h,
            source_width: w,
        })
    );
}

#[test]
fn setup_draws_what_run_cpu_records() {
    let op = RandomResizedCrop {
        height: 16,
        width: 12,
        scale: SCALE,
        ratio: RATIO,
        interp: Interp::Bilinear,
        antialias: true,
        dct_downscale: false,
    };
    for k in 0..40 {
        let (h, w) = (20 + k * 7 % 50, 30 + k * 13 % 40);
        assert_setup_matches_run(&op, image_u8(h, w, 3, k as u64), key(k, 99));
    }
}

/// GPU parity through the fused chain, on every device: the windows each sample draws,
/// resampled with and without antialias and nearest.
#[test]
fn gpu_random_resized_crop_windows_match_cpu() {
    let devs = devices();
    for (interp, antialias) in [
        (Interp::Bilinear, true),
        (Interp::Bilinear, false),
        (Interp::Nearest, false),
    ] {
        let op = RandomResizedCrop {
            height: 24,
            width: 31,
            scale: (0.08, 1.0),
            ratio: (0.75, 4.0 / 3.0),
            interp,
            antialias,
            dct_downscale: false,
        };
        for c in [1, 3] {
            let ims: Vec<Image> = (0..12)
                .map(|k| image_u8(37 + k * 13, 53 + k * 7, c, k as u64))
                .collect();
            check_ops(
                &devs,
                &[("random_resized_crop", &op)],
                &ims,
                &format!("rrc {interp:?} antialias={antialias} c={c}"),
            );
        }
    }
}
