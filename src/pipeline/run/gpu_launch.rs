//! The GPU stage's second half: a complete batch's kernels, on the kernel stream, after its
//! decodes (waited for on the device). In order: the pixels decoded on the CPU uploaded into
//! an area of their own; the JPEG engines' repeated chroma rebuilt into libjpeg's
//! interpolation (`kernels/chroma.cu`: resolve, guess, upsample); the fused chain into the
//! batch's output (with color jitter: geometry into u8 images, jitter in place, then the
//! rest); samples computed whole on the CPU copied into their places; repeats. Everything
//! the kernels read from the host goes up in one lease of the pinned upload ring, and every
//! descriptor and table into one device buffer.

use crate::cuda::chain::launcher::{tiles, JitterStages};
use crate::cuda::chain::{build_desc, FusedSample, SourceDims};
use crate::cuda::desc::{as_bytes, ChromaDesc, FusedDesc, JitterDesc};
use crate::cuda::gpu_device::{streams, DevicePtr, Grid, Kernel, KernelArg};
use crate::cuda::pool::{DeviceBuffer, PinnedLease};
use crate::error::Error;
use crate::image::{Image, Layout};
use crate::pipeline::device_tensor::DeviceTensor;

use super::gpu_plan::{Prepared, Source};
use super::gpu_stage::{Decoded, DeviceFill, Entry, GpuStage, ALIGN};

/// Where each entry of a batch goes in its output.
struct OutputLayout {
    shapes: Vec<[usize; 3]>,
    offsets: Vec<usize>,
    len: usize,
}

/// Host bytes staged for the kernel stream: appended to one pinned lease, copied up at once
/// into one device buffer (for descriptors and tables) or straight to their place.
struct Staging<'a> {
    lease: PinnedLease<'a>,
    at: usize,
}

impl Staging<'_> {
    /// Appends `bytes` to the lease; their offset in it.
    fn put(&mut self, bytes: &[u8]) -> usize {
        let at = self.at;
        self.lease.bytes()[at..at + bytes.len()].copy_from_slice(bytes);
        self.at = (at + bytes.len()).next_multiple_of(ALIGN);
        at
    }
}

/// Grid of a launch over `samples` samples of at most `elements` elements each, one thread
/// per element: the kernels stride over what one launch doesn't cover.
fn element_grid(elements: usize, samples: usize) -> Grid {
    Grid {
        blocks: elements.div_ceil(256).clamp(1, 1 << 12) as u32,
        samples: samples as u32,
    }
}

/// Grid of a chain launch: a block per output tile of the largest sample.
fn chain_grid(samples: &[FusedSample]) -> Grid {
    Grid {
        blocks: samples
            .iter()
            .map(|s| {
                let (h, w) = s.output_size();
                tiles(h, w)
            })
            .max()
            .unwrap_or(1)
            .clamp(1, 1 << 16) as u32,
        samples: samples.len() as u32,
    }
}

impl GpuStage {
    /// Launches the kernels over the batch of `fill` (every sample resolved) into a pooled
    /// output buffer; the batch is ready at the tensor's event.
    pub(crate) fn launch(&self, fill: DeviceFill) -> Result<DeviceTensor, Error> {
        let (dtype, layout) = (self.plan.dtype, self.plan.layout);
        let DeviceFill {
            mut entries,
            mut areas,
            decoded_at,
            ..
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
        for e in &decoded_at {
            self.dev.wait(streams::KERNELS, e)?;
        }
        let start = self.dev.record(streams::KERNELS, true)?;

        // Everything host-side first: the upload's size, then one lease.
        let host_images = host_images(&entries);
        let host_len: usize = host_images
            .iter()
            .map(|&k| host_image(&entries[k]).map_or(0, |im| im.pixels.as_bytes().len()))
            .map(|l| l.next_multiple_of(ALIGN))
            .sum();
        let mut uploads = self.uploads.lock().unwrap_or_else(|p| p.into_inner());
        let mut plan_len = host_len + ALIGN;
        // Host-decoded pixels into an area of their own.
        let mut host_area = None;
        if host_len > 0 {
            host_area = Some(self.pools.host.take(host_len, streams::KERNELS, &|| {
                format!("the images decoded on the CPU of a batch of {n} samples (batch = {batch})")
            })?);
        }
        // Chroma descriptors (sizes only depend on the decode).
        let chroma = self.chroma_plan(&entries);
        plan_len += chroma.len() * std::mem::size_of::<ChromaDesc>() + ALIGN;
        let finished_len: usize = entries
            .iter()
            .filter_map(|e| match e {
                Entry::Sample {
                    prepared: Prepared::Finished { image },
                    ..
                } => Some(image.pixels.as_bytes().len().next_multiple_of(ALIGN)),
                _ => None,
            })
            .sum();
        plan_len += finished_len;
        // The chain's descriptors need the sources' final addresses only, set below; their
        // sizes are known now.
        let chain: Vec<usize> = (0..entries.len())
            .filter(|&k| {
                matches!(
                    &entries[k],
                    Entry::Sample {
                        prepared: Prepared::Chain { .. },
                        ..
                    }
                )
            })
            .collect();
        let fused: Vec<FusedSample> = chain
            .iter()
            .map(|&k| match &entries[k] {
                Entry::Sample {
                    prepared: Prepared::Chain { fused, .. },
                    ..
                } => *fused,
                _ => unreachable!("filtered above"),
            })
            .collect();
        let stages = JitterStages::of(&fused);
        let mut tables = (Vec::new(), Vec::new());
        let mut descs: (Vec<FusedDesc>, Vec<FusedDesc>, Vec<JitterDesc>) =
            (Vec::new(), Vec::new(), Vec::new());
        {
            let geometry = stages.as_ref().map_or(&fused, |s| &s.geometry);
            for (&k, s) in chain.iter().zip(geometry) {
                let d = decoded_dims(&entries[k])?;
                descs.0.push(build_desc(d, s, &mut tables.0)?);
            }
            if let Some(st) = &stages {
                for (j, r) in st.jitter.iter().zip(&st.rest) {
                    let (h, w) = r.output_size();
                    descs.2.push(j.desc(h * w)?);
                    let dims = SourceDims {
                        height: h,
                        width: w,
                        channels: 3,
                        pitch: w * 3,
                    };
                    descs.1.push(build_desc(dims, r, &mut tables.1)?);
                }
            }
        }
        tables.0.push(0);
        tables.1.push(0);
        let desc_len = [
            std::mem::size_of_val(&descs.0[..]),
            std::mem::size_of_val(&descs.1[..]),
            std::mem::size_of_val(&descs.2[..]),
            4 * tables.0.len(),
            4 * tables.1.len(),
        ]
        .iter()
        .map(|l| l.next_multiple_of(ALIGN))
        .sum::<usize>()
            + (8 * chain.len()).next_multiple_of(ALIGN);
        plan_len += desc_len;
        let mut staging = Staging {
            lease: uploads.lease(plan_len, streams::KERNELS)?,
            at: 0,
        };
        let mut keep: Vec<DeviceBuffer> = Vec::new();

        // 1. Pixels decoded on the CPU.
        if let Some(area) = &host_area {
            let mut at = 0usize;
            let mut placed = Vec::with_capacity(host_images.len());
            for &k in &host_images {
                let Some(im) = host_image(&entries[k]) else {
                    continue;
                };
                let px = im.pixels.as_bytes();
                let from = staging.put(px);
                let dst = area.ptr() + at as u64;
                // SAFETY: `from..from + px.len()` of the lease was just written and stays
                // untouched until the lease's done event; `dst` lies in `area`, laid out
                // for these bytes, used by nothing else until the release event.
                unsafe {
                    self.dev.copy_to_device(
                        streams::KERNELS,
                        dst,
                        staging.lease.ptr(from),
                        px.len(),
                    )?
                };
                placed.push((k, dst));
                at = (at + px.len()).next_multiple_of(ALIGN);
            }
            for (k, dst) in placed {
                set_host_decoded(&mut entries[k], dst);
            }
        }
        // 2. The engines' chroma, rebuilt.
        if !chroma.is_empty() {
            let rebuilt = self.rebuild_chroma(&mut entries, &chroma, &mut staging)?;
            keep.extend(rebuilt);
        }
        // 3. The chain (and the jitter), into the output.
        let mut dev_descs = self.pools.descs.take(desc_len, streams::KERNELS, &|| {
            format!("the descriptors of a batch of {n} samples")
        })?;
        let put_desc =
            |staging: &mut Staging<'_>, at: &mut usize, bytes: &[u8]| -> Result<DevicePtr, Error> {
                let from = staging.put(bytes);
                let dst = dev_descs.ptr() + *at as u64;
                // SAFETY: the lease's bytes were just written and stay until its done event;
                // `dst..dst + len` lies in `dev_descs` (sized for every descriptor and table),
                // kept until the release event.
                unsafe {
                    self.dev.copy_to_device(
                        streams::KERNELS,
                        dst,
                        staging.lease.ptr(from),
                        bytes.len().max(1),
                    )?
                };
                *at = (*at + bytes.len()).next_multiple_of(ALIGN);
                Ok(dst)
            };
        let mut desc_at = 0usize;
        let mut mid: Option<DeviceBuffer> = None;
        if !chain.is_empty() {
            for (d, &k) in descs.0.iter_mut().zip(&chain) {
                d.src = source_ptr(&entries[k])?;
            }
            if let Some(st) = &stages {
                let mut mid_len = 0;
                let mut mid_at = Vec::with_capacity(st.geometry.len());
                for s in &st.geometry {
                    let (h, w) = s.output_size();
                    mid_at.push(mid_len);
                    mid_len = (mid_len + h * w * 3).next_multiple_of(ALIGN);
                }
                let m = self.pools.jitter.take(mid_len, streams::KERNELS, &|| {
                    format!("the color-jittered images of a batch of {n} samples")
                })?;
                for (((d, j), r), at) in descs
                    .0
                    .iter_mut()
                    .zip(descs.2.iter_mut())
                    .zip(descs.1.iter_mut())
                    .zip(&mid_at)
                {
                    d.dst = m.ptr() + *at as u64;
                    j.data = d.dst;
                    r.src = d.dst;
                }
                for (r, &k) in descs.1.iter_mut().zip(&chain) {
                    r.dst = out.ptr() + out_layout.offsets[k] as u64;
                }
                mid = Some(m);
            } else {
                for (d, &k) in descs.0.iter_mut().zip(&chain) {
                    d.dst = out.ptr() + out_layout.offsets[k] as u64;
                }
            }
            let d = put_desc(&mut staging, &mut desc_at, as_bytes(&descs.0))?;
            let t = put_desc(&mut staging, &mut desc_at, as_bytes(&tables.0))?;
            let geometry = stages.as_ref().map_or(&fused, |s| &s.geometry);
            let args = [
                KernelArg::Ptr(d),
                KernelArg::Ptr(t),
                KernelArg::U32(descs.0.len() as u32),
            ];
            // SAFETY: each descriptor's source is its decoded (or rebuilt) image in a
            // buffer of this batch kept until the release event, its window checked by
            // `build_desc`; its output is its place in `out` (or in `mid`), laid out for
            // its size; the tables hold its taps; all stay allocated until `ready`.
            unsafe {
                self.dev
                    .launch(streams::KERNELS, Kernel::Chain, chain_grid(geometry), &args)?
            };
            if let Some(st) = &stages {
                self.run_jitter(&descs.2, &st.rest, &mut |bytes| {
                    put_desc(&mut staging, &mut desc_at, bytes)
                })?;
                let d = put_desc(&mut staging, &mut desc_at, as_bytes(&descs.1))?;
                let t = put_desc(&mut staging, &mut desc_at, as_bytes(&tables.1))?;
                let args = [
                    KernelArg::Ptr(d),
                    KernelArg::Ptr(t),
                    KernelArg::U32(descs.1.len() as u32),
                ];
                // SAFETY: sources are the jittered images in `mid`, outputs the places in
                // `out`; all kept until `ready`.
                unsafe {
                    self.dev
                        .launch(streams::KERNELS, Kernel::Chain, chain_grid(&st.rest), &args)?
                };
            }
        }
        // 4. Samples computed on the CPU, then repeats.
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
                    out.ptr() + out_layout.offsets[k] as u64,
                    staging.lease.ptr(from),
                    px.len(),
                )?
            };
        }
        for (k, e) in entries.iter().enumerate() {
            if !matches!(e, Entry::Repeat) {
                continue;
            }
            let len = out_layout.shapes[k].iter().product::<usize>() * dtype.size();
            // SAFETY: both places lie in `out` (laid out above) and don't overlap.
            unsafe {
                self.dev.copy_on_device(
                    streams::KERNELS,
                    out.ptr() + out_layout.offsets[k] as u64,
                    out.ptr() + out_layout.offsets[k - 1] as u64,
                    len,
                )?
            };
        }
        let ready = self.dev.record(streams::KERNELS, true)?;
        staging.lease.done_at(ready.clone());
        dev_descs.used_until(ready.clone());
        for b in keep
            .iter_mut()
            .chain(areas.iter_mut())
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
        Ok(DeviceTensor::new(
            out,
            dtype,
            layout,
            out_layout.shapes,
            ready,
            self.streams.clone(),
        ))
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

    /// The samples whose chroma is rebuilt, by place, with their descriptors (addresses
    /// left 0).
    fn chroma_plan(&self, entries: &[Entry]) -> Vec<(usize, ChromaDesc)> {
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
    fn rebuild_chroma(
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
        for (kernel, grid) in [
            (Kernel::ChromaResolve, element_grid(max_blocks, n)),
            (Kernel::ChromaGuess, element_grid(max_blocks, n)),
            (Kernel::ChromaUpsample, element_grid(max_pixels, n)),
        ] {
            // SAFETY: each descriptor's source is the engines' output in a decode area of
            // this batch, its output and planes in `images` and `planes` (sized by
            // `ChromaDesc::plane_bytes` and pitch × height), all kept until the release
            // event; the region lies inside the image (the decoder's plan).
            unsafe { self.dev.launch(streams::KERNELS, kernel, grid, &args)? };
        }
        Ok(vec![images, planes])
    }

    /// The jitter between the chain's two launches: a luma sum where contrast needs it, then
    /// each step, for `jitter` (one per sample, in place on the u8 images).
    fn run_jitter(
        &self,
        jitter: &[JitterDesc],
        rest: &[FusedSample],
        put: &mut dyn FnMut(&[u8]) -> Result<DevicePtr, Error>,
    ) -> Result<(), Error> {
        let n = jitter.len();
        let jd = put(as_bytes(jitter))?;
        let sums = put(&vec![0u8; 8 * n])?;
        let g = chain_grid(rest);
        for step in 0..4u32 {
            let args = [
                KernelArg::Ptr(jd),
                KernelArg::U32(n as u32),
                KernelArg::U32(step),
                KernelArg::Ptr(sums),
            ];
            let contrast = jitter
                .iter()
                .any(|d| d.enabled & 2 != 0 && (d.order >> (8 * step)) & 255 == 1);
            if contrast {
                // SAFETY: each jitter descriptor covers its u8 RGB image in the batch's
                // jitter buffer; `sums` one u64 per sample (uploaded as zeros); all kept
                // until the release event.
                unsafe {
                    self.dev
                        .launch(streams::KERNELS, Kernel::JitterLumaSum, g, &args)?
                };
            }
            // SAFETY: as above.
            unsafe {
                self.dev
                    .launch(streams::KERNELS, Kernel::JitterStep, g, &args)?
            };
        }
        Ok(())
    }
}

/// The samples decoded on the CPU (by place), whose pixels go up with the batch.
fn host_images(entries: &[Entry]) -> Vec<usize> {
    (0..entries.len())
        .filter(|&k| host_image(&entries[k]).is_some())
        .collect()
}

/// The pixels of a sample decoded on the CPU and not uploaded yet.
fn host_image(e: &Entry) -> Option<&Image> {
    match e {
        Entry::Sample {
            prepared:
                Prepared::Chain {
                    source: Source::Host { image, .. },
                    ..
                },
            decoded: None,
        } => Some(image),
        _ => None,
    }
}

/// The dimensions the chain reads a sample's source with (decoded on the device, or on the
/// CPU and uploaded with the batch).
fn decoded_dims(e: &Entry) -> Result<SourceDims, Error> {
    match e {
        Entry::Sample {
            decoded: Some(d), ..
        } => Ok(d.dims),
        Entry::Sample {
            prepared:
                Prepared::Chain {
                    source: Source::Host { image, .. },
                    ..
                },
            ..
        } => Ok(SourceDims {
            height: image.height,
            width: image.width,
            channels: image.channels,
            pitch: image.width * image.channels,
        }),
        other => Err(Error::Cuda(format!(
            "a sample was launched before its decode: {other:?}"
        ))),
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

/// The address the chain reads a sample from.
fn source_ptr(e: &Entry) -> Result<DevicePtr, Error> {
    match e {
        Entry::Sample {
            decoded: Some(d), ..
        } => Ok(d.ptr),
        _ => Err(Error::Cuda(
            "a sample was launched before its decode".into(),
        )),
    }
}
