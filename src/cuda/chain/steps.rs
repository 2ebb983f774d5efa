//! Composing a chain of operators into one [`FusedSample`] per sample: each operator names
//! its [`ChainStep`] once (checked when the pipeline starts, so a chain the fused kernel
//! can't run is refused up front with a reason) and offers a [`ChainPiece`] per sample from
//! its host setup; [`ChainSteps::sample`] folds the pieces in data-flow order.
//!
//! What the fused chain computes is fixed: window → resample → crop of the resampled image →
//! flip → color jitter → normalize → cast → layout, on u8 HWC decoded images. A chain of
//! operators composes into it when applying the operators one by one gives the same values:
//! crops and resizes come first (at most one resampling, since two would round in between),
//! flips compose by exclusive or and commute with everything after the geometry, color
//! jitter commutes with flips, casts of u8 values are exact, and after a normalize at most
//! one rounding (to f16 or u8) may follow.

use std::fmt;

use crate::cuda::kernel::Kernel;
use crate::image::{DType, Layout};
use crate::resample::Interp;

use super::sample::{FusedSample, JitterSample, Rect};

/// How an operator resamples (its interpolation and antialiasing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resample {
    /// Interpolation.
    pub interp: Interp,
    /// Widen the bilinear filter when shrinking.
    pub antialias: bool,
}

/// What one operator is in the fused chain, known before any sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainStep {
    /// Cuts a window of its input (`crop`) and, with `resample`, resizes it to a size
    /// (`resize`: the whole input; `random_resized_crop`: a window).
    Geometry {
        /// How the window is resized; `None` for a plain crop.
        resample: Option<Resample>,
    },
    /// Mirrors (`flip`).
    Flip,
    /// Changes brightness, contrast, saturation and hue (`color_jitter`).
    ColorJitter,
    /// `(x - mean) * inv_std` into `dtype` (`normalize`).
    Normalize {
        /// Output element type.
        dtype: DType,
    },
    /// Converts elements (`cast`).
    Cast {
        /// Target element type.
        dtype: DType,
    },
    /// Reorders elements (`layout`).
    Layout {
        /// Target layout.
        layout: Layout,
    },
}

/// One operator's part in one sample's [`FusedSample`], from the parameters its host setup
/// drew.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ChainPiece {
    /// For [`ChainStep::Geometry`]: the window of the operator's input (top, left, height,
    /// width; negative or past the edge means a filled border) and the size it becomes.
    Geometry {
        /// The window in the operator's input; `None` = all of it.
        window: Option<(i64, i64, usize, usize)>,
        /// The (rows, columns) it becomes (the window's size for a plain crop).
        out: (usize, usize),
    },
    /// For [`ChainStep::Flip`]: the mirrors drawn.
    Flip {
        /// Left–right.
        horizontal: bool,
        /// Top–bottom.
        vertical: bool,
    },
    /// For [`ChainStep::ColorJitter`]: the adjustments drawn.
    ColorJitter(JitterSample),
    /// For [`ChainStep::Normalize`]: `(mean, 1 / std)` per channel of the sample's image.
    Normalize {
        /// Per-channel mean.
        mean: [f32; 4],
        /// Per-channel `1 / std`.
        inv_std: [f32; 4],
    },
    /// For steps that draw nothing per sample (cast, layout).
    Fixed,
}

/// Why a chain (or one sample of it) can't run as the fused kernel: which operator, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainError {
    /// The operator's name in the pipeline.
    pub op: String,
    /// What the fused kernel can't do.
    pub reason: String,
}

impl fmt::Display for ChainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "'{}': {}", self.op, self.reason)
    }
}

impl std::error::Error for ChainError {}

fn refuse(op: &str, reason: impl Into<String>) -> ChainError {
    ChainError {
        op: op.to_string(),
        reason: reason.into(),
    }
}

/// A chain of operators checked to compose into the fused kernel.
///
/// ```
/// use stokehold::cuda::chain::{ChainPiece, ChainSteps, ChainStep, Resample};
/// use stokehold::image::{DType, Layout};
/// use stokehold::resample::Interp;
///
/// let bilinear = Resample { interp: Interp::Bilinear, antialias: true };
/// let steps = ChainSteps::new(vec![
///     ("resized".into(), ChainStep::Geometry { resample: Some(bilinear) }),
///     ("cropped".into(), ChainStep::Geometry { resample: None }),
///     ("images".into(), ChainStep::Layout { layout: Layout::Chw }),
/// ])
/// .unwrap();
/// // A 300x400 image resized to 256x341, then the centre 224x224 of that.
/// let s = steps
///     .sample(
///         (300, 400, 3),
///         &[
///             ChainPiece::Geometry { window: None, out: (256, 341) },
///             ChainPiece::Geometry { window: Some((16, 58, 224, 224)), out: (224, 224) },
///             ChainPiece::Fixed,
///         ],
///     )
///     .unwrap();
/// assert_eq!((s.out_h, s.out_w, s.keep), (256, 341, Some((16, 58, 224, 224))));
/// assert_eq!((s.output_size(), s.dtype, s.layout), ((224, 224), DType::U8, Layout::Chw));
///
/// // Two resamplings would round in between: refused before any sample.
/// let e = ChainSteps::new(vec![
///     ("a".into(), ChainStep::Geometry { resample: Some(bilinear) }),
///     ("b".into(), ChainStep::Geometry { resample: Some(bilinear) }),
/// ])
/// .unwrap_err();
/// assert_eq!(e.op, "b");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ChainSteps {
    steps: Vec<(String, ChainStep)>,
}

impl ChainSteps {
    /// Checks that `steps` (operator names and steps, in data-flow order, starting from the
    /// decoded u8 HWC images) compose into the fused kernel; the error names the first
    /// operator that does not, and why.
    pub fn new(steps: Vec<(String, ChainStep)>) -> Result<ChainSteps, ChainError> {
        let mut resampler: Option<&str> = None;
        let mut flipped_or_jittered: Option<&str> = None;
        let mut jitter: Option<&str> = None;
        let mut normalize: Option<&str> = None;
        let mut dtype = DType::U8;
        let mut rounded = false;
        for (name, step) in &steps {
            let name = name.as_str();
            match *step {
                ChainStep::Geometry { resample } => {
                    if let Some(prev) = flipped_or_jittered {
                        return Err(refuse(
                            name,
                            format!(
                                "it comes after '{prev}': the fused chain crops and resizes \
                                 before it flips and jitters"
                            ),
                        ));
                    }
                    if resample.is_some() {
                        if let Some(first) = resampler {
                            return Err(refuse(
                                name,
                                format!(
                                    "'{first}' resamples already: the fused chain resamples \
                                     once (two resizes round to u8 in between)"
                                ),
                            ));
                        }
                        if dtype != DType::U8 {
                            return Err(refuse(name, "resampling takes u8 images"));
                        }
                        resampler = Some(name);
                    }
                }
                ChainStep::Flip => flipped_or_jittered = Some(name),
                ChainStep::ColorJitter => {
                    if let Some(first) = jitter {
                        return Err(refuse(
                            name,
                            format!("'{first}' jitters already: the fused chain jitters once"),
                        ));
                    }
                    if normalize.is_some() || dtype != DType::U8 {
                        return Err(refuse(name, "color jitter takes u8 images"));
                    }
                    jitter = Some(name);
                    flipped_or_jittered = Some(name);
                }
                ChainStep::Normalize { dtype: d } => {
                    if let Some(first) = normalize {
                        return Err(refuse(
                            name,
                            format!(
                                "'{first}' normalizes already: the fused chain normalizes once"
                            ),
                        ));
                    }
                    normalize = Some(name);
                    dtype = d;
                    rounded = d != DType::F32;
                }
                ChainStep::Cast { dtype: d } => {
                    if d == dtype {
                        continue;
                    }
                    if let (Some(n), true) = (normalize, rounded) {
                        return Err(refuse(
                            name,
                            format!(
                                "the values after '{n}' are rounded to {} already; a cast to {} \
                                 would round twice, the fused chain rounds once",
                                dtype.name(),
                                d.name()
                            ),
                        ));
                    }
                    // Before a normalize the values are u8 values, exact in every dtype.
                    rounded = normalize.is_some() && d != DType::F32;
                    dtype = d;
                }
                ChainStep::Layout { .. } => {}
            }
        }
        Ok(ChainSteps { steps })
    }

    /// The steps, with the operators' names.
    pub fn steps(&self) -> &[(String, ChainStep)] {
        &self.steps
    }

    /// The kernels a batch through these steps may launch: the chain's, and color jitter's
    /// two between two chain launches where a step jitters ([`super::launcher`]).
    pub fn kernels(&self) -> Vec<Kernel> {
        let mut kernels = vec![Kernel::Chain];
        if self
            .steps
            .iter()
            .any(|(_, s)| matches!(s, ChainStep::ColorJitter))
        {
            kernels.extend([Kernel::JitterLumaSum, Kernel::JitterStep]);
        }
        kernels
    }

    /// The fused sample for one decoded image of `source` = (height, width, channels), u8
    /// HWC, from each operator's piece (one per step, in order). Errors on what this sample
    /// can't do in the fused kernel (a window reaching outside the image, which would need a
    /// filled border; channels other than 1 to 4, or other than 3 for color jitter).
    pub fn sample(
        &self,
        source: (usize, usize, usize),
        pieces: &[ChainPiece],
    ) -> Result<FusedSample, ChainError> {
        let whole = |(h, w): (usize, usize)| (0, 0, h, w);
        let (sh, sw, channels) = source;
        if pieces.len() != self.steps.len() {
            let op = self.steps.first().map_or("", |s| s.0.as_str());
            return Err(refuse(
                op,
                format!("{} pieces for {} steps", pieces.len(), self.steps.len()),
            ));
        }
        if !(1..=4).contains(&channels) {
            let op = self.steps.first().map_or("", |s| s.0.as_str());
            return Err(refuse(
                op,
                format!("the fused chain takes 1 to 4 channels, not {channels}"),
            ));
        }
        let mut s = FusedSample::resize(whole((sh, sw)), sh, sw, Interp::Bilinear, true);
        // The image so far: its size, and whether it has been resampled.
        let mut size = (sh, sw);
        let mut resampled = false;
        let mut keep = whole((sh, sw));
        for ((name, step), piece) in self.steps.iter().zip(pieces) {
            match (*step, *piece) {
                (ChainStep::Geometry { resample }, ChainPiece::Geometry { window, out }) => {
                    let window = window.unwrap_or((0, 0, size.0, size.1));
                    let w = inside(window, size).ok_or_else(|| {
                        refuse(
                            name,
                            format!(
                                "window {}x{} at ({}, {}) reaches outside the {}x{} image: \
                                 the fused chain reads inside the image only (no filled border)",
                                window.2, window.3, window.0, window.1, size.0, size.1
                            ),
                        )
                    })?;
                    // A resize to the same size leaves the pixels as they are (as on the CPU).
                    let resample = resample.filter(|_| out != (w.2, w.3));
                    if resample.is_none() && out != (w.2, w.3) {
                        return Err(refuse(name, "a crop's output must be its window"));
                    }
                    match (resampled, resample) {
                        (false, _) => {
                            s.window = (s.window.0 + w.0, s.window.1 + w.1, w.2, w.3);
                            (s.out_h, s.out_w) = (w.2, w.3);
                            if let Some(r) = resample {
                                (s.out_h, s.out_w) = out;
                                (s.interp, s.antialias) = (r.interp, r.antialias);
                                resampled = true;
                            }
                            keep = whole(out);
                        }
                        (true, None) => keep = (keep.0 + w.0, keep.1 + w.1, w.2, w.3),
                        (true, Some(_)) => {
                            return Err(refuse(name, "the fused chain resamples once"))
                        }
                    }
                    size = out;
                }
                (
                    ChainStep::Flip,
                    ChainPiece::Flip {
                        horizontal,
                        vertical,
                    },
                ) => {
                    s.flip_h ^= horizontal;
                    s.flip_v ^= vertical;
                }
                (ChainStep::ColorJitter, ChainPiece::ColorJitter(j)) => {
                    if channels != 3 {
                        return Err(refuse(name, "color jitter takes 3-channel images"));
                    }
                    s.jitter = Some(j);
                }
                (ChainStep::Normalize { dtype }, ChainPiece::Normalize { mean, inv_std }) => {
                    s.normalize = Some((mean, inv_std));
                    s.dtype = dtype;
                }
                (ChainStep::Cast { dtype }, ChainPiece::Fixed) => s.dtype = dtype,
                (ChainStep::Layout { layout }, ChainPiece::Fixed) => s.layout = layout,
                (step, piece) => {
                    return Err(refuse(
                        name,
                        format!("its piece {piece:?} does not fit its step {step:?}"),
                    ))
                }
            }
        }
        if resampled && keep != whole((s.out_h, s.out_w)) {
            s.keep = Some(keep);
        }
        Ok(s)
    }
}

/// `window` as a rectangle inside an image of `size`, if it is one (non-empty, no border).
fn inside(window: (i64, i64, usize, usize), size: (usize, usize)) -> Option<Rect> {
    let (t, l, h, w) = window;
    let fits = |a: i64, n: usize, max: usize| {
        a >= 0
            && n > 0
            && (a as u64)
                .checked_add(n as u64)
                .is_some_and(|e| e <= max as u64)
    };
    (fits(t, h, size.0) && fits(l, w, size.1)).then_some((t as usize, l as usize, h, w))
}
