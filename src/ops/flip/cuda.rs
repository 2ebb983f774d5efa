//! GPU launcher of `flip` (the `flip_b*` kernels, out of place).

use crate::cuda::desc::{geom_flags, GeomDesc};
use crate::cuda::run::{run_geom, u32_of, GeomKernel};
use crate::cuda::{Device, DeviceBatch, DeviceImage};
use crate::error::Error;
use crate::image::Layout;

/// Mirrors image `i` left–right if `flips[i].0` and top–bottom if `flips[i].1` (the choices
/// [`super::Flip::choose`] made for each sample).
pub fn flip_batch(
    dev: &Device,
    inputs: &[DeviceImage],
    flips: &[(bool, bool)],
) -> Result<DeviceBatch, Error> {
    if flips.len() != inputs.len() {
        return Err(Error::Cuda("one flip choice per image".into()));
    }
    let layout = inputs.first().map_or(Layout::Hwc, |im| im.layout);
    let mut descs = Vec::with_capacity(inputs.len());
    for (im, &(h, v)) in inputs.iter().zip(flips) {
        if im.layout != layout {
            return Err(Error::Cuda("one layout per batch".into()));
        }
        let mut flags = if layout == Layout::Chw {
            geom_flags::CHW
        } else {
            0
        };
        if h {
            flags |= geom_flags::FLIP_H;
        }
        if v {
            flags |= geom_flags::FLIP_V;
        }
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
    run_geom(dev, GeomKernel::Flip, inputs, descs, layout)
}
