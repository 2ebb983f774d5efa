//! `pad`: add constant borders around each image, optionally growing the bottom and right
//! borders until height and width are multiples of a number (common for detection models).
//!
//! Works on any element type and layout.

/// GPU launcher.
pub mod gpu;

#[cfg(test)]
mod tests;

use crate::error::SampleErrorKind;
use crate::schema::expect_image;
use crate::value::{smallvec, Value, ValueType, Values};

use super::window::{crop_fill, MAX_FILL};
use super::{
    single_image, ArgError, ArgSpec, ArgType, Args, Backends, ImageShape, OpSchema, Operator,
    PortSpec, SampleContext, SampleKey, Setup, SetupInput,
};

/// Largest border on one side, and largest `to_multiple`.
pub const MAX_PAD: i64 = 1 << 15;

/// Schema of `pad`.
pub static SCHEMA: OpSchema = OpSchema {
    kind: "pad",
    doc: "Adds `top`, `bottom`, `left` and `right` borders of constant `fill`, then grows the \
          bottom and right borders until height and width are multiples of `to_multiple`. \
          Any dtype and layout.",
    inputs: &[PortSpec {
        name: "images",
        doc: "images",
    }],
    outputs: &[PortSpec {
        name: "images",
        doc: "padded images",
    }],
    args: &[
        ArgSpec {
            name: "top",
            ty: ArgType::Int {
                min: 0,
                max: MAX_PAD,
            },
            default: Some("0"),
            doc: "rows added above",
        },
        ArgSpec {
            name: "bottom",
            ty: ArgType::Int {
                min: 0,
                max: MAX_PAD,
            },
            default: Some("0"),
            doc: "rows added below",
        },
        ArgSpec {
            name: "left",
            ty: ArgType::Int {
                min: 0,
                max: MAX_PAD,
            },
            default: Some("0"),
            doc: "columns added on the left",
        },
        ArgSpec {
            name: "right",
            ty: ArgType::Int {
                min: 0,
                max: MAX_PAD,
            },
            default: Some("0"),
            doc: "columns added on the right",
        },
        ArgSpec {
            name: "fill",
            ty: ArgType::Floats {
                len: 0,
                min: -MAX_FILL,
                max: MAX_FILL,
            },
            default: Some("0"),
            doc:
                "border value: one for all channels or one per channel (rounded and clamped for u8)",
        },
        ArgSpec {
            name: "to_multiple",
            ty: ArgType::Int {
                min: 1,
                max: MAX_PAD,
            },
            default: Some("1"),
            doc: "pad bottom/right further so height and width are multiples of this",
        },
    ],
    aliases: &[],
    // The fused GPU chain reads inside the image only, so the GPU path can't pad.
    backends: Backends::CpuOnly,
};

/// The built operator.
#[derive(Debug, Clone, PartialEq)]
pub struct Pad {
    /// Rows above.
    pub top: usize,
    /// Rows below (before rounding up to `to_multiple`).
    pub bottom: usize,
    /// Columns on the left.
    pub left: usize,
    /// Columns on the right (before rounding up to `to_multiple`).
    pub right: usize,
    /// One value, or one per channel.
    pub fill: Vec<f64>,
    /// Output height and width are multiples of this.
    pub to_multiple: usize,
}

/// Builds the operator from validated arguments.
pub fn build(args: &Args) -> Result<Box<dyn Operator>, ArgError> {
    Ok(Box::new(Pad::from_args(args)))
}

impl Pad {
    /// The operator from validated arguments (defaults filled in).
    pub fn from_args(args: &Args) -> Pad {
        let side = |n: &str| args.int(n) as usize;
        Pad {
            top: side("top"),
            bottom: side("bottom"),
            left: side("left"),
            right: side("right"),
            fill: args.floats("fill"),
            to_multiple: side("to_multiple"),
        }
    }

    /// Output (height, width) for an input of `h` × `w`.
    pub fn output_size(&self, h: usize, w: usize) -> (usize, usize) {
        let m = self.to_multiple.max(1);
        let up = |n: usize| n.div_ceil(m) * m;
        (
            up(self.top + h + self.bottom),
            up(self.left + w + self.right),
        )
    }

    fn check_channels(&self, c: usize) -> Result<(), String> {
        if self.fill.len() == 1 || self.fill.len() == c {
            Ok(())
        } else {
            Err(format!(
                "pad has {} fill values but its images have {c} channel{}; give one value or one per channel",
                self.fill.len(),
                if c == 1 { "" } else { "s" }
            ))
        }
    }
}

impl Operator for Pad {
    /// The output size for the input's size; nothing is drawn.
    fn setup(&self, input: SetupInput<'_>, _: &SampleKey) -> Result<Setup, String> {
        let s = input.image()?;
        self.check_channels(s.channels)?;
        let (oh, ow) = self.output_size(s.height, s.width);
        Ok(Setup::shape(s.with_size(oh, ow)))
    }

    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
        let mut t = expect_image("pad", inputs)?;
        if let Some(c) = t.channels {
            self.check_channels(c)?;
        }
        t.size = t.size.map(|(h, w)| self.output_size(h, w));
        Ok(vec![ValueType::Image(t)])
    }

    fn argument_at_fault(&self, inputs: &[ValueType]) -> Option<&'static str> {
        match inputs {
            [ValueType::Image(t)] => self.check_channels(t.channels?).err().map(|_| "fill"),
            _ => None,
        }
    }

    fn run_cpu(
        &self,
        inputs: Values,
        ctx: &mut SampleContext<'_>,
    ) -> Result<Values, SampleErrorKind> {
        let im = single_image(inputs, ctx)?;
        let s = ctx.setup(self, SetupInput::Image(ImageShape::of(&im)))?;
        let (oh, ow) = (s.output.height, s.output.width);
        if (oh, ow) == (im.height, im.width) {
            return Ok(smallvec![Value::Image(im)]);
        }
        let out = crop_fill(
            &im,
            -(self.top as i64),
            -(self.left as i64),
            oh,
            ow,
            &self.fill,
        )
        .map_err(|e| ctx.error(e))?;
        Ok(smallvec![Value::Image(out)])
    }

    fn gpu(&self) -> Option<&dyn super::GpuOperator> {
        Some(self)
    }
}
