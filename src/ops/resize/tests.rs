//! Tests of `resize` as an operator, and GPU parity through the fused chain (the arithmetic
//! is tested in `crate::resample`, the Pillow goldens in `crate::ops::goldens`).

use std::collections::BTreeMap;

use super::*;
use crate::cuda::test_support::{image_u8, SHAPES};
use crate::fusion::chain::on_device::{check_ops, devices};
use crate::image::{DType, Image, Layout};
use crate::ops::testing::{assert_setup_matches_run, key};
use crate::value::ImageType;

#[test]
fn shorter_side_like_torchvision() {
    let t = ResizeTarget::Shorter(256);
    assert_eq!(t.output_size(375, 500), (256, 341)); // int(256 * 500 / 375) = 341
    assert_eq!(t.output_size(500, 375), (341, 256));
    assert_eq!(t.output_size(300, 300), (256, 256));
    assert_eq!(t.output_size(256, 1000), (256, 1000));
    assert_eq!(ResizeTarget::Shorter(3).output_size(7, 10), (3, 4)); // 4.28 → 4
    assert_eq!(ResizeTarget::Exact(5, 6).output_size(1, 1), (5, 6));
}

fn build_with(pairs: &[(&str, crate::ops::ArgValue)]) -> Result<Box<dyn Operator>, ArgError> {
    let given: BTreeMap<String, crate::ops::ArgValue> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    build(&Args::validate(&SCHEMA, &given)?)
}

#[test]
fn build_needs_exactly_one_size() {
    let e = build_with(&[]).unwrap_err();
    assert!(e.help.is_some() && e.message.contains("needs"), "{e:?}");
    let e = build_with(&[("size", 4.into()), ("shorter", 4.into())]).unwrap_err();
    assert!(e.message.contains("not both"), "{e:?}");
    assert!(build_with(&[("shorter", 4.into())]).is_ok());
}

#[test]
fn infer_requires_u8_hwc_and_knows_the_size() {
    let op = build_with(&[("size", [3, 5].into())]).unwrap();
    let t = crate::value::ImageType::decoded(3);
    let out = op.infer(&[ValueType::Image(t)]).unwrap();
    assert_eq!(
        out,
        vec![ValueType::Image(ImageType {
            size: Some((3, 5)),
            ..t
        })]
    );
    let f32_chw = ImageType {
        dtype: DType::F32,
        layout: Layout::Chw,
        ..t
    };
    let e = op.infer(&[ValueType::Image(f32_chw)]).unwrap_err();
    assert!(
        e.contains("u8 HWC") && e.contains("before normalize"),
        "{e}"
    );
    let op = build_with(&[("shorter", 10.into())]).unwrap();
    let sized = ImageType {
        size: Some((20, 40)),
        ..t
    };
    assert_eq!(
        op.infer(&[ValueType::Image(sized)]).unwrap(),
        vec![ValueType::Image(ImageType {
            size: Some((10, 20)),
            ..t
        })]
    );
}

#[test]
fn setup_draws_what_run_cpu_records() {
    for (k, target) in [
        ResizeTarget::Shorter(7),
        ResizeTarget::Exact(5, 9),
        ResizeTarget::Shorter(12),
    ]
    .into_iter()
    .enumerate()
    {
        let op = Resize {
            target,
            interp: Interp::Bilinear,
            antialias: true,
        };
        assert_setup_matches_run(&op, image_u8(12, 17, 3, k as u64), key(k, 1));
    }
}

/// GPU parity through the fused chain, on every device: sizes from the host setups (the
/// shorter side), and fixed sizes up, down, along one axis only and with tall and wide
/// ratios (both pass orders), each interpolation with and without antialias.
#[test]
fn gpu_resize_matches_cpu() {
    let devs = devices();
    let targets = [
        ResizeTarget::Shorter(8),
        ResizeTarget::Exact(1, 1),
        ResizeTarget::Exact(7, 5),
        ResizeTarget::Exact(3, 40),
        ResizeTarget::Exact(61, 19),
        ResizeTarget::Exact(250, 93),
    ];
    for c in [1, 3, 4] {
        let ims: Vec<Image> = SHAPES
            .iter()
            .map(|&(h, w)| image_u8(h, w, c, (h * 131 + w) as u64))
            .collect();
        for target in targets {
            for interp in [Interp::Bilinear, Interp::Nearest] {
                for antialias in [true, false] {
                    let op = Resize {
                        target,
                        interp,
                        antialias,
                    };
                    check_ops(
                        &devs,
                        &[("resize", &op)],
                        &ims,
                        &format!("resize {target:?} c={c} {interp:?} aa={antialias}"),
                    );
                }
            }
        }
    }
}
