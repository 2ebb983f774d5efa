//! GPU form of `layout`: one launch of the `transpose_b*` kernels (a copy when the images
//! are in the layout already); in the fused chain, the output layout.

use super::ToLayout;
use crate::cuda::chain::{ChainPiece, ChainStep};
use crate::cuda::desc::{geom_flags, GeomDesc};
use crate::cuda::run::{run_geom, u32_of, GeomKernel};
use crate::cuda::{Device, DeviceBatch, DeviceImage};
use crate::error::Error;
use crate::image::Layout;
use crate::ops::{check_setups, GpuOperator, Setup};

impl GpuOperator for ToLayout {
    /// Every image of a batch in the target layout.
    fn launch(
        &self,
        dev: &Device,
        inputs: &[DeviceImage],
        setups: &[Setup],
    ) -> Result<DeviceBatch, Error> {
        check_setups(inputs, setups)?;
        let layout = self.layout;
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

    fn chain_step(&self) -> Result<ChainStep, String> {
        Ok(ChainStep::Layout {
            layout: self.layout,
        })
    }

    fn chain_piece(&self, _: &Setup) -> Result<ChainPiece, String> {
        Ok(ChainPiece::Fixed)
    }
}
