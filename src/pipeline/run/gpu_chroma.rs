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

    /// Rebuilds the fancy chroma of the `chroma` samples in place: the kernels resolve each
    /// chroma block from the decode into scratch planes (returned, kept until the batch's
    /// release), then each pixel is read and written again by one thread. After the warm-up
    /// the planes buffer has the size the pool settled on; a batch whose planes need a little
    /// more is rebuilt in parts, one after the other in the same buffer on the kernel stream,
    /// rather than allocate.
    pub(super) fn rebuild_chroma(
        &self,
        entries: &mut [Entry],
        chroma: &[(usize, ChromaDesc)],
        staging: &mut Staging<'_>,
    ) -> Result<Vec<DeviceBuffer>, Error> {
        const DESC: usize = std::mem::size_of::<ChromaDesc>();
        let (n, batch) = (chroma.len(), self.batch);
        let need = |d: &ChromaDesc| d.plane_bytes().next_multiple_of(ALIGN);
        let total: usize = chroma.iter().map(|(_, d)| need(d) + DESC).sum();
        let room = if self.pools.planes.a_little_past_settled(total) {
            let largest = chroma.iter().map(|(_, d)| need(d) + DESC).max();
            self.pools.planes.high_water().max(largest.unwrap_or(0))
        } else {
            total
        };
        let planes = self.pools.planes.take(room, streams::KERNELS, &|| {
            format!("the chroma planes of {n} images of a batch of {batch}")
        })?;
        // Each part's planes from the buffer's start, its descriptors after them.
        let mut descs = Vec::with_capacity(n);
        let mut parts = Vec::new();
        let (mut first, mut plane_len) = (0, 0);
        for (i, &(k, d)) in chroma.iter().enumerate() {
            if i > first && plane_len + need(&d) + (i + 1 - first) * DESC > room {
                parts.push((first..i, plane_len));
                (first, plane_len) = (i, 0);
            }
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
            d.dst = dec.ptr;
            d.planes = planes.ptr() + plane_len as u64;
            dec.rebuild = None;
            descs.push(d);
            plane_len += need(&d);
        }
        parts.push((first..n, plane_len));
        if parts.len() > 1 {
            self.stats.count_chroma_in_parts();
        }
        let from = staging.put(as_bytes(&descs));
        for (range, plane_len) in parts {
            let part = &descs[range.clone()];
            let desc_dst = planes.ptr() + plane_len as u64;
            // SAFETY: the staged descriptors stay in the lease until its done event;
            // `desc_dst` follows the part's planes in `planes`, kept until the release event;
            // an earlier part's kernels, which read it, come first on this stream.
            unsafe {
                self.dev.copy_to_device(
                    streams::KERNELS,
                    desc_dst,
                    staging.lease.ptr(from + range.start * DESC),
                    std::mem::size_of_val(part),
                )?
            };
            let largest = |f: fn(&ChromaDesc) -> usize| part.iter().map(f).max().unwrap_or(0);
            let blocks = largest(|d| {
                let (c, r) = d.blocks();
                c * r
            });
            let pixels = largest(|d| d.width as usize * d.height as usize);
            let args = [KernelArg::Ptr(desc_dst), KernelArg::U32(part.len() as u32)];
            // A thread per chroma block to resolve and guess, per pixel to upsample.
            for (kernel, most) in [
                (Kernel::ChromaResolve, blocks),
                (Kernel::ChromaGuess, blocks),
                (Kernel::ChromaUpsample, pixels),
            ] {
                let grid = kernel.grid(most as u64, part.len());
                // SAFETY: each descriptor's source and output are the engines' output in a
                // decode area of this batch (each pixel read, then written, by one thread of
                // the upsample, after the blocks were resolved from it), its planes in
                // `planes` (sized by `ChromaDesc::plane_bytes`), all kept until the release
                // event; the region lies inside the image (the decoder's plan).
                unsafe { self.dev.launch(streams::KERNELS, kernel, grid, &args)? };
            }
        }
        Ok(vec![planes])
    }
}
