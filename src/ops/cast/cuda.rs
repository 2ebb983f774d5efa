//! GPU launcher of `cast` (the `convert` kernel without normalization).

use crate::cuda::desc::ConvertDesc;
use crate::cuda::run::run_convert;
use crate::cuda::{Device, DeviceBatch, DeviceImage};
use crate::error::Error;
use crate::image::{DType, Layout};

/// Every image of a batch converted to `dtype` with the rules of [`super::cast_pixels`].
pub fn cast_batch(
    dev: &Device,
    inputs: &[DeviceImage],
    dtype: DType,
) -> Result<DeviceBatch, Error> {
    let descs = inputs
        .iter()
        .map(|im| ConvertDesc {
            flags: if im.layout == Layout::Chw {
                crate::cuda::desc::conv_flags::CHW
            } else {
                0
            },
            ..ConvertDesc::default()
        })
        .collect();
    run_convert(dev, inputs, descs, dtype)
}
