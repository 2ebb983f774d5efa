//! `resize`: scale 8-bit HWC images to an exact size or so the shorter side has a given
//! length, bit-exact with Pillow's `Image.resize` (what torchvision does for PIL images).
//!
//! The arithmetic lives in [`crate::resample`] (shared with `random_resized_crop`, the fused
//! operators and the GPU chain): per-axis coefficient tables plus integer passes that the
//! GPU path replays. Any channel count works; channels are resampled independently (Pillow
//! premultiplies alpha for `RGBA`, stokehold does not).

/// GPU launcher.
pub mod gpu;

#[cfg(test)]
mod tests;

use crate::error::SampleErrorKind;
use crate::value::{smallvec, Value, ValueType, Values};

pub use crate::resample::{
    bilinear_taps, nearest_indices, resample_bilinear_u8, resample_nearest_u8, resize_image,
    resize_u8, vertical_first, Interp, ResizeError, SourceU8, Taps, Window, MAX_OUTPUT_PIXELS,
    MAX_SIDE, PRECISION_BITS,
};
pub use crate::schema::expect_u8_hwc;

use super::{
    single_image, ArgError, ArgSpec, ArgType, Args, Backends, ImageShape, OpSchema, Operator,
    PortSpec, SampleContext, SampleKey, Setup, SetupInput, OPTIONAL,
};

/// Schema of `resize`.
pub static SCHEMA: OpSchema = OpSchema {
    kind: "resize",
    doc: "Resizes 8-bit HWC images, either to an exact `size` or so that the `shorter` side \
          becomes N with the aspect ratio kept (torchvision `Resize(N)`: the long side becomes \
          int(N * long / short)). Bilinear is bit-exact with Pillow's `Image.resize(..., \
          BILINEAR)` (torchvision on PIL images, antialias=True); nearest matches Pillow's \
          NEAREST. Place it before normalize/cast/layout.",
    inputs: &[PortSpec { name: "images", doc: "u8 HWC images, any channel count" }],
    outputs: &[PortSpec { name: "images", doc: "resized u8 HWC images" }],
    args: &[
        ArgSpec {
            name: "size",
            ty: ArgType::Size { max: MAX_SIDE },
            default: OPTIONAL,
            doc: "exact output size, N or [height, width] (give this or `shorter`)",
        },
        ArgSpec {
            name: "shorter",
            ty: ArgType::Int { min: 1, max: MAX_SIDE },
            default: OPTIONAL,
            doc: "scale so the shorter side becomes N, keeping the aspect ratio (give this or `size`)",
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
            doc: "widen the bilinear filter when shrinking (Pillow/torchvision antialias); \
                  false gives plain 2-tap bilinear",
        },
    ],
    aliases: &[],
    backends: Backends::CpuAndGpu,
};

/// The output size a [`Resize`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResizeTarget {
    /// Exactly (height, width).
    Exact(usize, usize),
    /// The shorter side becomes this; the longer keeps the aspect ratio (truncated).
    Shorter(usize),
}

impl ResizeTarget {
    /// The output (height, width) for an input of `h` × `w`, as torchvision's
    /// `_compute_resized_output_size` (without `max_size`).
    pub fn output_size(&self, h: usize, w: usize) -> (usize, usize) {
        match *self {
            ResizeTarget::Exact(oh, ow) => (oh, ow),
            ResizeTarget::Shorter(n) => {
                let (short, long) = if w <= h { (w, h) } else { (h, w) };
                // Python: int(n * long / short); the product is exact in f64 and true
                // division of two exact integers is correctly rounded, as in f64.
                let new_long = ((n as f64 * long as f64) / short.max(1) as f64) as usize;
                if w <= h {
                    (new_long, n)
                } else {
                    (n, new_long)
                }
            }
        }
    }

    /// Why no input at all fits under [`MAX_OUTPUT_PIXELS`], when even the smallest output
    /// this target makes is over it: then it is the settings' fault, not any file's.
    pub fn never_fits(&self) -> Option<String> {
        let (h, w, what) = match *self {
            ResizeTarget::Exact(h, w) => (h, w, format!("size = [{h}, {w}] makes")),
            ResizeTarget::Shorter(n) => (n, n, format!("shorter = {n} makes at least")),
        };
        h.checked_mul(w)
            .is_none_or(|p| p > MAX_OUTPUT_PIXELS)
            .then(|| format!("{what} {h}x{w} images, over the limit of {MAX_OUTPUT_PIXELS} pixels"))
    }
}

/// The built operator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resize {
    /// Output size rule.
    pub target: ResizeTarget,
    /// Interpolation.
    pub interp: Interp,
    /// Widen the bilinear filter when downscaling.
    pub antialias: bool,
}

/// Builds the operator from validated arguments.
pub fn build(args: &Args) -> Result<Box<dyn Operator>, ArgError> {
    Ok(Box::new(Resize::from_args(args)?))
}

impl Resize {
    /// The operator from validated arguments (defaults filled in).
    pub fn from_args(args: &Args) -> Result<Resize, ArgError> {
        let target = match (args.has("size"), args.has("shorter")) {
            (true, false) => {
                let (h, w) = args.size("size");
                ResizeTarget::Exact(h, w)
            }
            (false, true) => ResizeTarget::Shorter(args.int("shorter") as usize),
            (both, _) => {
                let message = if both {
                    "'resize' takes either `size` or `shorter`, not both"
                } else {
                    "'resize' needs `size` or `shorter`"
                };
                return Err(ArgError {
                arg: None,
                message: message.to_string(),
                help: Some(
                    "use `size = [height, width]` for an exact size, or `shorter = N` to scale \
                     the shorter side to N keeping the aspect ratio"
                        .to_string(),
                ),
                about_name: false,
            });
            }
        };
        let interp = Interp::from_name(args.str("interp"))
            .ok_or_else(|| ArgError::arg("interp", "unknown interpolation"))?;
        Ok(Resize {
            target,
            interp,
            antialias: args.bool("antialias"),
        })
    }
}

impl Operator for Resize {
    /// The output size for the input's size; nothing is drawn.
    fn setup(&self, input: SetupInput<'_>, _: &SampleKey) -> Result<Setup, String> {
        let s = input.image()?;
        let (oh, ow) = self.target.output_size(s.height, s.width);
        Ok(Setup::shape(s.with_size(oh, ow)))
    }

    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
        let mut t = expect_u8_hwc("resize", inputs)?;
        t.size = match self.target {
            ResizeTarget::Exact(h, w) => Some((h, w)),
            ResizeTarget::Shorter(_) => t.size.map(|(h, w)| self.target.output_size(h, w)),
        };
        Ok(vec![ValueType::Image(t)])
    }

    fn run_cpu(
        &self,
        inputs: Values,
        ctx: &mut SampleContext<'_>,
    ) -> Result<Values, SampleErrorKind> {
        if let Some(message) = self.target.never_fits() {
            return Err(SampleErrorKind::Settings {
                op: ctx.op_name.to_string(),
                message,
            });
        }
        let im = single_image(inputs, ctx)?;
        let s = ctx.setup(self, SetupInput::Image(ImageShape::of(&im)))?;
        let (oh, ow) = (s.output.height, s.output.width);
        if (oh, ow) == (im.height, im.width) {
            return Ok(smallvec![Value::Image(im)]);
        }
        let out = resize_image(
            &im,
            (0, 0, im.height, im.width),
            oh,
            ow,
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
