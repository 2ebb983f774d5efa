//! AVX2 version of the u8 RGB HWC → f32 or f16 CHW normalize pass, chosen at run time.
//!
//! Eight pixels at a time: the 24 bytes are split into their three channels with byte
//! shuffles (in reverse pixel order when mirroring), widened to `f32`, then `(x - mean) *
//! inv_std` with the same two rounded `f32` operations as the scalar code (no fused
//! multiply-add), so the values are bit-identical; `f16` is rounded to nearest-even by
//! F16C's conversion, as `half::f16::from_f32` rounds. Only the pointer loads and stores
//! are `unsafe`, each bounds-checked by the loop.

use std::arch::x86_64::*;

pub use crate::ops::normalize::arith::{available, Lane};

/// Shuffle masks taking channel `k` of 8 pixels (bytes `0..16` in `lo`, `16..24` in `hi`)
/// to bytes `0..8`, in pixel order or reversed.
fn masks(k: usize, reversed: bool) -> ([i8; 16], [i8; 16]) {
    let (mut lo, mut hi) = ([-1i8; 16], [-1i8; 16]);
    for i in 0..8 {
        let byte = 3 * i + k;
        let to = if reversed { 7 - i } else { i };
        if byte < 16 {
            lo[to] = byte as i8;
        } else {
            hi[to] = (byte - 16) as i8;
        }
    }
    (lo, hi)
}

/// Normalizes a `height` × `width` RGB u8 HWC image into the three planes of `dst` (CHW,
/// `f32` or `f16`), mirrored left–right (`horizontal`) and/or top–bottom (`vertical`).
///
/// Callers must have checked [`available`] (AVX2 and F16C).
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,f16c")]
pub fn rgb_to_chw<T: Lane>(
    dst: &mut [T],
    src: &[u8],
    height: usize,
    width: usize,
    horizontal: bool,
    vertical: bool,
    mean: [f32; 3],
    inv: [f32; 3],
) {
    let plane = height * width;
    assert!(dst.len() >= 3 * plane && src.len() >= 3 * plane);
    let load = |m: [i8; 16]| {
        // SAFETY: `m` is 16 bytes.
        unsafe { _mm_loadu_si128(m.as_ptr().cast()) }
    };
    let shuffles: [(__m128i, __m128i); 3] = std::array::from_fn(|k| {
        let (lo, hi) = masks(k, horizontal);
        (load(lo), load(hi))
    });
    let means = mean.map(|m| _mm256_set1_ps(m));
    let invs = inv.map(|s| _mm256_set1_ps(s));
    let row = 3 * width;
    for y in 0..height {
        let sy = if vertical { height - 1 - y } else { y };
        let srow = &src[sy * row..][..row];
        let mut x = 0;
        while x + 8 <= width {
            // The 8 source pixels: x.. forwards, or the mirror image of x..x+8.
            let sp = if horizontal { width - x - 8 } else { x };
            // SAFETY: sp + 8 ≤ width, so bytes 3·sp .. 3·sp + 24 are inside `srow`.
            let (lo, hi) = unsafe {
                let p = srow.as_ptr().add(3 * sp);
                (_mm_loadu_si128(p.cast()), _mm_loadl_epi64(p.add(16).cast()))
            };
            for (k, (mlo, mhi)) in shuffles.iter().enumerate() {
                let bytes = _mm_or_si128(_mm_shuffle_epi8(lo, *mlo), _mm_shuffle_epi8(hi, *mhi));
                let v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
                let v = _mm256_mul_ps(_mm256_sub_ps(v, means[k]), invs[k]);
                let at = k * plane + y * width + x;
                // SAFETY: at + 8 ≤ k·plane + (y + 1)·width ≤ 3·plane ≤ dst.len(); `available`
                // was checked.
                unsafe { T::store8(dst, at, v) };
            }
            x += 8;
        }
        for x in x..width {
            let sx = if horizontal { width - 1 - x } else { x };
            for k in 0..3 {
                let v = f32::from(srow[3 * sx + k]);
                dst[k * plane + y * width + x] =
                    T::one(crate::ops::normalize::normalize_value(v, mean[k], inv[k]));
            }
        }
    }
}
