//! `pad`: add constant borders around each image, optionally growing the bottom and right
//! borders until height and width are multiples of a number (common for detection models).
//!
//! Works on any element type and layout.

/// GPU launcher (see `crate::cuda`).
pub mod cuda;

use crate::error::SampleErrorKind;
use crate::value::{Value, ValueType};

use super::crop::{crop_fill, MAX_FILL};
use super::schema::expect_image;
use super::{
    single_image, ArgError, ArgSpec, ArgType, Args, Backends, OpSchema, Operator, PortSpec,
    SampleContext,
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
    backends: Backends::CpuAndGpu,
    build,
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

fn build(args: &Args) -> Result<Box<dyn Operator>, ArgError> {
    let side = |n: &str| args.int(n) as usize;
    Ok(Box::new(Pad {
        top: side("top"),
        bottom: side("bottom"),
        left: side("left"),
        right: side("right"),
        fill: args.floats("fill"),
        to_multiple: side("to_multiple"),
    }))
}

impl Pad {
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
                "pad has {} fill values but the images have {c} channels; give one value or one per channel",
                self.fill.len()
            ))
        }
    }
}

impl Operator for Pad {
    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
        let mut t = expect_image("pad", inputs)?;
        if let Some(c) = t.channels {
            self.check_channels(c)?;
        }
        t.size = t.size.map(|(h, w)| self.output_size(h, w));
        Ok(vec![ValueType::Image(t)])
    }

    fn run_cpu(
        &self,
        inputs: Vec<Value>,
        ctx: &mut SampleContext<'_>,
    ) -> Result<Vec<Value>, SampleErrorKind> {
        let im = single_image(inputs, ctx)?;
        self.check_channels(im.channels).map_err(|e| ctx.error(e))?;
        let (oh, ow) = self.output_size(im.height, im.width);
        if (oh, ow) == (im.height, im.width) {
            return Ok(vec![Value::Image(im)]);
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
        Ok(vec![Value::Image(out)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::{Image, Layout, Pixels};
    use proptest::prelude::*;

    fn pad(top: usize, bottom: usize, left: usize, right: usize, fill: Vec<f64>, m: usize) -> Pad {
        Pad {
            top,
            bottom,
            left,
            right,
            fill,
            to_multiple: m,
        }
    }

    #[test]
    fn known_values_per_channel_fill() {
        // 1x1 RGB pixel (1,2,3), one column on the left filled with (7,8,9), one row below.
        let im = Image::from_u8_hwc(1, 1, 3, vec![1, 2, 3]);
        let p = pad(0, 1, 1, 0, vec![7.0, 8.0, 9.0], 1);
        let out = crop_fill(&im, 0, -1, 2, 2, &p.fill).unwrap();
        assert_eq!(p.output_size(1, 1), (2, 2));
        assert_eq!(
            out.as_u8_hwc().unwrap(),
            &[7, 8, 9, 1, 2, 3, 7, 8, 9, 7, 8, 9]
        );
    }

    #[test]
    fn to_multiple_rounds_bottom_right() {
        let p = pad(1, 0, 2, 0, vec![0.0], 32);
        assert_eq!(p.output_size(30, 30), (32, 32));
        assert_eq!(p.output_size(32, 30), (64, 32));
        assert_eq!(pad(0, 0, 0, 0, vec![0.0], 8).output_size(16, 8), (16, 8));
    }

    #[test]
    fn fill_count_must_match() {
        let p = pad(1, 1, 1, 1, vec![1.0, 2.0], 1);
        let t = crate::value::ImageType::decoded(3);
        assert!(p.infer(&[ValueType::Image(t)]).is_err());
        assert!(p
            .infer(&[ValueType::Image(crate::value::ImageType::decoded(2))])
            .is_ok());
    }

    proptest! {
        #[test]
        fn original_is_inside(h in 1usize..8, w in 1usize..8, c in 1usize..4, t in 0usize..4, b in 0usize..4,
                              l in 0usize..4, r in 0usize..4, m in 1usize..6, chw: bool) {
            let src: Vec<u8> = (0..h * w * c).map(|i| (i % 250) as u8 + 1).collect();
            let mut im = Image::from_u8_hwc(h, w, c, src);
            if chw {
                im = crate::ops::layout::to_layout(&im, Layout::Chw);
            }
            let p = pad(t, b, l, r, vec![0.0], m);
            let (oh, ow) = p.output_size(h, w);
            prop_assert!(oh % m == 0 && ow % m == 0 && oh >= h + t + b && ow >= w + l + r);
            prop_assert!(oh < h + t + b + m && ow < w + l + r + m);
            let out = crop_fill(&im, -(t as i64), -(l as i64), oh, ow, &p.fill).unwrap();
            let out = crate::ops::layout::to_layout(&out, Layout::Hwc);
            let im = crate::ops::layout::to_layout(&im, Layout::Hwc);
            let (Pixels::U8(o), Pixels::U8(s)) = (&out.pixels, &im.pixels) else { unreachable!() };
            let nonzero = o.iter().filter(|&&v| v != 0).count();
            prop_assert_eq!(nonzero, h * w * c);
            for y in 0..h {
                for x in 0..w {
                    for k in 0..c {
                        prop_assert_eq!(o[((y + t) * ow + x + l) * c + k], s[(y * w + x) * c + k]);
                    }
                }
            }
        }
    }
}
