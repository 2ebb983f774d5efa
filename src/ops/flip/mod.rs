//! `flip`: mirror images left–right and/or top–bottom, each with a probability.
//!
//! Works on any element type and layout. The choice is recorded as [`OpParams::Flip`].

/// GPU launcher.
pub mod gpu;

#[cfg(test)]
mod tests;

use crate::error::SampleErrorKind;
use crate::image::{Image, Layout, Pixels};
use crate::rng::SampleRng;
use crate::schema::expect_image;
use crate::value::{smallvec, Value, ValueType, Values};

use super::{
    single_image, ArgError, ArgSpec, ArgType, Args, Backends, FlipParams, ImageShape, OpParams,
    OpSchema, Operator, PortSpec, SampleContext, SampleKey, Setup, SetupInput,
};

/// Schema of `flip`.
pub static SCHEMA: OpSchema = OpSchema {
    kind: "flip",
    doc: "Mirrors each image left–right with probability `horizontal` and top–bottom with \
          probability `vertical` (independent draws, horizontal first). Any dtype and layout.",
    inputs: &[PortSpec {
        name: "images",
        doc: "images",
    }],
    outputs: &[PortSpec {
        name: "images",
        doc: "flipped images",
    }],
    args: &[
        ArgSpec {
            name: "horizontal",
            ty: ArgType::Float { min: 0.0, max: 1.0 },
            default: Some("0.5"),
            doc: "probability of a left–right mirror",
        },
        ArgSpec {
            name: "vertical",
            ty: ArgType::Float { min: 0.0, max: 1.0 },
            default: Some("0.0"),
            doc: "probability of a top–bottom mirror",
        },
    ],
    aliases: &[],
    backends: Backends::CpuAndGpu,
};

/// The built operator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Flip {
    /// Probability of a horizontal flip.
    pub horizontal: f64,
    /// Probability of a vertical flip.
    pub vertical: f64,
}

/// Builds the operator from validated arguments.
pub fn build(args: &Args) -> Result<Box<dyn Operator>, ArgError> {
    Ok(Box::new(Flip::from_args(args)))
}

impl Flip {
    /// The operator from validated arguments (defaults filled in).
    pub fn from_args(args: &Args) -> Flip {
        Flip {
            horizontal: args.float("horizontal"),
            vertical: args.float("vertical"),
        }
    }

    /// The random choice for one sample: (horizontal, vertical).
    pub fn choose(&self, rng: &mut SampleRng) -> (bool, bool) {
        let h = rng.bernoulli(self.horizontal);
        let v = rng.bernoulli(self.vertical);
        (h, v)
    }
}

impl Operator for Flip {
    /// Draws the flips: horizontal first, then vertical.
    fn setup(&self, input: SetupInput<'_>, sample: &SampleKey) -> Result<Setup, String> {
        let s = input.image()?;
        let (horizontal, vertical) = self.choose(&mut sample.rng());
        Ok(Setup {
            output: s,
            params: Some(OpParams::Flip(FlipParams {
                horizontal,
                vertical,
            })),
        })
    }

    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
        Ok(vec![ValueType::Image(expect_image("flip", inputs)?)])
    }

    fn run_cpu(
        &self,
        inputs: Values,
        ctx: &mut SampleContext<'_>,
    ) -> Result<Values, SampleErrorKind> {
        let mut im = single_image(inputs, ctx)?;
        let s = ctx.setup(self, SetupInput::Image(ImageShape::of(&im)))?;
        let f = s.flip().copied().unwrap_or_default();
        flip_in_place(&mut im, f.horizontal, f.vertical);
        Ok(smallvec![Value::Image(im)])
    }

    fn gpu(&self) -> Option<&dyn super::GpuOperator> {
        Some(self)
    }
}

/// Mirrors `im` in place.
pub fn flip_in_place(im: &mut Image, horizontal: bool, vertical: bool) {
    let (h, w, c) = (im.height, im.width, im.channels);
    // Both layouts are a stack of `planes` planes of `rows` rows of `w` pixels of `px` elements.
    let (planes, px) = match im.layout {
        Layout::Hwc => (1, c),
        Layout::Chw => (c, 1),
    };
    match &mut im.pixels {
        Pixels::U8(d) => flip_slice(d, planes, h, w, px, horizontal, vertical),
        Pixels::F16(d) => flip_slice(d, planes, h, w, px, horizontal, vertical),
        Pixels::F32(d) => flip_slice(d, planes, h, w, px, horizontal, vertical),
    }
}

fn flip_slice<T: Copy>(
    data: &mut [T],
    planes: usize,
    h: usize,
    w: usize,
    px: usize,
    horizontal: bool,
    vertical: bool,
) {
    let row = w * px;
    for plane in data.chunks_exact_mut(h * row).take(planes) {
        if horizontal {
            for r in plane.chunks_exact_mut(row) {
                for x in 0..w / 2 {
                    let (a, b) = (x * px, (w - 1 - x) * px);
                    for k in 0..px {
                        r.swap(a + k, b + k);
                    }
                }
            }
        }
        if vertical {
            for y in 0..h / 2 {
                let (top, bottom) = plane.split_at_mut((h - 1 - y) * row);
                top[y * row..(y + 1) * row].swap_with_slice(&mut bottom[..row]);
            }
        }
    }
}
