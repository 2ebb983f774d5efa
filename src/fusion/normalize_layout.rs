//! Fused `normalize → layout` (and `flip → normalize → layout`): u8 HWC pixels read once,
//! mirrored on the way when a flip is folded in, normalized and written straight in the
//! target layout — on the workers, or straight into the batch being filled.

use std::sync::Arc;

use half::f16;

use crate::error::SampleErrorKind;
use crate::image::{DType, Image, Layout, Pixels};
use crate::ops::flip::{flip_in_place, Flip};
use crate::ops::layout::to_layout;
use crate::ops::normalize::arith::{normalize_u8, Lane};
use crate::ops::normalize::{normalize_value, per_channel, Normalize};
use crate::ops::{
    single_image, ImageShape, OpParams, Operator, OutputPlace, PixelsMut, SampleContext, SetupInput,
};
use crate::value::{smallvec, Value, ValueType, Values};

#[cfg(target_arch = "x86_64")]
use super::normalize_layout_simd as simd;

/// `normalize` followed by `layout`, in one pass: u8 HWC in, normalized values written
/// straight in the target layout. Bit-identical to the two operators (same arithmetic per
/// element); the graph builder substitutes it for the pair. A `flip` just before it is folded
/// in too ([`NormalizeToLayout::mirror`]): the pass reads the source mirrored instead of
/// moving pixels first.
#[derive(Debug, Clone, PartialEq)]
pub struct NormalizeToLayout {
    /// The normalization.
    pub normalize: Normalize,
    /// The layout written.
    pub layout: Layout,
    /// A `flip` fused in front: its choice is drawn and recorded under its own name and
    /// random stream, so batches and parameters are those of the unfused operators.
    pub mirror: Option<FusedFlip>,
    /// Use vector instructions where the CPU has them (same values either way; `false`
    /// is for tests comparing the two).
    pub simd: bool,
}

/// The `flip` operator folded into a [`NormalizeToLayout`], with its identity.
#[derive(Debug, Clone, PartialEq)]
pub struct FusedFlip {
    /// Its probabilities.
    pub flip: Flip,
    /// Its name in the pipeline.
    pub name: Arc<str>,
    /// Its random-stream key.
    pub key: u64,
}

impl NormalizeToLayout {
    /// Normalizes `im` into `self.layout`, mirrored left–right (`horizontal`) and/or top–bottom
    /// (`vertical`) on the way.
    pub fn apply(&self, mut im: Image, horizontal: bool, vertical: bool) -> Result<Image, String> {
        let n = &self.normalize;
        if !self.one_pass(&im) {
            flip_in_place(&mut im, horizontal, vertical);
            let out = n.apply(im)?;
            return Ok(to_layout(&out, self.layout));
        }
        n.check_channels(im.channels)?;
        let len = im.pixels.len();
        let pixels = match self.one_pass_dtype() {
            DType::F16 => {
                let mut dst = crate::scratch::buffer::<f16>(len);
                self.write_one_pass(&im, horizontal, vertical, PixelsMut::F16(&mut dst));
                Pixels::F16(dst)
            }
            _ => {
                let mut dst = crate::scratch::buffer::<f32>(len);
                self.write_one_pass(&im, horizontal, vertical, PixelsMut::F32(&mut dst));
                Pixels::F32(dst)
            }
        };
        let (height, width, channels) = (im.height, im.width, im.channels);
        crate::scratch::recycle_image(im);
        Ok(Image {
            height,
            width,
            channels,
            layout: self.layout,
            pixels,
        })
    }

    /// Whether `im` takes the one pass from u8 HWC to normalized CHW or HWC.
    fn one_pass(&self, im: &Image) -> bool {
        matches!(im.pixels, Pixels::U8(_)) && im.layout == Layout::Hwc
    }

    /// The element type the one pass writes.
    fn one_pass_dtype(&self) -> DType {
        match self.normalize.dtype {
            DType::F16 => DType::F16,
            _ => DType::F32,
        }
    }

    /// The one pass over `im` (u8 HWC, channels checked) into `dst`, of the element type
    /// [`Self::one_pass_dtype`] and the image's length; every element is written.
    fn write_one_pass(&self, im: &Image, horizontal: bool, vertical: bool, dst: PixelsMut<'_>) {
        let n = &self.normalize;
        let c = im.channels;
        let mean = per_channel(&n.mean, c);
        let inv = per_channel(&n.inv_std, c);
        let Pixels::U8(data) = &im.pixels else {
            unreachable!("one_pass checked the type")
        };
        let src = SourceHwc {
            data,
            height: im.height,
            width: im.width,
            channels: c,
            horizontal,
            vertical,
        };
        match (self.layout, dst) {
            (Layout::Hwc, PixelsMut::F16(d)) => hwc_normalized(&src, &mean, &inv, self.simd, d),
            (Layout::Hwc, PixelsMut::F32(d)) => hwc_normalized(&src, &mean, &inv, self.simd, d),
            (_, PixelsMut::F16(d)) => {
                if !rgb_to_chw_vector(&src, &mean, &inv, self.simd, d) {
                    hwc_to_chw_normalized(&src, &mean, &inv, f16::from_f32, d)
                }
            }
            (_, PixelsMut::F32(d)) => {
                if !rgb_to_chw_vector(&src, &mean, &inv, self.simd, d) {
                    hwc_to_chw_normalized(&src, &mean, &inv, |y| y, d)
                }
            }
            (_, PixelsMut::U8(_)) => unreachable!("the one pass writes f16 or f32"),
        }
    }

    /// Draws (and records) the fused flip's choice with the flip's own setup, under its
    /// name and random stream: (left–right, top–bottom).
    fn choose_mirror(&self, im: &Image, ctx: &mut SampleContext<'_>) -> (bool, bool) {
        let Some(f) = &self.mirror else {
            return (false, false);
        };
        let key = ctx.key().for_op(f.key);
        let p = f
            .flip
            .setup(SetupInput::Image(ImageShape::of(im)), &key)
            .ok()
            .and_then(|s| s.flip().copied())
            .unwrap_or_default();
        ctx.params.push((f.name.clone(), OpParams::Flip(p)));
        (p.horizontal, p.vertical)
    }
}

/// The RGB case (f32 or f16) with vector instructions, when allowed (`simd`) and
/// available; false when not taken (nothing written).
#[cfg(target_arch = "x86_64")]
fn rgb_to_chw_vector<T: Lane>(
    src: &SourceHwc<'_>,
    mean: &[f32],
    inv: &[f32],
    simd: bool,
    dst: &mut [T],
) -> bool {
    if simd && src.channels == 3 && simd::available() {
        // SAFETY: `available()` checked that this CPU has AVX2 and F16C.
        unsafe {
            simd::rgb_to_chw(
                dst,
                src.data,
                src.height,
                src.width,
                src.horizontal,
                src.vertical,
                [mean[0], mean[1], mean[2]],
                [inv[0], inv[1], inv[2]],
            )
        };
        return true;
    }
    false
}

/// No vector pass on other CPUs: the scalar code writes every case.
#[cfg(not(target_arch = "x86_64"))]
fn rgb_to_chw_vector<T>(_: &SourceHwc<'_>, _: &[f32], _: &[f32], _: bool, _: &mut [T]) -> bool {
    false
}

/// The one pass into HWC: each row normalized as it is (rows taken bottom-up when mirrored
/// top–bottom), or through a copy with its pixels reversed when mirrored left–right.
fn hwc_normalized<T: Lane>(
    src: &SourceHwc<'_>,
    mean: &[f32],
    inv: &[f32],
    simd: bool,
    dst: &mut [T],
) {
    let (h, c) = (src.height, src.channels);
    let row = src.width * c;
    if row == 0 || (!src.horizontal && !src.vertical) {
        return normalize_u8(dst, src.data, mean, inv, simd);
    }
    let mut reversed = vec![0u8; if src.horizontal { row } else { 0 }];
    for (y, out) in dst.chunks_exact_mut(row).take(h).enumerate() {
        let sy = if src.vertical { h - 1 - y } else { y };
        let mut srow = &src.data[sy * row..][..row];
        if src.horizontal {
            let pixels = reversed.chunks_exact_mut(c).zip(srow.chunks_exact(c).rev());
            pixels.for_each(|(d, s)| d.copy_from_slice(s));
            srow = &reversed;
        }
        normalize_u8(out, srow, mean, inv, simd);
    }
}

/// A u8 HWC image read optionally mirrored.
struct SourceHwc<'a> {
    data: &'a [u8],
    height: usize,
    width: usize,
    channels: usize,
    horizontal: bool,
    vertical: bool,
}

fn hwc_to_chw_normalized<T: Copy>(
    src: &SourceHwc<'_>,
    mean: &[f32],
    inv: &[f32],
    out: impl Fn(f32) -> T + Copy,
    dst: &mut [T],
) {
    let (h, w, c) = (src.height, src.width, src.channels);
    let plane = h * w;
    debug_assert_eq!(dst.len(), plane * c);
    if plane == 0 {
        return;
    }
    let row = w * c;
    for y in 0..h {
        let sy = if src.vertical { h - 1 - y } else { y };
        let srow = &src.data[sy * row..][..row];
        match c {
            3 => chw_row::<3, T>(dst, plane, y * w, srow, src.horizontal, mean, inv, out),
            1 => chw_row::<1, T>(dst, plane, y * w, srow, src.horizontal, mean, inv, out),
            4 => chw_row::<4, T>(dst, plane, y * w, srow, src.horizontal, mean, inv, out),
            _ => {
                for (k, (&m, &s)) in mean.iter().zip(inv).enumerate().take(c) {
                    let d = &mut dst[k * plane + y * w..][..w];
                    for (x, o) in d.iter_mut().enumerate() {
                        let sx = if src.horizontal { w - 1 - x } else { x };
                        *o = out(normalize_value(f32::from(srow[sx * c + k]), m, s));
                    }
                }
            }
        }
    }
}

/// One source row of `N`-channel pixels into row `at` (an offset within a plane) of each of
/// the `N` output planes.
#[allow(clippy::too_many_arguments)]
#[inline]
fn chw_row<const N: usize, T: Copy>(
    dst: &mut [T],
    plane: usize,
    at: usize,
    srow: &[u8],
    mirrored: bool,
    mean: &[f32],
    inv: &[f32],
    out: impl Fn(f32) -> T,
) {
    let w = srow.len() / N;
    let m: [f32; N] = std::array::from_fn(|k| mean[k]);
    let s: [f32; N] = std::array::from_fn(|k| inv[k]);
    let mut each_plane = dst.chunks_exact_mut(plane);
    let mut planes: [&mut [T]; N] = std::array::from_fn(|_| {
        let p = each_plane.next().expect("one plane per channel");
        &mut p[at..][..w]
    });
    let px = srow.chunks_exact(N);
    let mut put = |x: usize, p: &[u8]| {
        for k in 0..N {
            planes[k][x] = out(normalize_value(f32::from(p[k]), m[k], s[k]));
        }
    };
    if mirrored {
        for (x, p) in px.rev().enumerate() {
            put(x, p);
        }
    } else {
        for (x, p) in px.enumerate() {
            put(x, p);
        }
    }
}

impl Operator for NormalizeToLayout {
    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
        let mut out = self.normalize.infer(inputs)?;
        if let Some(ValueType::Image(t)) = out.first_mut() {
            t.layout = self.layout;
        }
        Ok(out)
    }

    fn run_cpu(
        &self,
        inputs: Values,
        ctx: &mut SampleContext<'_>,
    ) -> Result<Values, SampleErrorKind> {
        let im = single_image(inputs, ctx)?;
        let (horizontal, vertical) = self.choose_mirror(&im, ctx);
        let out = self
            .apply(im, horizontal, vertical)
            .map_err(|e| ctx.error(e))?;
        Ok(smallvec![Value::Image(out)])
    }

    fn run_cpu_into(
        &self,
        inputs: Values,
        ctx: &mut SampleContext<'_>,
        place: &mut dyn OutputPlace,
    ) -> Result<Values, SampleErrorKind> {
        let im = single_image(inputs, ctx)?;
        let (horizontal, vertical) = self.choose_mirror(&im, ctx);
        if self.one_pass(&im) && self.normalize.check_channels(im.channels).is_ok() {
            let shape = match self.layout {
                Layout::Chw => [im.channels, im.height, im.width],
                Layout::Hwc => [im.height, im.width, im.channels],
            };
            if let Some(room) = place.room(self.one_pass_dtype(), self.layout, shape) {
                self.write_one_pass(&im, horizontal, vertical, room);
                crate::scratch::recycle_image(im);
                return Ok(Values::new());
            }
        }
        let out = self
            .apply(im, horizontal, vertical)
            .map_err(|e| ctx.error(e))?;
        Ok(smallvec![Value::Image(out)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_image_of_no_channels_passes_in_either_layout() {
        let n = Normalize::new(&[1.0], &[2.0], DType::F16).unwrap();
        for layout in [Layout::Hwc, Layout::Chw] {
            let fused = NormalizeToLayout {
                normalize: n.clone(),
                layout,
                mirror: None,
                simd: true,
            };
            let out = fused.apply(Image::from_u8_hwc(2, 3, 0, Vec::new()), true, false);
            assert_eq!(out.map(|im| im.pixels.len()), Ok(0), "{layout:?}");
        }
    }

    proptest! {
        #[test]
        fn normalize_to_layout_is_bit_identical(h in 1usize..9, w in 1usize..40, c in 1usize..6, f16_out: bool,
                                                 fh: bool, fv: bool, hwc: bool, seed: u64) {
            let mut rng = crate::rng::SampleRng::from_key(seed);
            let src: Vec<u8> = (0..h * w * c).map(|_| rng.next_u64() as u8).collect();
            let im = Image::from_u8_hwc(h, w, c, src);
            let dtype = if f16_out { DType::F16 } else { DType::F32 };
            let n = Normalize::new(&[123.675, 116.28, 103.53][..c.min(3)].iter().copied().cycle().take(c).collect::<Vec<_>>(), &[58.395], dtype).unwrap();
            let mut flipped = im.clone();
            flip_in_place(&mut flipped, fh, fv);
            let layout = if hwc { Layout::Hwc } else { Layout::Chw };
            let two_pass = to_layout(&n.apply(flipped).unwrap(), layout);
            let mut fused = NormalizeToLayout { normalize: n, layout, mirror: None, simd: true };
            prop_assert_eq!(fused.apply(im.clone(), fh, fv).unwrap(), two_pass.clone());
            fused.simd = false;
            prop_assert_eq!(fused.apply(im.clone(), fh, fv).unwrap(), two_pass.clone());
            // Other layouts and dtypes go through the general path, mirrored the same way.
            let f32_hwc = crate::ops::cast::cast_image(&im, DType::F32);
            prop_assert_eq!(fused.apply(f32_hwc, fh, fv).unwrap(), two_pass);
        }
    }
}
