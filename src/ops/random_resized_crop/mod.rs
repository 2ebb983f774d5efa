//! `random_resized_crop`: pick a random window covering a random fraction of the image with
//! a random aspect ratio (torchvision `RandomResizedCrop.get_params`, drawn from stokehold's
//! counter-based stream) and resize it to a fixed size, as if it had been cropped first.
//!
//! The window is recorded as [`OpParams::Crop`] by the host setup ([`choose_window`]), which
//! is also what a region-of-interest decoder calls to know the window before decoding (the
//! fused decode → crop operator, `crate::fusion::decode_random_crop`, decodes only the window,
//! with bit-identical output).

/// GPU launcher.
pub mod gpu;

#[cfg(test)]
mod tests;

use crate::error::SampleErrorKind;
use crate::resample::{resize_image, Interp, MAX_SIDE};
use crate::rng::SampleRng;
use crate::schema::expect_u8_hwc;
use crate::value::{smallvec, Value, ValueType, Values};

use super::{
    single_image, ArgError, ArgSpec, ArgType, Args, Backends, CropParams, ImageShape, OpParams,
    OpSchema, Operator, PortSpec, SampleContext, SampleKey, Setup, SetupInput,
};

/// Schema of `random_resized_crop`.
pub static SCHEMA: OpSchema = OpSchema {
    kind: "random_resized_crop",
    doc: "Chooses a window with area fraction in `scale` and aspect ratio (width / height) in \
          `ratio` (log-uniform), up to 10 tries, else a central crop clamped to `ratio` \
          (torchvision RandomResizedCrop), then resizes it to `size` as resize does (pixels \
          outside the window never contribute). u8 HWC images.",
    inputs: &[PortSpec {
        name: "images",
        doc: "u8 HWC images",
    }],
    outputs: &[PortSpec {
        name: "images",
        doc: "u8 HWC images of `size`",
    }],
    args: &[
        ArgSpec {
            name: "size",
            ty: ArgType::Size { max: MAX_SIDE },
            default: None,
            doc: "output size, N or [height, width]",
        },
        ArgSpec {
            name: "scale",
            ty: ArgType::Range { min: 0.0, max: 1.0 },
            default: Some("[0.08, 1.0]"),
            doc: "range of the window's area as a fraction of the image",
        },
        ArgSpec {
            name: "ratio",
            ty: ArgType::Range {
                min: 0.0,
                max: 100.0,
            },
            default: Some("[0.75, 1.3333333333333333]"),
            doc: "range of the window's aspect ratio (width / height), both > 0",
        },
        ArgSpec {
            name: "interp",
            ty: ArgType::Choice(&["bilinear", "nearest"]),
            default: Some("\"bilinear\""),
            doc: "interpolation",
        },
        ArgSpec {
            name: "antialias",
            ty: ArgType::Bool,
            default: Some("true"),
            doc: "widen the bilinear filter when shrinking (Pillow/torchvision antialias)",
        },
        ArgSpec {
            name: "dct_downscale",
            ty: ArgType::Bool,
            default: Some("false"),
            doc: "when a JPEG decode feeds this crop on the CPU and the window is at least \
                  twice the output, decode it downscaled by 1/2, 1/4 or 1/8 in the DCT \
                  domain (at 1/8, progressive files skip the AC scans the 1x1 IDCT never \
                  reads): several times faster on large photos, pixels close to but not \
                  identical with the exact path (and the GPU path, which always decodes at \
                  full size)",
        },
    ],
    aliases: &[],
    backends: Backends::CpuAndGpu,
};

/// The built operator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RandomResizedCrop {
    /// Output rows.
    pub height: usize,
    /// Output columns.
    pub width: usize,
    /// Area fraction range.
    pub scale: (f64, f64),
    /// Aspect ratio (width / height) range, both > 0.
    pub ratio: (f64, f64),
    /// Interpolation.
    pub interp: Interp,
    /// Widen the bilinear filter when downscaling.
    pub antialias: bool,
    /// Decode large windows downscaled in the DCT domain when fused with the decoder
    /// (`crate::fusion::decode_and_crop_scaled`); not bit-identical to the exact path.
    pub dct_downscale: bool,
}

/// Builds the operator from validated arguments.
pub fn build(args: &Args) -> Result<Box<dyn Operator>, ArgError> {
    Ok(Box::new(RandomResizedCrop::from_args(args)?))
}

impl RandomResizedCrop {
    /// The operator from validated arguments (defaults filled in).
    pub fn from_args(args: &Args) -> Result<RandomResizedCrop, ArgError> {
        let (height, width) = args.size("size");
        let ratio = args.range("ratio");
        if ratio.0 <= 0.0 {
            return Err(
                ArgError::arg("ratio", "aspect ratios must be greater than 0")
                    .with_help("e.g. ratio = [0.75, 1.3333333333333333]"),
            );
        }
        let interp = Interp::from_name(args.str("interp"))
            .ok_or_else(|| ArgError::arg("interp", "unknown interpolation"))?;
        Ok(RandomResizedCrop {
            height,
            width,
            scale: args.range("scale"),
            ratio,
            interp,
            antialias: args.bool("antialias"),
            dct_downscale: args.bool("dct_downscale"),
        })
    }
}

/// Python's `round()` to an integer: halves go to the even neighbour.
fn round_half_even(x: f64) -> i64 {
    x.round_ties_even() as i64
}

/// The window (top, left, height, width) for an `h` × `w` image, as torchvision's
/// `RandomResizedCrop.get_params` with draws from `rng`: up to 10 tries of
/// `area · U(scale)` and `exp(U(ln ratio))` (scale drawn first), sides rounded half to even,
/// accepted when `0 < side <= image side`, then top = `below(h - height + 1)`,
/// left = `below(w - width + 1)`. Otherwise a central crop: the whole image, narrowed or
/// shortened to the nearest allowed ratio. Always inside the image and at least 1 × 1 for a
/// non-empty image.
pub fn choose_window(
    h: usize,
    w: usize,
    scale: (f64, f64),
    ratio: (f64, f64),
    rng: &mut SampleRng,
) -> (usize, usize, usize, usize) {
    let area = (h * w) as f64;
    let log_ratio = (ratio.0.ln(), ratio.1.ln());
    for _ in 0..10 {
        let target_area = area * rng.uniform_range(scale.0, scale.1);
        let aspect = rng.uniform_range(log_ratio.0, log_ratio.1).exp();
        let cw = round_half_even((target_area * aspect).sqrt());
        let ch = round_half_even((target_area / aspect).sqrt());
        if 0 < cw && cw as usize <= w && 0 < ch && ch as usize <= h {
            let (ch, cw) = (ch as usize, cw as usize);
            let top = rng.below((h - ch + 1) as u64) as usize;
            let left = rng.below((w - cw + 1) as u64) as usize;
            return (top, left, ch, cw);
        }
    }
    let in_ratio = w as f64 / h.max(1) as f64;
    let (ch, cw) = if in_ratio < ratio.0 {
        (round_half_even(w as f64 / ratio.0) as usize, w)
    } else if in_ratio > ratio.1 {
        (h, round_half_even(h as f64 * ratio.1) as usize)
    } else {
        (h, w)
    };
    // Rounding cannot exceed the image (the ratio test bounds it), but a ratio far from the
    // image's could round a side to 0: keep at least one pixel.
    let (ch, cw) = (ch.clamp(1.min(h), h), cw.clamp(1.min(w), w));
    ((h - ch) / 2, (w - cw) / 2, ch, cw)
}

impl RandomResizedCrop {
    /// The window for one sample of `h` × `w` (see [`choose_window`]).
    pub fn choose(&self, h: usize, w: usize, rng: &mut SampleRng) -> (usize, usize, usize, usize) {
        choose_window(h, w, self.scale, self.ratio, rng)
    }
}

impl Operator for RandomResizedCrop {
    /// Draws the window (see [`choose_window`]) for the input's size.
    fn setup(&self, input: SetupInput<'_>, sample: &SampleKey) -> Result<Setup, String> {
        let s = input.image()?;
        if s.height == 0 || s.width == 0 {
            return Err("empty image".into());
        }
        let (top, left, height, width) = self.choose(s.height, s.width, &mut sample.rng());
        Ok(Setup {
            output: s.with_size(self.height, self.width),
            params: Some(OpParams::Crop(CropParams {
                top: top as i64,
                left: left as i64,
                height,
                width,
                source_height: s.height,
                source_width: s.width,
            })),
        })
    }

    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
        let mut t = expect_u8_hwc("random_resized_crop", inputs)?;
        t.size = Some((self.height, self.width));
        Ok(vec![ValueType::Image(t)])
    }

    fn run_cpu(
        &self,
        inputs: Values,
        ctx: &mut SampleContext<'_>,
    ) -> Result<Values, SampleErrorKind> {
        let im = single_image(inputs, ctx)?;
        let s = ctx.setup(self, SetupInput::Image(ImageShape::of(&im)))?;
        let Some(c) = s.crop() else {
            unreachable!("random_resized_crop's setup draws a window")
        };
        let out = resize_image(
            &im,
            (c.top as usize, c.left as usize, c.height, c.width),
            self.height,
            self.width,
            self.interp,
            self.antialias,
        )
        .map_err(|e| ctx.error(e))?;
        Ok(smallvec![Value::Image(out)])
    }

    fn gpu(&self) -> Option<&dyn super::GpuOperator> {
        Some(self)
    }
}
