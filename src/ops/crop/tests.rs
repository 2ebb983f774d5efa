//! Tests of `crop`: the placement rules (torchvision, DALI), argument checks, the host setup
//! against `run_cpu`, its chain piece, and GPU parity through the fused chain.
//! The window-with-fill pixel code is tested in `super::super::window`.

use proptest::prelude::*;

use super::*;
use crate::cuda::chain::{ChainPiece, ChainStep};
use crate::cuda::test_support::{image_u8, SHAPES};
use crate::fusion::chain::on_device::{check_ops, devices};
use crate::image::Image;
use crate::ops::testing::assert_setup_matches_run;
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
