//! Fused `decode → random_resized_crop`: decode only the chosen window, then resize it.
//!
//! [`decode_and_crop`] gives the same pixels and the same window as decoding the whole image
//! with [`crate::decode::decode`] and running [`RandomResizedCrop`] on it with the same rng:
//! the window depends only on the image size, which [`crate::decode::probe`] reads from the
//! header, [`crate::decode::decode_window`] returns exactly the full decode's pixels in the
//! window, and resizing a window reads no pixel outside it.

use crate::decode::{decode_window, probe, DecodeError, DecodeOptions, Window};
use crate::image::Image;
use crate::rng::SampleRng;

use super::super::resize::resize_image;
use super::RandomResizedCrop;

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
    let info = probe(bytes, decode_opts)?;
    if info.height == 0 || info.width == 0 {
        return Err(DecodeAndCropError::Crop("empty image".into()));
    }
    let window = rrc.choose(info.height, info.width, rng);
    let crop = decode_window(bytes, decode_opts, window)?;
    let out = resize_image(
        &crop,
        (0, 0, crop.height, crop.width),
        rrc.height,
        rrc.width,
        rrc.interp,
        rrc.antialias,
    )
    .map_err(DecodeAndCropError::Crop)?;
    Ok((out, window))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{decode, ColorMode};
    use crate::ops::resize::Interp;
    use crate::ops::{OpParams, Operator, SampleContext};
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
        let mut params = Vec::new();
        let mut ctx = SampleContext {
            seed: 11,
            epoch: 2,
            index: key as usize,
            path: Path::new("x.jpg"),
            op_key: 99,
            op_name: &name,
            params: &mut params,
        };
        let out = rrc.run_cpu(vec![Value::Image(im)], &mut ctx).unwrap();
        let Value::Image(out) = out.into_iter().next().unwrap() else {
            panic!("not an image")
        };
        let OpParams::Crop {
            top,
            left,
            height,
            width,
        } = params[0].1.clone()
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
}
