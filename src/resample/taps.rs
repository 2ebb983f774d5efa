//! Per-axis resampling tables ([`Taps`] for bilinear, source indices for nearest), computed
//! in `f64` exactly as Pillow computes them (`libImaging/Resample.c`, `precompute_coeffs` +
//! `normalize_coeffs_8bpc`, and `Geometry.c`, `ImagingScaleAffine`), and Pillow's pass-order
//! rule. The CPU passes and the GPU kernels read the same tables.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Range;
use std::rc::Rc;

/// Fractional bits of the fixed-point weights (Pillow's `PRECISION_BITS`, `32 - 8 - 2`).
pub const PRECISION_BITS: u32 = 22;

/// The rounding offset every accumulator starts from: one half in fixed point.
pub(crate) const HALF: i32 = 1 << (PRECISION_BITS - 1);

/// How output pixels are computed from input pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interp {
    /// Triangle filter (Pillow `BILINEAR`); with antialiasing the filter widens by the
    /// downscale factor.
    Bilinear,
    /// The source pixel under each output pixel's centre (Pillow `NEAREST`).
    Nearest,
}

impl Interp {
    /// Parses the pipeline-file name (`"bilinear"`, `"nearest"`).
    pub fn from_name(s: &str) -> Option<Interp> {
        match s {
            "bilinear" => Some(Interp::Bilinear),
            "nearest" => Some(Interp::Nearest),
            _ => None,
        }
    }
}

/// Bilinear filter taps along one axis: for output index `i`, the source indices
/// `start[i] .. start[i] + len[i]` weighted by `weights[i * ksize ..][.. len[i]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taps {
    /// Weights stored per output index (the largest `len` possible for this scale).
    pub ksize: usize,
    /// First source index of each output index (absolute in the source image).
    pub start: Vec<u32>,
    /// Number of taps of each output index, at most `ksize`.
    pub len: Vec<u32>,
    /// Fixed-point weights (`PRECISION_BITS` fraction bits), `ksize` per output index,
    /// zero beyond `len`.
    pub weights: Vec<i32>,
}

impl Taps {
    /// A table with no outputs, whose buffers [`Taps::fill_bilinear`] grows.
    pub(crate) const fn empty() -> Taps {
        Taps {
            ksize: 0,
            start: Vec::new(),
            len: Vec::new(),
            weights: Vec::new(),
        }
    }

    /// Number of output indices.
    pub fn out_size(&self) -> usize {
        self.start.len()
    }

    /// The same taps reading `offset` indices further along the source axis (used to
    /// resample a window of a larger image as if it were the whole input).
    pub fn shifted(mut self, offset: usize) -> Taps {
        self.shift(offset);
        self
    }

    /// [`Taps::shifted`] in place.
    pub(crate) fn shift(&mut self, offset: usize) {
        let off = offset as u32;
        for s in &mut self.start {
            *s += off;
        }
    }

    /// The taps of outputs `keep` only (for computing part of a resize: a crop after it).
    pub fn subset(&self, keep: Range<usize>) -> Taps {
        let mut t = Taps::empty();
        t.fill_subset(self, keep, 0);
        t
    }

    /// The source indices read by any output (empty when there are no outputs).
    pub fn source_range(&self) -> Range<usize> {
        self.source_range_of(0..self.out_size())
    }

    /// The source indices read by outputs `keep` (`self.subset(keep).source_range()`).
    pub(crate) fn source_range_of(&self, keep: Range<usize>) -> Range<usize> {
        let start = &self.start[keep.clone()];
        let lo = start.iter().min().map_or(0, |&s| s as usize);
        let hi = start
            .iter()
            .zip(&self.len[keep])
            .map(|(&s, &n)| s as usize + (n as usize).min(self.ksize))
            .max()
            .unwrap_or(0);
        lo..hi.max(lo)
    }

    /// This table becomes `from.subset(keep)` with its source indices `back` lower, in its
    /// own buffers (no allocation once they are large enough).
    pub(crate) fn fill_subset(&mut self, from: &Taps, keep: Range<usize>, back: usize) {
        let k = from.ksize;
        let back = back as u32;
        self.ksize = k;
        self.start.clear();
        self.start
            .extend(from.start[keep.clone()].iter().map(|&s| s - back));
        self.len.clear();
        self.len.extend_from_slice(&from.len[keep.clone()]);
        self.weights.clear();
        self.weights
            .extend_from_slice(&from.weights[keep.start * k..keep.end * k]);
    }

    /// The first source index and the weights of output `i`.
    pub(crate) fn taps(&self, i: usize) -> (usize, &[i32]) {
        let n = (self.len[i] as usize).min(self.ksize);
        (self.start[i] as usize, &self.weights[i * self.ksize..][..n])
    }
}

/// Pillow's triangle filter.
#[inline]
fn triangle(x: f64) -> f64 {
    let x = x.abs();
    if x < 1.0 {
        1.0 - x
    } else {
        0.0
    }
}

/// Bilinear taps mapping the source interval `[in0, in1)` of an axis of `in_size` pixels
/// onto `out_size` outputs, as Pillow's `precompute_coeffs` with the `BILINEAR` filter
/// followed by `normalize_coeffs_8bpc`.
///
/// * `scale = (in1 - in0) / out_size` (the difference taken in `f32`, as Pillow's box is
///   `float`), `filterscale = max(scale, 1)` with `antialias`, else `1`; `support = filterscale`.
/// * output `i` is centred at `in0 + (i + 0.5) · scale`; taps run from
///   `trunc(center - support + 0.5)` (at least 0) to `trunc(center + support + 0.5)` (at most
///   `in_size`), weighted by `triangle((j - center + 0.5) / filterscale)` and normalised to sum 1
///   (a window clipped by the image border is renormalised, Pillow's edge handling).
/// * weights become `(int)(w · 2^22 ± 0.5)` (round half away from zero).
///
/// `antialias = false` keeps the plain two-tap half-pixel bilinear of torchvision's tensor
/// path with `antialias=False`, except at the borders where the clipped window is
/// renormalised instead of clamping the coordinate.
pub fn bilinear_taps(in_size: usize, in0: f32, in1: f32, out_size: usize, antialias: bool) -> Taps {
    let mut taps = Taps::empty();
    taps.fill_bilinear(in_size, in0, in1, out_size, antialias);
    taps
}

impl Taps {
    /// [`bilinear_taps`] into this table, reusing its buffers: no allocation once they are
    /// as large as the outputs need (a worker's resize keeps one table per axis).
    pub(crate) fn fill_bilinear(
        &mut self,
        in_size: usize,
        in0: f32,
        in1: f32,
        out_size: usize,
        antialias: bool,
    ) {
        let scale = f64::from(in1 - in0) / out_size.max(1) as f64;
        let filterscale = if antialias { scale.max(1.0) } else { 1.0 };
        let support = filterscale;
        let ksize = support.ceil() as usize * 2 + 1;
        let inv = 1.0 / filterscale;
        self.ksize = ksize;
        self.start.clear();
        self.len.clear();
        self.start.reserve(out_size);
        self.len.reserve(out_size);
        self.weights.clear();
        self.weights.resize(out_size * ksize, 0);
        for i in 0..out_size {
            let center = f64::from(in0) + (i as f64 + 0.5) * scale;
            let xmin = ((center - support + 0.5) as i64).max(0);
            let xmax = ((center + support + 0.5) as i64).min(in_size as i64);
            let n = (xmax - xmin).clamp(0, ksize as i64) as usize;
            // Each weight is computed twice (for the sum, then to store it), the same
            // arithmetic both times: no buffer for the unnormalised weights.
            let weight = |j: usize| triangle(((j as i64 + xmin) as f64 - center + 0.5) * inv);
            let sum = (0..n).fold(0.0, |sum, j| sum + weight(j));
            let row = &mut self.weights[i * ksize..][..n];
            for (j, k) in row.iter_mut().enumerate() {
                let wj = weight(j);
                let v = if sum != 0.0 { wj / sum } else { wj };
                let scaled = v * f64::from(1u32 << PRECISION_BITS);
                *k = if v < 0.0 {
                    (scaled - 0.5) as i32
                } else {
                    (scaled + 0.5) as i32
                };
            }
            self.start.push(xmin as u32);
            self.len.push(n as u32);
        }
    }
}

/// Whole-axis tables a thread keeps (each is a few kB; the set is cleared when full).
const CACHED_TAPS: usize = 1024;

thread_local! {
    static WHOLE_AXIS_TAPS: RefCell<HashMap<(usize, usize, bool), Rc<Taps>>> =
        RefCell::new(HashMap::new());
}

/// [`bilinear_taps`] of a whole axis (`0..in_size` onto `out_size`), kept per thread: a
/// random crop's window sizes repeat across samples (an image's sides, a scale's few
/// hundred values), and computing them was a large part of a GPU batch's host time.
pub fn whole_axis_taps(in_size: usize, out_size: usize, antialias: bool) -> Rc<Taps> {
    WHOLE_AXIS_TAPS.with(|cache| {
        let mut cache = cache.borrow_mut();
        let key = (in_size, out_size, antialias);
        if let Some(t) = cache.get(&key) {
            return t.clone();
        }
        if cache.len() >= CACHED_TAPS {
            cache.clear();
        }
        let t = Rc::new(bilinear_taps(
            in_size,
            0.0,
            in_size as f32,
            out_size,
            antialias,
        ));
        cache.insert(key, t.clone());
        t
    })
}

/// Nearest-neighbour source indices for `[in0, in1)` of an axis of `in_size` pixels onto
/// `out_size` outputs, as Pillow's `ImagingScaleAffine`: `a = (in1 - in0) / out_size`,
/// `x = in0 + a / 2`, then for each output `floor(x)` and `x += a` (accumulated in `f64`).
/// Indices are clamped to the axis (Pillow would leave such a pixel 0; it cannot occur for
/// windows inside the image).
pub fn nearest_indices(in_size: usize, in0: f32, in1: f32, out_size: usize) -> Vec<u32> {
    let a = f64::from(in1 - in0) / out_size.max(1) as f64;
    let mut x = f64::from(in0) + a * 0.5;
    let last = in_size.saturating_sub(1) as i64;
    let mut out = Vec::with_capacity(out_size);
    for _ in 0..out_size {
        let xi = if x < 0.0 { -1 } else { x as i64 };
        out.push(xi.clamp(0, last) as u32);
        x += a;
    }
    out
}

/// Whether Pillow 13 runs the vertical pass first when resizing an `in_h` × `in_w` image to
/// `out_h` × `out_w`: when the height shrinks by more than twice as many pixels as the width
/// (`in_h - out_h > 0 && in_h - out_h > 2 (in_w - out_w)`, signed). Pillow ≤ 12.1 always went
/// horizontal first (12.2–12.3 only for images over 100 times taller than wide), so results
/// against those versions can differ by 1 where the order differs. For a window resize the
/// "image" is the window (crop first, then resize).
pub fn vertical_first(in_h: usize, in_w: usize, out_h: usize, out_w: usize) -> bool {
    let dy = in_h as i64 - out_h as i64;
    let dx = in_w as i64 - out_w as i64;
    dy > 0 && dy > dx * 2
}
