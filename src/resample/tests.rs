//! Tests of the resampling arithmetic: Pillow's tables by hand, a naive reference,
//! properties, and the vector passes against the scalar ones.

use proptest::prelude::*;

use super::passes::resample_bilinear_with;
use super::*;
use crate::rng::SampleRng;

#[test]
fn taps_match_pillow_by_hand() {
    // 4 → 2: scale 2, support 2; output 0 centred at 1.0 covers 0..3 with triangle weights
    // (0.75, 0.75, 0.25)/1.75 ... as fixed point summing to about 2^22.
    let t = bilinear_taps(4, 0.0, 4.0, 2, true);
    assert_eq!(t.ksize, 5);
    assert_eq!((t.start[0], t.len[0]), (0, 3));
    assert_eq!((t.start[1], t.len[1]), (1, 3));
    let w = |x: f64| (x * f64::from(1u32 << PRECISION_BITS) + 0.5) as i32;
    assert_eq!(
        &t.weights[..3],
        &[w(0.75 / 1.75), w(0.75 / 1.75), w(0.25 / 1.75)]
    );
    // Without antialiasing: two taps at most.
    let t = bilinear_taps(4, 0.0, 4.0, 2, false);
    assert_eq!(t.ksize, 3);
    assert!(t.len.iter().all(|&n| n <= 3));
    // Nearest 5 → 2: a = 2.5, x = 1.25, 3.75.
    assert_eq!(nearest_indices(5, 0.0, 5.0, 2), vec![1, 3]);
}

#[test]
fn no_antialias_is_two_tap_bilinear_inside() {
    // Away from the borders, antialias=false interpolates the two nearest samples at the
    // half-pixel-mapped coordinate: 1-D ramp v[x] = 5x resized 40 → 16 gives
    // 5 * ((i + 0.5) * 2.5 - 0.5), rounded.
    let src: Vec<u8> = (0..40).map(|x| (5 * x) as u8).collect();
    let out = resize_u8(
        &src,
        1,
        40,
        1,
        40,
        (0, 0, 1, 40),
        1,
        16,
        Interp::Bilinear,
        false,
    )
    .unwrap();
    for (i, &o) in out.iter().enumerate().skip(1).take(10) {
        let x = (i as f64 + 0.5) * 2.5 - 0.5;
        let expected = 5.0 * x;
        assert!(
            (f64::from(o) - expected).abs() <= 0.5 + 1e-9,
            "{i}: {o} vs {expected}"
        );
    }
}

#[test]
fn bad_windows_are_errors_not_panics() {
    let src = vec![0u8; 12];
    assert!(resize_u8(&src, 2, 2, 3, 2, (1, 1, 2, 1), 4, 4, Interp::Bilinear, true).is_err());
    assert!(resize_u8(&src, 2, 2, 3, 2, (0, 0, 0, 1), 4, 4, Interp::Bilinear, true).is_err());
    assert!(resize_u8(&src, 3, 2, 3, 2, (0, 0, 1, 1), 4, 4, Interp::Bilinear, true).is_err());
    assert!(resize_u8(&src, 2, 2, 3, 1, (0, 0, 1, 1), 4, 4, Interp::Bilinear, true).is_err());
    assert!(resize_u8(&src, 2, 2, 0, 2, (0, 0, 1, 1), 4, 4, Interp::Nearest, true).is_err());
}

/// Straight-from-the-definition bilinear: floating weights per axis, same fixed-point
/// rounding, horizontal then vertical (transposed when Pillow goes vertical first), no
/// tables shared with the kernel.
fn naive_bilinear(
    src: &[u8],
    h: usize,
    w: usize,
    c: usize,
    oh: usize,
    ow: usize,
    aa: bool,
) -> Vec<u8> {
    fn weights(n: usize, out: usize, aa: bool) -> Vec<(usize, Vec<i64>)> {
        let scale = n as f64 / out as f64;
        let fs = if aa { scale.max(1.0) } else { 1.0 };
        (0..out)
            .map(|i| {
                let center = (i as f64 + 0.5) * scale;
                let lo = ((center - fs + 0.5) as i64).max(0) as usize;
                let hi = ((center + fs + 0.5) as i64).min(n as i64) as usize;
                let ws: Vec<f64> = (lo..hi)
                    .map(|j| (1.0 - ((j as f64 - center + 0.5) / fs).abs()).max(0.0))
                    .collect();
                let sum: f64 = ws.iter().sum();
                (
                    lo,
                    ws.iter()
                        .map(|v| (v / sum * 4194304.0).round() as i64)
                        .collect(),
                )
            })
            .collect()
    }
    let clip = |s: i64| ((s + (1 << 21)) >> 22).clamp(0, 255) as u8;
    if ow != w && oh != h && vertical_first(h, w, oh, ow) {
        // Same passes through the transposed image.
        let t = transpose(src, h, w, c);
        return transpose(
            &naive_bilinear_hv(&t, w, h, c, ow, oh, aa, weights, &clip),
            ow,
            oh,
            c,
        );
    }
    naive_bilinear_hv(src, h, w, c, oh, ow, aa, weights, &clip)
}

fn transpose(src: &[u8], h: usize, w: usize, c: usize) -> Vec<u8> {
    let mut out = vec![0; src.len()];
    for y in 0..h {
        for x in 0..w {
            for k in 0..c {
                out[(x * h + y) * c + k] = src[(y * w + x) * c + k];
            }
        }
    }
    out
}

type WeightsFn = fn(usize, usize, bool) -> Vec<(usize, Vec<i64>)>;

#[allow(clippy::too_many_arguments)]
fn naive_bilinear_hv(
    src: &[u8],
    h: usize,
    w: usize,
    c: usize,
    oh: usize,
    ow: usize,
    aa: bool,
    weights: WeightsFn,
    clip: &dyn Fn(i64) -> u8,
) -> Vec<u8> {
    let mut tmp = src.to_vec();
    let mut tw = w;
    if ow != w {
        let ws = weights(w, ow, aa);
        tmp = vec![0; h * ow * c];
        for y in 0..h {
            for (x, (lo, k)) in ws.iter().enumerate() {
                for ch in 0..c {
                    let s: i64 = k
                        .iter()
                        .enumerate()
                        .map(|(j, &kk)| i64::from(src[(y * w + lo + j) * c + ch]) * kk)
                        .sum();
                    tmp[(y * ow + x) * c + ch] = clip(s);
                }
            }
        }
        tw = ow;
    }
    if oh == h {
        return tmp;
    }
    let ws = weights(h, oh, aa);
    let mut out = vec![0; oh * tw * c];
    for (y, (lo, k)) in ws.iter().enumerate() {
        for e in 0..tw * c {
            let s: i64 = k
                .iter()
                .enumerate()
                .map(|(j, &kk)| i64::from(tmp[(lo + j) * tw * c + e]) * kk)
                .sum();
            out[y * tw * c + e] = clip(s);
        }
    }
    out
}

proptest! {
    #[test]
    fn matches_naive_bilinear(h in 1usize..30, w in 1usize..30, c in 1usize..6, oh in 1usize..40, ow in 1usize..40,
                              aa: bool, seed: u64) {
        let mut rng = SampleRng::from_key(seed);
        let src: Vec<u8> = (0..h * w * c).map(|_| rng.next_u64() as u8).collect();
        let got = resize_u8(&src, h, w, c, w, (0, 0, h, w), oh, ow, Interp::Bilinear, aa).unwrap();
        prop_assert_eq!(got, naive_bilinear(&src, h, w, c, oh, ow, aa));
    }

    #[test]
    fn channels_are_independent(h in 1usize..20, w in 1usize..20, c in 2usize..6, oh in 1usize..25, ow in 1usize..25,
                                nearest: bool, seed: u64) {
        let mut rng = SampleRng::from_key(seed);
        let src: Vec<u8> = (0..h * w * c).map(|_| rng.next_u64() as u8).collect();
        let interp = if nearest { Interp::Nearest } else { Interp::Bilinear };
        let all = resize_u8(&src, h, w, c, w, (0, 0, h, w), oh, ow, interp, true).unwrap();
        for k in 0..c {
            let plane: Vec<u8> = src.iter().skip(k).step_by(c).copied().collect();
            let one = resize_u8(&plane, h, w, 1, w, (0, 0, h, w), oh, ow, interp, true).unwrap();
            let got: Vec<u8> = all.iter().skip(k).step_by(c).copied().collect();
            prop_assert_eq!(got, one);
        }
    }

    #[test]
    fn strided_source_equals_packed(h in 1usize..15, w in 1usize..15, pad in 0usize..5, c in 1usize..5,
                                    oh in 1usize..20, ow in 1usize..20, seed: u64) {
        let mut rng = SampleRng::from_key(seed);
        let stride = w + pad;
        let wide: Vec<u8> = (0..h * stride * c).map(|_| rng.next_u64() as u8).collect();
        let packed: Vec<u8> = wide.chunks(stride * c).flat_map(|r| r[..w * c].to_vec()).collect();
        let a = resize_u8(&wide, h, w, c, stride, (0, 0, h, w), oh, ow, Interp::Bilinear, true).unwrap();
        let b = resize_u8(&packed, h, w, c, w, (0, 0, h, w), oh, ow, Interp::Bilinear, true).unwrap();
        prop_assert_eq!(a, b);
    }

    #[test]
    fn constant_images_stay_constant(h in 1usize..30, w in 1usize..30, oh in 1usize..40, ow in 1usize..40, v: u8, aa: bool) {
        let src = vec![v; h * w * 3];
        let out = resize_u8(&src, h, w, 3, w, (0, 0, h, w), oh, ow, Interp::Bilinear, aa).unwrap();
        prop_assert!(out.iter().all(|&o| o == v));
    }

    /// The vector passes against the scalar ones on windows of strided images, both pass
    /// orders, upscales and large downscales (many taps), and rows whose last pixels sit at
    /// the very end of the buffer (where the vector loads must not read).
    #[test]
    fn vector_passes_equal_scalar(h in 1usize..120, w in 1usize..120, pad in 0usize..3, c in 1usize..5,
                                  oh in 1usize..70, ow in 1usize..70, cut in 0.0f64..1.0, aa: bool,
                                  vfirst: bool, seed: u64) {
        let mut rng = SampleRng::from_key(seed);
        let stride = w + pad;
        let data: Vec<u8> = (0..h * stride * c).map(|_| rng.next_u64() as u8).collect();
        let src = SourceU8 { data: &data, height: h, width: w, channels: c, stride: stride * c };
        let (wh, ww) = (((h as f64 * cut) as usize).max(1), ((w as f64 * (1.0 - cut)) as usize).max(1));
        let (top, left) = (h - wh, w - ww);
        let ht = bilinear_taps(ww, 0.0, ww as f32, ow, aa).shifted(left);
        let vt = bilinear_taps(wh, 0.0, wh as f32, oh, aa).shifted(top);
        for (hh, vv) in [(Some(&ht), Some(&vt)), (Some(&ht), None), (None, Some(&vt))] {
            let win = (top, left, wh, ww);
            let fast = resample_bilinear_with(src, win, hh, vv, vfirst, true).unwrap();
            let slow = resample_bilinear_with(src, win, hh, vv, vfirst, false).unwrap();
            prop_assert_eq!(fast, slow);
        }
    }
}

#[test]
fn vector_passes_run_where_the_cpu_has_them() {
    // The equality test above is only meaningful where the vector path runs; say which ran.
    #[cfg(target_arch = "x86_64")]
    assert_eq!(simd_available(), is_x86_feature_detected!("avx2"));
    eprintln!("resize passes vectorised: {}", simd_available());
}
