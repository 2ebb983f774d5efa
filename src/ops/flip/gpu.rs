//! GPU form of `flip`: one launch of the `flip_b*` kernels (out of place) with each sample's
//! drawn flips; in the fused chain, the mirror flags.

use super::Flip;
use crate::cuda::chain::{ChainPiece, ChainStep};
use crate::cuda::desc::{geom_flags, GeomDesc};
use crate::cuda::run::{run_geom, u32_of, GeomKernel};
use crate::cuda::{Device, DeviceBatch, DeviceImage};
use crate::error::Error;
use crate::image::Layout;
use crate::ops::{check_setups, GpuOperator, Setup};

impl GpuOperator for Flip {
    /// Mirrors image `i` as `setups[i]` drew it.
    fn launch(
        &self,
        dev: &Device,
        inputs: &[DeviceImage],
        setups: &[Setup],
    ) -> Result<DeviceBatch, Error> {
        check_setups(inputs, setups)?;
        let layout = inputs.first().map_or(Layout::Hwc, |im| im.layout);
        let mut descs = Vec::with_capacity(inputs.len());
        for (im, s) in inputs.iter().zip(setups) {
            if im.layout != layout {
                return Err(Error::Cuda("one layout per batch".into()));
            }
            let f = s
                .flip()
                .ok_or_else(|| Error::Cuda("flip: a setup without flips".into()))?;
            let mut flags = if layout == Layout::Chw {
                geom_flags::CHW
            } else {
                0
            };
            if f.horizontal {
                flags |= geom_flags::FLIP_H;
            }
            if f.vertical {
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

    fn chain_step(&self) -> Result<ChainStep, String> {
        Ok(ChainStep::Flip)
    }

    fn chain_piece(&self, setup: &Setup) -> Result<ChainPiece, String> {
        let f = setup.flip().ok_or("flip: a setup without flips")?;
        Ok(ChainPiece::Flip {
            horizontal: f.horizontal,
            vertical: f.vertical,
        })
    }
}
