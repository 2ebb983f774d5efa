//! `crop`: cut a fixed-size window out of each image, centred (torchvision `CenterCrop`) or
//! at a relative position (DALI `crop_pos_y` / `crop_pos_x`). Parts of the window outside
//! the image are filled with a constant, so a crop larger than the image pads it.
//!
//! Works on any element type and layout. The window is recorded as [`OpParams::Crop`].

/// GPU launcher (see `crate::cuda`).
pub mod cuda;

use half::f16;

use crate::error::SampleErrorKind;
use crate::image::{Image, Layout, Pixels};
use crate::value::{Value, ValueType};

use super::schema::expect_image;
use super::{
    single_image, ArgError, ArgSpec, ArgType, Args, Backends, OpParams, OpSchema, Operator,
    PortSpec, SampleContext, OPTIONAL,
};

/// Largest crop side.
pub const MAX_SIDE: i64 = 1 << 15;

/// Largest magnitude of a fill value (the largest finite f16).
pub const MAX_FILL: f64 = 65504.0;

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
    backends: Backends::CpuAndGpu,
    build,
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
    /// Placement.
    pub anchor: Anchor,
    /// Value outside the image.
    pub fill: f64,
}

fn build(args: &Args) -> Result<Box<dyn Operator>, ArgError> {
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
    Ok(Box::new(Crop {
        height,
        width,
        anchor,
        fill: args.float("fill"),
    }))
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
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
        let mut t = expect_image("crop", inputs)?;
        t.size = Some((self.height, self.width));
        Ok(vec![ValueType::Image(t)])
    }

    fn run_cpu(
        &self,
        inputs: Vec<Value>,
        ctx: &mut SampleContext<'_>,
    ) -> Result<Vec<Value>, SampleErrorKind> {
        let im = single_image(inputs, ctx)?;
        let (top, left) = self.window(im.height, im.width);
        ctx.record(OpParams::Crop {
            top,
            left,
            height: self.height,
            width: self.width,
        });
        if (top, left, self.height, self.width) == (0, 0, im.height, im.width) {
            return Ok(vec![Value::Image(im)]);
        }
        let fill = vec![self.fill; im.channels.max(1)];
        let out =
            crop_fill(&im, top, left, self.height, self.width, &fill).map_err(|e| ctx.error(e))?;
        Ok(vec![Value::Image(out)])
    }
}

/// An element type that can be written from a fill value.
trait FillValue: Copy {
    fn from_fill(v: f64) -> Self;
}

impl FillValue for u8 {
    fn from_fill(v: f64) -> Self {
        v.round().clamp(0.0, 255.0) as u8
    }
}

impl FillValue for f16 {
    fn from_fill(v: f64) -> Self {
        f16::from_f64(v)
    }
}

impl FillValue for f32 {
    fn from_fill(v: f64) -> Self {
        v as f32
    }
}

/// The `height` × `width` window of `im` whose top-left corner is at (`top`, `left`) (which
/// may be negative or past the image); pixels outside the image take `fill`, one value per
/// channel or a single value for all. Any dtype and layout; the layout is kept.
pub fn crop_fill(
    im: &Image,
    top: i64,
    left: i64,
    height: usize,
    width: usize,
    fill: &[f64],
) -> Result<Image, String> {
    let c = im.channels;
    let fill: Vec<f64> = match fill.len() {
        1 => vec![fill[0]; c],
        n if n == c => fill.to_vec(),
        n => return Err(format!("{n} fill values for an image with {c} channels")),
    };
    let elems = height.checked_mul(width).and_then(|p| p.checked_mul(c));
    if elems.is_none_or(|n| n > (1usize << 31)) {
        return Err(format!("output {height}x{width}x{c} is too large"));
    }
    let g = Geometry {
        h: im.height,
        w: im.width,
        c,
        layout: im.layout,
        top,
        left,
        oh: height,
        ow: width,
    };
    if im.pixels.len() != im.height * im.width * c {
        return Err("pixel buffer does not match the image size".to_string());
    }
    let pixels = match &im.pixels {
        Pixels::U8(v) => Pixels::U8(g.run(v, &fill)),
        Pixels::F16(v) => Pixels::F16(g.run(v, &fill)),
        Pixels::F32(v) => Pixels::F32(g.run(v, &fill)),
    };
    Ok(Image {
        height,
        width,
        channels: c,
        layout: im.layout,
        pixels,
    })
}

struct Geometry {
    h: usize,
    w: usize,
    c: usize,
    layout: Layout,
    top: i64,
    left: i64,
    oh: usize,
    ow: usize,
}

impl Geometry {
    fn run<T: FillValue>(&self, src: &[T], fill: &[f64]) -> Vec<T> {
        let fill: Vec<T> = fill.iter().map(|&v| T::from_fill(v)).collect();
        // Both layouts are `planes` planes of rows of `px`-element pixels.
        let (planes, px) = match self.layout {
            Layout::Hwc => (1, self.c),
            Layout::Chw => (self.c, 1),
        };
        let mut out = Vec::with_capacity(self.oh * self.ow * self.c);
        // Columns of the output that come from the image: [x0, x1), reading from column sx0.
        let x0 = (-self.left).clamp(0, self.ow as i64) as usize;
        let x1 = (self.w as i64 - self.left).clamp(x0 as i64, self.ow as i64) as usize;
        let sx0 = (self.left + x0 as i64).max(0) as usize;
        for p in 0..planes {
            let pat: &[T] = match self.layout {
                Layout::Hwc => &fill,
                Layout::Chw => &fill[p..p + 1],
            };
            let plane = &src[p * self.h * self.w * px..][..self.h * self.w * px];
            for y in 0..self.oh {
                let sy = self.top + y as i64;
                if sy < 0 || sy >= self.h as i64 || x0 == x1 {
                    for _ in 0..self.ow {
                        out.extend_from_slice(pat);
                    }
                    continue;
                }
                for _ in 0..x0 {
                    out.extend_from_slice(pat);
                }
                let row = &plane[sy as usize * self.w * px..][..self.w * px];
                out.extend_from_slice(&row[sx0 * px..(sx0 + x1 - x0) * px]);
                for _ in x1..self.ow {
                    out.extend_from_slice(pat);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SampleRng;
    use proptest::prelude::*;

    /// Element (y, x, k) of the window, straight from the definition.
    #[allow(clippy::too_many_arguments)]
    fn naive(
        src: &[u8],
        h: usize,
        w: usize,
        c: usize,
        top: i64,
        left: i64,
        oh: usize,
        ow: usize,
        fill: u8,
    ) -> Vec<u8> {
        let mut out = Vec::new();
        for y in 0..oh as i64 {
            for x in 0..ow as i64 {
                for k in 0..c {
                    let (sy, sx) = (top + y, left + x);
                    let inside = sy >= 0 && sx >= 0 && sy < h as i64 && sx < w as i64;
                    out.push(if inside {
                        src[(sy as usize * w + sx as usize) * c + k]
                    } else {
                        fill
                    });
                }
            }
        }
        out
    }

    proptest! {
        #[test]
        fn matches_naive(h in 1usize..9, w in 1usize..9, c in 1usize..5, top in -10i64..10, left in -10i64..10,
                         oh in 1usize..12, ow in 1usize..12, seed: u64) {
            let mut rng = SampleRng::from_key(seed);
            let src: Vec<u8> = (0..h * w * c).map(|_| rng.next_u64() as u8).collect();
            let im = Image::from_u8_hwc(h, w, c, src.clone());
            let out = crop_fill(&im, top, left, oh, ow, &[7.0]).unwrap();
            prop_assert_eq!(out.as_u8_hwc().unwrap(), &naive(&src, h, w, c, top, left, oh, ow, 7)[..]);
        }

        #[test]
        fn chw_matches_hwc(h in 1usize..7, w in 1usize..7, c in 1usize..4, top in -4i64..6, left in -4i64..6,
                           oh in 1usize..9, ow in 1usize..9) {
            let src: Vec<u8> = (0..h * w * c).map(|i| i as u8).collect();
            let hwc = Image::from_u8_hwc(h, w, c, src);
            let chw = crate::ops::layout::to_layout(&hwc, Layout::Chw);
            let fill: Vec<f64> = (0..c).map(|k| 200.0 + k as f64).collect();
            let a = crop_fill(&hwc, top, left, oh, ow, &fill).unwrap();
            let b = crop_fill(&chw, top, left, oh, ow, &fill).unwrap();
            prop_assert_eq!(crate::ops::layout::to_layout(&b, Layout::Hwc), a);
        }

        #[test]
        fn center_window_matches_torchvision_rules(size in 1usize..50, crop in 1usize..60) {
            let off = center_offset(size, crop);
            if crop <= size {
                // Inside, centred to within half a pixel.
                prop_assert!(off >= 0 && off as usize + crop <= size);
                prop_assert!((2 * off - (size - crop) as i64).abs() <= 1);
            } else {
                // Padded: (crop - size) // 2 before the image, the rest after.
                prop_assert_eq!(-off, ((crop - size) / 2) as i64);
            }
        }
    }

    #[test]
    fn center_rounding_is_ties_to_even() {
        // (37 - 36) / 2 = 0.5 → 0; (131 - 128) / 2 = 1.5 → 2; (9 - 4) / 2 = 2.5 → 2.
        assert_eq!(center_offset(37, 36), 0);
        assert_eq!(center_offset(131, 128), 2);
        assert_eq!(center_offset(9, 4), 2);
        assert_eq!(position_offset(9, 4, 0.5), 3);
        assert_eq!(position_offset(9, 4, 0.0), 0);
        assert_eq!(position_offset(9, 4, 1.0), 5);
    }

    #[test]
    fn larger_than_image_pads_like_torchvision() {
        // torchvision center_crop of a 1x2 image to 3x5: pad left (5-2)//2 = 1, right 2,
        // top (3-1)//2 = 1, bottom 1, with 0; the padded image is the result.
        let im = Image::from_u8_hwc(1, 2, 1, vec![10, 20]);
        let c = Crop {
            height: 3,
            width: 5,
            anchor: Anchor::Center,
            fill: 0.0,
        };
        let (top, left) = c.window(1, 2);
        assert_eq!((top, left), (-1, -1));
        let out = crop_fill(&im, top, left, 3, 5, &[0.0]).unwrap();
        #[rustfmt::skip]
        let expected = vec![
            0, 0, 0, 0, 0,
            0, 10, 20, 0, 0,
            0, 0, 0, 0, 0,
        ];
        assert_eq!(out.as_u8_hwc().unwrap(), &expected[..]);
    }

    #[test]
    fn float_types_and_fill() {
        let im = Image {
            height: 1,
            width: 1,
            channels: 2,
            layout: Layout::Hwc,
            pixels: Pixels::F32(vec![1.5, -2.0]),
        };
        let out = crop_fill(&im, 0, -1, 1, 2, &[0.25, -0.75]).unwrap();
        assert_eq!(out.pixels, Pixels::F32(vec![0.25, -0.75, 1.5, -2.0]));
        assert!(crop_fill(&im, 0, 0, 1, 1, &[1.0, 2.0, 3.0]).is_err());
        assert_eq!(u8::from_fill(300.0), 255);
        assert_eq!(u8::from_fill(-3.0), 0);
        assert_eq!(u8::from_fill(2.5), 3);
    }

    #[test]
    fn build_checks_pos() {
        use std::collections::BTreeMap;
        let mut given = BTreeMap::new();
        given.insert("size".to_string(), crate::ops::ArgValue::from(4));
        given.insert("anchor".to_string(), crate::ops::ArgValue::from("position"));
        let args = Args::validate(&SCHEMA, &given).unwrap();
        assert_eq!(build(&args).unwrap_err().arg.as_deref(), Some("pos"));
        given.insert("pos".to_string(), crate::ops::ArgValue::from([0.0, 1.0]));
        let args = Args::validate(&SCHEMA, &given).unwrap();
        let op = build(&args).unwrap();
        let t = crate::value::ImageType::decoded(3);
        let out = op.infer(&[ValueType::Image(t)]).unwrap();
        assert_eq!(
            out,
            vec![ValueType::Image(crate::value::ImageType {
                size: Some((4, 4)),
                ..t
            })]
        );
    }
}
