//! GPU vs CPU parity of every operator and of the fused chain. Each test opens device 0 and
//! prints "skipped: no CUDA driver" and returns when that fails (set
//! `STOKEHOLD_REQUIRE_GPU=1` to make that a failure instead, on a GPU machine). They need no
//! files, so a prebuilt test binary runs them anywhere:
//! `stokehold-<hash> cuda::parity --test-threads=1`.
//!
//! u8 outputs must match the CPU bit for bit; float outputs within 1e-3 (relative above 1).

use super::{run_fused_batch, Device, DeviceBatch, DeviceImage, FusedSample};
use crate::image::{DType, Image, Layout, Pixels};
use crate::ops::cast::{cast_image, cast_pixels};
use crate::ops::color_jitter::{apply as jitter_cpu, ColorJitter};
use crate::ops::crop::{crop_fill, Anchor, Crop};
use crate::ops::flip::flip_in_place;
use crate::ops::layout::to_layout;
use crate::ops::normalize::{normalize_image, per_channel, Normalize};
use crate::ops::pad::Pad;
use crate::ops::random_resized_crop::choose_window;
use crate::ops::resize::{resize_u8, Interp};
use crate::rng::SampleRng;

fn device() -> Option<Device> {
    match Device::new(0) {
        Ok(d) => {
            eprintln!("GPU: {:?}", d.info());
            Some(d)
        }
        Err(e) => {
            if std::env::var("STOKEHOLD_REQUIRE_GPU").as_deref() == Ok("1") {
                panic!("STOKEHOLD_REQUIRE_GPU=1 but no GPU: {e}");
            }
            eprintln!("skipped: no CUDA driver ({e})");
            None
        }
    }
}

/// Deterministic noise with some smooth structure.
pub(super) fn image_u8(h: usize, w: usize, c: usize, seed: u64) -> Image {
    let mut rng = SampleRng::from_key(seed);
    let data = (0..h * w * c)
        .map(|i| {
            let smooth = ((i / c) % w * 255 / w.max(1)) as u64;
            ((smooth + rng.below(64)) % 256) as u8
        })
        .collect();
    Image::from_u8_hwc(h, w, c, data)
}

/// Odd shapes: 1×1, single rows and columns, odd widths, larger.
const SHAPES: &[(usize, usize)] = &[
    (1, 1),
    (1, 7),
    (9, 1),
    (5, 9),
    (17, 33),
    (64, 47),
    (120, 90),
];

pub(super) fn in_any(im: &Image, dtype: DType, layout: Layout) -> Image {
    to_layout(&cast_image(im, dtype), layout)
}

fn upload_all(dev: &Device, ims: &[Image]) -> Vec<DeviceImage> {
    ims.iter()
        .map(|im| DeviceImage::upload(dev, im).expect("upload"))
        .collect()
}

pub(super) fn assert_same(got: &Image, want: &Image, what: &str) {
    assert_eq!(
        (got.height, got.width, got.channels, got.layout, got.dtype()),
        (
            want.height,
            want.width,
            want.channels,
            want.layout,
            want.dtype()
        ),
        "{what}: shape"
    );
    let as_f32 = |p: &Pixels| -> Vec<f32> {
        match cast_pixels(p.clone(), DType::F32) {
            Pixels::F32(v) => v,
            _ => unreachable!(),
        }
    };
    match (&got.pixels, &want.pixels) {
        (Pixels::U8(a), Pixels::U8(b)) => {
            if let Some(i) = a.iter().zip(b).position(|(x, y)| x != y) {
                panic!(
                    "{what}: u8 differs at element {i}: gpu {} cpu {}",
                    a[i], b[i]
                );
            }
        }
        (a, b) => {
            for (i, (x, y)) in as_f32(a).iter().zip(as_f32(b)).enumerate() {
                let ok = (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-3 * y.abs().max(1.0);
                assert!(ok, "{what}: element {i}: gpu {x} cpu {y}");
            }
        }
    }
}

fn check_batch(batch: &DeviceBatch, want: &[Image], what: &str) {
    let got = batch.to_host().expect("download");
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_same(g, w, &format!("{what}, sample {i}"));
    }
}

#[test]
fn resize_matches_cpu() {
    let Some(dev) = device() else { return };
    for c in [1, 3, 4] {
        for &(h, w) in SHAPES {
            let im = image_u8(h, w, c, (h * 131 + w) as u64);
            // Up, down, one axis only, tall/wide ratios (both pass orders).
            let sizes = [
                (1, 1),
                (h, (w / 2).max(1)),
                ((h / 3).max(1), w),
                (h * 2 + 1, w + 3),
                (7, 5),
                (3, 40),
            ];
            for interp in [Interp::Bilinear, Interp::Nearest] {
                for aa in [true, false] {
                    let ims = vec![im.clone(); sizes.len()];
                    let inputs = upload_all(&dev, &ims);
                    let windows = vec![(0, 0, h, w); sizes.len()];
                    let batch = crate::ops::resize::cuda::resize_batch(
                        &dev, &inputs, &windows, &sizes, interp, aa,
                    )
                    .expect("resize");
                    let want: Vec<Image> = sizes
                        .iter()
                        .map(|&(oh, ow)| {
                            let v = resize_u8(
                                im.as_u8_hwc().unwrap(),
                                h,
                                w,
                                c,
                                w,
                                (0, 0, h, w),
                                oh,
                                ow,
                                interp,
                                aa,
                            )
                            .unwrap();
                            Image::from_u8_hwc(oh, ow, c, v)
                        })
                        .collect();
                    check_batch(
                        &batch,
                        &want,
                        &format!("resize {h}x{w}x{c} {interp:?} aa={aa}"),
                    );
                }
            }
        }
    }
}

#[test]
fn random_resized_crop_windows_match_cpu() {
    let Some(dev) = device() else { return };
    for c in [1, 3] {
        let ims: Vec<Image> = (0..12)
            .map(|k| image_u8(37 + k * 13, 53 + k * 7, c, k as u64))
            .collect();
        let windows: Vec<_> = ims
            .iter()
            .enumerate()
            .map(|(k, im)| {
                choose_window(
                    im.height,
                    im.width,
                    (0.08, 1.0),
                    (0.75, 4.0 / 3.0),
                    &mut SampleRng::from_key(k as u64),
                )
            })
            .collect();
        let op = crate::ops::random_resized_crop::RandomResizedCrop {
            height: 24,
            width: 31,
            scale: (0.08, 1.0),
            ratio: (0.75, 4.0 / 3.0),
            interp: Interp::Bilinear,
            antialias: true,
            dct_downscale: false,
        };
        let inputs = upload_all(&dev, &ims);
        let batch = op.run_cuda(&dev, &inputs, &windows).expect("rrc");
        let want: Vec<Image> = ims
            .iter()
            .zip(&windows)
            .map(|(im, &win)| {
                let v = resize_u8(
                    im.as_u8_hwc().unwrap(),
                    im.height,
                    im.width,
                    c,
                    im.width,
                    win,
                    24,
                    31,
                    Interp::Bilinear,
                    true,
                )
                .unwrap();
                Image::from_u8_hwc(24, 31, c, v)
            })
            .collect();
        check_batch(&batch, &want, &format!("rrc c={c}"));
        assert_eq!(batch.shape(), Some([12, 24, 31, c]));
    }
}

/// The CPU chain the fused kernel replaces.
pub(super) fn fused_cpu(im: &Image, s: &FusedSample) -> Image {
    let (h, w, c) = (im.height, im.width, im.channels);
    let v = resize_u8(
        im.as_u8_hwc().unwrap(),
        h,
        w,
        c,
        w,
        s.window,
        s.out_h,
        s.out_w,
        s.interp,
        s.antialias,
    )
    .unwrap();
    let mut out = Image::from_u8_hwc(s.out_h, s.out_w, c, v);
    flip_in_place(&mut out, s.flip_h, s.flip_v);
    if let Some((m, inv)) = s.normalize {
        let nd = if s.dtype == DType::F16 {
            DType::F16
        } else {
            DType::F32
        };
        out = normalize_image(out, &m[..c], &inv[..c], nd);
    }
    out = cast_image(&out, s.dtype);
    to_layout(&out, s.layout)
}

#[test]
fn fused_chain_matches_cpu() {
    let Some(dev) = device() else { return };
    let norm = Normalize::new(
        &[123.675, 116.28, 103.53],
        &[58.395, 57.12, 57.375],
        DType::F32,
    )
    .unwrap();
    for c in [1, 3] {
        for (dtype, layout, normalize) in [
            (DType::F32, Layout::Chw, true),
            (DType::F16, Layout::Chw, true),
            (DType::F32, Layout::Hwc, true),
            (DType::U8, Layout::Chw, true),
            (DType::U8, Layout::Hwc, false),
            (DType::F16, Layout::Hwc, false),
        ] {
            let ims: Vec<Image> = (0..SHAPES.len() + 6)
                .map(|k| {
                    let (h, w) = SHAPES
                        .get(k)
                        .copied()
                        .unwrap_or((200 + k * 31, 150 + k * 17));
                    image_u8(h, w, c, 1000 + k as u64)
                })
                .collect();
            let samples: Vec<FusedSample> = ims
                .iter()
                .enumerate()
                .map(|(k, im)| {
                    let mut rng = SampleRng::from_key(k as u64 * 7 + c as u64);
                    let window = choose_window(
                        im.height,
                        im.width,
                        (0.08, 1.0),
                        (0.75, 4.0 / 3.0),
                        &mut rng,
                    );
                    let (m, inv) = (per_channel(&norm.mean, c), per_channel(&norm.inv_std, c));
                    let mut mm = [0f32; 4];
                    let mut ii = [0f32; 4];
                    mm[..c].copy_from_slice(&m);
                    ii[..c].copy_from_slice(&inv);
                    FusedSample {
                        window,
                        out_h: 16 + k % 5,
                        out_w: 13 + k % 3,
                        interp: if k % 4 == 3 {
                            Interp::Nearest
                        } else {
                            Interp::Bilinear
                        },
                        antialias: k % 5 != 4,
                        flip_h: rng.bernoulli(0.5),
                        flip_v: k % 3 == 0,
                        normalize: normalize.then_some((mm, ii)),
                        dtype,
                        layout,
                    }
                })
                .collect();
            let inputs = upload_all(&dev, &ims);
            let batch = run_fused_batch(&dev, &inputs, &samples).expect("fused");
            let want: Vec<Image> = ims
                .iter()
                .zip(&samples)
                .map(|(im, s)| fused_cpu(im, s))
                .collect();
            check_batch(
                &batch,
                &want,
                &format!("fused c={c} {dtype:?} {layout:?} norm={normalize}"),
            );
        }
    }
}

#[test]
fn crop_and_pad_match_cpu() {
    let Some(dev) = device() else { return };
    for dtype in [DType::U8, DType::F16, DType::F32] {
        for layout in [Layout::Hwc, Layout::Chw] {
            for c in [1, 3] {
                let ims: Vec<Image> = SHAPES
                    .iter()
                    .map(|&(h, w)| in_any(&image_u8(h, w, c, (h + w) as u64), dtype, layout))
                    .collect();
                let inputs = upload_all(&dev, &ims);
                for crop in [
                    Crop {
                        height: 4,
                        width: 6,
                        anchor: Anchor::Center,
                        fill: 7.6,
                    },
                    Crop {
                        height: 30,
                        width: 3,
                        anchor: Anchor::Position { y: 0.25, x: 1.0 },
                        fill: -2.5,
                    },
                ] {
                    let batch = crop.run_cuda(&dev, &inputs).expect("crop");
                    let want: Vec<Image> = ims
                        .iter()
                        .map(|im| {
                            let (t, l) = crop.window(im.height, im.width);
                            crop_fill(im, t, l, crop.height, crop.width, &[crop.fill]).unwrap()
                        })
                        .collect();
                    check_batch(&batch, &want, &format!("crop {dtype:?} {layout:?} c={c}"));
                }
                let fill = if c == 3 {
                    vec![1.0, 250.4, 3.5]
                } else {
                    vec![9.0]
                };
                let pad = Pad {
                    top: 2,
                    bottom: 1,
                    left: 0,
                    right: 3,
                    fill: fill.clone(),
                    to_multiple: 4,
                };
                let batch = pad.run_cuda(&dev, &inputs).expect("pad");
                let want: Vec<Image> = ims
                    .iter()
                    .map(|im| {
                        let (oh, ow) = pad.output_size(im.height, im.width);
                        crop_fill(im, -2, 0, oh, ow, &fill).unwrap()
                    })
                    .collect();
                check_batch(&batch, &want, &format!("pad {dtype:?} {layout:?} c={c}"));
            }
        }
    }
}

#[test]
fn flip_layout_cast_match_cpu() {
    let Some(dev) = device() else { return };
    for dtype in [DType::U8, DType::F16, DType::F32] {
        for layout in [Layout::Hwc, Layout::Chw] {
            for c in [1, 3, 4] {
                let ims: Vec<Image> = SHAPES
                    .iter()
                    .map(|&(h, w)| in_any(&image_u8(h, w, c, (h * w) as u64), dtype, layout))
                    .collect();
                let inputs = upload_all(&dev, &ims);
                let flips: Vec<(bool, bool)> =
                    (0..ims.len()).map(|k| (k % 2 == 0, k % 3 == 0)).collect();
                let batch =
                    crate::ops::flip::cuda::flip_batch(&dev, &inputs, &flips).expect("flip");
                let want: Vec<Image> = ims
                    .iter()
                    .zip(&flips)
                    .map(|(im, &(h, v))| {
                        let mut o = im.clone();
                        flip_in_place(&mut o, h, v);
                        o
                    })
                    .collect();
                check_batch(&batch, &want, &format!("flip {dtype:?} {layout:?} c={c}"));
                for to in [Layout::Hwc, Layout::Chw] {
                    let batch = crate::ops::layout::cuda::to_layout_batch(&dev, &inputs, to)
                        .expect("layout");
                    let want: Vec<Image> = ims.iter().map(|im| to_layout(im, to)).collect();
                    check_batch(
                        &batch,
                        &want,
                        &format!("layout {dtype:?} {layout:?}->{to:?} c={c}"),
                    );
                }
            }
        }
    }
    // Casts, with values that exercise rounding, saturation and NaN.
    let vals: Vec<f32> = vec![
        0.5,
        1.5,
        2.5,
        -0.5,
        254.5,
        254.51,
        255.4,
        300.0,
        -3.0,
        f32::NAN,
        1e6,
        1.0 + 2f32.powi(-11),
        127.0,
        65519.0,
        3.3,
    ];
    let src = Image {
        height: 1,
        width: vals.len(),
        channels: 1,
        layout: Layout::Hwc,
        pixels: Pixels::F32(vals),
    };
    for from in [DType::F32, DType::F16] {
        let im = cast_image(&src, from);
        let inputs = upload_all(&dev, std::slice::from_ref(&im));
        for to in [DType::U8, DType::F16, DType::F32] {
            let batch = crate::ops::cast::cuda::cast_batch(&dev, &inputs, to).expect("cast");
            check_batch(
                &batch,
                &[cast_image(&im, to)],
                &format!("cast {from:?}->{to:?}"),
            );
        }
    }
    let u8im = image_u8(5, 9, 3, 4);
    let inputs = upload_all(&dev, std::slice::from_ref(&u8im));
    for to in [DType::U8, DType::F16, DType::F32] {
        let batch = crate::ops::cast::cuda::cast_batch(&dev, &inputs, to).expect("cast");
        check_batch(
            &batch,
            &[cast_image(&u8im, to)],
            &format!("cast U8->{to:?}"),
        );
    }
}

#[test]
fn normalize_matches_cpu() {
    let Some(dev) = device() else { return };
    for (mean, std) in [
        (vec![123.675, 116.28, 103.53], vec![58.395, 57.12, 57.375]),
        (vec![127.5], vec![0.3]),
    ] {
        for out in [DType::F32, DType::F16] {
            let op = Normalize::new(&mean, &std, out).unwrap();
            for from in [DType::U8, DType::F16, DType::F32] {
                for layout in [Layout::Hwc, Layout::Chw] {
                    let ims: Vec<Image> = SHAPES
                        .iter()
                        .map(|&(h, w)| in_any(&image_u8(h, w, 3, (h ^ w) as u64), from, layout))
                        .collect();
                    let inputs = upload_all(&dev, &ims);
                    let batch = op.run_cuda(&dev, &inputs).expect("normalize");
                    let want: Vec<Image> =
                        ims.iter().map(|im| op.apply(im.clone()).unwrap()).collect();
                    check_batch(
                        &batch,
                        &want,
                        &format!("normalize {from:?}->{out:?} {layout:?} {mean:?}"),
                    );
                }
            }
        }
    }
}

#[test]
fn color_jitter_matches_cpu() {
    let Some(dev) = device() else { return };
    for (b, c, s, h) in [
        (0.4, 0.4, 0.4, 0.1),
        (0.0, 0.9, 0.0, 0.0),
        (2.0, 0.0, 1.5, 0.5),
        (0.0, 0.0, 0.0, 0.3),
    ] {
        let op = ColorJitter::new(b, c, s, h).unwrap();
        let ims: Vec<Image> = SHAPES
            .iter()
            .map(|&(hh, ww)| image_u8(hh, ww, 3, (hh * 3 + ww) as u64))
            .chain([image_u8(300, 401, 3, 77)])
            .collect();
        let params: Vec<_> = (0..ims.len())
            .map(|k| op.choose(&mut SampleRng::from_key(k as u64 + 99)))
            .collect();
        let inputs = upload_all(&dev, &ims);
        let batch = crate::ops::color_jitter::cuda::color_jitter_batch(&dev, &inputs, &params)
            .expect("jitter");
        let want: Vec<Image> = ims
            .iter()
            .zip(&params)
            .map(|(im, p)| {
                let mut v = im.as_u8_hwc().unwrap().to_vec();
                jitter_cpu(&mut v, p);
                Image::from_u8_hwc(im.height, im.width, 3, v)
            })
            .collect();
        check_batch(&batch, &want, &format!("color_jitter {b} {c} {s} {h}"));
    }
}

#[test]
fn batches_chain_and_return_buffers_to_the_pool() {
    let Some(dev) = device() else { return };
    let ims: Vec<Image> = (0..4).map(|k| image_u8(20 + k, 30, 3, k as u64)).collect();
    let inputs = upload_all(&dev, &ims);
    let flips = vec![(true, false); 4];
    let flipped = crate::ops::flip::cuda::flip_batch(&dev, &inputs, &flips).expect("flip");
    let chw = crate::ops::layout::cuda::to_layout_batch(&dev, &flipped.images(), Layout::Chw)
        .expect("layout");
    let want: Vec<Image> = ims
        .iter()
        .map(|im| {
            let mut o = im.clone();
            flip_in_place(&mut o, true, false);
            to_layout(&o, Layout::Chw)
        })
        .collect();
    check_batch(&chw, &want, "flip then layout");
    let idle = dev.pool().idle_count();
    drop(chw);
    drop(flipped);
    assert!(dev.pool().idle_count() > idle);
}
