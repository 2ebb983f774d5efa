//! The `convert` kernel, which `normalize` and `cast` share, against both operators' CPU
//! code, on the host (the kernels compiled by the host's C++ compiler).

use crate::cuda::desc::{conv_flags, dtype, ConvertDesc};
use crate::cuda::test_support::{assert_same, image_from, image_u8, in_any, out_buf, Emu};
use crate::image::{DType, Layout};
use crate::ops::cast::cast_image;
use crate::ops::layout::to_layout;
use crate::ops::normalize::Normalize;

type ConvertKernel = unsafe extern "C" fn(*const ConvertDesc, u32);

#[test]
fn convert_kernel_matches_cpu_on_the_host() {
    let Some(emu) = Emu::load() else { return };
    let convert: ConvertKernel = emu.sym("convert");
    let norm = Normalize::new(
        &[123.675, 116.28, 103.53],
        &[58.395, 57.12, 57.375],
        DType::F32,
    )
    .unwrap();
    for from in [DType::U8, DType::F16, DType::F32] {
        for layout in [Layout::Hwc, Layout::Chw] {
            let base = image_u8(13, 11, 3, 5);
            // Values with ties and out-of-range for the float sources.
            let im = if from == DType::U8 {
                base
            } else {
                let mut f = in_any(&base, DType::F32, Layout::Hwc);
                if let crate::image::Pixels::F32(v) = &mut f.pixels {
                    for (i, x) in v.iter_mut().enumerate() {
                        *x = *x * 1.25 - 30.0 + if i % 7 == 0 { 0.5 } else { 0.0 };
                    }
                }
                in_any(&f, from, layout)
            };
            let im = to_layout(&im, layout);
            for to in [DType::U8, DType::F16, DType::F32] {
                for normalize in [false, true] {
                    let mut d = ConvertDesc {
                        src: im.pixels.as_bytes().as_ptr() as u64,
                        count: (13 * 11 * 3) as u32,
                        channels: 3,
                        plane: 13 * 11,
                        flags: if layout == Layout::Chw {
                            conv_flags::CHW
                        } else {
                            0
                        },
                        src_dtype: dtype::code(from),
                        dst_dtype: dtype::code(to),
                        ..ConvertDesc::default()
                    };
                    let want = if normalize {
                        d.flags |= conv_flags::NORMALIZE;
                        d.mean[..3].copy_from_slice(&norm.mean);
                        d.inv_std[..3].copy_from_slice(&norm.inv_std);
                        cast_image(&norm.apply(im.clone()).unwrap(), to)
                    } else {
                        cast_image(&im, to)
                    };
                    let out = out_buf(13 * 11 * 3 * to.size());
                    d.dst = out.as_ptr() as u64;
                    emu.per_sample(1, || {
                        // SAFETY: `d` points at the live image and an output sized for it.
                        unsafe { convert(&d, 1) }
                    });
                    let got = image_from(&out, 13, 11, 3, to, layout);
                    assert_same(
                        &got,
                        &want,
                        &format!("convert {from:?}->{to:?} {layout:?} norm={normalize}"),
                    );
                }
            }
        }
    }
}
