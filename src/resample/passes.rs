//! The integer-only resampling passes over `u8` HWC pixels: `ss = 2^21 + Σ pixel · weight` in
//! `i32`, output `clamp(ss >> 22, 0, 255)`. Integer sums do not depend on the order of the
//! terms, so a kernel that reads the same tables produces the same bytes whatever its thread
//! layout.
//!
//! Bilinear is separable: one pass along each axis with a `u8` intermediate image holding
//! only the rows (or columns) the second pass reads. Which pass goes first matters for the
//! result (the intermediate is rounded to `u8`); [`vertical_first`] is Pillow 13's rule. A pass
//! whose size does not change is skipped, as in Pillow.

use std::cell::RefCell;
use std::ops::Range;

use super::taps::{nearest_indices, vertical_first, Interp, Taps, HALF, PRECISION_BITS};

thread_local! {
    /// [`resize_u8`]'s horizontal and vertical tables, kept for their buffers.
    static RESIZE_TAPS: RefCell<(Taps, Taps)> =
        const { RefCell::new((Taps::empty(), Taps::empty())) };
}

/// Why a resize could not be done (arguments that do not describe a valid image or window).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("resize: {0}")]
pub struct ResizeError(pub String);

/// A source image for the passes: `u8` HWC rows of `stride` elements, `channels` per pixel.
#[derive(Debug, Clone, Copy)]
pub struct SourceU8<'a> {
    /// The elements.
    pub data: &'a [u8],
    /// Rows.
    pub height: usize,
    /// Pixels per row that may be read.
    pub width: usize,
    /// Channels per pixel.
    pub channels: usize,
    /// Elements from one row to the next (at least `width * channels`).
    pub stride: usize,
}

impl SourceU8<'_> {
    fn check(&self) -> Result<(), ResizeError> {
        let row = self.width.checked_mul(self.channels);
        let need = row.and_then(|r| {
            self.height
                .checked_sub(1)
                .map_or(Some(0), |h1| h1.checked_mul(self.stride)?.checked_add(r))
        });
        match (row, need) {
            (_, _) if self.channels == 0 => Err(ResizeError("zero channels".into())),
            (Some(r), Some(n)) if self.stride >= r && self.data.len() >= n => Ok(()),
            _ => Err(ResizeError(format!(
                "buffer of {} elements is too small for {}x{}x{} with row stride {}",
                self.data.len(),
                self.height,
                self.width,
                self.channels,
                self.stride
            ))),
        }
    }
}

/// A window of the source: (top, left, height, width) in pixels.
pub type Window = (usize, usize, usize, usize);

/// Bilinear resampling with explicit tables: `h` maps source columns to `out_w` columns and
/// `v` source rows to `out_h` rows; `None` on an axis keeps the window's columns (rows)
/// unchanged. Taps hold absolute source indices. With both tables, `vertical_first` picks
/// the pass order (see [`vertical_first`]).
pub fn resample_bilinear_u8(
    src: SourceU8<'_>,
    window: Window,
    h: Option<&Taps>,
    v: Option<&Taps>,
    vertical_first: bool,
) -> Result<Vec<u8>, ResizeError> {
    resample_bilinear_with(src, window, h, v, vertical_first, simd_available())
}

/// Whether the passes run vectorised on this CPU (AVX2 on x86-64; elsewhere the scalar loops,
/// which produce the same bytes).
pub fn simd_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    return super::simd::available();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// [`resample_bilinear_u8`] with the vector passes allowed (`simd`, when available) or not.
pub(crate) fn resample_bilinear_with(
    src: SourceU8<'_>,
    window: Window,
    h: Option<&Taps>,
    v: Option<&Taps>,
    vertical_first: bool,
    simd: bool,
) -> Result<Vec<u8>, ResizeError> {
    src.check()?;
    check_window(&src, window)?;
    let (top, left, wh, ww) = window;
    let c = src.channels;
    for (t, extent, name) in [(h, src.width, "horizontal"), (v, src.height, "vertical")] {
        if let Some(t) = t {
            let bad_len =
                t.len.len() != t.start.len() || t.weights.len() != t.start.len() * t.ksize;
            let out_of_range = t
                .start
                .iter()
                .zip(&t.len)
                .any(|(&s, &n)| s as usize + (n as usize).min(t.ksize) > extent);
            if bad_len || out_of_range {
                return Err(ResizeError(format!("{name} taps do not fit the source")));
            }
        }
    }
    let out_w = h.map_or(ww, Taps::out_size);
    let out_h = v.map_or(wh, Taps::out_size);
    let row_out = out_w * c;
    // Every branch below writes every output element.
    let mut out = crate::scratch::buffer::<u8>(out_h * row_out);
    if out.is_empty() {
        return Ok(out);
    }
    let rows = v.map_or(top..top + wh, Taps::source_range);
    match (h, v) {
        (Some(h), Some(v)) if vertical_first => {
            // Vertical pass over the columns the horizontal pass reads, then horizontal.
            let cols = h.source_range();
            let mut tmp = crate::scratch::buffer::<u8>(out_h * cols.len() * c);
            vertical_pass(&src, cols.start * c, 0, v, &mut tmp, simd);
            let tsrc = SourceU8 {
                data: &tmp,
                height: out_h,
                width: cols.len(),
                channels: c,
                stride: cols.len() * c,
            };
            horizontal_pass(&tsrc, 0..out_h, cols.start, h, &mut out, simd);
            crate::scratch::recycle(tmp);
        }
        (Some(h), Some(v)) => {
            let mut tmp = crate::scratch::buffer::<u8>(rows.len() * row_out);
            horizontal_pass(&src, rows.clone(), 0, h, &mut tmp, simd);
            let tsrc = SourceU8 {
                data: &tmp,
                height: rows.len(),
                width: out_w,
                channels: c,
                stride: row_out,
            };
            vertical_pass(&tsrc, 0, rows.start, v, &mut out, simd);
            crate::scratch::recycle(tmp);
        }
        (Some(h), None) => horizontal_pass(&src, rows, 0, h, &mut out, simd),
        (None, Some(v)) => vertical_pass(&src, left * c, 0, v, &mut out, simd),
        (None, None) => copy_window(&src, window, &mut out),
    }
    Ok(out)
}

/// Nearest-neighbour resampling with explicit tables of absolute source columns `xs` and
/// rows `ys`; the output is `ys.len()` × `xs.len()`.
pub fn resample_nearest_u8(
    src: SourceU8<'_>,
    xs: &[u32],
    ys: &[u32],
) -> Result<Vec<u8>, ResizeError> {
    src.check()?;
    if xs.iter().any(|&x| x as usize >= src.width) || ys.iter().any(|&y| y as usize >= src.height) {
        return Err(ResizeError("nearest indices outside the source".into()));
    }
    let c = src.channels;
    let row_out = xs.len() * c;
    let mut out = vec![0u8; ys.len() * row_out];
    if row_out == 0 {
        return Ok(out);
    }
    for (orow, &y) in out.chunks_exact_mut(row_out).zip(ys) {
        let srow = &src.data[y as usize * src.stride..][..src.width * c];
        match c {
            1 => {
                for (o, &x) in orow.iter_mut().zip(xs) {
                    *o = srow[x as usize];
                }
            }
            3 => gather::<3>(orow, srow, xs),
            4 => gather::<4>(orow, srow, xs),
            _ => {
                for (o, &x) in orow.chunks_exact_mut(c).zip(xs) {
                    o.copy_from_slice(&srow[x as usize * c..][..c]);
                }
            }
        }
    }
    Ok(out)
}

fn gather<const N: usize>(orow: &mut [u8], srow: &[u8], xs: &[u32]) {
    for (o, &x) in orow.chunks_exact_mut(N).zip(xs) {
        o.copy_from_slice(&srow[x as usize * N..][..N]);
    }
}

/// Resizes `window` of an 8-bit HWC image to `out_h` × `out_w`, as if the window had been
/// cropped out first (torchvision's crop-then-resize): pixels outside it never contribute.
///
/// `row_stride_px` is the distance between source rows in pixels (`w` for a packed image).
/// A bilinear pass whose size does not change is skipped (Pillow); nearest with an unchanged
/// size copies the window.
#[allow(clippy::too_many_arguments)]
pub fn resize_u8(
    src: &[u8],
    h: usize,
    w: usize,
    c: usize,
    row_stride_px: usize,
    window: Window,
    out_h: usize,
    out_w: usize,
    interp: Interp,
    antialias: bool,
) -> Result<Vec<u8>, ResizeError> {
    let source = SourceU8 {
        data: src,
        height: h,
        width: w,
        channels: c,
        stride: row_stride_px
            .checked_mul(c)
            .ok_or_else(|| ResizeError("row stride overflows".into()))?,
    };
    source.check()?;
    check_window(&source, window)?;
    let (top, left, wh, ww) = window;
    if wh == 0 || ww == 0 || out_h == 0 || out_w == 0 {
        return Err(ResizeError(format!(
            "empty window {wh}x{ww} or output {out_h}x{out_w}"
        )));
    }
    match interp {
        Interp::Bilinear => RESIZE_TAPS.with(|tables| {
            // This thread's tables, refilled: a random crop's sizes differ sample to sample.
            let (ht, vt) = &mut *tables.borrow_mut();
            let fill = |t: &mut Taps, in_size: usize, out: usize, offset: usize| {
                t.fill_bilinear(in_size, 0.0, in_size as f32, out, antialias);
                t.shift(offset);
            };
            let h = (out_w != ww).then(|| fill(ht, ww, out_w, left));
            let v = (out_h != wh).then(|| fill(vt, wh, out_h, top));
            let vfirst = vertical_first(wh, ww, out_h, out_w);
            resample_bilinear_u8(source, window, h.map(|_| &*ht), v.map(|_| &*vt), vfirst)
        }),
        Interp::Nearest => {
            let shift =
                |v: Vec<u32>, o: usize| v.into_iter().map(|i| i + o as u32).collect::<Vec<_>>();
            let xs = shift(nearest_indices(ww, 0.0, ww as f32, out_w), left);
            let ys = shift(nearest_indices(wh, 0.0, wh as f32, out_h), top);
            resample_nearest_u8(source, &xs, &ys)
        }
    }
}

fn check_window(src: &SourceU8<'_>, (top, left, wh, ww): Window) -> Result<(), ResizeError> {
    let fits = |a: usize, n: usize, max: usize| a.checked_add(n).is_some_and(|e| e <= max);
    if fits(top, wh, src.height) && fits(left, ww, src.width) {
        Ok(())
    } else {
        Err(ResizeError(format!(
            "window {wh}x{ww} at ({top}, {left}) is outside the {}x{} image",
            src.height, src.width
        )))
    }
}

#[inline]
fn clip8(ss: i32) -> u8 {
    (ss >> PRECISION_BITS).clamp(0, 255) as u8
}

/// Horizontal pass over source `rows` into `out` (`rows.len()` rows of `taps.out_size()`
/// pixels); tap index `j` reads column `j - col_base` of `src`.
fn horizontal_pass(
    src: &SourceU8<'_>,
    rows: Range<usize>,
    col_base: usize,
    taps: &Taps,
    out: &mut [u8],
    simd: bool,
) {
    let c = src.channels;
    let row_out = taps.out_size() * c;
    // Only x86-64 has vector passes; elsewhere the scalar loop below runs either way.
    #[cfg(not(target_arch = "x86_64"))]
    let _ = simd;
    #[cfg(target_arch = "x86_64")]
    if simd && (c == 3 || c == 4) && super::simd::available() {
        use super::simd::{hrow_groups, HGroups};
        thread_local! {
            /// The regrouped taps, kept for their buffers.
            static GROUPS: RefCell<HGroups> = const { RefCell::new(HGroups::empty()) };
        }
        GROUPS.with(|groups| {
            let mut groups = groups.borrow_mut();
            if c == 3 {
                groups.fill::<3>(taps, col_base);
            } else {
                groups.fill::<4>(taps, col_base);
            }
            for (orow, y) in out.chunks_exact_mut(row_out).zip(rows) {
                // The vector loads may read past the row's last pixel, never past the buffer.
                let rest = &src.data[y * src.stride..];
                let srow = &rest[..src.width * c];
                // SAFETY: `available()` checked that this CPU has AVX2.
                unsafe {
                    if c == 3 {
                        hrow_groups::<3>(orow, rest, col_base, taps, &groups, |o, i| {
                            hpixel::<3>(o, srow, col_base, taps, i)
                        })
                    } else {
                        hrow_groups::<4>(orow, rest, col_base, taps, &groups, |o, i| {
                            hpixel::<4>(o, srow, col_base, taps, i)
                        })
                    }
                }
            }
        });
        return;
    }
    for (orow, y) in out.chunks_exact_mut(row_out).zip(rows) {
        let srow = &src.data[y * src.stride..][..src.width * c];
        match c {
            1 => hrow::<1>(orow, srow, col_base, taps),
            2 => hrow::<2>(orow, srow, col_base, taps),
            3 => hrow::<3>(orow, srow, col_base, taps),
            4 => hrow::<4>(orow, srow, col_base, taps),
            _ => hrow_any(orow, srow, col_base, taps, c),
        }
    }
}

#[inline]
fn hrow<const N: usize>(orow: &mut [u8], srow: &[u8], col_base: usize, taps: &Taps) {
    for (i, o) in orow.chunks_exact_mut(N).enumerate() {
        hpixel::<N>(o, srow, col_base, taps, i);
    }
}

/// Output pixel `i` of a horizontal pass.
#[inline]
fn hpixel<const N: usize>(o: &mut [u8], srow: &[u8], col_base: usize, taps: &Taps, i: usize) {
    let (s, k) = taps.taps(i);
    let s = s - col_base;
    let px = &srow[s * N..][..k.len() * N];
    let mut acc = [HALF; N];
    for (p, &kk) in px.chunks_exact(N).zip(k) {
        for ch in 0..N {
            acc[ch] += i32::from(p[ch]) * kk;
        }
    }
    for ch in 0..N {
        o[ch] = clip8(acc[ch]);
    }
}

fn hrow_any(orow: &mut [u8], srow: &[u8], col_base: usize, taps: &Taps, c: usize) {
    for (i, o) in orow.chunks_exact_mut(c).enumerate() {
        let (s, k) = taps.taps(i);
        let s = s - col_base;
        for (ch, oc) in o.iter_mut().enumerate() {
            let mut acc = HALF;
            for (j, &kk) in k.iter().enumerate() {
                acc += i32::from(srow[(s + j) * c + ch]) * kk;
            }
            *oc = clip8(acc);
        }
    }
}

/// Vertical pass: output row `i` combines source rows `taps.start[i] - row_base ..` of `src`,
/// reading `out.len() / out_rows` elements from element `col0` of each row.
fn vertical_pass(
    src: &SourceU8<'_>,
    col0: usize,
    row_base: usize,
    taps: &Taps,
    out: &mut [u8],
    simd: bool,
) {
    const CHUNK: usize = 256;
    let row_out = out.len() / taps.out_size();
    #[cfg(not(target_arch = "x86_64"))]
    let _ = simd;
    #[cfg(target_arch = "x86_64")]
    if simd && super::simd::available() {
        for (i, orow) in out.chunks_exact_mut(row_out).enumerate() {
            let (s, k) = taps.taps(i);
            let first = (s - row_base) * src.stride + col0;
            // SAFETY: `available()` checked that this CPU has AVX2.
            unsafe { super::simd::vrow(orow, src.data, src.stride, first, k) };
        }
        return;
    }
    for (i, orow) in out.chunks_exact_mut(row_out).enumerate() {
        let (s, k) = taps.taps(i);
        let s = s - row_base;
        let mut e0 = 0;
        while e0 < row_out {
            let n = CHUNK.min(row_out - e0);
            let mut acc = [HALF; CHUNK];
            let acc = &mut acc[..n];
            for (j, &kk) in k.iter().enumerate() {
                let irow = &src.data[(s + j) * src.stride + col0 + e0..][..n];
                for (a, &p) in acc.iter_mut().zip(irow) {
                    *a += i32::from(p) * kk;
                }
            }
            for (o, &a) in orow[e0..e0 + n].iter_mut().zip(acc.iter()) {
                *o = clip8(a);
            }
            e0 += n;
        }
    }
}

fn copy_window(src: &SourceU8<'_>, (top, left, _, ww): Window, out: &mut [u8]) {
    let c = src.channels;
    let row = ww * c;
    for (y, orow) in out.chunks_exact_mut(row).enumerate() {
        orow.copy_from_slice(&src.data[(top + y) * src.stride + left * c..][..row]);
    }
}
