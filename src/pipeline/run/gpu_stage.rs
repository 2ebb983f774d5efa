//! The GPU stage: the device side of the GPU path, driven by the assembler's thread. A batch's
//! prepared samples ([`DeviceFill`]) are decoded in one submission on the decode stream
//! (`gpu_decode`), then the fused chain runs once over the batch on the kernel stream
//! (here), into a pooled output buffer handed to the consumer as a [`DeviceTensor`].
//!
//! # Streams, events, overlap
//!
//! ```text
//! host (assembler)  ─ fill N ─ submit N, upload, finish N ─ launch N ─ fill N+1 ─ submit N+1 …
//! decode stream              [decode N][uploads N]                             [decode N+1]…
//! kernel stream                           wait(decoded N) [chain N]──────────────── wait [chain N+1]
//! consumer                        uses N−1 ……………………………………………… uses N ……………
//! ```
//! The host waits once per batch, at its decodes' fence (nvJPEG reports some errors only
//! then, and a failed image is decoded again on the CPU before the batch is launched); the
//! kernels of batch N run while batch N+1 is decoded, and the consumer uses batch N−1
//! meanwhile. No host synchronisation per image, none on the uploads or the kernels. Every
//! buffer returns to the pool with its release events (see [`crate::cuda::pool`]).
//!
//! # Memory bound
//!
//! With `B` = batch size, `prefetch` = the batch queue's length:
//! ```text
//! device ≤ (prefetch + 2) × out_batch          queued, held by the consumer, being written
//!        + 2 × decoded_batch                   decoded for the kernels of N, and for N+1
//!        + 2 × jitter_batch (with color jitter) u8 images between the jitter's launches
//!        + 2 × (descriptors + tap tables)      < 1 MB for B = 256
//!        + up to MAX_IDLE idle pool buffers    reused before anything is allocated
//!        + nvJPEG's own buffers                from its caches, bounded by its ring slots
//! pinned ≤ 2 × CPU-decoded pixels of a batch   (the staging ring here)
//!        + 2 × (descriptors + tap tables + samples computed on the CPU)
//!        + ring_depth × encoded bytes of a batch (nvJPEG's staging ring; 2 by default)
//! ```
//! where `out_batch` = B × output sample bytes, `decoded_batch` = Σ over the batch of
//! 3 × (the region the decoder writes, in pixels: the crop window's region of interest, an
//! MCU wider on each side where the decoder pads ROIs, or the whole image without a crop),
//! and `jitter_batch` = B × output height × width × 3. A consumer that keeps batches keeps
//! their memory too.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use crate::cuda::chain::launcher::JitterStages;
use crate::cuda::chain::{build_desc, FusedSample, SourceDims};
use crate::cuda::desc::{as_bytes, FusedDesc, JitterDesc};
use crate::cuda::gpu_device::{streams, DevicePtr, Event, GpuDevice, Grid, Kernel, KernelArg};
use crate::cuda::pool::{DeviceBuffer, DevicePool, PinnedLease, PinnedRing};
use crate::error::Error;
use crate::image::{Image, Layout};
use crate::pipeline::device_tensor::{ConsumerStreams, DeviceTensor};

use super::gpu_plan::{GpuPlan, Prepared};
use super::stats::Stats;

/// Byte alignment of each image in a decode area and each sample in an output.
pub(super) const ALIGN: usize = 256;

/// The device side of the GPU path (one per pipeline).
pub(crate) struct GpuStage {
    pub(super) dev: Arc<dyn GpuDevice>,
    pub(super) pool: Arc<DevicePool>,
    /// Pixels decoded on the CPU, for the decode stream (the device's decoder stages the
    /// encoded bytes itself).
    pub(super) staging: Mutex<PinnedRing>,
    /// Descriptors, tap tables and samples computed on the CPU, for the kernel stream.
    uploads: Mutex<PinnedRing>,
    streams: Arc<ConsumerStreams>,
    pub(super) plan: Arc<GpuPlan>,
    pub(super) stats: Arc<Stats>,
    pub(super) batch: usize,
    /// Timing events not read yet: (kernels?, start, end).
    pub(super) timings: Mutex<VecDeque<(bool, Event, Event)>>,
}

impl std::fmt::Debug for GpuStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuStage").field("dev", &self.dev).finish()
    }
}

/// Where a resolved sample's source is: `dims` at `ptr` in one of the fill's areas.
#[derive(Debug, Clone, Copy)]
pub(super) struct Decoded {
    pub(super) ptr: DevicePtr,
    pub(super) dims: SourceDims,
}

// Repeats are rare and a batch's entries few: no point boxing the samples.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(super) enum Entry {
    Sample {
        prepared: Prepared,
        decoded: Option<Decoded>,
    },
    /// A repeat of the entry before (`last_batch = "pad"`).
    Repeat,
}

/// The image output of the batch being filled, on the GPU path: the samples in batch order,
/// decoded (resolved) a batch at a time.
#[derive(Debug, Default)]
pub(crate) struct DeviceFill {
    pub(super) entries: Vec<Entry>,
    pub(super) areas: Vec<DeviceBuffer>,
    /// Events the kernels wait for (the decodes).
    pub(super) decoded_at: Vec<Event>,
}

impl DeviceFill {
    /// Appends a prepared sample.
    pub(crate) fn push(&mut self, p: Box<Prepared>) {
        self.entries.push(Entry::Sample {
            prepared: *p,
            decoded: None,
        });
    }

    /// Appends a repeat of the last sample.
    pub(crate) fn repeat_last(&mut self) {
        self.entries.push(Entry::Repeat);
    }

    /// Removes sample `i` (a sample whose decode failed late).
    pub(crate) fn remove(&mut self, i: usize) {
        self.entries.remove(i);
    }
}

impl GpuStage {
    pub(crate) fn new(
        dev: Arc<dyn GpuDevice>,
        plan: Arc<GpuPlan>,
        stats: Arc<Stats>,
        batch: usize,
    ) -> GpuStage {
        GpuStage {
            pool: DevicePool::new(dev.clone()),
            staging: Mutex::new(PinnedRing::new(dev.clone(), 2)),
            uploads: Mutex::new(PinnedRing::new(dev.clone(), 2)),
            streams: ConsumerStreams::new(dev.clone()),
            dev,
            plan,
            stats,
            batch,
            timings: Mutex::new(VecDeque::new()),
        }
    }

    /// The device.
    pub(crate) fn device(&self) -> &Arc<dyn GpuDevice> {
        &self.dev
    }

    /// Idle buffers in the device pool.
    pub(crate) fn idle_buffers(&self) -> usize {
        self.pool.idle_count()
    }

    /// Adds the device time of finished work to the statistics (all of it with `wait`).
    pub(crate) fn read_timings(&self, wait: bool) {
        let mut t = self.timings.lock().unwrap_or_else(|p| p.into_inner());
        while let Some((kernels, start, end)) = t.front() {
            if !wait && !self.dev.is_complete(end).unwrap_or(true) {
                break;
            }
            if let Ok(d) = self.dev.elapsed(start, end) {
                let counter = if *kernels {
                    &self.stats.gpu_kernels_ns
                } else {
                    &self.stats.gpu_decode_ns
                };
                counter.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
            }
            t.pop_front();
        }
        if let Ok(mut m) = self.stats.gpu_memory.lock() {
            *m = Some(self.dev.memory());
        }
    }

    /// Launches the chain over the batch of `fill` (resolved) into a pooled output buffer.
    pub(crate) fn launch(&self, fill: DeviceFill) -> Result<DeviceTensor, Error> {
        let (dtype, layout) = (self.plan.dtype, self.plan.layout);
        let DeviceFill {
            entries,
            mut areas,
            decoded_at,
        } = fill;
        // Output placement, and what each place gets.
        let mut shapes = Vec::with_capacity(entries.len());
        let mut offsets = Vec::with_capacity(entries.len());
        let mut chain: Vec<(usize, Decoded, FusedSample)> = Vec::new();
        let mut finished: Vec<(usize, &Image)> = Vec::new();
        let mut repeats = Vec::new();
        let mut out_len = 0usize;
        for (k, e) in entries.iter().enumerate() {
            let (h, w, c) = match e {
                Entry::Sample {
                    prepared: Prepared::Chain { fused, .. },
                    decoded: Some(d),
                } => {
                    let (h, w) = fused.output_size();
                    chain.push((k, *d, *fused));
                    (h, w, d.dims.channels)
                }
                Entry::Sample {
                    prepared: Prepared::Finished { image, .. },
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
                    finished.push((k, image));
                    (image.height, image.width, image.channels)
                }
                Entry::Repeat => {
                    repeats.push(k);
                    let prev: [usize; 3] = *shapes
                        .last()
                        .ok_or_else(|| Error::Cuda("a repeat with no sample before it".into()))?;
                    shapes.push(prev);
                    offsets.push(out_len);
                    out_len += prev.iter().product::<usize>() * dtype.size();
                    continue;
                }
                Entry::Sample { decoded: None, .. } => {
                    return Err(Error::Cuda(
                        "a sample was launched before its decode".into(),
                    ))
                }
            };
            shapes.push(match layout {
                Layout::Hwc => [h, w, c],
                Layout::Chw => [c, h, w],
            });
            offsets.push(out_len);
            out_len += h * w * c * dtype.size();
        }
        let n = entries.len();
        let batch = self.batch;
        let mut out = self.pool.take(out_len, streams::KERNELS, &|| {
            format!("the output of a batch of {n} samples (batch = {batch})")
        })?;
        for e in &decoded_at {
            self.dev.wait(streams::KERNELS, e)?;
        }
        let start = self.dev.record(streams::KERNELS, true)?;
        let mut keep: Vec<DeviceBuffer> = Vec::new();
        let mut uploads = self.uploads.lock().unwrap_or_else(|p| p.into_inner());
        let upload_len = chain.len() * 2 * std::mem::size_of::<FusedDesc>()
            + chain.len() * std::mem::size_of::<JitterDesc>()
            + finished
                .iter()
                .map(|(_, im)| im.pixels.as_bytes().len())
                .sum::<usize>()
            + 64 * ALIGN;
        // Tap tables vary in size: staged after the fixed parts, the lease grown for them.
        let fused: Vec<FusedSample> = chain.iter().map(|c| c.2).collect();
        let stages = JitterStages::of(&fused);
        let geometry_samples = stages.as_ref().map_or(&fused, |s| &s.geometry);
        let mut table = Vec::new();
        let mut descs = Vec::with_capacity(chain.len());
        for (c, s) in chain.iter().zip(geometry_samples) {
            descs.push(build_desc(c.1.dims, s, &mut table)?);
            descs.last_mut().expect("pushed").src = c.1.ptr;
        }
        let mut rest_descs = Vec::new();
        let mut rest_table = Vec::new();
        let mut jitter_descs = Vec::new();
        let mut mid: Option<DeviceBuffer> = None;
        if let Some(st) = &stages {
            // Geometry into u8 HWC images, jitter in place, then the rest into the output.
            let mut mid_len = 0;
            let mut mid_at = Vec::new();
            for s in &st.geometry {
                let (h, w) = s.output_size();
                mid_at.push((mid_len, h, w));
                mid_len = (mid_len + h * w * 3).next_multiple_of(ALIGN);
            }
            let m = self.pool.take(mid_len, streams::KERNELS, &|| {
                format!("the color-jittered images of a batch of {n} samples")
            })?;
            for ((d, &(at, h, w)), (j, r)) in descs
                .iter_mut()
                .zip(&mid_at)
                .zip(st.jitter.iter().zip(&st.rest))
            {
                d.dst = m.ptr() + at as u64;
                let mut jd = j.desc(h * w)?;
                jd.data = d.dst;
                jitter_descs.push(jd);
                let dims = SourceDims {
                    height: h,
                    width: w,
                    channels: 3,
                    pitch: w * 3,
                };
                let mut rd = build_desc(dims, r, &mut rest_table)?;
                rd.src = d.dst;
                rest_descs.push(rd);
            }
            mid = Some(m);
        }
        // Outputs of the last chain launch.
        {
            let last = if stages.is_some() {
                &mut rest_descs
            } else {
                &mut descs
            };
            for (d, c) in last.iter_mut().zip(&chain) {
                d.dst = out.ptr() + offsets[c.0] as u64;
            }
        }
        if table.is_empty() {
            table.push(0);
        }
        if rest_table.is_empty() {
            rest_table.push(0);
        }
        let total = upload_len + 4 * (table.len() + rest_table.len()) + 4 * ALIGN;
        let mut lease = uploads.lease(total, streams::KERNELS)?;
        let mut at = 0usize;
        let device_copy = |lease: &mut PinnedLease<'_>,
                           keep: &mut Vec<DeviceBuffer>,
                           from: usize,
                           to_len: usize|
         -> Result<DevicePtr, Error> {
            let b = self.pool.take(to_len, streams::KERNELS, &|| {
                format!("the descriptors of a batch of {n} samples")
            })?;
            let ptr = b.ptr();
            // SAFETY: `from..from + to_len` of the lease was just written and stays untouched
            // until the lease's done event; `b` holds `to_len` bytes, kept until that event.
            unsafe {
                self.dev
                    .copy_to_device(streams::KERNELS, ptr, lease.ptr(from), to_len)?
            };
            keep.push(b);
            Ok(ptr)
        };
        let mut upload = |lease: &mut PinnedLease<'_>,
                          keep: &mut Vec<DeviceBuffer>,
                          bytes: &[u8]|
         -> Result<DevicePtr, Error> {
            lease.bytes()[at..at + bytes.len()].copy_from_slice(bytes);
            let ptr = device_copy(lease, keep, at, bytes.len().max(1))?;
            at = (at + bytes.len()).next_multiple_of(ALIGN);
            Ok(ptr)
        };
        let grid = |samples: &[FusedSample]| Grid {
            blocks: samples
                .iter()
                .map(|s| {
                    let (h, w) = s.output_size();
                    (h * w) as u64
                })
                .max()
                .unwrap_or(1)
                .div_ceil(256)
                .clamp(1, 1 << 16) as u32,
            samples: samples.len() as u32,
        };
        if !chain.is_empty() {
            let d = upload(&mut lease, &mut keep, as_bytes(&descs))?;
            let t = upload(&mut lease, &mut keep, as_bytes(&table))?;
            let args = [
                KernelArg::Ptr(d),
                KernelArg::Ptr(t),
                KernelArg::U32(descs.len() as u32),
            ];
            // SAFETY: each descriptor's source is its decoded image in an area of this fill
            // (kept until the release event below), its window checked inside by
            // `build_desc`; its output is its place in `out` (or in `mid`), laid out for
            // its size; the tables hold its taps; all stay allocated until `ready`.
            unsafe {
                self.dev.launch(
                    streams::KERNELS,
                    Kernel::Chain,
                    grid(geometry_samples),
                    &args,
                )?
            };
            if let Some(st) = &stages {
                let jd = upload(&mut lease, &mut keep, as_bytes(&jitter_descs))?;
                let sums = self.pool.take(8 * chain.len(), streams::KERNELS, &|| {
                    "the luma sums of a batch".into()
                })?;
                // SAFETY: `sums` holds 8 bytes per sample, kept until `ready`.
                unsafe {
                    self.dev
                        .zero(streams::KERNELS, sums.ptr(), 8 * chain.len())?
                };
                let g = grid(&st.rest);
                for step in 0..4u32 {
                    let args = [
                        KernelArg::Ptr(jd),
                        KernelArg::U32(chain.len() as u32),
                        KernelArg::U32(step),
                        KernelArg::Ptr(sums.ptr()),
                    ];
                    let contrast = jitter_descs
                        .iter()
                        .any(|d| d.enabled & 2 != 0 && (d.order >> (8 * step)) & 255 == 1);
                    if contrast {
                        // SAFETY: each jitter descriptor covers its u8 RGB image in `mid`;
                        // `sums` one u64 per sample; kept until `ready`.
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
                keep.push(sums);
                let d = upload(&mut lease, &mut keep, as_bytes(&rest_descs))?;
                let t = upload(&mut lease, &mut keep, as_bytes(&rest_table))?;
                let args = [
                    KernelArg::Ptr(d),
                    KernelArg::Ptr(t),
                    KernelArg::U32(rest_descs.len() as u32),
                ];
                // SAFETY: sources are the jittered images in `mid`, outputs the places in
                // `out`; all kept until `ready`.
                unsafe {
                    self.dev
                        .launch(streams::KERNELS, Kernel::Chain, grid(&st.rest), &args)?
                };
            }
        }
        for (k, im) in &finished {
            let px = im.pixels.as_bytes();
            lease.bytes()[at..at + px.len()].copy_from_slice(px);
            // SAFETY: the staged pixels stay in the lease until its done event; the place in
            // `out` is laid out for exactly these bytes.
            unsafe {
                self.dev.copy_to_device(
                    streams::KERNELS,
                    out.ptr() + offsets[*k] as u64,
                    lease.ptr(at),
                    px.len(),
                )?
            };
            at = (at + px.len()).next_multiple_of(ALIGN);
        }
        for &k in &repeats {
            let len = shapes[k].iter().product::<usize>() * dtype.size();
            // SAFETY: both places lie in `out` (laid out above) and don't overlap.
            unsafe {
                self.dev.copy_on_device(
                    streams::KERNELS,
                    out.ptr() + offsets[k] as u64,
                    out.ptr() + offsets[k - 1] as u64,
                    len,
                )?
            };
        }
        let ready = self.dev.record(streams::KERNELS, true)?;
        lease.done_at(ready.clone());
        drop(uploads);
        for b in keep
            .iter_mut()
            .chain(areas.iter_mut())
            .chain(mid.iter_mut())
        {
            b.used_until(ready.clone());
        }
        out.used_until(ready.clone());
        self.timings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back((true, start, ready.clone()));
        self.read_timings(false);
        Ok(DeviceTensor::new(
            out,
            dtype,
            layout,
            shapes,
            ready,
            self.streams.clone(),
        ))
    }
}
