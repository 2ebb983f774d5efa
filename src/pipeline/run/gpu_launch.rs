//! The GPU stage's second half: a complete batch's kernels, on the kernel stream, after its
//! decodes (waited for on the device). `GpuStage::launch` runs these passes in order:
//! the pixels decoded on the CPU uploaded into an area of their own
//! (`GpuStage::upload_host_images`); the JPEG engines' repeated chroma rebuilt into
//! libjpeg's interpolation (`gpu_chroma.rs`); the fused chain into the batch's output
//! (`GpuStage::launch_chain`; with color jitter: geometry into u8 images, jitter in place,
//! then the rest); samples computed whole on the CPU copied into their places, then repeats
//! (`GpuStage::copy_finished`, `GpuStage::copy_repeats`). Everything the kernels read
//! from the host goes up in one lease of the pinned upload ring, and every descriptor and
//! table into one device buffer, so each is sized before the first pass
//! (`ChainDescs::build`).

use std::sync::Arc;

use crate::cuda::chain::SourceDims;
use crate::cuda::desc::ChromaDesc;
use crate::cuda::gpu_device::{streams, DevicePtr, Event};
use crate::cuda::pool::DeviceBuffer;
use crate::cuda::staging::StagedBytes;
use crate::error::Error;
use crate::image::{Image, Layout};
use crate::pipeline::device_tensor::DeviceTensor;

use super::gpu_chain::{ChainDescs, DescArea};
use super::gpu_plan::{Prepared, Source, SPLIT_CAUSE};
use super::gpu_stage::{
    DecodeArea, Decoded, DeviceFill, Entry, GpuStage, Staging, ALIGN, DESC_SLACK,
};

/// Where each entry of a batch goes in its output.
struct OutputLayout {
    shapes: Vec<[usize; 3]>,
    offsets: Vec<usize>,
    len: usize,
}

impl OutputLayout {
    /// The address of entry `k`'s place in `out`.
    fn place(&self, out: &DeviceBuffer, k: usize) -> DevicePtr {
        out.ptr() + self.offsets[k] as u64
    }
}

impl GpuStage {
    /// Launches the kernels over the batch of `fill` (every sample resolved) into a pooled
    /// output buffer; the batch is ready at the tensor's event.
    pub(crate) fn launch(&self, fill: DeviceFill) -> Result<DeviceTensor, Error> {
        let (dtype, layout) = (self.plan.dtype, self.plan.layout);
        let DeviceFill {
            mut entries, areas, ..
        } = fill;
        let out_layout = self.layout_outputs(&entries)?;
        let n = entries.len();
        let batch = self.batch;
        let mut out = self
            .pools
            .outputs
            .take(out_layout.len, streams::KERNELS, &|| {
                format!("the output of a batch of {n} samples (batch = {batch})")
            })?;
        let start = self.after_decodes(&areas)?;

        // Everything host-side first: the upload's size, then one lease.
        let host_images = host_images(&entries);
        // All of it goes up; what the workers did not copy into pinned memory goes through the
        // upload lease. The split counts what it did not send (the engines can't take it).
        let (mut host_len, mut host_copied, mut forced) = (0, 0, 0);
        let host = || host_images.iter().filter_map(|&k| host_image(&entries[k]));
        let len = |im: &Image| im.pixels.as_bytes().len().next_multiple_of(ALIGN);
        for (im, staged, cause) in host() {
            let l = len(im);
            host_len += l;
            host_copied += if staged.is_none() { l } else { 0 };
            forced += if cause == SPLIT_CAUSE { 0 } else { l };
        }
        self.split.carried(host_len, host_images.len(), forced);
        // (Read only until the warm-up ends.)
        self.forced_sizes.add(
            host()
                .filter(|&(.., cause)| cause != SPLIT_CAUSE)
                .map(|(im, ..)| len(im)),
        );
        let mut uploads = self.uploads.lock().unwrap_or_else(|p| p.into_inner());
        let mut host_area = None;
        if host_len > 0 {
            host_area = Some(self.pools.host.take(host_len, streams::KERNELS, &|| {
                format!("the images decoded on the CPU of a batch of {n} samples (batch = {batch})")
            })?);
        }
        // Chroma descriptors (sizes only depend on the decode).
        let chroma = self.chroma_descs(&entries);
        let mut chain = ChainDescs::build(&entries)?;
        let desc_len = chain.device_len();
        // (Read only until the warm-up ends.)
        self.desc_sizes.add(chain.sample_bytes().iter().copied());
        debug_assert!(
            desc_len <= chain.sample_bytes().iter().sum::<usize>() + DESC_SLACK,
            "the descriptor buffers' bound misses part of a batch's {desc_len} bytes"
        );
        let upload_len = host_copied
            + ALIGN
            + chroma.len() * std::mem::size_of::<ChromaDesc>()
            + ALIGN
            + finished_len(&entries)
            + desc_len;
        let mut staging = Staging::new(uploads.lease(upload_len, streams::KERNELS)?);
        let mut keep: Vec<DeviceBuffer> = Vec::new();

        if let Some(area) = &host_area {
            self.upload_host_images(&mut entries, &host_images, area, &mut staging)?;
        }
        if !chroma.is_empty() {
            let rebuilt = self.rebuild_chroma(&mut entries, &chroma, &mut staging)?;
            keep.extend(rebuilt);
        }
        let mut dev_descs = self.pools.descs.take(desc_len, streams::KERNELS, &|| {
            format!("the descriptors of a batch of {n} samples")
        })?;
        let mut descs_at = DescArea::new(dev_descs.ptr());
        let place = |k: usize| out_layout.place(&out, k);
        let mut mid =
            self.launch_chain(&entries, &mut chain, &place, &mut staging, &mut descs_at)?;
        self.copy_finished(&entries, (&out, &out_layout), &mut staging)?;
        self.copy_repeats(&entries, (&out, &out_layout))?;

        // Every buffer of the batch is kept until its kernels are done.
        let ready = self.dev.record(streams::KERNELS, true)?;
        staging.lease.done_at(ready.clone());
        dev_descs.used_until(ready.clone());
        for a in &areas {
            a.used_until(ready.clone());
        }
        drop(areas);
        for b in keep
            .iter_mut()
            .chain(mid.iter_mut())
            .chain(host_area.iter_mut())
        {
            b.used_until(ready.clone());
        }
        drop(dev_descs);
        out.used_until(ready.clone());
        self.push_timing(true, start, ready.clone());
        self.launched(&ready)?;
        self.read_timings(false);
        give_back(entries);
        Ok(DeviceTensor::new(
            out,
            dtype,
            layout,
            out_layout.shapes,
            ready,
            self.streams.clone(),
        ))
    }

    /// Queues the kernel stream behind the batch's decodes; the event its kernels' time is
    /// measured from.
    fn after_decodes(&self, areas: &[Arc<DecodeArea>]) -> Result<Event, Error> {
        for a in areas {
            self.dev.wait(streams::KERNELS, &a.end)?;
        }
        self.dev.record(streams::KERNELS, true)
    }

    /// Uploads the pixels of the `host_images` entries (decoded on the CPU) into `area` and
    /// points their entries at them: from the worker's pinned copy where it made one (kept
    /// with the stage's kept bytes until an event after the copies: whatever fails later),
    /// else through the upload lease.
    fn upload_host_images(
        &self,
        entries: &mut [Entry],
        host_images: &[usize],
        area: &DeviceBuffer,
        staging: &mut Staging<'_>,
    ) -> Result<(), Error> {
        let mut at = 0usize;
        let mut placed = Vec::with_capacity(host_images.len());
        let mut kept = Vec::new();
        for &k in host_images {
            let Some((im, staged, _)) = host_image(&entries[k]) else {
                continue;
            };
            let px = im.pixels.as_bytes();
            let dst = area.ptr() + at as u64;
            let src = match staged {
                Some(s) => {
                    kept.push(s.clone());
                    s.as_slice().as_ptr()
                }
                None => {
                    let from = staging.put(px);
                    staging.lease.ptr(from)
                }
            };
            // SAFETY: `src` is the worker's pinned copy of these pixels (kept by the caller
            // until the batch's ready event, after this copy) or the part of the lease just
            // written (untouched until the lease's done event); `dst` lies in `area`, laid
            // out for these bytes, used by nothing else until the release event.
            let queued = unsafe {
                self.dev
                    .copy_to_device(streams::KERNELS, dst, src, px.len())
            };
            if let Err(e) = queued {
                // The copies queued before may still read the workers' slabs, which go back
                // to their free list with this batch: the device is done first (the error
                // fails the pipeline anyway).
                let _ = self.dev.synchronize_all();
                return Err(e);
            }
            placed.push((k, dst));
            at = (at + px.len()).next_multiple_of(ALIGN);
        }
        if !kept.is_empty() {
            let copied = match self.dev.record(streams::KERNELS, false) {
                Ok(e) => e,
                Err(e) => {
                    let _ = self.dev.synchronize_all();
                    return Err(e);
                }
            };
            self.stats
                .gpu_host_pinned
                .fetch_add(kept.len() as u64, std::sync::atomic::Ordering::Relaxed);
            let mut held = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            self.sweep_kept(&mut held);
            held.push((copied, Vec::new(), kept));
        }
        for (k, dst) in placed {
            set_host_decoded(&mut entries[k], dst);
        }
        Ok(())
    }

    /// Copies the samples computed whole on the CPU into their places in `out`.
    fn copy_finished(
        &self,
        entries: &[Entry],
        (out, out_layout): (&DeviceBuffer, &OutputLayout),
        staging: &mut Staging<'_>,
    ) -> Result<(), Error> {
        for (k, e) in entries.iter().enumerate() {
            let Entry::Sample {
                prepared: Prepared::Finished { image },
                ..
            } = e
            else {
                continue;
            };
            let px = image.pixels.as_bytes();
            let from = staging.put(px);
            // SAFETY: the staged pixels stay in the lease until its done event; the place in
            // `out` is laid out for exactly these bytes.
            unsafe {
                self.dev.copy_to_device(
                    streams::KERNELS,
                    out_layout.place(out, k),
                    staging.lease.ptr(from),
                    px.len(),
                )?
            };
        }
        Ok(())
    }

    /// Copies each repeat's sample before it into its place in `out`.
    fn copy_repeats(
        &self,
        entries: &[Entry],
        (out, out_layout): (&DeviceBuffer, &OutputLayout),
    ) -> Result<(), Error> {
        for (k, e) in entries.iter().enumerate() {
            if !matches!(e, Entry::Repeat) {
                continue;
            }
            let len = out_layout.shapes[k].iter().product::<usize>() * self.plan.dtype.size();
            // SAFETY: both places lie in `out` (laid out above) and don't overlap.
            unsafe {
                self.dev.copy_on_device(
                    streams::KERNELS,
                    out_layout.place(out, k),
                    out_layout.place(out, k - 1),
                    len,
                )?
            };
        }
        Ok(())
    }

    /// Every entry's place and shape in the output.
    fn layout_outputs(&self, entries: &[Entry]) -> Result<OutputLayout, Error> {
        let (dtype, layout) = (self.plan.dtype, self.plan.layout);
        let mut shapes: Vec<[usize; 3]> = Vec::with_capacity(entries.len());
        let mut offsets = Vec::with_capacity(entries.len());
        let mut len = 0usize;
        for e in entries {
            let (h, w, c) = match e {
                Entry::Sample {
                    prepared: Prepared::Chain { fused, source, .. },
                    ..
                } => {
                    let (h, w) = fused.output_size();
                    let c = match source {
                        Source::Host { image, .. } => image.channels,
                        Source::Device { .. } => 3,
                    };
                    (h, w, c)
                }
                Entry::Sample {
                    prepared: Prepared::Finished { image },
                    ..
                } => {
                    if image.dtype() != dtype || image.layout != layout {
                        return Err(Error::Cuda(format!(
                            "a sample computed on the CPU is {} {}, the batch {} {}",
                            image.dtype().name(),
                            image.layout.name(),
                            dtype.name(),
                            layout.name()
                        )));
                    }
                    (image.height, image.width, image.channels)
                }
                Entry::Repeat => {
                    let prev: [usize; 3] = *shapes
                        .last()
                        .ok_or_else(|| Error::Cuda("a repeat with no sample before it".into()))?;
                    shapes.push(prev);
                    offsets.push(len);
                    len += prev.iter().product::<usize>() * dtype.size();
                    continue;
                }
            };
            shapes.push(match layout {
                Layout::Hwc => [h, w, c],
                Layout::Chw => [c, h, w],
            });
            offsets.push(len);
            len += h * w * c * dtype.size();
        }
        Ok(OutputLayout {
            shapes,
            offsets,
            len,
        })
    }
}

/// The samples decoded on the CPU (by place), whose pixels go up with the batch.
fn host_images(entries: &[Entry]) -> Vec<usize> {
    (0..entries.len())
        .filter(|&k| host_image(&entries[k]).is_some())
        .collect()
}

/// The pixels of a sample decoded on the CPU and not uploaded yet, the worker's pinned copy
/// of them, and why the CPU decoded it.
fn host_image(e: &Entry) -> Option<(&Image, Option<&StagedBytes>, &'static str)> {
    match e {
        Entry::Sample {
            prepared:
                Prepared::Chain {
                    source:
                        Source::Host {
                            image,
                            staged,
                            cause,
                        },
                    ..
                },
            decoded: None,
        } => Some((image, staged.as_ref(), cause)),
        _ => None,
    }
}

/// Points a sample decoded on the CPU at its uploaded pixels.
fn set_host_decoded(e: &mut Entry, ptr: DevicePtr) {
    if let Entry::Sample {
        prepared:
            Prepared::Chain {
                source: Source::Host { image, .. },
                ..
            },
        decoded,
    } = e
    {
        *decoded = Some(Decoded {
            ptr,
            dims: SourceDims {
                height: image.height,
                width: image.width,
                channels: image.channels,
                pitch: image.width * image.channels,
            },
            rebuild: None,
        });
    }
}

/// Bytes of the samples computed whole on the CPU, each aligned.
fn finished_len(entries: &[Entry]) -> usize {
    entries
        .iter()
        .filter_map(|e| match e {
            Entry::Sample {
                prepared: Prepared::Finished { image },
                ..
            } => Some(image.pixels.as_bytes().len().next_multiple_of(ALIGN)),
            _ => None,
        })
        .sum()
}

/// Gives the host buffers of a launched batch's samples back to the pipeline's pools: the
/// files (unless the feeding thread still keeps them for the engines) and the images decoded
/// on the CPU (uploaded already).
fn give_back(entries: Vec<Entry>) {
    for e in entries {
        let Entry::Sample { prepared, .. } = e else {
            continue;
        };
        match prepared {
            Prepared::Chain { bytes, source, .. } => {
                crate::scratch::recycle_encoded(bytes);
                if let Source::Host { image, .. } = source {
                    crate::scratch::recycle_image(image);
                }
            }
            Prepared::Finished { image } => crate::scratch::recycle_image(image),
        }
    }
}
