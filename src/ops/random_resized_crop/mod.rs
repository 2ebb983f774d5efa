//! `random_resized_crop`: pick a random window covering a random fraction of the image with
//! a random aspect ratio (torchvision `RandomResizedCrop.get_params`, drawn from stokehold's
//! counter-based stream) and resize it to a fixed size, as if it had been cropped first.
//!
//! The window is recorded as [`OpParams::Crop`]; [`choose_window`] is what the GPU path and
//! a region-of-interest decoder call to know the window before decoding; [`decode_and_crop`]
//! is the fused decode → crop path that decodes only the window (bit-identical output).

mod fused;

pub use fused::{decode_and_crop, decode_and_crop_scaled, DecodeAndCropError, DecodeRandomCrop};

/// GPU launcher (see `crate::cuda`).
pub mod cuda;

use crate::error::SampleErrorKind;
use crate::rng::SampleRng;
use crate::value::{Value, ValueType};

use super::resize::{expect_u8_hwc, resize_image, Interp, MAX_SIDE};
use super::{
    single_image, ArgError, ArgSpec, ArgType, Args, Backends, OpParams, OpSchema, Operator,
    PortSpec, SampleContext,
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
    backends: Backends::CpuAndGpu,
    build,
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
    /// ([`decode_and_crop_scaled`]); not bit-identical to the exact path.
    pub dct_downscale: bool,
}

fn build(args: &Args) -> Result<Box<dyn Operator>, ArgError> {
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
    Ok(Box::new(RandomResizedCrop {
        height,
        width,
        scale: args.range("scale"),
        ratio,
        interp,
        antialias: args.bool("antialias"),
        dct_downscale: args.bool("dct_downscale"),
    }))
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
    fn as_random_resized_crop(&self) -> Option<&RandomResizedCrop> {
        Some(self)
    }

    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
        let mut t = expect_u8_hwc("random_resized_crop", inputs)?;
        t.size = Some((self.height, self.width));
        Ok(vec![ValueType::Image(t)])
    }

    fn run_cpu(
        &self,
        inputs: Vec<Value>,
        ctx: &mut SampleContext<'_>,
    ) -> Result<Vec<Value>, SampleErrorKind> {
        let im = single_image(inputs, ctx)?;
        if im.height == 0 || im.width == 0 {
            return Err(ctx.error("empty image"));
        }
        let window = self.choose(im.height, im.width, &mut ctx.rng());
        let (top, left, height, width) = window;
        ctx.record(OpParams::Crop {
            top: top as i64,
            left: left as i64,
            height,
            width,
        });
        let out = resize_image(
            &im,
            window,
            self.height,
            self.width,
            self.interp,
            self.antialias,
        )
        .map_err(|e| ctx.error(e))?;
        Ok(vec![Value::Image(out)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;
    use crate::ops::resize::resize_u8;
    use proptest::prelude::*;
    use std::path::Path;
    use std::sync::Arc;

    const SCALE: (f64, f64) = (0.08, 1.0);
    const RATIO: (f64, f64) = (0.75, 4.0 / 3.0);

    proptest! {
        #[test]
        fn window_inside_and_within_scale(h in 1usize..600, w in 1usize..600, key: u64) {
            let (top, left, ch, cw) = choose_window(h, w, SCALE, RATIO, &mut SampleRng::from_key(key));
            prop_assert!(ch >= 1 && cw >= 1 && top + ch <= h && left + cw <= w);
            let in_ratio = w as f64 / h as f64;
            let central = top == (h - ch) / 2 && left == (w - cw) / 2;
            let frac = (ch * cw) as f64 / (h * w) as f64;
            let ratio = cw as f64 / ch as f64;
            // A window from the tries has the drawn area and ratio up to rounding of each
            // side by at most half a pixel.
            let slack_area = (ch + cw) as f64 / (h * w) as f64 + 0.25 / (h * w) as f64;
            let in_scale = frac >= SCALE.0 - slack_area && frac <= SCALE.1 + 1e-12;
            let r_lo = (cw as f64 - 0.5) / (ch as f64 + 0.5);
            let r_hi = (cw as f64 + 0.5) / (ch as f64 - 0.5).max(1e-9);
            let in_ratio_range = r_hi >= RATIO.0 && r_lo <= RATIO.1;
            prop_assert!((in_scale && in_ratio_range) || (central && (ch == h || cw == w)),
                "{h}x{w}: window {ch}x{cw} at ({top}, {left}), fraction {frac}, ratio {ratio}, image ratio {in_ratio}");
        }

        #[test]
        fn crop_then_resize_equals_window_resize(h in 1usize..40, w in 1usize..40, c in 1usize..5,
                                                 oh in 1usize..30, ow in 1usize..30, key: u64, nearest: bool, aa: bool) {
            let src: Vec<u8> = (0..h * w * c).map(|i| (i * 37 % 251) as u8).collect();
            let (top, left, ch, cw) = choose_window(h, w, SCALE, RATIO, &mut SampleRng::from_key(key));
            let interp = if nearest { Interp::Nearest } else { Interp::Bilinear };
            let direct = resize_u8(&src, h, w, c, w, (top, left, ch, cw), oh, ow, interp, aa).unwrap();
            let im = Image::from_u8_hwc(h, w, c, src);
            let cropped = crate::ops::crop::crop_fill(&im, top as i64, left as i64, ch, cw, &[0.0]).unwrap();
            let copy = resize_u8(cropped.as_u8_hwc().unwrap(), ch, cw, c, cw, (0, 0, ch, cw), oh, ow, interp, aa).unwrap();
            prop_assert_eq!(direct, copy);
        }
    }

    #[test]
    fn degenerate_images_fall_back() {
        let mut rng = SampleRng::from_key(3);
        assert_eq!(choose_window(1, 1, SCALE, RATIO, &mut rng), (0, 0, 1, 1));
        // 1x1000: far wider than 4/3, every try fails (height 1 allows width ≤ 1 only at
        // tiny areas that round to 0 or exceed the ratio): central crop, 1 high, round(4/3) wide.
        for k in 0..200 {
            let win = choose_window(1, 1000, SCALE, RATIO, &mut SampleRng::from_key(k));
            assert_eq!(win, (0, 499, 1, 1), "key {k}");
            let win = choose_window(1000, 1, SCALE, RATIO, &mut SampleRng::from_key(k));
            assert_eq!(win, (499, 0, 1, 1), "key {k}");
        }
        // Ratio far from the image's would round the short side to 0: kept at 1.
        let win = choose_window(1000, 3, (1.0, 1.0), (50.0, 100.0), &mut rng);
        assert_eq!(win, (499, 0, 1, 3));
        // Full area at ratio 1 on a square image: the first try takes the whole image.
        assert_eq!(
            choose_window(30, 30, (1.0, 1.0), (1.0, 1.0), &mut rng),
            (0, 0, 30, 30)
        );
    }

    #[test]
    fn area_fraction_covers_the_scale_range() {
        // Large image: the tries nearly always succeed; the mean fraction of accepted windows
        // must be near the middle of the range (ratios reject a few large areas, so below it).
        let n = 4000;
        let fracs: Vec<f64> = (0..n)
            .map(|k| {
                let (_, _, ch, cw) =
                    choose_window(480, 640, SCALE, RATIO, &mut SampleRng::from_key(k));
                (ch * cw) as f64 / (480.0 * 640.0)
            })
            .collect();
        let mean = fracs.iter().sum::<f64>() / n as f64;
        assert!(mean > 0.4 && mean < 0.56, "{mean}");
        assert!(fracs.iter().any(|&f| f < 0.1) && fracs.iter().any(|&f| f > 0.9));
    }

    #[test]
    fn run_records_the_window_and_matches_choose() {
        let op = RandomResizedCrop {
            height: 16,
            width: 12,
            scale: SCALE,
            ratio: RATIO,
            interp: Interp::Bilinear,
            antialias: true,
            dct_downscale: false,
        };
        let (h, w) = (50, 70);
        let src: Vec<u8> = (0..h * w * 3).map(|i| (i % 256) as u8).collect();
        let name: Arc<str> = Arc::from("rrc");
        let mut params = Vec::new();
        let mut ctx = SampleContext {
            seed: 5,
            epoch: 1,
            index: 9,
            path: Path::new("x.jpg"),
            op_key: 77,
            op_name: &name,
            params: &mut params,
        };
        let expected_window = op.choose(h, w, &mut ctx.rng());
        let out = op
            .run_cpu(
                vec![Value::Image(Image::from_u8_hwc(h, w, 3, src.clone()))],
                &mut ctx,
            )
            .unwrap();
        let Value::Image(out) = &out[0] else {
            panic!("not an image")
        };
        let expected = resize_u8(
            &src,
            h,
            w,
            3,
            w,
            expected_window,
            16,
            12,
            Interp::Bilinear,
            true,
        )
        .unwrap();
        assert_eq!(out.as_u8_hwc().unwrap(), &expected[..]);
        let (top, left, ch, cw) = expected_window;
        assert_eq!(
            params[0].1,
            OpParams::Crop {
                top: top as i64,
                left: left as i64,
                height: ch,
                width: cw
            }
        );
    }
}
