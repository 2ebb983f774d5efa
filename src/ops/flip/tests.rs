//! Tests of `flip`: against a naive mirror, its probabilities, the host setup against
//! `run_cpu`, and GPU parity through the fused chain.

use proptest::prelude::*;

use super::*;
use crate::cuda::test_support::{image_u8, SHAPES};
use crate::fusion::chain::on_device::{check_ops, devices};
use crate::ops::testing::{assert_setup_matches_run, key};

fn naive(src: &[u8], h: usize, w: usize, c: usize, fh: bool, fv: bool) -> Vec<u8> {
    let mut out = vec![0; src.len()];
    for y in 0..h {
        for x in 0..w {
            let sy = if fv { h - 1 - y } else { y };
            let sx = if fh { w - 1 - x } else { x };
            for k in 0..c {
                out[(y * w + x) * c + k] = src[(sy * w + sx) * c + k];
            }
        }
    }
    out
}

proptest! {
    #[test]
    fn matches_naive_hwc(h in 1usize..9, w in 1usize..9, c in 1usize..4, fh: bool, fv: bool, seed: u64) {
        let mut rng = SampleRng::from_key(seed);
        let src: Vec<u8> = (0..h * w * c).map(|_| rng.next_u64() as u8).collect();
        let mut im = Image::from_u8_hwc(h, w, c, src.clone());
        flip_in_place(&mut im, fh, fv);
        prop_assert_eq!(im.as_u8_hwc().unwrap(), &naive(&src, h, w, c, fh, fv)[..]);
    }

    #[test]
    fn chw_matches_hwc(h in 1usize..7, w in 1usize..7, c in 1usize..4, fh: bool, fv: bool) {
        let src: Vec<u8> = (0..h * w * c).map(|i| i as u8).collect();
        let mut hwc = Image::from_u8_hwc(h, w, c, src.clone());
        let mut chw = crate::testutil::to_layout(&hwc, Layout::Chw);
        flip_in_place(&mut hwc, fh, fv);
        flip_in_place(&mut chw, fh, fv);
        prop_assert_eq!(crate::testutil::to_layout(&chw, Layout::Hwc), hwc);
    }
}

#[test]
fn probability_is_respected() {
    let f = Flip {
        horizontal: 0.5,
        vertical: 0.0,
    };
    let n = 20_000;
    let hits = (0..n)
        .filter(|&i| f.choose(&mut SampleRng::for_sample(1, 0, i, 9)).0)
        .count();
    assert!((hits as f64 / n as f64 - 0.5).abs() < 0.02);
    assert!((0..1000).all(|i| !f.choose(&mut SampleRng::for_sample(1, 0, i, 9)).1));
}

#[test]
fn setup_draws_what_run_cpu_records() {
    let f = Flip {
        horizontal: 0.5,
        vertical: 0.3,
    };
    for k in 0..64 {
        assert_setup_matches_run(&f, image_u8(3 + k % 5, 4, 3, k as u64), key(k, 77));
    }
}

/// GPU parity through the fused chain, on every device: each mirror for certain, and both
/// drawn per sample.
#[test]
fn gpu_flip_matches_cpu() {
    let devs = devices();
    for (horizontal, vertical) in [(1.0, 0.0), (0.0, 1.0), (1.0, 1.0), (0.5, 0.5)] {
        let op = Flip {
            horizontal,
            vertical,
        };
        for c in [1, 3, 4] {
            let ims: Vec<Image> = SHAPES
                .iter()
                .chain(SHAPES)
                .map(|&(h, w)| image_u8(h, w, c, (h * w) as u64))
                .collect();
            check_ops(
                &devs,
                &[("flip", &op)],
                &ims,
                &format!("flip {horizontal} {vertical} c={c}"),
            );
        }
    }
}
