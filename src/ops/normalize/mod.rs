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

/// GPU launcher (see `crate::cuda`).
pub mod cuda;
#[cfg(target_arch = "x86_64")]
mod simd;

use std::sync::Arc;

use half::f16;

use crate::error::SampleErrorKind;
use crate::image::{DType, Image, Layout, Pixels};
use crate::rng::SampleRng;
use crate::value::{Value, ValueType};

use super::schema::expect_image;
use super::{
    single_image, ArgError, ArgSpec, ArgType, Args, Backends, OpParams, OpSchema, Operator,
    OutputSlot, PixelsMut, PortSpec, SampleContext,
};
use crate::ops::flip::{flip_in_place, Flip};

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
    backends: Backends::CpuAndGpu,
    build,
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

fn build(args: &Args) -> Result<Box<dyn Operator>, ArgError> {
    let dtype = match args.str("dtype") {
        "f16" => DType::F16,
        _ => DType::F32,
    };
    Ok(Box::new(Normalize::new(
        &args.floats("mean"),
        &args.floats("std"),
        dtype,
    )?))
}

impl Normalize {
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

    /// Which argument does not fit `channels`, as an error message.
    fn check_channels(&self, channels: usize) -> Result<(), String> {
        for (name, n) in [("mean", self.mean.len()), ("std", self.inv_std.len())] {
            if n != 1 && n != channels {
                return Err(format!(
                    "'normalize' argument '{name}' has {n} values but the images have {channels} \
                     channels; give '{name}' one value or {channels}"
                ));
            }
        }
        Ok(())
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
    fn fuse_with(&self, next: super::FuseTarget<'_>) -> Option<Box<dyn Operator>> {
        let layout = next.op.converts_to_layout()?;
        Some(Box::new(NormalizeToLayout {
            normalize: self.clone(),
            layout,
            mirror: None,
            simd: true,
        }))
    }

    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
        let mut t = expect_image("normalize", inputs)?;
        if let Some(c) = t.channels {
            self.check_channels(c)?;
        }
        t.dtype = self.dtype;
        Ok(vec![ValueType::Image(t)])
    }

    fn run_cpu(
        &self,
        inputs: Vec<Value>,
        ctx: &mut SampleContext<'_>,
    ) -> Result<Vec<Value>, SampleErrorKind> {
        let im = single_image(inputs, ctx)?;
        let out = self.apply(im).map_err(|e| ctx.error(e))?;
        Ok(vec![Value::Image(out)])
    }
}

/// `normalize` followed by `layout`, in one pass: u8 HWC in, normalized values written
/// straight in the target layout. Bit-identical to the two operators (same arithmetic per
/// element); the executor substitutes it for the pair. A `flip` just before it is folded in
/// too ([`NormalizeToLayout::mirror`]): the pass reads the source mirrored instead of
/// moving pixels first.
#[derive(Debug, Clone, PartialEq)]
pub struct NormalizeToLayout {
    /// The normalization.
    pub normalize: Normalize,
    /// The layout written.
    pub layout: Layout,
    /// A `flip` fused in front: its choice is drawn and recorded under its own name and
    /// random stream, so batches and parameters are those of the unfused operators.
    pub mirror: Option<FusedFlip>,
    /// Use vector instructions where the CPU has them (same values either way; `false`
    /// is for tests comparing the two).
    pub simd: bool,
}

/// The `flip` operator folded into a [`NormalizeToLayout`], with its identity.
#[derive(Debug, Clone, PartialEq)]
pub struct FusedFlip {
    /// Its probabilities.
    pub flip: Flip,
    /// Its name in the pipeline.
    pub name: Arc<str>,
    /// Its random-stream key.
    pub key: u64,
}

impl NormalizeToLayout {
    /// Normalizes `im` into `self.layout`, mirrored left–right (`horizontal`) and/or top–bottom
    /// (`vertical`) on the way.
    pub fn apply(&self, mut im: Image, horizontal: bool, vertical: bool) -> Result<Image, String> {
        let n = &self.normalize;
        if !self.one_pass(&im) {
            flip_in_place(&mut im, horizontal, vertical);
            let out = n.apply(im)?;
            return Ok(crate::ops::layout::to_layout(&out, self.layout));
        }
        n.check_channels(im.channels)?;
        let len = im.pixels.len();
        let pixels = match self.one_pass_dtype() {
            DType::F16 => {
                let mut dst = crate::scratch::buffer::<f16>(len);
                self.write_one_pass(&im, horizontal, vertical, PixelsMut::F16(&mut dst));
                Pixels::F16(dst)
            }
            _ => {
                let mut dst = crate::scratch::buffer::<f32>(len);
                self.write_one_pass(&im, horizontal, vertical, PixelsMut::F32(&mut dst));
                Pixels::F32(dst)
            }
        };
        let (height, width, channels) = (im.height, im.width, im.channels);
        crate::scratch::recycle_image(im);
        Ok(Image {
            height,
            width,
            channels,
            layout: Layout::Chw,
            pixels,
        })
    }

    /// Whether `im` takes the one pass from u8 HWC to normalized CHW.
    fn one_pass(&self, im: &Image) -> bool {
        matches!(im.pixels, Pixels::U8(_)) && im.layout == Layout::Hwc && self.layout == Layout::Chw
    }

    /// The element type the one pass writes.
    fn one_pass_dtype(&self) -> DType {
        match self.normalize.dtype {
            DType::F16 => DType::F16,
            _ => DType::F32,
        }
    }

    /// The one pass over `im` (u8 HWC, channels checked) into `dst`, of the element type
    /// [`Self::one_pass_dtype`] and the image's length; every element is written.
    fn write_one_pass(&self, im: &Image, horizontal: bool, vertical: bool, dst: PixelsMut<'_>) {
        let n = &self.normalize;
        let c = im.channels;
        let mean = per_channel(&n.mean, c);
        let inv = per_channel(&n.inv_std, c);
        let Pixels::U8(data) = &im.pixels else {
            unreachable!("one_pass checked the type")
        };
        let src = SourceHwc {
            data,
            height: im.height,
            width: im.width,
            channels: c,
            horizontal,
            vertical,
        };
        match dst {
            PixelsMut::F16(d) => hwc_to_chw_normalized(&src, &mean, &inv, f16::from_f32, d),
            PixelsMut::F32(d) => {
                if !rgb_to_chw_vector(&src, &mean, &inv, self.simd, d) {
                    hwc_to_chw_normalized(&src, &mean, &inv, |y| y, d)
                }
            }
            PixelsMut::U8(_) => unreachable!("the one pass writes f16 or f32"),
        }
    }

    /// Draws (and records) the fused flip's choice: (left–right, top–bottom).
    fn choose_mirror(&self, ctx: &mut SampleContext<'_>) -> (bool, bool) {
        let Some(f) = &self.mirror else {
            return (false, false);
        };
        let mut rng = SampleRng::for_sample(ctx.seed, ctx.epoch, ctx.index as u64, f.key);
        let (h, v) = f.flip.choose(&mut rng);
        ctx.params.push((
            f.name.clone(),
            OpParams::Flip {
                horizontal: h,
                vertical: v,
            },
        ));
        (h, v)
    }
}

/// The f32 RGB case with vector instructions, when allowed (`simd`) and available; false
/// when not taken (nothing written).
fn rgb_to_chw_vector(
    src: &SourceHwc<'_>,
    mean: &[f32],
    inv: &[f32],
    simd: bool,
    dst: &mut [f32],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if simd && src.channels == 3 && simd::available() {
        // SAFETY: `available()` checked that this CPU has AVX2.
        unsafe {
            simd::rgb_to_chw(
                dst,
                src.data,
                src.height,
                src.width,
                src.horizontal,
                src.vertical,
                [mean[0], mean[1], mean[2]],
                [inv[0], inv[1], inv[2]],
            )
        };
        return true;
    }
    let _ = (src, mean, inv, simd, dst);
    false
}

/// A u8 HWC image read optionally mirrored.
struct SourceHwc<'a> {
    data: &'a [u8],
    height: usize,
    width: usize,
    channels: usize,
    horizontal: bool,
    vertical: bool,
}

fn hwc_to_chw_normalized<T: Copy>(
    src: &SourceHwc<'_>,
    mean: &[f32],
    inv: &[f32],
    out: impl Fn(f32) -> T + Copy,
    dst: &mut [T],
) {
    let (h, w, c) = (src.height, src.width, src.channels);
    let plane = h * w;
    debug_assert_eq!(dst.len(), plane * c);
    if plane == 0 {
        return;
    }
    let row = w * c;
    for y in 0..h {
        let sy = if src.vertical { h - 1 - y } else { y };
        let srow = &src.data[sy * row..][..row];
        match c {
            3 => chw_row::<3, T>(dst, plane, y * w, srow, src.horizontal, mean, inv, out),
            1 => chw_row::<1, T>(dst, plane, y * w, srow, src.horizontal, mean, inv, out),
            4 => chw_row::<4, T>(dst, plane, y * w, srow, src.horizontal, mean, inv, out),
            _ => {
                for (k, (&m, &s)) in mean.iter().zip(inv).enumerate().take(c) {
                    let d = &mut dst[k * plane + y * w..][..w];
                    for (x, o) in d.iter_mut().enumerate() {
                        let sx = if src.horizontal { w - 1 - x } else { x };
                        *o = out(normalize_value(f32::from(srow[sx * c + k]), m, s));
                    }
                }
            }
        }
    }
}

/// One source row of `N`-channel pixels into row `at` (an offset within a plane) of each of
/// the `N` output planes.
#[allow(clippy::too_many_arguments)]
#[inline]
fn chw_row<const N: usize, T: Copy>(
    dst: &mut [T],
    plane: usize,
    at: usize,
    srow: &[u8],
    mirrored: bool,
    mean: &[f32],
    inv: &[f32],
    out: impl Fn(f32) -> T,
) {
    let w = srow.len() / N;
    let m: [f32; N] = std::array::from_fn(|k| mean[k]);
    let s: [f32; N] = std::array::from_fn(|k| inv[k]);
    let mut each_plane = dst.chunks_exact_mut(plane);
    let mut planes: [&mut [T]; N] = std::array::from_fn(|_| {
        let p = each_plane.next().expect("one plane per channel");
        &mut p[at..][..w]
    });
    let px = srow.chunks_exact(N);
    let mut put = |x: usize, p: &[u8]| {
        for k in 0..N {
            planes[k][x] = out(normalize_value(f32::from(p[k]), m[k], s[k]));
        }
    };
    if mirrored {
        for (x, p) in px.rev().enumerate() {
            put(x, p);
        }
    } else {
        for (x, p) in px.enumerate() {
            put(x, p);
        }
    }
}

impl Operator for NormalizeToLayout {
    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
        let mut out = self.normalize.infer(inputs)?;
        if let Some(ValueType::Image(t)) = out.first_mut() {
            t.layout = self.layout;
        }
        Ok(out)
    }

    fn run_cpu(
        &self,
        inputs: Vec<Value>,
        ctx: &mut SampleContext<'_>,
    ) -> Result<Vec<Value>, SampleErrorKind> {
        let im = single_image(inputs, ctx)?;
        let (horizontal, vertical) = self.choose_mirror(ctx);
        let out = self
            .apply(im, horizontal, vertical)
            .map_err(|e| ctx.error(e))?;
        Ok(vec![Value::Image(out)])
    }

    fn run_cpu_into(
        &self,
        inputs: Vec<Value>,
        ctx: &mut SampleContext<'_>,
        slot: &mut dyn OutputSlot,
    ) -> Result<Vec<Value>, SampleErrorKind> {
        let im = single_image(inputs, ctx)?;
        let (horizontal, vertical) = self.choose_mirror(ctx);
        if self.one_pass(&im) && self.normalize.check_channels(im.channels).is_ok() {
            let shape = [im.channels, im.height, im.width];
            if let Some(room) = slot.room(self.one_pass_dtype(), Layout::Chw, shape) {
                self.write_one_pass(&im, horizontal, vertical, room);
                crate::scratch::recycle_image(im);
                return Ok(Vec::new());
            }
        }
        let out = self
            .apply(im, horizontal, vertical)
            .map_err(|e| ctx.error(e))?;
        Ok(vec![Value::Image(out)])
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

/// `values` repeated to `channels` entries when it has one value, else a copy.
pub fn per_channel(values: &[f32], channels: usize) -> Vec<f32> {
    if values.len() == 1 {
        vec![values[0]; channels]
    } else {
        values.to_vec()
    }
}

/// One element: `(x - mean) * inv_std` in f32.
#[inline]
pub fn normalize_value(x: f32, mean: f32, inv_std: f32) -> f32 {
    (x - mean) * inv_std
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
            Pixels::F32(map(&v, layout, c, plane, mean, inv_std, f32::from, |y| y))
        }
        (Pixels::F16(v), DType::F32 | DType::U8) => {
            Pixels::F32(map(&v, layout, c, plane, mean, inv_std, f16::to_f32, |y| y))
        }
        (Pixels::U8(v), DType::F16) => Pixels::F16(map(
            &v,
            layout,
            c,
            plane,
            mean,
            inv_std,
            f32::from,
            f16::from_f32,
        )),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::color_jitter::tests::{golden, golden_input};
    use crate::ops::layout::to_layout;
    use crate::value::ImageType;
    use proptest::prelude::*;

    fn imagenet() -> Normalize {
        Normalize::new(
            &[123.675, 116.28, 103.53],
            &[58.395, 57.12, 57.375],
            DType::F32,
        )
        .unwrap()
    }

    fn f32s(im: &Image) -> &[f32] {
        match &im.pixels {
            Pixels::F32(v) => v,
            other => panic!("not f32: {:?}", other.dtype()),
        }
    }

    #[test]
    fn matches_torchvision_golden() {
        let g = golden();
        let n = &g["normalize"];
        let (h, w) = (
            n["h"].as_u64().unwrap() as usize,
            n["w"].as_u64().unwrap() as usize,
        );
        let pix = |k: &str| -> Vec<f64> {
            n[k].as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect()
        };
        let mean: Vec<f64> = pix("mean").iter().map(|m| 255.0 * m).collect();
        let std: Vec<f64> = pix("std").iter().map(|s| 255.0 * s).collect();
        let op = Normalize::new(&mean, &std, DType::F32).unwrap();
        let im = Image::from_u8_hwc(h, w, 3, golden_input(h, w));
        let out = op.apply(im).unwrap();
        let got = f32s(&out);
        let ours = pix("ours");
        let tv = pix("torchvision");
        assert_eq!(got.len(), tv.len());
        // Our formula, evaluated by numpy in f32: bit-exact. (JSON holds the f32 values as
        // shortest f64 decimals; rounding the parsed f64 to f32 recovers them exactly.)
        for (a, b) in got.iter().zip(&ours) {
            assert_eq!(a.to_bits(), (*b as f32).to_bits(), "{a} vs {b}");
        }
        let max = got
            .iter()
            .zip(&tv)
            .map(|(a, b)| (f64::from(*a) - b).abs())
            .fold(0.0, f64::max);
        eprintln!("normalize: max |ours - torchvision| = {max:e}");
        assert!(max < 1e-5, "{max}");
    }

    #[test]
    fn f16_output_rounds_the_f32_result() {
        let src = golden_input(5, 7);
        let f32_out = imagenet()
            .apply(Image::from_u8_hwc(5, 7, 3, src.clone()))
            .unwrap();
        let mut op = imagenet();
        op.dtype = DType::F16;
        let f16_out = op.apply(Image::from_u8_hwc(5, 7, 3, src)).unwrap();
        let Pixels::F16(h) = &f16_out.pixels else {
            panic!("not f16")
        };
        let want: Vec<f16> = f32s(&f32_out).iter().map(|&x| f16::from_f32(x)).collect();
        assert_eq!(h, &want);
    }

    #[test]
    fn channel_count_errors_name_the_argument() {
        let op = imagenet();
        let e = op
            .infer(&[ValueType::Image(ImageType::decoded(1))])
            .unwrap_err();
        assert!(e.contains("'mean'") && e.contains("1 channels"), "{e}");
        let one_mean = Normalize::new(&[0.5], &[1.0, 2.0, 3.0], DType::F16).unwrap();
        let e = one_mean
            .apply(Image::from_u8_hwc(1, 1, 4, vec![1; 4]))
            .unwrap_err();
        assert!(e.contains("'std'"), "{e}");
        let t = one_mean
            .infer(&[ValueType::Image(ImageType::decoded(3))])
            .unwrap();
        assert!(matches!(
            t[0],
            ValueType::Image(ImageType {
                dtype: DType::F16,
                ..
            })
        ));
        assert!(Normalize::new(&[0.0, 1.0], &[1.0, 1.0, 1.0], DType::F32).is_err());
        assert!(Normalize::new(&[0.0], &[0.0], DType::F32).is_err());
        assert!(Normalize::new(&[f64::NAN], &[1.0], DType::F32).is_err());
    }

    #[test]
    fn schema_rejects_nonpositive_std() {
        let given = [("std".to_string(), crate::ops::ArgValue::Float(0.0))].into();
        let e = crate::ops::Args::validate(&SCHEMA, &given).unwrap_err();
        assert_eq!(e.arg.as_deref(), Some("std"));
        let args = crate::ops::Args::validate(&SCHEMA, &Default::default()).unwrap();
        let op = (SCHEMA.build)(&args).unwrap();
        let t = op
            .infer(&[ValueType::Image(ImageType::decoded(3))])
            .unwrap();
        assert!(matches!(
            t[0],
            ValueType::Image(ImageType {
                dtype: DType::F32,
                ..
            })
        ));
    }

    proptest! {
        #[test]
        fn layout_independent(h in 1usize..6, w in 1usize..6, c in 1usize..5, seed: u64) {
            let mut rng = crate::rng::SampleRng::from_key(seed);
            let src: Vec<u8> = (0..h * w * c).map(|_| rng.next_u64() as u8).collect();
            let mean: Vec<f64> = (0..c).map(|_| rng.uniform_range(-50.0, 200.0)).collect();
            let std: Vec<f64> = (0..c).map(|_| rng.uniform_range(0.1, 80.0)).collect();
            let op = Normalize::new(&mean, &std, DType::F32).unwrap();
            let hwc = Image::from_u8_hwc(h, w, c, src.clone());
            let chw = to_layout(&hwc, Layout::Chw);
            let a = op.apply(hwc).unwrap();
            let b = op.apply(chw).unwrap();
            prop_assert_eq!(to_layout(&b, Layout::Hwc), a.clone());
            // And each element follows the formula for its channel.
            for (i, y) in f32s(&a).iter().enumerate() {
                let k = i % c;
                let want = (f32::from(src[i]) - mean[k] as f32) * (1.0f32 / std[k] as f32);
                prop_assert_eq!(y.to_bits(), want.to_bits());
            }
        }

        #[test]
        fn one_value_broadcasts(v in proptest::collection::vec(any::<f32>(), 6), m in -10.0f64..10.0, s in 0.5f64..4.0) {
            let v: Vec<f32> = v.into_iter().map(|x| if x.is_finite() { x } else { 0.0 }).collect();
            let im = Image { height: 1, width: 2, channels: 3, layout: Layout::Hwc, pixels: Pixels::F32(v.clone()) };
            let a = Normalize::new(&[m], &[s], DType::F32).unwrap().apply(im.clone()).unwrap();
            let b = Normalize::new(&[m; 3], &[s; 3], DType::F32).unwrap().apply(im).unwrap();
            prop_assert_eq!(a, b);
        }
    }

    #[test]
    fn f16_input_is_widened_exactly() {
        let vals = [0.5f32, -3.25, 1000.0, 0.0];
        let im = Image {
            height: 2,
            width: 2,
            channels: 1,
            layout: Layout::Chw,
            pixels: Pixels::F16(vals.iter().map(|&x| f16::from_f32(x)).collect()),
        };
        let out = Normalize::new(&[0.5], &[2.0], DType::F32)
            .unwrap()
            .apply(im)
            .unwrap();
        assert_eq!(f32s(&out), &[0.0, -1.875, 499.75, -0.25]);
    }
}

#[cfg(test)]
mod fused_tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn normalize_to_layout_is_bit_identical(h in 1usize..9, w in 1usize..40, c in 1usize..6, f16_out: bool,
                                                 fh: bool, fv: bool, seed: u64) {
            let mut rng = crate::rng::SampleRng::from_key(seed);
            let src: Vec<u8> = (0..h * w * c).map(|_| rng.next_u64() as u8).collect();
            let im = Image::from_u8_hwc(h, w, c, src);
            let dtype = if f16_out { DType::F16 } else { DType::F32 };
            let n = Normalize::new(&[123.675, 116.28, 103.53][..c.min(3)].iter().copied().cycle().take(c).collect::<Vec<_>>(), &[58.395], dtype).unwrap();
            let mut flipped = im.clone();
            flip_in_place(&mut flipped, fh, fv);
            let two_pass = crate::ops::layout::to_layout(&n.apply(flipped).unwrap(), Layout::Chw);
            let mut fused = NormalizeToLayout { normalize: n, layout: Layout::Chw, mirror: None, simd: true };
            prop_assert_eq!(fused.apply(im.clone(), fh, fv).unwrap(), two_pass.clone());
            fused.simd = false;
            prop_assert_eq!(fused.apply(im.clone(), fh, fv).unwrap(), two_pass.clone());
            // Other layouts and dtypes go through the general path, mirrored the same way.
            let f32_hwc = crate::ops::cast::cast_image(&im, DType::F32);
            prop_assert_eq!(fused.apply(f32_hwc, fh, fv).unwrap(), two_pass);
        }
    }

    #[test]
    fn the_graph_fuses_normalize_and_layout() {
        use crate::pipeline::spec::{OpSpec, PipelineSpec};
        let spec = PipelineSpec::builder()
            .op(OpSpec::new("file_reader").output("jpegs").arg("root", "x"))
            .op(OpSpec::new("decode").input("jpegs").output("decoded"))
            .op(OpSpec::new("normalize")
                .input("decoded")
                .output("normalized"))
            .op(OpSpec::new("layout").input("normalized").output("images"))
            .outputs(&["images"]);
        let g = crate::pipeline::graph::Graph::build(&spec).unwrap();
        let names: Vec<&str> = g.nodes.iter().map(|n| &*n.name).collect();
        assert_eq!(names, ["decoded", "normalized+images"]);
        // A flip in front folds in as well.
        let with_flip = PipelineSpec::builder()
            .op(OpSpec::new("file_reader").output("jpegs").arg("root", "x"))
            .op(OpSpec::new("decode").input("jpegs").output("decoded"))
            .op(OpSpec::new("flip").input("decoded").output("flipped"))
            .op(OpSpec::new("normalize")
                .input("flipped")
                .output("normalized"))
            .op(OpSpec::new("layout").input("normalized").output("images"))
            .outputs(&["images"]);
        let g = crate::pipeline::graph::Graph::build(&with_flip).unwrap();
        let names: Vec<&str> = g.nodes.iter().map(|n| &*n.name).collect();
        assert_eq!(names, ["decoded", "flipped+normalized+images"]);
        // Not fused when the intermediate is also an output.
        let g =
            crate::pipeline::graph::Graph::build(&spec.outputs(&["images", "normalized"])).unwrap();
        assert_eq!(g.nodes.len(), 3);
    }
}
