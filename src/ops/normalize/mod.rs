//! `normalize`: per-channel `(x - mean) / std`, output in f32 or f16.
//!
//! # Specification (the GPU path must reproduce it)
//!
//! Means and stds are in the input's units (0–255 for u8 input, as DALI's
//! `crop_mirror_normalize`). With `c` the channel of an element (`i % channels` in HWC,
//! `i / (height * width)` in CHW), all in f32:
//!
//! ```text
//! mean_f[c] = f32(mean[c])                  // round to nearest from the f64 argument
//! inv_f[c]  = 1.0f32 / f32(std[c])          // f32 division, precomputed once
//! y         = (f32(x) - mean_f[c]) * inv_f[c]   // f32 subtract, then f32 multiply
//! out       = y                      (dtype f32)
//!           = f16 round-to-nearest-even of y (dtype f16; CUDA __float2half_rn)
//! ```
//!
//! `f32(x)` is exact for u8, f16 and f32 inputs. A `mean`/`std` of one value applies to every
//! channel; otherwise it needs one value per channel. Compared with torchvision's
//! `ToTensor()` + `Normalize(m, s)` (`(x / 255 - m) / s` in f32) using `mean = 255 m`,
//! `std = 255 s`, the results differ by at most 4.8e-7 on the ImageNet statistics
//! (measured by scripts/golden/color.py).

/// The per-element arithmetic: one value, or u8 elements eight at a time (AVX2, F16C).
pub mod arith;
/// GPU launcher.
pub mod gpu;

pub use arith::normalize_value;

#[cfg(test)]
mod tests;

use half::f16;

use crate::error::SampleErrorKind;
use crate::image::{DType, Image, Layout, Pixels};
use crate::schema::expect_image;
use crate::value::{smallvec, Value, ValueType, Values};

use super::{
    single_image, ArgError, ArgSpec, ArgType, Args, Backends, ImageShape, OpSchema, Operator,
    PortSpec, SampleContext, SampleKey, Setup, SetupInput,
};

/// Largest magnitude accepted for `mean` and `std` (the arithmetic is in f32).
const LIMIT: f64 = f32::MAX as f64;

/// Schema of `normalize`.
pub static SCHEMA: OpSchema = OpSchema {
    kind: "normalize",
    doc: "Per-channel (x - mean) / std, computed in f32 as (x - mean) * (1 / std), output in \
          `dtype`. Means and stds are in the input's units: 0–255 for u8 images (ImageNet: \
          mean = [123.675, 116.28, 103.53], std = [58.395, 57.12, 57.375]). Any input dtype and \
          layout; one value applies to every channel, otherwise one value per channel.",
    inputs: &[PortSpec {
        name: "images",
        doc: "images, any dtype and layout",
    }],
    outputs: &[PortSpec {
        name: "images",
        doc: "normalized f32 or f16 images, same layout",
    }],
    args: &[
        ArgSpec {
            name: "mean",
            ty: ArgType::Floats {
                len: 0,
                min: -LIMIT,
                max: LIMIT,
            },
            default: Some("[0.0]"),
            doc: "value subtracted, one or one per channel, in the input's units",
        },
        ArgSpec {
            name: "std",
            ty: ArgType::Floats {
                len: 0,
                min: f32::MIN_POSITIVE as f64,
                max: LIMIT,
            },
            default: Some("[1.0]"),
            doc: "divisor (> 0), one or one per channel, in the input's units",
        },
        ArgSpec {
            name: "dtype",
            ty: ArgType::Choice(&["f32", "f16"]),
            default: Some("\"f32\""),
            doc: "output element type",
        },
    ],
    aliases: &[],
    backends: Backends::CpuAndGpu,
};

/// The built operator, with its f32 coefficients precomputed.
#[derive(Debug, Clone, PartialEq)]
pub struct Normalize {
    /// `f32(mean[c])`, one value or one per channel.
    pub mean: Vec<f32>,
    /// `1.0f32 / f32(std[c])`, one value or one per channel.
    pub inv_std: Vec<f32>,
    /// Output element type (F32 or F16).
    pub dtype: DType,
}

/// Builds the operator from validated arguments.
pub fn build(args: &Args) -> Result<Box<dyn Operator>, ArgError> {
    Ok(Box::new(Normalize::from_args(args)?))
}

impl Normalize {
    /// The operator from validated arguments (defaults filled in).
    pub fn from_args(args: &Args) -> Result<Normalize, ArgError> {
        let dtype = match args.str("dtype") {
            "f16" => DType::F16,
            _ => DType::F32,
        };
        Normalize::new(&args.floats("mean"), &args.floats("std"), dtype)
    }

    /// Checks the arguments (non-empty, finite, `std > 0`, output F32 or F16) and
    /// precomputes the f32 coefficients.
    pub fn new(mean: &[f64], std: &[f64], dtype: DType) -> Result<Normalize, ArgError> {
        if mean.is_empty() || mean.iter().any(|m| m.is_nan() || m.abs() > LIMIT) {
            return Err(ArgError::arg("mean", "argument 'mean' needs finite values")
                .with_help("give one value or one per channel, e.g. [123.675, 116.28, 103.53]"));
        }
        if std.is_empty()
            || std
                .iter()
                .any(|s| !(f64::from(f32::MIN_POSITIVE)..=LIMIT).contains(s))
        {
            return Err(
                ArgError::arg("std", "argument 'std' needs finite values > 0")
                    .with_help("give one value or one per channel, e.g. [58.395, 57.12, 57.375]"),
            );
        }
        if mean.len() > 1 && std.len() > 1 && mean.len() != std.len() {
            return Err(ArgError::arg(
                "std",
                format!(
                    "argument 'std' has {} values but 'mean' has {}",
                    std.len(),
                    mean.len()
                ),
            )
            .with_help("give both one value per channel (or a single value)"));
        }
        if dtype == DType::U8 {
            return Err(ArgError::arg("dtype", "normalize outputs f32 or f16")
                .with_help("use dtype = \"f32\" or \"f16\""));
        }
        Ok(Normalize {
            mean: mean.iter().map(|&m| m as f32).collect(),
            inv_std: std.iter().map(|&s| 1.0f32 / s as f32).collect(),
            dtype,
        })
    }

    /// The argument whose count of values does not fit `channels`, and that count.
    fn misfit(&self, channels: usize) -> Option<(&'static str, usize)> {
        [("mean", self.mean.len()), ("std", self.inv_std.len())]
            .into_iter()
            .find(|&(_, n)| n != 1 && n != channels)
    }

    /// Which argument does not fit `channels`, as an error message.
    pub fn check_channels(&self, channels: usize) -> Result<(), String> {
        let Some((name, n)) = self.misfit(channels) else {
            return Ok(());
        };
        let has = match channels {
            1 => "1 channel (gray)".to_string(),
            c => format!("{c} channels"),
        };
        Err(format!(
            "'normalize' argument '{name}' has {n} values but its images have {has}; \
             give '{name}' one value per channel ({channels}), or a single value"
        ))
    }

    /// Normalizes `im`; an error names the argument whose length does not fit its channels.
    pub fn apply(&self, im: Image) -> Result<Image, String> {
        self.check_channels(im.channels)?;
        let c = im.channels;
        let mean = per_channel(&self.mean, c);
        let inv = per_channel(&self.inv_std, c);
        Ok(normalize_image(im, &mean, &inv, self.dtype))
    }
}

impl Operator for Normalize {
    /// The same image with the output element type; nothing is drawn.
    fn setup(&self, input: SetupInput<'_>, _: &SampleKey) -> Result<Setup, String> {
        let mut s = input.image()?;
        self.check_channels(s.channels)?;
        s.dtype = self.dtype;
        Ok(Setup::shape(s))
    }

    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
        let mut t = expect_image("normalize", inputs)?;
        if let Some(c) = t.channels {
            self.check_channels(c)?;
        }
        t.dtype = self.dtype;
        Ok(vec![ValueType::Image(t)])
    }

    fn argument_at_fault(&self, inputs: &[ValueType]) -> Option<&'static str> {
        match inputs {
            [ValueType::Image(t)] => self.misfit(t.channels?).map(|(name, _)| name),
            _ => None,
        }
    }

    fn run_cpu(
        &self,
        inputs: Values,
        ctx: &mut SampleContext<'_>,
    ) -> Result<Values, SampleErrorKind> {
        let im = single_image(inputs, ctx)?;
        ctx.setup(self, SetupInput::Image(ImageShape::of(&im)))?;
        let out = self.apply(im).map_err(|e| ctx.error(e))?;
        Ok(smallvec![Value::Image(out)])
    }

    fn gpu(&self) -> Option<&dyn super::GpuOperator> {
        Some(self)
    }
}

/// `values` repeated to `channels` entries when it has one value, else the same values: on
/// the stack for up to four channels (every image but an unusual one), as it is built for
/// each image.
pub fn per_channel(values: &[f32], channels: usize) -> PerChannel {
    let n = if values.len() == 1 {
        channels
    } else {
        values.len()
    };
    if n <= PerChannel::INLINE {
        let mut v = [0.0; PerChannel::INLINE];
        for (k, x) in v[..n].iter_mut().enumerate() {
            *x = values[if values.len() == 1 { 0 } else { k }];
        }
        PerChannel::Inline(v, n)
    } else if values.len() == 1 {
        PerChannel::Heap(vec![values[0]; channels])
    } else {
        PerChannel::Heap(values.to_vec())
    }
}

/// One value a channel ([`per_channel`]); reads as a slice.
#[derive(Debug, Clone, PartialEq)]
pub enum PerChannel {
    /// Up to [`PerChannel::INLINE`] values: the first `.1` of the array.
    Inline([f32; PerChannel::INLINE], usize),
    /// More channels than that.
    Heap(Vec<f32>),
}

impl PerChannel {
    /// The most channels held without an allocation.
    pub const INLINE: usize = 4;
}

impl std::ops::Deref for PerChannel {
    type Target = [f32];

    fn deref(&self) -> &[f32] {
        match self {
            PerChannel::Inline(v, n) => &v[..*n],
            PerChannel::Heap(v) => v,
        }
    }
}

/// Normalizes `im` with one `mean` and `inv_std` per channel (both `im.channels` long) into
/// `dtype` (F32 or F16; U8 is treated as F32). An f32 → f32 image is processed in place.
pub fn normalize_image(im: Image, mean: &[f32], inv_std: &[f32], dtype: DType) -> Image {
    let (c, plane) = (im.channels, im.height * im.width);
    let layout = im.layout;
    let pixels = match (im.pixels, dtype) {
        (Pixels::F32(mut v), DType::F32 | DType::U8) => {
            for_each_channel(&mut v, layout, c, plane, |x, k| {
                *x = normalize_value(*x, mean[k], inv_std[k]);
            });
            Pixels::F32(v)
        }
        (Pixels::U8(v), DType::F32 | DType::U8) => {
            Pixels::F32(from_u8(&v, layout, c, plane, mean, inv_std))
        }
        (Pixels::F16(v), DType::F32 | DType::U8) => {
            Pixels::F32(map(&v, layout, c, plane, mean, inv_std, f16::to_f32, |y| y))
        }
        (Pixels::U8(v), DType::F16) => Pixels::F16(from_u8(&v, layout, c, plane, mean, inv_std)),
        (Pixels::F16(v), DType::F16) => Pixels::F16(map(
            &v,
            layout,
            c,
            plane,
            mean,
            inv_std,
            f16::to_f32,
            f16::from_f32,
        )),
        (Pixels::F32(v), DType::F16) => Pixels::F16(map(
            &v,
            layout,
            c,
            plane,
            mean,
            inv_std,
            |x| x,
            f16::from_f32,
        )),
    };
    Image {
        height: im.height,
        width: im.width,
        channels: c,
        layout,
        pixels,
    }
}

/// Calls `f(element, channel)` for every element of a `layout` buffer.
fn for_each_channel<T>(
    v: &mut [T],
    layout: Layout,
    c: usize,
    plane: usize,
    mut f: impl FnMut(&mut T, usize),
) {
    if c == 0 || plane == 0 {
        return;
    }
    match layout {
        Layout::Hwc => {
            for px in v.chunks_exact_mut(c) {
                for (k, x) in px.iter_mut().enumerate() {
                    f(x, k);
                }
            }
        }
        Layout::Chw => {
            for (k, p) in v.chunks_exact_mut(plane).enumerate() {
                for x in p {
                    f(x, k);
                }
            }
        }
    }
}

/// A new buffer with every u8 element normalized, eight at a time where the CPU allows.
fn from_u8<D: arith::Lane + Default>(
    src: &[u8],
    layout: Layout,
    c: usize,
    plane: usize,
    mean: &[f32],
    inv_std: &[f32],
) -> Vec<D> {
    let mut out = vec![D::default(); src.len()];
    if c == 0 || plane == 0 {
        return out;
    }
    match layout {
        Layout::Hwc => arith::normalize_u8(&mut out, src, mean, inv_std, true),
        Layout::Chw => {
            let planes = out.chunks_exact_mut(plane).zip(src.chunks_exact(plane));
            for (k, (o, s)) in planes.enumerate() {
                arith::normalize_u8(o, s, &mean[k..=k], &inv_std[k..=k], true);
            }
        }
    }
    out
}

/// A new buffer with `to(normalize_value(from(x), ..))` for every element.
#[allow(clippy::too_many_arguments)]
fn map<S: Copy, D: Copy + Default>(
    src: &[S],
    layout: Layout,
    c: usize,
    plane: usize,
    mean: &[f32],
    inv_std: &[f32],
    from: impl Fn(S) -> f32,
    to: impl Fn(f32) -> D,
) -> Vec<D> {
    let mut out = vec![D::default(); src.len()];
    if c == 0 || plane == 0 {
        return out;
    }
    match layout {
        Layout::Hwc => {
            for (o, s) in out.chunks_exact_mut(c).zip(src.chunks_exact(c)) {
                for k in 0..c {
                    o[k] = to(normalize_value(from(s[k]), mean[k], inv_std[k]));
                }
            }
        }
        Layout::Chw => {
            for (k, (o, s)) in out
                .chunks_exact_mut(plane)
                .zip(src.chunks_exact(plane))
                .enumerate()
            {
                let (m, i) = (mean[k], inv_std[k]);
                for (o, &s) in o.iter_mut().zip(s) {
                    *o = to(normalize_value(from(s), m, i));
                }
            }
        }
    }
    out
}
