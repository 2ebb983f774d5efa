//! `flip`: mirror images left–right and/or top–bottom, each with a probability.
//!
//! Works on any element type and layout. The choice is recorded as [`OpParams::Flip`].

/// GPU launcher (see `crate::cuda`).
pub mod cuda;

use crate::error::SampleErrorKind;
use crate::image::{Image, Layout, Pixels};
use crate::rng::SampleRng;
use crate::value::{Value, ValueType};

use super::schema::expect_image;
use super::{
    single_image, ArgError, ArgSpec, ArgType, Args, Backends, OpParams, OpSchema, Operator,
    PortSpec, SampleContext,
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
    backends: Backends::CpuAndGpu,
    build,
};

/// The built operator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Flip {
    /// Probability of a horizontal flip.
    pub horizontal: f64,
    /// Probability of a vertical flip.
    pub vertical: f64,
}

fn build(args: &Args) -> Result<Box<dyn Operator>, ArgError> {
    Ok(Box::new(Flip {
        horizontal: args.float("horizontal"),
        vertical: args.float("vertical"),
    }))
}

impl Flip {
    /// The random choice for one sample: (horizontal, vertical).
    pub fn choose(&self, rng: &mut SampleRng) -> (bool, bool) {
        let h = rng.bernoulli(self.horizontal);
        let v = rng.bernoulli(self.vertical);
        (h, v)
    }
}

impl Operator for Flip {
    /// Folds into a following normalize+layout pass, which then reads the image mirrored.
    fn fuse_with(&self, next: super::FuseTarget<'_>) -> Option<Box<dyn Operator>> {
        let norm = next
            .op
            .as_any()?
            .downcast_ref::<super::normalize::NormalizeToLayout>()?;
        if norm.mirror.is_some() {
            return None;
        }
        Some(Box::new(super::normalize::NormalizeToLayout {
            mirror: Some(super::normalize::FusedFlip {
                flip: *self,
                name: next.first_name.clone(),
                key: next.first_key,
            }),
            ..norm.clone()
        }))
    }

    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
        Ok(vec![ValueType::Image(expect_image("flip", inputs)?)])
    }

    fn run_cpu(
        &self,
        inputs: Vec<Value>,
        ctx: &mut SampleContext<'_>,
    ) -> Result<Vec<Value>, SampleErrorKind> {
        let mut im = single_image(inputs, ctx)?;
        let (h, v) = self.choose(&mut ctx.rng());
        ctx.record(OpParams::Flip {
            horizontal: h,
            vertical: v,
        });
        flip_in_place(&mut im, h, v);
        Ok(vec![Value::Image(im)])
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn naive(src: &[u8], h: usize, w: usize, c: usize, fh: bool, fv: bool) -> Vec<u8> {
        let mut out = vec![0; src.len()];
        for y in 0..h {
            for x in 0..w {
                let sy = if fv { h - 1 - y } else { y };
                let sx = if fh { w - 1 - x } else { x };
                for k in 0..c {
                    out[(y * w + x) * c + k] = src[(sy * w + sx) * c + k];
                }
            }
        }
        out
    }

    proptest! {
        #[test]
        fn matches_naive_hwc(h in 1usize..9, w in 1usize..9, c in 1usize..4, fh: bool, fv: bool, seed: u64) {
            let mut rng = SampleRng::from_key(seed);
            let src: Vec<u8> = (0..h * w * c).map(|_| rng.next_u64() as u8).collect();
            let mut im = Image::from_u8_hwc(h, w, c, src.clone());
            flip_in_place(&mut im, fh, fv);
            prop_assert_eq!(im.as_u8_hwc().unwrap(), &naive(&src, h, w, c, fh, fv)[..]);
        }

        #[test]
        fn chw_matches_hwc(h in 1usize..7, w in 1usize..7, c in 1usize..4, fh: bool, fv: bool) {
            let src: Vec<u8> = (0..h * w * c).map(|i| i as u8).collect();
            let mut hwc = Image::from_u8_hwc(h, w, c, src.clone());
            let mut chw = crate::ops::layout::to_layout(&hwc, Layout::Chw);
            flip_in_place(&mut hwc, fh, fv);
            flip_in_place(&mut chw, fh, fv);
            prop_assert_eq!(crate::ops::layout::to_layout(&chw, Layout::Hwc), hwc);
        }
    }

    #[test]
    fn probability_is_respected() {
        let f = Flip {
            horizontal: 0.5,
            vertical: 0.0,
        };
        let n = 20_000;
        let hits = (0..n)
            .filter(|&i| f.choose(&mut SampleRng::for_sample(1, 0, i, 9)).0)
            .count();
        assert!((hits as f64 / n as f64 - 0.5).abs() < 0.02);
        assert!((0..1000).all(|i| !f.choose(&mut SampleRng::for_sample(1, 0, i, 9)).1));
    }
}
