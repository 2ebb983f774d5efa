//! Tests of `layout`: known values, round trips, the host setup against `run_cpu`, and GPU
//! parity through the fused chain.

use proptest::prelude::*;

use super::*;
use crate::cuda::test_support::{image_u8, SHAPES};
use crate::fusion::chain::on_device::{check_ops, devices};
use crate::ops::testing::{assert_setup_matches_run, key};
use crate::ops::ImageShape;

#[test]
fn known_values() {
    // 1x2 RGB: pixels (1,2,3) (4,5,6) → planes R=[1,4] G=[2,5] B=[3,6].
    let im = Image::from_u8_hwc(1, 2, 3, vec![1, 2, 3, 4, 5, 6]);
    let chw = to_layout(&im, Layout::Chw);
    assert_eq!(chw.pixels, crate::image::Pixels::U8(vec![1, 4, 2, 5, 3, 6]));
    assert_eq!(chw.shape(), [3, 1, 2]);
}

proptest! {
    #[test]
    fn round_trip(h in 1usize..8, w in 1usize..8, c in 1usize..5) {
        let src: Vec<u8> = (0..h * w * c).map(|i| (i * 7) as u8).collect();
        let im = Image::from_u8_hwc(h, w, c, src);
        let back = to_layout(&to_layout(&im, Layout::Chw), Layout::Hwc);
        prop_assert_eq!(back, im);
    }
}

#[test]
fn setup_draws_what_run_cpu_records() {
    for (k, layout) in [Layout::Chw, Layout::Hwc].into_iter().enumerate() {
        let op = ToLayout { layout };
        assert_setup_matches_run(&op, image_u8(3, 5, 3, k as u64), key(k, 2));
    }
}

/// GPU parity through the fused chain, on every device: the decoded HWC images in either
/// layout.
#[test]
fn gpu_layout_matches_cpu() {
    let devs = devices();
    for c in [1, 3, 4] {
        let ims: Vec<Image> = SHAPES
            .iter()
            .map(|&(h, w)| image_u8(h, w, c, (h * w) as u64))
            .collect();
        for to in [Layout::Hwc, Layout::Chw] {
            let op = ToLayout { layout: to };
            check_ops(
                &devs,
                &[("layout", &op)],
                &ims,
                &format!("layout ->{to:?} c={c}"),
            );
        }
    }
}

#[test]
fn shape_of_a_device_layout() {
    let im = image_u8(2, 3, 4, 0);
    let s = ToLayout {
        layout: Layout::Chw,
    }
    .setup(SetupInput::Image(ImageShape::of(&im)), &key(0, 0))
    .unwrap();
    assert_eq!((s.output.layout, s.output.channels), (Layout::Chw, 4));
}
