//! Tests of `crop`: the placement rules (torchvision, DALI), argument checks, the host setup
//! against `run_cpu`, its chain piece, GPU parity through the fused chain, and the
//! standalone `crop_fill` kernels emulated on the host.
//! The window-with-fill pixel code is tested in `super::super::window`.

use proptest::prelude::*;

use super::*;
use crate::cuda::chain::{ChainPiece, ChainStep};
use crate::cuda::desc::{geom_flags, GeomDesc};
use crate::cuda::test_support::{image_from, image_u8, in_any, out_buf, Emu, SHAPES};
use crate::fusion::chain::on_device::{check_ops, devices};
use crate::image::{DType, Image, Layout};
use crate::ops::testing::assert_setup_matches_run;
use crate::ops::window::fill_bits;
use crate::ops::GpuOperator;

proptest! {
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

#[test]
fn setup_draws_what_run_cpu_records() {
    for (k, (h, w)) in [(1, 1), (5, 9), (40, 30), (3, 100)].into_iter().enumerate() {
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
            let im = image_u8(h, w, 3, k as u64);
            assert_setup_matches_run(&crop, im, crate::ops::testing::key(k, 11));
        }
    }
}

/// GPU parity through the fused chain, on every device: windows inside each image (one
/// reaching outside it is run by the CPU operators on the GPU path, not by the chain).
#[test]
fn gpu_crop_matches_cpu() {
    let devs = devices();
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
        for c in [1, 3] {
            let ims: Vec<Image> = SHAPES
                .iter()
                .filter(|&&(h, w)| h >= crop.height && w >= crop.width)
                .map(|&(h, w)| image_u8(h, w, c, (h + w) as u64))
                .collect();
            check_ops(
                &devs,
                &[("crop", &crop)],
                &ims,
                &format!("crop {}x{} c={c}", crop.height, crop.width),
            );
        }
    }
}

type GeomKernel = unsafe extern "C" fn(*const GeomDesc, u32);

/// The `crop_fill` kernels on the host (the crop part of the former geometry-kernel test).
#[test]
fn crop_fill_kernels_match_cpu_on_the_host() {
    let Some(emu) = Emu::load() else { return };
    for dt in [DType::U8, DType::F16, DType::F32] {
        let suffix = ["b1", "b2", "", "b4"][dt.size() - 1];
        let crop: GeomKernel = emu.sym(&format!("crop_fill_{suffix}"));
        for layout in [Layout::Hwc, Layout::Chw] {
            for (h, w, c) in [(1, 1, 1), (5, 9, 3), (8, 3, 1), (7, 7, 4)] {
                let im = in_any(&image_u8(h, w, c, (h * w + c) as u64), dt, layout);
                let chw = if layout == Layout::Chw {
                    geom_flags::CHW
                } else {
                    0
                };
                let base = GeomDesc {
                    src: im.pixels.as_bytes().as_ptr() as u64,
                    src_h: h as u32,
                    src_w: w as u32,
                    out_h: h as u32,
                    out_w: w as u32,
                    channels: c as u32,
                    ..GeomDesc::default()
                };
                // Windows inside, across the edges and fully outside.
                for (top, left, oh, ow) in [
                    (0i64, 0i64, h, w),
                    (-2, 1, h + 3, 2),
                    (3, -4, 2, w + 5),
                    (50, 50, 2, 2),
                ] {
                    let fill = [7.6, -2.5, 300.0, 1.5];
                    let mut d = base;
                    (d.top, d.left, d.out_h, d.out_w, d.flags) =
                        (top as i32, left as i32, oh as u32, ow as u32, chw);
                    d.fill = fill.map(|v| fill_bits(v, dt));
                    let out = out_buf(oh * ow * c * dt.size());
                    d.dst = out.as_ptr() as u64;
                    emu.per_sample(1, || {
                        // SAFETY: `d` points at the live image and an output sized for it.
                        unsafe { crop(&d, 1) }
                    });
                    let want = crop_fill(&im, top, left, oh, ow, &fill[..c]).unwrap();
                    crate::cuda::test_support::assert_same(
                        &image_from(&out, oh, ow, c, dt, layout),
                        &want,
                        "crop",
                    );
                }
            }
        }
    }
}

#[test]
fn chain_piece_is_the_window() {
    let crop = Crop {
        height: 4,
        width: 6,
        anchor: Anchor::Center,
        fill: 0.0,
    };
    let s = crop
        .setup(
            SetupInput::Image(ImageShape::of(&image_u8(10, 20, 3, 1))),
            &crate::ops::testing::key(0, 1),
        )
        .unwrap();
    assert_eq!(
        crop.chain_piece(&s),
        Ok(ChainPiece::Geometry {
            window: Some((3, 7, 4, 6)),
            out: (4, 6)
        })
    );
    assert_eq!(
        crop.chain_step(),
        Ok(ChainStep::Geometry { resample: None })
    );
}
