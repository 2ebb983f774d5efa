//! AVX2 versions of the two bilinear passes, chosen at run time when the CPU has AVX2.
//!
//! They compute exactly the integer sums of the scalar passes in [`super::passes`]
//! (`2^21 + Σ pixel · weight` in `i32`, then `clamp(ss >> 22, 0, 255)`); integer addition
//! does not care about the order of the terms, so the bytes are identical (tested against the
//! scalar passes in `tests.rs`). Only the bounds-checked pointer loads and stores are `unsafe`.

use std::arch::x86_64::*;

use super::taps::{Taps, PRECISION_BITS};

/// Whether this CPU can run the passes in this module (checked once, then cached by std).
#[inline]
pub fn available() -> bool {
    is_x86_feature_detected!("avx2")
}

const HALF: i32 = 1 << (PRECISION_BITS - 1);

/// Horizontal pass of one row of 3- or 4-channel pixels, from output `first` on (`orow` starts
/// at that output): output pixel `i` is
/// `Σ_j srow[(start_i - col_base + j) · N ..][..N] · weight_ij`. `srow` may run past the row's
/// last pixel (the loads read up to 8 bytes per tap pair); pixels whose loads would leave
/// `srow` are computed by `scalar`.
///
/// Callers must have checked [`available`].
#[target_feature(enable = "avx2")]
pub fn hrow<const N: usize>(
    orow: &mut [u8],
    srow: &[u8],
    col_base: usize,
    taps: &Taps,
    first: usize,
    scalar: impl Fn(&mut [u8], usize),
) {
    const { assert!(N == 3 || N == 4) };
    // Lanes 0..4 take tap j's pixel (channels + one spare byte), lanes 4..8 tap j + 1's.
    let pair_shuffle = if N == 3 {
        _mm_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, -1, -1, -1, -1, -1, -1, -1, -1)
    } else {
        _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, -1, -1, -1, -1, -1, -1, -1, -1)
    };
    let spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
    let half = _mm_set1_epi32(HALF);
    for (i, o) in orow.chunks_exact_mut(N).enumerate() {
        let i = first + i;
        let n = (taps.len[i] as usize).min(taps.ksize);
        let w = &taps.weights[i * taps.ksize..][..n];
        let base = (taps.start[i] as usize - col_base) * N;
        // The last pair's 8-byte load starts at most (n - 1) pixels in.
        if base + n.saturating_sub(1) * N + 8 > srow.len() {
            scalar(o, i);
            continue;
        }
        let px = &srow[base..];
        let mut acc = _mm256_setzero_si256();
        let mut j = 0;
        while j + 2 <= n {
            // SAFETY: base + j·N + 8 ≤ base + (n - 1)·N + 8 ≤ srow.len() (checked above) and
            // j + 2 ≤ n = w.len(), so both unaligned loads stay inside their slices.
            let (p, ww) = unsafe {
                (
                    _mm_loadl_epi64(px.as_ptr().add(j * N).cast()),
                    _mm_loadl_epi64(w.as_ptr().add(j).cast()),
                )
            };
            let p = _mm256_cvtepu8_epi32(_mm_shuffle_epi8(p, pair_shuffle));
            let ww = _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(ww), spread);
            acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(p, ww));
            j += 2;
        }
        let mut sum = _mm_add_epi32(
            _mm256_castsi256_si128(acc),
            _mm256_extracti128_si256::<1>(acc),
        );
        if j < n {
            // SAFETY: j = n - 1, so the 8-byte load at j·N is the one bounded above.
            let p = unsafe { _mm_loadl_epi64(px.as_ptr().add(j * N).cast()) };
            let p = _mm_cvtepu8_epi32(p);
            sum = _mm_add_epi32(sum, _mm_mullo_epi32(p, _mm_set1_epi32(w[j])));
        }
        let v = _mm_srai_epi32::<{ PRECISION_BITS as i32 }>(_mm_add_epi32(sum, half));
        let v = _mm_packus_epi16(_mm_packs_epi32(v, v), v);
        let bytes = (_mm_cvtsi128_si32(v) as u32).to_le_bytes();
        o.copy_from_slice(&bytes[..N]);
    }
}

/// The horizontal taps regrouped for [`hrow_groups`]: outputs in groups of four, each with
/// the byte offset of every output's first tap, the group's tap count (the longest of the
/// four) and the weights interleaved tap by tap (`[tap][output]`, zero past an output's own
/// taps).
pub struct HGroups {
    offsets: Vec<[usize; 4]>,
    taps: Vec<usize>,
    /// Bytes a row must hold from its start for the group's loads.
    reach: Vec<usize>,
    weights: Vec<[i32; 4]>,
    ksize: usize,
}

impl HGroups {
    /// No groups, for [`HGroups::fill`] to fill.
    pub const fn empty() -> HGroups {
        HGroups {
            offsets: Vec::new(),
            taps: Vec::new(),
            reach: Vec::new(),
            weights: Vec::new(),
            ksize: 0,
        }
    }

    /// Groups `taps` for `N`-channel pixels, tap indices counted from `col_base`, in these
    /// groups' buffers (no allocation once they are large enough).
    pub fn fill<const N: usize>(&mut self, taps: &Taps, col_base: usize) {
        let groups = taps.out_size() / 4;
        let ksize = taps.ksize;
        let g = self;
        g.ksize = ksize;
        g.offsets.clear();
        g.taps.clear();
        g.reach.clear();
        g.weights.clear();
        g.weights.resize(groups * ksize, [0; 4]);
        for k in 0..groups {
            let outs: [usize; 4] = std::array::from_fn(|p| 4 * k + p);
            let len = outs.map(|i| (taps.len[i] as usize).min(ksize));
            let offsets = outs.map(|i| (taps.start[i] as usize - col_base) * N);
            let n = len.into_iter().max().unwrap_or(0);
            for j in 0..n {
                g.weights[k * ksize + j] = std::array::from_fn(|p| {
                    if j < len[p] {
                        taps.weights[outs[p] * ksize + j]
                    } else {
                        0
                    }
                });
            }
            let last = offsets.into_iter().max().unwrap_or(0) + n.saturating_sub(1) * N;
            g.offsets.push(offsets);
            g.taps.push(n);
            g.reach.push(last + 4);
        }
    }
}

/// Horizontal pass of one row, four outputs at a time (one 4-byte load per output and tap,
/// the four sums packed and stored together); the outputs after the last whole group, and
/// groups whose loads would leave `srow`, go through [`hrow`]'s per-output code or `scalar`.
///
/// Callers must have checked [`available`].
#[target_feature(enable = "avx2")]
pub fn hrow_groups<const N: usize>(
    orow: &mut [u8],
    srow: &[u8],
    col_base: usize,
    taps: &Taps,
    groups: &HGroups,
    scalar: impl Fn(&mut [u8], usize),
) {
    const { assert!(N == 3 || N == 4) };
    let half = _mm256_set1_epi32(HALF);
    let lo_pair = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
    let hi_pair = _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3);
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    // Four 4-byte pixels to four packed `N`-byte pixels.
    let compact = if N == 3 {
        _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1)
    } else {
        _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
    };
    let whole = groups.taps.len();
    for k in 0..whole {
        let at = 4 * k * N;
        if groups.reach[k] > srow.len() {
            for p in 0..4 {
                scalar(&mut orow[at + p * N..][..N], 4 * k + p);
            }
            continue;
        }
        let [o0, o1, o2, o3] = groups.offsets[k];
        let weights = &groups.weights[k * groups.ksize..][..groups.taps[k]];
        let mut acc01 = half;
        let mut acc23 = half;
        for (j, w) in weights.iter().enumerate() {
            let d = j * N;
            // SAFETY: each load reads 4 bytes from offset + j·N ≤ max offset + (n - 1)·N, so
            // it ends by `reach[k]` ≤ srow.len() (checked above); `w` is 16 bytes.
            let (p0, p1, p2, p3, w) = unsafe {
                let px = srow.as_ptr();
                (
                    _mm_loadu_si32(px.add(o0 + d)),
                    _mm_loadu_si32(px.add(o1 + d)),
                    _mm_loadu_si32(px.add(o2 + d)),
                    _mm_loadu_si32(px.add(o3 + d)),
                    _mm_loadu_si128(w.as_ptr().cast()),
                )
            };
            let w = _mm256_castsi128_si256(w);
            let x01 = _mm256_cvtepu8_epi32(_mm_unpacklo_epi32(p0, p1));
            let x23 = _mm256_cvtepu8_epi32(_mm_unpacklo_epi32(p2, p3));
            let w01 = _mm256_permutevar8x32_epi32(w, lo_pair);
            let w23 = _mm256_permutevar8x32_epi32(w, hi_pair);
            acc01 = _mm256_add_epi32(acc01, _mm256_mullo_epi32(x01, w01));
            acc23 = _mm256_add_epi32(acc23, _mm256_mullo_epi32(x23, w23));
        }
        let v01 = _mm256_srai_epi32::<{ PRECISION_BITS as i32 }>(acc01);
        let v23 = _mm256_srai_epi32::<{ PRECISION_BITS as i32 }>(acc23);
        // i16 lanes: [out0, out2 | out1, out3]; bytes, then dwords back in output order.
        let w16 = _mm256_packs_epi32(v01, v23);
        let b = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(w16, w16), order);
        let b = _mm_shuffle_epi8(_mm256_castsi256_si128(b), compact);
        if at + 16 <= orow.len() {
            // SAFETY: 16 bytes from `at` are inside `orow`; the bytes past this group's
            // 4·N are rewritten by the next group or the tail below.
            unsafe { _mm_storeu_si128(orow.as_mut_ptr().add(at).cast(), b) };
        } else {
            let mut bytes = [0u8; 16];
            // SAFETY: `bytes` is 16 bytes.
            unsafe { _mm_storeu_si128(bytes.as_mut_ptr().cast(), b) };
            orow[at..at + 4 * N].copy_from_slice(&bytes[..4 * N]);
        }
    }
    let done = 4 * whole;
    if done < taps.out_size() {
        hrow::<N>(&mut orow[done * N..], srow, col_base, taps, done, &scalar);
    }
}

/// Vertical pass of one output row: `orow[e] = Σ_j rows[(start - row_base + j) · stride + col0
/// + e] · weight_j` for every element `e` of `orow`.
///
/// Callers must have checked [`available`].
#[target_feature(enable = "avx2")]
pub fn vrow(orow: &mut [u8], src: &[u8], stride: usize, first: usize, weights: &[i32]) {
    let n = orow.len();
    // Every tap row must hold `n` elements from `first`.
    let last_row_end = first + weights.len().saturating_sub(1) * stride + n;
    assert!(weights.is_empty() || last_row_end <= src.len());
    let half = _mm256_set1_epi32(HALF);
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    let mut e = 0;
    while e + 32 <= n {
        let mut acc = [half; 4];
        for (j, &kk) in weights.iter().enumerate() {
            let kk = _mm256_set1_epi32(kk);
            let at = first + j * stride + e;
            for (q, a) in acc.iter_mut().enumerate() {
                // SAFETY: at + 8q + 8 ≤ first + j·stride + n ≤ last_row_end ≤ src.len().
                let p = unsafe { _mm_loadl_epi64(src.as_ptr().add(at + 8 * q).cast()) };
                *a = _mm256_add_epi32(*a, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(p), kk));
            }
        }
        let [a, b, c, d] = acc.map(|a| _mm256_srai_epi32::<{ PRECISION_BITS as i32 }>(a));
        let bytes = _mm256_packus_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
        let bytes = _mm256_permutevar8x32_epi32(bytes, order);
        // SAFETY: e + 32 ≤ n = orow.len().
        unsafe { _mm256_storeu_si256(orow.as_mut_ptr().add(e).cast(), bytes) };
        e += 32;
    }
    while e + 8 <= n {
        let mut acc = half;
        for (j, &kk) in weights.iter().enumerate() {
            let at = first + j * stride + e;
            // SAFETY: at + 8 ≤ first + j·stride + n ≤ src.len(), as above.
            let p = unsafe { _mm_loadl_epi64(src.as_ptr().add(at).cast()) };
            let p = _mm256_cvtepu8_epi32(p);
            acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(p, _mm256_set1_epi32(kk)));
        }
        let acc = _mm256_srai_epi32::<{ PRECISION_BITS as i32 }>(acc);
        let v = _mm_packs_epi32(
            _mm256_castsi256_si128(acc),
            _mm256_extracti128_si256::<1>(acc),
        );
        let v = _mm_packus_epi16(v, v);
        orow[e..e + 8].copy_from_slice(&(_mm_cvtsi128_si64(v) as u64).to_le_bytes());
        e += 8;
    }
    for (k, o) in orow[e..].iter_mut().enumerate() {
        let mut ss = HALF;
        for (j, &kk) in weights.iter().enumerate() {
            ss += i32::from(src[first + j * stride + e + k]) * kk;
        }
        *o = (ss >> PRECISION_BITS).clamp(0, 255) as u8;
    }
}
