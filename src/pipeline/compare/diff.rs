//! The arithmetic of a comparison: per output, the largest and mean absolute difference and
//! the worst per-sample PSNR, accumulated batch by batch; per-sample PSNR of decoded images.

use crate::image::{DType, Pixels};
use crate::pipeline::batch::{BatchOutput, BatchTensor};

/// How far apart two runs of one output are, over every sample compared.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputDiff {
    /// The output's name.
    pub name: String,
    /// Element type (`None` for labels).
    pub dtype: Option<DType>,
    /// Elements compared.
    pub elements: u64,
    /// Largest absolute difference.
    pub max_abs: f64,
    /// Sum of absolute differences (see [`OutputDiff::mean_abs`]).
    pub sum_abs: f64,
    /// Per sample: PSNR in dB of the second run against the first (infinite when equal),
    /// the peak being 255 for u8 and the first run's range of values otherwise.
    pub psnr: Vec<f64>,
    /// Samples whose shapes (or whose presence) differ: not compared element-wise.
    pub shape_mismatches: usize,
}

impl OutputDiff {
    /// An empty accumulator for output `name`.
    pub fn new(name: &str) -> OutputDiff {
        OutputDiff {
            name: name.to_string(),
            dtype: None,
            elements: 0,
            max_abs: 0.0,
            sum_abs: 0.0,
            psnr: Vec::new(),
            shape_mismatches: 0,
        }
    }

    /// Mean absolute difference per element.
    pub fn mean_abs(&self) -> f64 {
        if self.elements == 0 {
            0.0
        } else {
            self.sum_abs / self.elements as f64
        }
    }

    /// The smallest per-sample PSNR (infinite when every sample is equal).
    pub fn min_psnr(&self) -> f64 {
        self.psnr.iter().copied().fold(f64::INFINITY, f64::min)
    }

    /// The median per-sample PSNR.
    pub fn median_psnr(&self) -> f64 {
        median(&self.psnr)
    }

    /// Adds one output of a batch of each run, sample `i` of one against sample `i` of the
    /// other.
    pub fn add(&mut self, a: &BatchOutput, b: &BatchOutput) {
        match (a, b) {
            (BatchOutput::Labels(x), BatchOutput::Labels(y)) => {
                self.shape_mismatches += x.len().abs_diff(y.len());
                for (&p, &q) in x.iter().zip(y) {
                    let d = p.abs_diff(q) as f64;
                    self.max_abs = self.max_abs.max(d);
                    self.sum_abs += d;
                    self.elements += 1;
                }
            }
            (BatchOutput::Images(x), BatchOutput::Images(y)) => self.add_tensors(x, y),
            (x, _) => self.shape_mismatches += samples(x),
        }
    }

    fn add_tensors(&mut self, x: &BatchTensor, y: &BatchTensor) {
        self.dtype = Some(x.dtype);
        self.shape_mismatches += x.len().abs_diff(y.len());
        if x.dtype != y.dtype || x.layout != y.layout {
            self.shape_mismatches += x.len().min(y.len());
            return;
        }
        for i in 0..x.len().min(y.len()) {
            if x.shapes[i] != y.shapes[i] {
                self.shape_mismatches += 1;
                continue;
            }
            let n: usize = x.shapes[i].iter().product();
            let (p, q) = (
                values(&x.data, x.offsets[i], n),
                values(&y.data, y.offsets[i], n),
            );
            let (mut sum_sq, mut lo, mut hi) = (0f64, f64::INFINITY, f64::NEG_INFINITY);
            for (u, v) in p.zip(q) {
                let d = if u.is_nan() && v.is_nan() {
                    0.0
                } else {
                    (u - v).abs()
                };
                let d = if d.is_nan() { f64::INFINITY } else { d };
                self.max_abs = self.max_abs.max(d);
                self.sum_abs += d;
                sum_sq += d * d;
                lo = lo.min(u);
                hi = hi.max(u);
            }
            self.elements += n as u64;
            let peak = if x.dtype == DType::U8 {
                255.0
            } else {
                (hi - lo).max(f64::MIN_POSITIVE)
            };
            self.psnr.push(psnr(sum_sq, n as u64, peak));
        }
    }
}

fn samples(o: &BatchOutput) -> usize {
    match o {
        BatchOutput::Labels(l) => l.len(),
        BatchOutput::Images(t) => t.len(),
        BatchOutput::Device(t) => t.len(),
        BatchOutput::Pinned(t) => t.len(),
    }
}

/// `n` elements of `data` from `offset`, as f64.
fn values(data: &Pixels, offset: usize, n: usize) -> Box<dyn Iterator<Item = f64> + '_> {
    match data {
        Pixels::U8(v) => Box::new(v[offset..offset + n].iter().map(|&x| f64::from(x))),
        Pixels::F16(v) => Box::new(v[offset..offset + n].iter().map(|&x| f64::from(x.to_f32()))),
        Pixels::F32(v) => Box::new(v[offset..offset + n].iter().map(|&x| f64::from(x))),
    }
}

/// PSNR in dB of `n` values whose squared differences sum to `sum_sq`, for values spanning
/// `peak`; infinite when they are equal.
pub fn psnr(sum_sq: f64, n: u64, peak: f64) -> f64 {
    if sum_sq == 0.0 || n == 0 {
        return f64::INFINITY;
    }
    let mse = sum_sq / n as f64;
    10.0 * (peak * peak / mse).log10()
}

/// The median of `v` (infinite for an empty list).
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::INFINITY;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let m = s.len() / 2;
    // Two infinite middles (equal samples) stay infinite rather than NaN.
    if s.len() % 2 == 1 || (s[m - 1].is_infinite() && s[m].is_infinite()) {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}
