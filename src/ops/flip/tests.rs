//! Tests of `flip`: against a naive mirror, its probabilities, the host setup against
//! `run_cpu`, GPU parity through the fused chain, and the standalone `flip_b*` kernels
//! emulated on the host.

use proptest::prelude::*;

use super::*;
use crate::cuda::desc::{geom_flags, GeomDesc};
use crate::cuda::test_support::{assert_same, image_from, image_u8, in_any, out_buf, Emu, SHAPES};
use crate::fusion::chain::on_device::{check_ops, devices};
use crate::image::DType;
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

type GeomKernel = unsafe extern "C" fn(*const GeomDesc, u32);

/// The `flip_b*` kernels on the host (the flip part of the former geometry-kernel test).
#[test]
fn flip_kernels_match_cpu_on_the_host() {
    let Some(emu) = Emu::load() else { return };
    for dt in [DType::U8, DType::F16, DType::F32] {
        let suffix = ["b1", "b2", "", "b4"][dt.size() - 1];
        let flip: GeomKernel = emu.sym(&format!("flip_{suffix}"));
        for layout in [Layout::Hwc, Layout::Chw] {
            for (h, w, c) in [(1, 1, 1), (5, 9, 3), (8, 3, 1), (7, 7, 4)] {
                let im = in_any(&image_u8(h, w, c, (h * w + c) as u64), dt, layout);
                let chw = if layout == Layout::Chw {
                    geom_flags::CHW
                } else {
                    0
                };
                for (fh, fv) in [(true, false), (false, true), (true, true)] {
                    let mut d = GeomDesc {
                        src: im.pixels.as_bytes().as_ptr() as u64,
                        src_h: h as u32,
                        src_w: w as u32,
                        out_h: h as u32,
                        out_w: w as u32,
                        channels: c as u32,
                        ..GeomDesc::default()
                    };
                    d.flags = chw
                        | if fh { geom_flags::FLIP_H } else { 0 }
                        | if fv { geom_flags::FLIP_V } else { 0 };
                    let out = out_buf(h * w * c * dt.size());
                    d.dst = out.as_ptr() as u64;
                    emu.per_sample(1, || {
                        // SAFETY: `d` points at the live image and an output sized for it.
                        unsafe { flip(&d, 1) }
                    });
                    let mut want = im.clone();
                    flip_in_place(&mut want, fh, fv);
                    assert_same(&image_from(&out, h, w, c, dt, layout), &want, "flip");
                }
            }
        }
    }
}
