//! The per-element arithmetic of `normalize`: one value ([`normalize_value`], the
//! specification's), and u8 elements eight at a time with AVX2 (and F16C for `f16`), chosen
//! at run time and bit-identical to it: the same two rounded `f32` operations per element
//! (no fused multiply-add), and `f16` rounded to nearest-even by F16C's conversion, as
//! `half::f16::from_f32` rounds. The loops bound every pointer access; only the loads and
//! stores are `unsafe`.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use half::f16;

/// One element: `(x - mean) * inv_std` in f32.
#[inline]
pub fn normalize_value(x: f32, mean: f32, inv_std: f32) -> f32 {
    (x - mean) * inv_std
}

/// Whether this CPU has the vector passes (checked once, then cached by std). Every CPU with
/// AVX2 has F16C (Haswell, Excavator and later), so asking for both costs none.
#[inline]
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// An element type the vector passes write: eight values at once, or one.
pub trait Lane: Copy {
    /// Writes the eight values of `v` to `dst[at..at + 8]`.
    ///
    /// # Safety
    /// `at + 8 ≤ dst.len()`, and the CPU has AVX2 and F16C ([`available`]).
    #[cfg(target_arch = "x86_64")]
    unsafe fn store8(dst: &mut [Self], at: usize, v: __m256);
    /// One value, as the scalar code writes it.
    fn one(x: f32) -> Self;
}

impl Lane for f32 {
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn store8(dst: &mut [f32], at: usize, v: __m256) {
        // SAFETY: the caller keeps at + 8 ≤ dst.len() and has checked AVX2.
        unsafe { _mm256_storeu_ps(dst.as_mut_ptr().add(at), v) }
    }
    #[inline(always)]
    fn one(x: f32) -> f32 {
        x
    }
}

impl Lane for f16 {
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn store8(dst: &mut [f16], at: usize, v: __m256) {
        // SAFETY: the caller keeps at + 8 ≤ dst.len() (16 bytes of f16) and has checked F16C.
        unsafe {
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v);
            _mm_storeu_si128(dst.as_mut_ptr().add(at).cast(), h)
        }
    }
    #[inline(always)]
    fn one(x: f32) -> f16 {
        f16::from_f32(x)
    }
}

/// `dst[i] = normalize_value(src[i], mean[i % c], inv[i % c])` in `T`, with `c` =
/// `mean.len()` channels interleaved (one channel for a plane of CHW): eight at a time where
/// allowed (`simd`) and the CPU has the instructions, for up to 8 channels.
pub fn normalize_u8<T: Lane>(dst: &mut [T], src: &[u8], mean: &[f32], inv: &[f32], simd: bool) {
    assert!(dst.len() == src.len() && mean.len() == inv.len());
    if src.is_empty() {
        return;
    }
    assert!(!mean.is_empty(), "elements of no channel");
    let c = mean.len();
    let done = if simd && c <= 8 && available() {
        vector_part(dst, src, mean, inv)
    } else {
        0
    };
    for (i, (d, &s)) in dst.iter_mut().zip(src).enumerate().skip(done) {
        *d = T::one(normalize_value(f32::from(s), mean[i % c], inv[i % c]));
    }
}

/// The whole periods of [`normalize_u8`] with vector instructions (the caller checked
/// [`available`]); how many elements were written.
#[cfg(target_arch = "x86_64")]
fn vector_part<T: Lane>(dst: &mut [T], src: &[u8], mean: &[f32], inv: &[f32]) -> usize {
    // SAFETY: the caller checked `available()`: this CPU has AVX2 and F16C.
    unsafe { normalize_u8_avx2(dst, src, mean, inv) }
}

#[cfg(not(target_arch = "x86_64"))]
fn vector_part<T: Lane>(_: &mut [T], _: &[u8], _: &[f32], _: &[f32]) -> usize {
    0
}

/// The whole periods (`lcm(channels, 8)` elements each) of [`normalize_u8`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
fn normalize_u8_avx2<T: Lane>(dst: &mut [T], src: &[u8], mean: &[f32], inv: &[f32]) -> usize {
    let c = mean.len();
    // Each period starts on channel 0, so the vectors of channel values repeat period by
    // period: 1 vector for 1, 2, 4 or 8 channels, 3 for RGB.
    let vectors = c / gcd(c, 8);
    let period = 8 * vectors;
    let pattern = |of: &[f32], j: usize| {
        let lanes: [f32; 8] = std::array::from_fn(|l| of[(8 * j + l) % c]);
        // SAFETY: `lanes` is 8 f32s.
        unsafe { _mm256_loadu_ps(lanes.as_ptr()) }
    };
    let means: [__m256; 8] = std::array::from_fn(|j| pattern(mean, j));
    let invs: [__m256; 8] = std::array::from_fn(|j| pattern(inv, j));
    let mut i = 0;
    while i + period <= src.len() {
        for j in 0..vectors {
            let at = i + 8 * j;
            // SAFETY: at + 8 ≤ i + period ≤ src.len() = dst.len().
            unsafe {
                let bytes = _mm_loadl_epi64(src.as_ptr().add(at).cast());
                let v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
                let v = _mm256_mul_ps(_mm256_sub_ps(v, means[j]), invs[j]);
                T::store8(dst, at, v);
            }
        }
        i += period;
    }
    i
}

#[cfg(target_arch = "x86_64")]
fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_vector_pass_is_bit_identical(len in 0usize..200, c in 1usize..10, f16_out: bool, seed: u64) {
            let mut rng = crate::rng::SampleRng::from_key(seed);
            let src: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            let mean: Vec<f32> = (0..c).map(|k| 100.0 + 7.3 * k as f32).collect();
            let inv: Vec<f32> = (0..c).map(|k| 1.0 / (50.0 + 3.1 * k as f32)).collect();
            let scalar = |i: usize| normalize_value(f32::from(src[i]), mean[i % c], inv[i % c]);
            if f16_out {
                let mut d = vec![f16::ZERO; len];
                normalize_u8(&mut d, &src, &mean, &inv, true);
                let want: Vec<f16> = (0..len).map(|i| f16::from_f32(scalar(i))).collect();
                prop_assert_eq!(d.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), want.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
            } else {
                let mut d = vec![0f32; len];
                normalize_u8(&mut d, &src, &mean, &inv, true);
                let want: Vec<f32> = (0..len).map(scalar).collect();
                prop_assert_eq!(d.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), want.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
            }
        }
    }
}
