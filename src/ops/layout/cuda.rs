//! GPU launcher of `layout` (the `transpose_b*` kernels).

use crate::cuda::desc::{geom_flags, GeomDesc};
use crate::cuda::run::{run_geom, u32_of, GeomKernel};
use crate::cuda::{Device, DeviceBatch, DeviceImage};
use crate::error::Error;
use crate::image::Layout;

/// Every image of a batch in `layout` (a copy when it already is).
pub fn to_layout_batch(
    dev: &Device,
    inputs: &[DeviceImage],
    layout: Layout,
) -> Result<DeviceBatch, Error> {
    let from = inputs.first().map_or(layout, |im| im.layout);
    let mut descs = Vec::with_capacity(inputs.len());
    for im in inputs {
        if im.layout != from {
            return Err(Error::Cuda("one layout per batch".into()));
        }
        let flags = match (from, layout) {
            (Layout::Hwc, Layout::Chw) => geom_flags::TO_CHW,
            (Layout::Chw, Layout::Chw) => geom_flags::CHW,
            _ => 0,
        };
        descs.push(GeomDesc {
            src_h: u32_of(im.height, "height")?,
            src_w: u32_of(im.width, "width")?,
            out_h: u32_of(im.height, "height")?,
            out_w: u32_of(im.width, "width")?,
            channels: u32_of(im.channels, "channels")?,
            flags,
            ..GeomDesc::default()
        });
    }
    let kernel = if from == layout {
        GeomKernel::Flip // with no flip flags: a copy
    } else {
        GeomKernel::Transpose
    };
    run_geom(dev, kernel, inputs, descs, layout)
}
