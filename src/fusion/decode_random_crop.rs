//! Fused `decode → random_resized_crop`: decode only the rows and columns the chosen window
//! needs, then resize the window where it lies in them.
//!
//! [`decode_and_crop`] gives the same pixels and the same window as decoding the whole image
//! with [`crate::decode::decode`] and running [`RandomResizedCrop`] on it with the same rng:
//! the window depends only on the image size, which the header read once per sample gives
//! ([`ParsedImage`]), [`ParsedImage::decode_window_within`] returns exactly the full decode's
//! pixels in the window (with the columns the decoder produced beside it, not copied out),
//! and resizing a window reads no pixel outside it.

use crate::decode::{DecodeError, DecodeOptions, Format, ImageInfo, ParsedImage, Window};
use crate::image::Image;
use crate::ops::random_resized_crop::RandomResizedCrop;
use crate::ops::{CropParams, OpParams};
use crate::resample::resize_image;
use crate::rng::SampleRng;

/// Why [`decode_and_crop`] failed: the decode step (attribute it to the decode operator) or
/// the resize step (attribute it to `random_resized_crop`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeAndCropError {
    /// The bytes could not be decoded (the error the unfused decode would give).
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The crop/resize failed (the message the unfused operator would give).
    #[error("{0}")]
    Crop(String),
}

/// Decodes `bytes` and applies `rrc` with window draws from `rng`, decoding only the window.
/// Returns the resized image and the window (top, left, height, width) in the decoded
/// image's coordinates (what the operator records as `OpParams::Crop`). Bit-identical to
/// `decode` followed by `rrc.run_cpu` when `rng` is the operator's `ctx.rng()`.
pub fn decode_and_crop(
    bytes: &[u8],
    decode_opts: &DecodeOptions,
    rrc: &RandomResizedCrop,
    rng: &mut SampleRng,
) -> Result<(Image, Window), DecodeAndCropError> {
    decode_and_crop_with_info(bytes, decode_opts, rrc, rng).map(|(im, window, _)| (im, window))
}

/// [`decode_and_crop`], also returning the image's header facts (its size for the record).
fn decode_and_crop_with_info(
    bytes: &[u8],
    decode_opts: &DecodeOptions,
    rrc: &RandomResizedCrop,
    rng: &mut SampleRng,
) -> Result<(Image, Window, ImageInfo), DecodeAndCropError> {
    let (image, window) = parse_and_choose(bytes, decode_opts, rrc, rng)?;
    let (decoded, within) = image.decode_window_within(window)?;
    Ok((resize_within(decoded, within, rrc)?, window, image.info()))
}

/// The image's header, read once, and the window drawn for it (the same draws as the
/// unfused operator).
fn parse_and_choose<'a>(
    bytes: &'a [u8],
    decode_opts: &DecodeOptions,
    rrc: &RandomResizedCrop,
    rng: &mut SampleRng,
) -> Result<(ParsedImage<'a>, Window), DecodeAndCropError> {
    let image = ParsedImage::parse(bytes, decode_opts)?;
    let info = image.info();
    if info.height == 0 || info.width == 0 {
        return Err(DecodeAndCropError::Crop("empty image".into()));
    }
    let window = rrc.choose(info.height, info.width, rng);
    Ok((image, window))
}

/// Resizes all of `crop` to the operator's output size; its buffer is recycled.
fn resize_whole(crop: Image, rrc: &RandomResizedCrop) -> Result<Image, DecodeAndCropError> {
    let whole = (0, 0, crop.height, crop.width);
    resize_within(crop, whole, rrc)
}

/// Resizes `window` of `image` to the operator's output size; its buffer is recycled.
fn resize_within(
    image: Image,
    window: Window,
    rrc: &RandomResizedCrop,
) -> Result<Image, DecodeAndCropError> {
    let out = resize_image(
        &image,
        window,
        rrc.height,
        rrc.width,
        rrc.interp,
        rrc.antialias,
    )
    .map_err(DecodeAndCropError::Crop)?;
    crate::scratch::recycle_image(image);
    Ok(out)
}

/// **Opt-in (`dct_downscale = true`), not bit-identical to the reference.** Like
/// [`decode_and_crop`] (same window,
/// same rng draws), but when the window is at least 2× the output size in both directions the
/// JPEG is decoded downscaled by 1/2, 1/4 or 1/8 in the DCT domain (the largest factor that
/// keeps the scaled window at least as large as the output), its window widened outwards to
/// whole scaled pixels, and that is resized to the output. Much less decoding work for large
/// windows; the pixels differ slightly from the reference (DCT-domain downscaling is a box-like
/// filter, and the window edges move by under one scaled pixel). PNG and small windows take
/// the exact path.
pub fn decode_and_crop_scaled(
    bytes: &[u8],
    decode_opts: &DecodeOptions,
    rrc: &RandomResizedCrop,
    rng: &mut SampleRng,
) -> Result<(Image, Window), DecodeAndCropError> {
    decode_and_crop_scaled_with_info(bytes, decode_opts, rrc, rng)
        .map(|(im, window, _)| (im, window))
}

/// [`decode_and_crop_scaled`], also returning the image's header facts.
fn decode_and_crop_scaled_with_info(
    bytes: &[u8],
    decode_opts: &DecodeOptions,
    rrc: &RandomResizedCrop,
    rng: &mut SampleRng,
) -> Result<(Image, Window, ImageInfo), DecodeAndCropError> {
    let (image, window) = parse_and_choose(bytes, decode_opts, rrc, rng)?;
    let info = image.info();
    let (top, left, wh, ww) = window;
    let denom = [8usize, 4, 2]
        .into_iter()
        .find(|&d| wh / d >= rrc.height && ww / d >= rrc.width)
        .filter(|_| info.format == Format::Jpeg)
        .unwrap_or(1);
    if denom == 1 {
        let (decoded, within) = image.decode_window_within(window)?;
        return Ok((resize_within(decoded, within, rrc)?, window, info));
    }
    let (sh, sw) = (info.height.div_ceil(denom), info.width.div_ceil(denom));
    let (t, l) = (top / denom, left / denom);
    let b = (top + wh).div_ceil(denom).min(sh);
    let r = (left + ww).div_ceil(denom).min(sw);
    let crop = image.decode_scaled(denom as u8, Some((t, l, b - t, r - l)))?;
    Ok((resize_whole(crop, rrc)?, window, info))
}

/// `decode` followed by `random_resized_crop` as one operator (what the graph builder
/// substitutes for that pair): the window is drawn from the crop operator's own random stream and recorded
/// under its name, so batches are identical to the unfused pair.
#[derive(Debug, Clone)]
pub struct DecodeRandomCrop {
    /// The decoder's options.
    pub decode: DecodeOptions,
    /// The crop.
    pub rrc: RandomResizedCrop,
    /// The crop operator's name.
    pub rrc_name: std::sync::Arc<str>,
    /// The crop operator's random-stream key.
    pub rrc_key: u64,
}

impl crate::ops::Operator for DecodeRandomCrop {
    fn infer(
        &self,
        inputs: &[crate::value::ValueType],
    ) -> Result<Vec<crate::value::ValueType>, String> {
        crate::ops::decode::infer_decoded(
            &self.decode,
            Some((self.rrc.height, self.rrc.width)),
            inputs,
        )
    }

    fn max_input_bytes(&self) -> Option<u64> {
        Some(self.decode.limits.max_file_bytes)
    }

    fn run_cpu(
        &self,
        inputs: crate::value::Values,
        ctx: &mut crate::ops::SampleContext<'_>,
    ) -> Result<crate::value::Values, crate::error::SampleErrorKind> {
        let Some(crate::value::Value::Encoded(bytes)) = inputs.into_iter().next() else {
            return Err(ctx.error("expected encoded bytes"));
        };
        let mut rng = SampleRng::for_sample(ctx.seed, ctx.epoch, ctx.index as u64, self.rrc_key);
        let result = if self.rrc.dct_downscale {
            decode_and_crop_scaled_with_info(&bytes, &self.decode, &self.rrc, &mut rng)
        } else {
            decode_and_crop_with_info(&bytes, &self.decode, &self.rrc, &mut rng)
        };
        crate::scratch::recycle_encoded(bytes);
        match result {
            Ok((image, (top, left, height, width), info)) => {
                ctx.params.push((
                    self.rrc_name.clone(),
                    OpParams::Crop(CropParams {
                        top: top as i64,
                        left: left as i64,
                        height,
                        width,
                        source_height: info.height,
                        source_width: info.width,
                    }),
                ));
                Ok(crate::value::smallvec![crate::value::Value::Image(image)])
            }
            Err(DecodeAndCropError::Decode(e)) => Err(crate::error::SampleErrorKind::Decode(e)),
            Err(DecodeAndCropError::Crop(message)) => Err(crate::error::SampleErrorKind::Op {
                op: self.rrc_name.to_string(),
                message,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{decode, decode_scaled, ColorMode};
    use crate::ops::{Operator, SampleContext};
    use crate::resample::Interp;
    use crate::testutil::{encode_jpeg_opts, exif_orientation_tiff, pattern_rgb, JpegOpts, Sub};
    use crate::value::Value;
    use std::path::Path;
    use std::sync::Arc;

    /// The unfused path: full decode, then the operator itself.
    fn unfused(
        bytes: &[u8],
        opts: &DecodeOptions,
        rrc: &RandomResizedCrop,
        key: u64,
    ) -> (Image, Window) {
        let im = decode(bytes, opts).unwrap();
        let name: Arc<str> = Arc::from("rrc");
        let mut params = crate::ops::SampleParams::new();
        let mut ctx = SampleContext {
            seed: 11,
            epoch: 2,
            index: key as usize,
            path: Path::new("x.jpg"),
            op_key: 99,
            op_name: &name,
            params: &mut params,
        };
        let out = rrc
            .run_cpu(crate::value::smallvec![Value::Image(im)], &mut ctx)
            .unwrap();
        let Value::Image(out) = out.into_iter().next().unwrap() else {
            panic!("not an image")
        };
        let OpParams::Crop(CropParams {
            top,
            left,
            height,
            width,
            ..
        }) = params[0].1.clone()
        else {
            panic!("no crop recorded")
        };
        (out, (top as usize, left as usize, height, width))
    }

    fn fused(
        bytes: &[u8],
        opts: &DecodeOptions,
        rrc: &RandomResizedCrop,
        key: u64,
    ) -> (Image, Window) {
        let mut rng = SampleRng::for_sample(11, 2, key, 99);
        decode_and_crop(bytes, opts, rrc, &mut rng).unwrap()
    }

    fn rrc(h: usize, w: usize, interp: Interp, antialias: bool) -> RandomResizedCrop {
        RandomResizedCrop {
            height: h,
            width: w,
            scale: (0.08, 1.0),
            ratio: (0.75, 4.0 / 3.0),
            interp,
            antialias,
            dct_downscale: false,
        }
    }

    #[test]
    fn fused_equals_unfused_on_generated_jpegs() {
        let (h, w) = (97usize, 130usize);
        let src = pattern_rgb(h, w);
        let mut n = 0;
        for (o, sub, progressive) in [
            (1u8, Sub::S420, false),
            (1, Sub::S444, true),
            (6, Sub::S422, false),
            (3, Sub::S420, true),
            (8, Sub::S411, false),
            (5, Sub::S440, false),
        ] {
            let jpg = encode_jpeg_opts(
                &src,
                h,
                w,
                3,
                &JpegOpts {
                    quality: 88,
                    sub,
                    progressive,
                    exif_tiff: Some(exif_orientation_tiff(u16::from(o), false)),
                },
            );
            for color in [ColorMode::Rgb, ColorMode::Gray] {
                let opts = DecodeOptions {
                    color,
                    ..DecodeOptions::default()
                };
                for (i, op) in [
                    rrc(24, 24, Interp::Bilinear, true),
                    rrc(31, 17, Interp::Nearest, false),
                    rrc(40, 50, Interp::Bilinear, false),
                ]
                .iter()
                .enumerate()
                {
                    for key in 0..25u64 {
                        let key = key * 3 + i as u64;
                        let (a, wa) = unfused(&jpg, &opts, op, key);
                        let (b, wb) = fused(&jpg, &opts, op, key);
                        assert_eq!(wa, wb, "o={o} {sub:?} key {key}");
                        assert!(a == b, "o={o} {sub:?} key {key}: pixels differ");
                        n += 1;
                    }
                }
            }
        }
        println!("{n} fused crops identical");
    }

    #[test]
    fn fused_equals_unfused_on_real_files() {
        let Some(data) = crate::testutil::shared_data() else {
            return;
        };
        let mut files: Vec<_> = std::fs::read_dir(data.join("imagenet-400"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        let op = rrc(224, 224, Interp::Bilinear, true);
        let opts = DecodeOptions::default();
        for (i, f) in files.iter().take(40).enumerate() {
            let bytes = std::fs::read(f).unwrap();
            let (a, wa) = unfused(&bytes, &opts, &op, i as u64);
            let (b, wb) = fused(&bytes, &opts, &op, i as u64);
            assert_eq!(wa, wb, "{}", f.display());
            assert!(a == b, "{}: pixels differ", f.display());
        }
    }

    #[test]
    fn errors_are_attributed() {
        let op = rrc(8, 8, Interp::Bilinear, true);
        let mut rng = SampleRng::from_key(1);
        let e = decode_and_crop(b"nope", &DecodeOptions::default(), &op, &mut rng).unwrap_err();
        assert_eq!(e, DecodeAndCropError::Decode(DecodeError::UnknownFormat));
        let src = pattern_rgb(20, 20);
        let jpg = encode_jpeg_opts(
            &src,
            20,
            20,
            3,
            &JpegOpts {
                quality: 90,
                sub: Sub::S420,
                progressive: false,
                exif_tiff: None,
            },
        );
        let e = decode_and_crop(
            &jpg[..jpg.len() - 5],
            &DecodeOptions::default(),
            &op,
            &mut rng,
        )
        .unwrap_err();
        assert!(
            matches!(e, DecodeAndCropError::Decode(DecodeError::Corrupt(_))),
            "{e}"
        );
    }

    #[test]
    fn scaled_path_is_close_and_exact_for_small_windows() {
        // A smooth 700x900 "photo": large windows take the DCT-scaled path.
        let (h, w) = (700usize, 900usize);
        let mut src = Vec::with_capacity(h * w * 3);
        for y in 0..h {
            for x in 0..w {
                let (fy, fx) = (y as f64, x as f64);
                src.push((128.0 + 100.0 * (fx / 37.0).sin()) as u8);
                src.push((128.0 + 100.0 * (fy / 29.0).cos()) as u8);
                src.push((128.0 + 90.0 * ((fx + fy) / 53.0).sin()) as u8);
            }
        }
        let jpg = encode_jpeg_opts(
            &src,
            h,
            w,
            3,
            &JpegOpts {
                quality: 92,
                sub: Sub::S420,
                progressive: false,
                exif_tiff: Some(exif_orientation_tiff(6, false)),
            },
        );
        let opts = DecodeOptions::default();
        let (mut scaled, mut exact, mut worst) = (0, 0, f64::INFINITY);
        for (op, keys) in [
            (rrc(112, 112, Interp::Bilinear, true), 0..40u64),
            (rrc(600, 600, Interp::Bilinear, true), 40..50),
        ] {
            for key in keys {
                let (a, wa) = unfused(&jpg, &opts, &op, key);
                let mut rng = SampleRng::for_sample(11, 2, key, 99);
                let (b, wb) = decode_and_crop_scaled(&jpg, &opts, &op, &mut rng).unwrap();
                assert_eq!(wa, wb);
                assert_eq!((b.height, b.width), (a.height, a.width));
                let (a, b) = (a.as_u8_hwc().unwrap(), b.as_u8_hwc().unwrap());
                if wa.2 >= 2 * op.height && wa.3 >= 2 * op.width {
                    let p = crate::testutil::psnr_u8(a, b);
                    assert!(p > 30.0, "key {key}: window {wa:?}, PSNR {p:.1} dB");
                    worst = worst.min(p);
                    scaled += 1;
                } else {
                    assert!(a == b, "key {key}: small window must be exact");
                    exact += 1;
                }
            }
        }
        println!("{scaled} scaled (worst PSNR {worst:.1} dB), {exact} exact");
        assert!(scaled >= 5 && exact >= 10, "{scaled} scaled, {exact} exact");
    }

    #[test]
    fn scaled_windows_equal_the_scaled_full_decode() {
        let (h, w) = (90usize, 123usize);
        let src = pattern_rgb(h, w);
        for (sub, o) in [
            (Sub::S420, 1u8),
            (Sub::S422, 6),
            (Sub::S444, 3),
            (Sub::S411, 8),
        ] {
            let jpg = encode_jpeg_opts(
                &src,
                h,
                w,
                3,
                &JpegOpts {
                    quality: 85,
                    sub,
                    progressive: o == 3,
                    exif_tiff: Some(exif_orientation_tiff(u16::from(o), false)),
                },
            );
            let opts = DecodeOptions::default();
            assert!(decode_scaled(&jpg, &opts, 1, None).unwrap() == decode(&jpg, &opts).unwrap());
            assert!(decode_scaled(&jpg, &opts, 3, None).is_err());
            for d in [2u8, 4, 8] {
                let full = decode_scaled(&jpg, &opts, d, None).unwrap();
                let dd = usize::from(d);
                let (fh, fw) = if o >= 5 { (w, h) } else { (h, w) };
                assert_eq!(
                    (full.height, full.width),
                    (fh.div_ceil(dd), fw.div_ceil(dd))
                );
                let px = full.as_u8_hwc().unwrap();
                for (t, l, wh, ww) in [
                    (0, 0, full.height, full.width),
                    (1, 2, 3, 4),
                    (
                        full.height / 2,
                        full.width / 3,
                        full.height / 2,
                        full.width / 2,
                    ),
                    (full.height - 1, full.width - 1, 1, 1),
                ] {
                    let got = decode_scaled(&jpg, &opts, d, Some((t, l, wh, ww))).unwrap();
                    let mut want = Vec::new();
                    for y in t..t + wh {
                        want.extend_from_slice(
                            &px[(y * full.width + l) * 3..(y * full.width + l + ww) * 3],
                        );
                    }
                    assert!(
                        got.as_u8_hwc().unwrap() == &want[..],
                        "{sub:?} o={o} 1/{d} {:?}",
                        (t, l, wh, ww)
                    );
                }
            }
        }
    }
}
