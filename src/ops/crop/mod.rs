//! `crop`: cut a fixed-size window out of each image, centred (torchvision `CenterCrop`) or
//! at a relative position (DALI `crop_pos_y` / `crop_pos_x`). Parts of the window outside
//! the image are filled with a constant, so a crop larger than the image pads it.
//!
//! Works on any element type and layout. The window is recorded as [`OpParams::Crop`]; the
//! pixel work is [`super::window`]'s, shared with `pad`.

/// GPU launcher.
pub mod gpu;

#[cfg(test)]
mod tests;

use crate::error::SampleErrorKind;
use crate::schema::expect_image;
use crate::value::{smallvec, Value, ValueType, Values};

use super::window::crop_fill;
pub use super::window::MAX_FILL;
use super::{
    single_image, ArgError, ArgSpec, ArgType, Args, Backends, CropParams, ImageShape, OpParams,
    OpSchema, Operator, PortSpec, SampleContext, SampleKey, Setup, SetupInput, OPTIONAL,
};

/// Largest crop side.
pub const MAX_SIDE: i64 = 1 << 15;

/// Schema of `crop`.
pub static SCHEMA: OpSchema = OpSchema {
    kind: "crop",
    doc: "Cuts a `size` window out of each image. `anchor = \"center\"` places it as \
          torchvision `CenterCrop` (top = round((H - h) / 2), ties to even; a crop larger than \
          the image pads it symmetrically, the extra pixel going right/bottom); \
          `anchor = \"position\"` places it at `pos = [y, x]` in [0, 1]: top = round((H - h) * y), \
          left = round((W - w) * x) (DALI crop_pos). Pixels outside the image get `fill`. \
          Any dtype and layout.",
    inputs: &[PortSpec { name: "images", doc: "images" }],
    outputs: &[PortSpec { name: "images", doc: "cropped images" }],
    args: &[
        ArgSpec {
            name: "size",
            ty: ArgType::Size { max: MAX_SIDE },
            default: None,
            doc: "window size, N or [height, width]",
        },
        ArgSpec {
            name: "anchor",
            ty: ArgType::Choice(&["center", "position"]),
            default: Some("\"center\""),
            doc: "how the window is placed",
        },
        ArgSpec {
            name: "pos",
            ty: ArgType::Floats { len: 2, min: 0.0, max: 1.0 },
            default: OPTIONAL,
            doc: "relative position [y, x] of the window, each in [0, 1] (with anchor = \"position\")",
        },
        ArgSpec {
            name: "fill",
            ty: ArgType::Float { min: -MAX_FILL, max: MAX_FILL },
            default: Some("0"),
            doc: "value for window pixels outside the image (rounded and clamped for u8)",
        },
    ],
    aliases: &[],
    backends: Backends::CpuAndGpu,
};

/// Where the window goes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Anchor {
    /// Centred, torchvision `CenterCrop` rounding.
    Center,
    /// Relative position: `y`, `x` in [0, 1] of the free space.
    Position {
        /// Vertical position (0 = top, 1 = bottom).
        y: f64,
        /// Horizontal position (0 = left, 1 = right).
        x: f64,
    },
}

/// The built operator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Crop {
    /// Window rows.
    pub height: usize,
    /// Window columns.
    pub width: usize,
    /// Where the window sits in the image.
    pub anchor: Anchor,
    /// Value outside the image.
    pub fill: f64,
}

/// Builds the operator from validated arguments.
pub fn build(args: &Args) -> Result<Box<dyn Operator>, ArgError> {
    Ok(Box::new(Crop::from_args(args)?))
}

impl Crop {
    /// The operator from validated arguments (defaults filled in).
    pub fn from_args(args: &Args) -> Result<Crop, ArgError> {
        let (height, width) = args.size("size");
        let anchor = match (args.str("anchor"), args.has("pos")) {
            ("center", false) => Anchor::Center,
            ("center", true) => {
                return Err(
                    ArgError::arg("pos", "`pos` is only used with anchor = \"position\"")
                        .with_help("add `anchor = \"position\"` or remove `pos`"),
                )
            }
            (_, true) => {
                let p = args.floats("pos");
                Anchor::Position { y: p[0], x: p[1] }
            }
            (_, false) => {
                return Err(
                    ArgError::arg("pos", "anchor = \"position\" needs `pos`").with_help(
                        "add `pos = [y, x]` with values in [0, 1], e.g. [0.5, 0.5] for the centre",
                    ),
                )
            }
        };
        Ok(Crop {
            height,
            width,
            anchor,
            fill: args.float("fill"),
        })
    }
}

/// Offset of a centred window of `crop` along an axis of `size`, as torchvision's
/// `center_crop`: when the crop is larger the image is first padded by `(crop - size) // 2`
/// before it, so the window starts that far outside; otherwise `round((size - crop) / 2)`
/// with ties to even (Python `round`).
pub fn center_offset(size: usize, crop: usize) -> i64 {
    if crop > size {
        -(((crop - size) / 2) as i64)
    } else {
        ((size - crop) as f64 / 2.0).round_ties_even() as i64
    }
}

/// Offset of a window of `crop` at relative position `pos` along an axis of `size`:
/// `round((size - crop) * pos)`, ties away from zero (negative when the crop is larger).
pub fn position_offset(size: usize, crop: usize, pos: f64) -> i64 {
    ((size as f64 - crop as f64) * pos).round() as i64
}

impl Crop {
    /// The window (top, left) for an image of `h` × `w`; negative when it starts outside.
    pub fn window(&self, h: usize, w: usize) -> (i64, i64) {
        match self.anchor {
            Anchor::Center => (center_offset(h, self.height), center_offset(w, self.width)),
            Anchor::Position { y, x } => (
                position_offset(h, self.height, y),
                position_offset(w, self.width, x),
            ),
        }
    }
}

impl Operator for Crop {
    /// The window for the input's size (nothing random: the placement rule).
    fn setup(&self, input: SetupInput<'_>, _: &SampleKey) -> Result<Setup, String> {
        let s = input.image()?;
        let (top, left) = self.window(s.height, s.width);
        Ok(Setup {
            output: s.with_size(self.height, self.width),
            params: Some(OpParams::Crop(CropParams {
                top,
                left,
                height: self.height,
                width: self.width,
                source_height: s.height,
                source_width: s.width,
            })),
        })
    }

    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
        let mut t = expect_image("crop", inputs)?;
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
        let Some(OpParams::Crop(CropParams { top, left, .. })) = s.params else {
            unreachable!("crop's setup draws a window")
        };
        if (top, left, self.height, self.width) == (0, 0, im.height, im.width) {
            return Ok(smallvec![Value::Image(im)]);
        }
        let fill = vec![self.fill; im.channels.max(1)];
        let out =
            crop_fill(&im, top, left, self.height, self.width, &fill).map_err(|e| ctx.error(e))?;
        Ok(smallvec![Value::Image(out)])
    }

    fn gpu(&self) -> Option<&dyn super::GpuOperator> {
        Some(self)
    }
}
