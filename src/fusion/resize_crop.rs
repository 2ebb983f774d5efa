//! Fused `resize → crop` (the evaluation recipe: shorter side to 256, center crop 224) and
//! `decode → resize → crop`: only the kept outputs are computed, and only the source pixels
//! their taps read are decoded.
//!
//! Bit-identical to running the operators one by one: the taps are those of the whole resize
//! (so Pillow's choice of pass order and skipped passes are unchanged), restricted to the
//! cropped rows and columns, and every intermediate value a kept output reads is computed the
//! same way whichever outputs are asked for. When the crop reaches outside the resized image
//! (it then pads), the fused operators fall back to the step-by-step path.

use std::cell::RefCell;
use std::ops::Range;
use std::rc::Rc;
use std::sync::Arc;

use crate::decode::{DecodeOptions, ParsedImage};
use crate::error::SampleErrorKind;
use crate::image::Image;
use crate::ops::crop::Crop;
use crate::ops::resize::Resize;
use crate::ops::window::crop_fill;
use crate::ops::{CropParams, OpParams, Operator, SampleContext};
use crate::resample::{
    nearest_indices, resample_bilinear_u8, resample_nearest_u8, resize_image, vertical_first,
    whole_axis_taps, Interp, SourceU8, Taps,
};
use crate::schema::expect_u8_hwc;
use crate::value::{smallvec, Value, ValueType, Values};

thread_local! {
    /// [`CroppedResize::run`]'s horizontal and vertical tables, kept for their buffers.
    static KEPT_TAPS: RefCell<(Taps, Taps)> =
        const { RefCell::new((Taps::empty(), Taps::empty())) };
}

/// A crop window `(top, left, height, width)` inside the resized image, or `None` when the
/// crop reaches outside it.
fn inner_window(crop: &Crop, oh: usize, ow: usize) -> Option<(usize, usize, usize, usize)> {
    let (t, l) = crop.window(oh, ow);
    let fits = |a: i64, n: usize, max: usize| a >= 0 && a as usize + n <= max;
    (fits(t, crop.height, oh) && fits(l, crop.width, ow)).then_some((
        t as usize,
        l as usize,
        crop.height,
        crop.width,
    ))
}

/// A resize of a `h`×`w` image to `oh`×`ow` of which only the kept outputs (the crop's) are
/// computed: which taps, or source indices, they read.
enum CroppedResize {
    /// Same size: the crop is a copy.
    Copy,
    /// Bilinear taps per axis — the whole resize's (this thread's cached table) and the
    /// kept outputs; `None`: that pass is skipped, as in Pillow — and the pass order.
    Bilinear {
        h: Option<(Rc<Taps>, Range<usize>)>,
        v: Option<(Rc<Taps>, Range<usize>)>,
        vertical_first: bool,
    },
    /// Nearest source columns and rows.
    Nearest { xs: Vec<u32>, ys: Vec<u32> },
}

fn cropped_resize(
    r: &Resize,
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    win: (usize, usize, usize, usize),
) -> CroppedResize {
    let (ct, cl, ch, cw) = win;
    if (oh, ow) == (h, w) {
        return CroppedResize::Copy;
    }
    match r.interp {
        Interp::Bilinear => CroppedResize::Bilinear {
            h: (ow != w).then(|| (whole_axis_taps(w, ow, r.antialias), cl..cl + cw)),
            v: (oh != h).then(|| (whole_axis_taps(h, oh, r.antialias), ct..ct + ch)),
            vertical_first: vertical_first(h, w, oh, ow),
        },
        Interp::Nearest => CroppedResize::Nearest {
            xs: nearest_indices(w, 0.0, w as f32, ow)[cl..cl + cw].to_vec(),
            ys: nearest_indices(h, 0.0, h as f32, oh)[ct..ct + ch].to_vec(),
        },
    }
}

impl CroppedResize {
    /// The source rectangle `(top, left, height, width)` the kept outputs read.
    fn source(&self, win: (usize, usize, usize, usize)) -> (usize, usize, usize, usize) {
        let (ct, cl, ch, cw) = win;
        let span = |v: &[u32]| {
            let lo = v.iter().min().copied().unwrap_or(0) as usize;
            let hi = v.iter().max().map_or(0, |&m| m as usize + 1);
            lo..hi
        };
        let (rows, cols) = match self {
            CroppedResize::Copy => (ct..ct + ch, cl..cl + cw),
            CroppedResize::Bilinear { h, v, .. } => {
                let read = |(t, keep): &(Rc<Taps>, Range<usize>)| t.source_range_of(keep.clone());
                (
                    v.as_ref().map_or(ct..ct + ch, read),
                    h.as_ref().map_or(cl..cl + cw, read),
                )
            }
            CroppedResize::Nearest { xs, ys } => (span(ys), span(xs)),
        };
        (rows.start, cols.start, rows.len(), cols.len())
    }

    /// Runs on the source rectangle (`origin`, at the image's row and column, and
    /// [`CroppedResize::source`]'s size) found at `at` in `src`.
    fn run(
        self,
        src: &Image,
        at: (usize, usize, usize, usize),
        origin: (usize, usize),
        win: (usize, usize, usize, usize),
    ) -> Result<Image, String> {
        let data = src.as_u8_hwc().ok_or("resize works on u8 HWC images")?;
        let c = src.channels;
        let source = SourceU8 {
            data,
            height: src.height,
            width: src.width,
            channels: c,
            stride: src.width * c,
        };
        // The image's row and column of `src`'s first pixel.
        let (r0, c0) = (origin.0 - at.0, origin.1 - at.1);
        let (ct, cl, ch, cw) = win;
        let out = match self {
            CroppedResize::Copy => {
                resample_bilinear_u8(source, (ct - r0, cl - c0, ch, cw), None, None, false)
            }
            CroppedResize::Bilinear {
                h,
                v,
                vertical_first,
            } => {
                let window = (
                    if v.is_none() { ct - r0 } else { at.0 },
                    if h.is_none() { cl - c0 } else { at.1 },
                    if v.is_none() { ch } else { at.2 },
                    if h.is_none() { cw } else { at.3 },
                );
                // The kept outputs' taps, read from `src`: this thread's buffers, refilled.
                KEPT_TAPS.with(|kept| {
                    let (hk, vk) = &mut *kept.borrow_mut();
                    let h = h.map(|(t, keep)| hk.fill_subset(&t, keep, c0));
                    let v = v.map(|(t, keep)| vk.fill_subset(&t, keep, r0));
                    let (h, v) = (h.map(|_| &*hk), v.map(|_| &*vk));
                    resample_bilinear_u8(source, window, h, v, vertical_first)
                })
            }
            CroppedResize::Nearest { xs, ys } => {
                let xs: Vec<u32> = xs.iter().map(|&x| x - c0 as u32).collect();
                let ys: Vec<u32> = ys.iter().map(|&y| y - r0 as u32).collect();
                resample_nearest_u8(source, &xs, &ys)
            }
        }
        .map_err(|e| e.to_string())?;
        Ok(Image::from_u8_hwc(ch, cw, c, out))
    }
}

/// `resize` then `crop`, one by one (the fallback when the crop pads).
fn step_by_step(r: &Resize, crop: &Crop, im: Image) -> Result<(Image, (i64, i64)), String> {
    let (oh, ow) = r.target.output_size(im.height, im.width);
    let resized = if (oh, ow) == (im.height, im.width) {
        im
    } else {
        resize_image(
            &im,
            (0, 0, im.height, im.width),
            oh,
            ow,
            r.interp,
            r.antialias,
        )?
    };
    let (t, l) = crop.window(oh, ow);
    if (t, l, crop.height, crop.width) == (0, 0, oh, ow) {
        return Ok((resized, (t, l)));
    }
    let fill = vec![crop.fill; resized.channels.max(1)];
    Ok((
        crop_fill(&resized, t, l, crop.height, crop.width, &fill)?,
        (t, l),
    ))
}

/// `resize` followed by `crop`, computing only the cropped outputs.
#[derive(Debug, Clone)]
pub struct ResizeCrop {
    /// The resize.
    pub resize: Resize,
    /// The crop.
    pub crop: Crop,
    /// The resize operator's name (its errors are reported under it).
    pub resize_name: Arc<str>,
    /// The crop operator's name (its parameters are recorded under it).
    pub crop_name: Arc<str>,
}

impl ResizeCrop {
    /// Resizes and crops `im`; returns the crop's offsets in the resized image.
    pub fn apply(&self, im: Image) -> Result<(Image, (i64, i64)), String> {
        let (oh, ow) = self.resize.target.output_size(im.height, im.width);
        match inner_window(&self.crop, oh, ow) {
            Some(win) => {
                let p = cropped_resize(&self.resize, im.height, im.width, oh, ow, win);
                // The whole image holds the source rectangle where it lies in the image.
                let at = p.source(win);
                let out = p.run(&im, at, (at.0, at.1), win)?;
                crate::scratch::recycle_image(im);
                Ok((out, (win.0 as i64, win.1 as i64)))
            }
            None => step_by_step(&self.resize, &self.crop, im),
        }
    }

    /// Records the crop's window, in the resized image of an `h` × `w` input, under the crop
    /// operator's name.
    fn record(&self, ctx: &mut SampleContext<'_>, (top, left): (i64, i64), (h, w): (usize, usize)) {
        let (source_height, source_width) = self.resize.target.output_size(h, w);
        ctx.params.push((
            self.crop_name.clone(),
            OpParams::Crop(CropParams {
                top,
                left,
                height: self.crop.height,
                width: self.crop.width,
                source_height,
                source_width,
            }),
        ));
    }
}

impl Operator for ResizeCrop {
    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
        let mut t = expect_u8_hwc("resize", inputs)?;
        t.size = Some((self.crop.height, self.crop.width));
        Ok(vec![ValueType::Image(t)])
    }

    fn run_cpu(
        &self,
        inputs: Values,
        ctx: &mut SampleContext<'_>,
    ) -> Result<Values, SampleErrorKind> {
        let im = crate::ops::single_image(inputs, ctx)?;
        let size = (im.height, im.width);
        let (out, offsets) = self.apply(im).map_err(|message| SampleErrorKind::Op {
            op: self.resize_name.to_string(),
            message,
        })?;
        self.record(ctx, offsets, size);
        Ok(smallvec![Value::Image(out)])
    }
}

/// `decode` followed by [`ResizeCrop`]: decodes only the source rectangle the kept outputs
/// read (libjpeg-turbo window decode), then resamples it.
#[derive(Debug, Clone)]
pub struct DecodeResizeCrop {
    /// The decoder's options.
    pub decode: DecodeOptions,
    /// The resize and crop.
    pub rest: ResizeCrop,
}

impl DecodeResizeCrop {
    /// The output, the crop's offsets and the decoded image's size.
    #[allow(clippy::type_complexity)]
    fn apply(&self, bytes: &[u8]) -> Result<(Image, (i64, i64), (usize, usize)), SampleErrorKind> {
        let op_err = |message: String| SampleErrorKind::Op {
            op: self.rest.resize_name.to_string(),
            message,
        };
        let image = ParsedImage::parse(bytes, &self.decode)?;
        let info = image.info();
        let (h, w) = (info.height, info.width);
        let (oh, ow) = self.rest.resize.target.output_size(h, w);
        let Some(win) = inner_window(&self.rest.crop, oh, ow).filter(|_| h > 0 && w > 0) else {
            let im = image.decode()?;
            return step_by_step(&self.rest.resize, &self.rest.crop, im)
                .map(|(out, offsets)| (out, offsets, (h, w)))
                .map_err(op_err);
        };
        let p = cropped_resize(&self.rest.resize, h, w, oh, ow, win);
        let (r0, c0, rh, rw) = p.source(win);
        let (part, at) = image.decode_window_within((r0, c0, rh, rw))?;
        let out = p.run(&part, at, (r0, c0), win).map_err(op_err)?;
        crate::scratch::recycle_image(part);
        Ok((out, (win.0 as i64, win.1 as i64), (h, w)))
    }
}

impl Operator for DecodeResizeCrop {
    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
        crate::ops::decode::infer_decoded(
            &self.decode,
            Some((self.rest.crop.height, self.rest.crop.width)),
            inputs,
        )
    }

    fn max_input_bytes(&self) -> Option<u64> {
        Some(self.decode.limits.max_file_bytes)
    }

    fn run_cpu(
        &self,
        inputs: Values,
        ctx: &mut SampleContext<'_>,
    ) -> Result<Values, SampleErrorKind> {
        let Some(Value::Encoded(bytes)) = inputs.into_iter().next() else {
            return Err(ctx.error("expected encoded bytes"));
        };
        let result = self.apply(&bytes);
        crate::scratch::recycle_encoded(bytes);
        let (out, offsets, size) = result?;
        self.rest.record(ctx, offsets, size);
        Ok(smallvec![Value::Image(out)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::crop::Anchor;
    use crate::ops::resize::ResizeTarget;
    use crate::rng::SampleRng;
    use proptest::prelude::*;

    fn image(h: usize, w: usize, c: usize, seed: u64) -> Image {
        let mut rng = SampleRng::from_key(seed);
        Image::from_u8_hwc(
            h,
            w,
            c,
            (0..h * w * c).map(|_| rng.next_u64() as u8).collect(),
        )
    }

    proptest! {
        #[test]
        fn resize_crop_equals_resize_then_crop(
            h in 1usize..40, w in 1usize..40, c in prop::sample::select(vec![1usize, 3]),
            oh in 1usize..50, ow in 1usize..50, ch in 1usize..50, cw in 1usize..50,
            shorter in any::<bool>(), nearest in any::<bool>(), antialias in any::<bool>(),
            pos in prop::option::of((0.0f64..=1.0, 0.0f64..=1.0)), seed in any::<u64>(),
        ) {
            let im = image(h, w, c, seed);
            let resize = Resize {
                target: if shorter { ResizeTarget::Shorter(oh) } else { ResizeTarget::Exact(oh, ow) },
                interp: if nearest { Interp::Nearest } else { Interp::Bilinear },
                antialias,
            };
            let crop = Crop {
                height: ch,
                width: cw,
                anchor: pos.map_or(Anchor::Center, |(y, x)| Anchor::Position { y, x }),
                fill: 7.0,
            };
            let rc = ResizeCrop { resize, crop, resize_name: "r".into(), crop_name: "c".into() };
            let fused = rc.apply(im.clone());
            let reference = step_by_step(&resize, &crop, im);
            prop_assert_eq!(fused, reference);
        }

        /// Decoding only the source rectangle — its rows as the decoder writes them, from an
        /// iMCU left of it — then resizing and cropping equals decoding the whole image and
        /// resizing and cropping it.
        #[test]
        fn decode_resize_crop_equals_decode_then_resize_then_crop(
            h in 16usize..120, w in 70usize..200, sub in 0usize..3,
            short in 20usize..140, ch in 8usize..64, cw in 8usize..64,
            nearest in any::<bool>(), pos in prop::option::of((0.0f64..=1.0, 0.0f64..=1.0)),
        ) {
            use crate::testutil::{encode_jpeg, pattern_rgb, Sub};
            let sub = [Sub::S444, Sub::S422, Sub::S420][sub];
            let jpg = encode_jpeg(&pattern_rgb(h, w), h, w, 3, 85, sub);
            let resize = Resize {
                target: ResizeTarget::Shorter(short),
                interp: if nearest { Interp::Nearest } else { Interp::Bilinear },
                antialias: true,
            };
            let crop = Crop {
                height: ch,
                width: cw,
                anchor: pos.map_or(Anchor::Center, |(y, x)| Anchor::Position { y, x }),
                fill: 0.0,
            };
            let rest = ResizeCrop { resize, crop, resize_name: "r".into(), crop_name: "c".into() };
            let fused = DecodeResizeCrop { decode: DecodeOptions::default(), rest: rest.clone() };
            let (got, offsets, _) = fused.apply(&jpg).unwrap();
            let whole = crate::decode::decode(&jpg, &DecodeOptions::default()).unwrap();
            let (want, want_offsets) = step_by_step(&resize, &crop, whole).unwrap();
            prop_assert_eq!((got, offsets), (want, want_offsets));
        }
    }
}
