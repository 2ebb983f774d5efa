//! The JPEG engines' repeated chroma rebuilt into libjpeg's fancy upsampling before the
//! chain reads it (`kernels/chroma.cu`: resolve, guess, upsample), a pass of
//! `GpuStage::launch` (`gpu_launch.rs`).

use crate::cuda::desc::{as_bytes, ChromaDesc};
use crate::cuda::gpu_device::{streams, KernelArg};
use crate::cuda::kernel::Kernel;
use crate::cuda::pool::DeviceBuffer;
use crate::error::Error;

use super::gpu_stage::{Decoded, Entry, GpuStage, Staging, ALIGN};

impl GpuStage {
    /// The samples whose chroma is rebuilt, by place, with their descriptors (addresses
    /// left 0).
    pub(super) fn chroma_descs(&self, entries: &[Entry]) -> Vec<(usize, ChromaDesc)> {
        entries
            .iter()
            .enumerate()
            .filter_map(|(k, e)| match e {
                Entry::Sample {
                    decoded:
                        Some(Decoded {
                            dims,
                            rebuild: Some(r),
                            ..
                        }),
                    ..
                } => Some((
                    k,
                    ChromaDesc {
                        pitch: dims.pitch as u32,
                        width: dims.width as u32,
                        height: dims.height as u32,
                        x0: r.x0 as u32,
                        y0: r.y0 as u32,
                        image_w: r.image_w as u32,
                        image_h: r.image_h as u32,
                        sx: r.sx as u32,
                        sy: r.sy as u32,
                        ..ChromaDesc::default()
                    },
                )),
                _ => None,
            })
            .collect()
    }

    /// Rebuilds the fancy chroma of the `chroma` samples into new buffers (returned, kept
    /// until the batch's release) and points their entries at the rebuilt images.
    pub(super) fn rebuild_chroma(
        &self,
        entries: &mut [Entry],
        chroma: &[(usize, ChromaDesc)],
        staging: &mut Staging<'_>,
    ) -> Result<Vec<DeviceBuffer>, Error> {
        let n = chroma.len();
        let mut image_len = 0usize;
        let mut plane_len = 0usize;
        let mut placed = Vec::with_capacity(n);
        for (_, d) in chroma {
            placed.push((image_len, plane_len));
            image_len += (d.pitch as usize * d.height as usize).next_multiple_of(ALIGN);
            plane_len += d.plane_bytes().next_multiple_of(ALIGN);
        }
        let batch = self.batch;
        let images = self.pools.rebuilt.take(image_len, streams::KERNELS, &|| {
            format!("the rebuilt chroma of {n} images of a batch of {batch}")
        })?;
        let planes_len = plane_len + n * std::mem::size_of::<ChromaDesc>();
        let planes = self.pools.planes.take(planes_len, streams::KERNELS, &|| {
            format!("the chroma planes of {n} images of a batch of {batch}")
        })?;
        let mut descs = Vec::with_capacity(n);
        let mut max_blocks = 0usize;
        let mut max_pixels = 0usize;
        for (&(k, d), &(im_at, pl_at)) in chroma.iter().zip(&placed) {
            let Entry::Sample {
                decoded: Some(dec), ..
            } = &mut entries[k]
            else {
                return Err(Error::Cuda(
                    "a chroma rebuild of an undecoded sample".into(),
                ));
            };
            let mut d = d;
            d.src = dec.ptr;
            d.dst = images.ptr() + im_at as u64;
            d.planes = planes.ptr() + pl_at as u64;
            let (c, r) = d.blocks();
            max_blocks = max_blocks.max(c * r);
            max_pixels = max_pixels.max(d.width as usize * d.height as usize);
            dec.ptr = d.dst;
            dec.rebuild = None;
            descs.push(d);
        }
        let from = staging.put(as_bytes(&descs));
        let desc_dst = planes.ptr() + plane_len as u64;
        // SAFETY: the staged descriptors stay in the lease until its done event; `desc_dst`
        // is the tail of `planes`, sized for them, kept until the release event.
        unsafe {
            self.dev.copy_to_device(
                streams::KERNELS,
                desc_dst,
                staging.lease.ptr(from),
                std::mem::size_of_val(&descs[..]),
            )?
        };
        let args = [KernelArg::Ptr(desc_dst), KernelArg::U32(n as u32)];
        // A thread per chroma block to resolve and guess, per pixel to upsample.
        for (kernel, largest) in [
            (Kernel::ChromaResolve, max_blocks),
            (Kernel::ChromaGuess, max_blocks),
            (Kernel::ChromaUpsample, max_pixels),
        ] {
            let grid = kernel.grid(largest as u64, n);
            // SAFETY: each descriptor's source is the engines' output in a decode area of
            // this batch, its output and planes in `images` and `planes` (sized by
            // `ChromaDesc::plane_bytes` and pitch × height), all kept until the release
            // event; the region lies inside the image (the decoder's plan).
            unsafe { self.dev.launch(streams::KERNELS, kernel, grid, &args)? };
        }
        Ok(vec![images, planes])
    }
}
