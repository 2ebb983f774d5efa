//! The batched decoder: nvJPEG's hardware and CUDA decoders behind one call per batch, every
//! image routed on the host first from the header the caller already read.
//!
//! # Which nvJPEG decoder decodes what
//!
//! [`BatchDecoder`] holds up to two handles:
//! - a **hardware** handle (`NVJPEG_BACKEND_HARDWARE`, the JPEG engines of A100/H100/H200),
//!   created when [`BackendPreference`] allows it and `nvjpegCreateExV2` accepts it; it decodes
//!   the images [`route_header`] sends to [`GpuRoute::Hardware`] *and* that
//!   `nvjpegDecodeBatchedSupportedEx` accepts, in one `nvjpegDecodeBatchedEx` call
//!   (`hardware.rs`);
//! - a **default** handle with the two decoupled decoders, which decode everything else one
//!   image at a time (`decoupled.rs`).
//!
//! If the batched call fails, its images go the decoupled way, so one bad image fails alone.
//!
//! # Submitted is not decoded
//!
//! [`BatchDecoder::submit`] only queues work. The images are decoded when
//! [`BatchDecoder::finish`] says so, after the batch's fence: errors that show only then (a
//! bitstream the engines choke on, a failed kernel) turn the batch's images into
//! [`FallbackReason::NvjpegFailed`] (decode them on the CPU), and a lost CUDA context is a
//! fatal error for the whole pipeline ([`NvjpegError::is_fatal`]).
//!
//! # Memory
//!
//! Bounded and allocated once: the encoded bytes of each batch in flight are copied into a
//! pinned block of the staging ring (`ring.rs`, `ring_depth` blocks), the decoupled path has
//! `decoupled_slots` sets of buffers, and everything nvJPEG allocates itself comes from our
//! caches (`alloc.rs`), never from `cudaMalloc`/`cudaFree` in the middle of a run.

use std::ffi::c_void;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::super::fallback::{classify, route_header, FallbackReason, GpuRoute, JpegFacts, Route};
use super::super::result::{Nvjpeg, NvjpegError};
use super::super::sys;
use super::alloc::{Allocators, CacheStats};
use super::context::{Fence, GpuContext};
use super::decoupled::Decoupled;
use super::handle::{DecodedInfo, DeviceOutput, Handle, NvjpegImageInfo, Roi};
use super::hardware::{Hardware, HwImage, HwSlot, SupportChecks};
use super::ring::StagingRing;
use super::roi::{decode_region, needs_margin, DecodeRegion};
use crate::decode::{JpegHeader, Limits};

pub use super::decoupled::GPU_HYBRID_MIN_PIXELS;

/// Which nvJPEG backend to use for the batched path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BackendPreference {
    /// The JPEG engines when `nvjpegCreateExV2` accepts `NVJPEG_BACKEND_HARDWARE`, else the
    /// CUDA decoders only.
    #[default]
    Auto,
    /// The JPEG engines, or an error.
    Hardware,
    /// The CUDA decoders only (no hardware handle).
    Hybrid,
}

/// How a [`BatchDecoder`] is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecoderConfig {
    /// Most images per [`BatchDecoder::submit`] (1..=2^31-1).
    pub max_batch: usize,
    /// Backend preference.
    pub backend: BackendPreference,
    /// Batches in flight (staging-ring slots, each with its own hardware state).
    pub ring_depth: usize,
    /// Images in flight on the decoupled path.
    pub decoupled_slots: usize,
    /// (width, height) the hardware states are allocated for up front
    /// (`nvjpegDecodeBatchedPreAllocate`); larger images grow them.
    pub preallocate: (usize, usize),
    /// Chroma interpolated as libjpeg does (`NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION`, a
    /// third of the engines' speed on the host); else repeated over each block. Default: on,
    /// unless `STOKEHOLD_CHROMA_REBUILD=1` ([`super::chroma_rebuild_enabled`]).
    pub interpolate: bool,
}

impl Default for DecoderConfig {
    fn default() -> Self {
        DecoderConfig {
            max_batch: 256,
            backend: BackendPreference::Auto,
            ring_depth: 2,
            decoupled_slots: 4,
            preallocate: (512, 512),
            interpolate: !super::chroma_rebuild_enabled(),
        }
    }
}

/// One image to decode.
#[derive(Debug, Clone, Copy)]
pub struct EncodedImage<'a> {
    /// The encoded file (copied before [`BatchDecoder::submit`] returns).
    pub bytes: &'a [u8],
    /// Its header, read once for the sample (to EOI, with the pipeline's limits).
    pub header: &'a JpegHeader,
    /// The region wanted (stored coordinates), or the whole image.
    pub roi: Option<Roi>,
    /// Decode a subsampled image's region an MCU wider on every side, for a caller that
    /// rebuilds interpolated chroma from repeated chroma ([`needs_margin`]); what
    /// [`BatchDecoder::region_to_decode`] assumes without interpolation.
    pub chroma_margin: bool,
    /// Where it goes: interleaved RGB, sized by [`BatchDecoder::region_to_decode`].
    pub output: DeviceOutput,
    /// The caller asked [`SupportChecks::accepts`] (for this region) and the engines take
    /// it: `submit` does not ask again on its thread.
    pub engines_checked: bool,
    /// `bytes` are pinned host memory, handed to nvJPEG in place instead of copied into the
    /// staging ring: the caller must then keep them alive and unchanged until the host has
    /// seen this batch's fence complete ([`BatchDecoder::submit`]'s safety contract).
    pub pinned: bool,
}

/// Where the submitting thread's time inside [`BatchDecoder::submit`] went, summed since the
/// decoder was made: the JPEG engines are fed by one thread, so these phases bound their
/// rate (`docs/gpu.md`, The engines' feeding thread).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeedTimes {
    /// Calls to `submit`.
    pub calls: u64,
    /// Images queued for the engines in one batched call.
    pub engine_images: u64,
    /// Waiting for a staging slot's previous batch to be decoded (the host reuses its
    /// pinned copy and nvJPEG state only then).
    pub slot_wait: Duration,
    /// Copying the encoded bytes into the slot's pinned block.
    pub staging: Duration,
    /// Images whose bytes the caller had in pinned memory already (read in place, not
    /// copied: [`EncodedImage::pinned`]).
    pub pinned_images: u64,
    /// nvJPEG's per-image support checks (`nvjpegJpegStreamParseHeader` and
    /// `nvjpegDecodeBatchedSupportedEx`) of images the caller did not check before.
    pub checks: Duration,
    /// `nvjpegDecodeBatchedInitialize` and `nvjpegDecodeBatchedEx`: nvJPEG's own host work
    /// for the engines (it parses every image again).
    pub engines_call: Duration,
    /// Images decoded one by one (the decoupled decoders).
    pub decoupled: Duration,
}

/// A batch queued by [`BatchDecoder::submit`]; [`BatchDecoder::finish`] says how it went.
#[derive(Debug)]
#[must_use = "a submitted batch is decoded only once `finish` says so"]
pub struct Submitted {
    /// Done once every image's GPU work has run; `None` when nothing went to the GPU.
    fence: Option<Arc<dyn Fence>>,
    /// Per image: what was queued (`Ok`), or why it is not decoded on the GPU.
    results: Vec<Result<DecodedInfo, NvjpegError>>,
}

impl Submitted {
    /// Whether the GPU work is done (never blocks); `finish` then returns at once.
    pub fn is_done(&self) -> Result<bool, NvjpegError> {
        self.fence.as_ref().map_or(Ok(true), |f| f.is_done())
    }

    /// The fence of the batch's GPU work, for ordering other work after it.
    pub fn fence(&self) -> Option<&Arc<dyn Fence>> {
        self.fence.as_ref()
    }

    /// Per image, what was queued or why not, without waiting for the work: for a caller
    /// that orders its own work after the batch on the stream (the decoder keeps what the
    /// work reads until its fence). A failure of the queued work is then a fault of the
    /// context, which later calls report.
    pub fn into_results(self) -> Vec<Result<DecodedInfo, NvjpegError>> {
        self.results
    }
}

/// A batched JPEG decoder writing interleaved RGB into caller-provided device buffers, bound
/// to one CUDA context. One per thread at a time (nvJPEG states and buffers are per thread);
/// it may move between threads, since it makes its context current before every call.
pub struct BatchDecoder {
    // Field order is drop order, after `Drop::drop` has waited for all work.
    ring: StagingRing<Option<HwSlot>>,
    decoupled: Decoupled,
    hardware: Option<Hardware>,
    default: Arc<Handle>,
    memory: Arc<Allocators>,
    ctx: Arc<dyn GpuContext>,
    config: DecoderConfig,
    pad_roi: bool,
    /// Whether its handles interpolate chroma (libjpeg's fancy upsampling).
    interpolated: bool,
    limits: Limits,
    /// Set when a batch's fence could not be recorded: its work can't be known done, so the
    /// staging memory can't be reused safely, and the decoder refuses further batches.
    broken: Option<NvjpegError>,
    /// The submitting thread's time, by phase.
    feed: FeedTimes,
}

impl std::fmt::Debug for BatchDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchDecoder")
            .field("hardware", &self.hardware.is_some())
            .field("decoupled", &self.decoupled)
            .field("config", &self.config)
            .field("pad_roi", &self.pad_roi)
            .finish()
    }
}

/// An image on its way through `submit`.
struct Job {
    index: usize,
    facts: JpegFacts,
    region: DecodeRegion,
    dest: sys::nvjpegImage_t,
    route: GpuRoute,
}

impl BatchDecoder {
    /// Creates the handles, decoders, slots and ring in `ctx` (made current here).
    /// Checks that every function it needs is in the library first.
    pub fn new(
        lib: Arc<Nvjpeg>,
        ctx: Arc<dyn GpuContext>,
        config: DecoderConfig,
    ) -> Result<Self, NvjpegError> {
        let max_batch = config.max_batch;
        if max_batch == 0 || i32::try_from(max_batch).is_err() {
            return Err(NvjpegError::InvalidArgument(format!(
                "max_batch must be 1..=2^31-1, got {max_batch}"
            )));
        }
        if let Some(symbol) = lib.missing_symbols().first() {
            return Err(NvjpegError::MissingSymbol { symbol });
        }
        ctx.bind()?;
        let memory = Allocators::new(ctx.clone());
        let hardware = match config.backend {
            BackendPreference::Hybrid => None,
            pref => match Hardware::new(&lib, &ctx, &memory, config.interpolate) {
                Ok(hw) => Some(hw),
                Err(e) if pref == BackendPreference::Hardware => return Err(e),
                Err(e) => {
                    tracing::info!(
                        "nvJPEG hardware backend unavailable ({e}); using CUDA decoders"
                    );
                    None
                }
            },
        };
        let default = Handle::new(
            lib.clone(),
            sys::NVJPEG_BACKEND_DEFAULT,
            memory.clone(),
            config.interpolate,
        )?;
        let decoupled = Decoupled::new(&default, config.decoupled_slots)?;
        let payloads = (0..config.ring_depth.max(1))
            .map(|_| {
                hardware
                    .as_ref()
                    .map(|hw| hw.slot(max_batch, config.preallocate))
                    .transpose()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let interpolated = default.interpolated_upsampling()
            || hardware
                .as_ref()
                .is_some_and(|hw| hw.handle().interpolated_upsampling());
        Ok(BatchDecoder {
            ring: StagingRing::new(memory.clone(), payloads),
            decoupled,
            hardware,
            // The bug is known with interpolated chroma; padding costs the engines an MCU
            // around the region and the host nothing (its time is the stream's parse), so
            // repeated chroma is padded on those libraries too rather than trusted untried.
            pad_roi: lib.roi_boundary_bug(),
            interpolated,
            default,
            memory,
            ctx,
            config,
            limits: Limits::default(),
            broken: None,
            feed: FeedTimes::default(),
        })
    }

    /// A decoder for another thread (a prep worker) on this decoder's default handle and
    /// context: nvJPEG's GPU-assisted Huffman decoder with states of its own
    /// ([`super::WorkerDecoder`]).
    pub fn worker_decoder(&self) -> Result<super::WorkerDecoder, NvjpegError> {
        // Its chroma must be what the rest of the batch gets (the stage rebuilds it, or not,
        // by [`Self::interpolated`]).
        if self.default.interpolated_upsampling() != self.interpolated {
            return Err(NvjpegError::InvalidArgument(
                "the CUDA decoders' chroma upsampling differs from the engines'".into(),
            ));
        }
        super::WorkerDecoder::new(&self.default, self.ctx.clone())
    }

    /// Uses `limits` (the pipeline's) in [`Self::route`].
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// How it was built.
    pub fn config(&self) -> DecoderConfig {
        self.config
    }

    /// Whether the JPEG engines are in use.
    pub fn has_hardware(&self) -> bool {
        self.hardware.is_some()
    }

    /// (engines, cores per engine), when the engines are in use.
    pub fn hardware_info(&self) -> Option<(u32, u32)> {
        self.ctx.bind().ok()?;
        self.hardware
            .as_ref()
            .and_then(|h| h.handle().hardware_info().ok())
    }

    /// Whether chroma comes out interpolated as libjpeg's (else repeated: see
    /// [`super::chroma_rebuild_enabled`]).
    pub fn interpolated(&self) -> bool {
        self.interpolated
    }

    /// The largest batch [`Self::submit`] takes.
    pub fn max_batch(&self) -> usize {
        self.config.max_batch
    }

    /// Whether ROIs are padded by an MCU (the library's ROI boundary bug; see
    /// [`decode_region`]).
    pub fn pads_roi(&self) -> bool {
        self.pad_roi
    }

    /// The engines' support checks, for the threads that prepare images (`None` without the
    /// engines): an image they accepted goes to [`Self::submit`] with
    /// [`EncodedImage::engines_checked`].
    pub fn support_checks(&self) -> Option<Arc<SupportChecks>> {
        self.hardware.as_ref().map(|hw| hw.checks().clone())
    }

    /// Where the submitting thread's time went so far.
    pub fn feed_times(&self) -> FeedTimes {
        self.feed
    }

    /// What nvJPEG's own allocations (device, pinned) have cost so far.
    pub fn memory_stats(&self) -> (CacheStats, CacheStats) {
        (self.memory.device.stats(), self.memory.pinned.stats())
    }

    /// Where `bytes` would be decoded by this decoder, reading its header with this
    /// decoder's limits (a stage that has read the header uses [`route_header`]).
    pub fn route(&self, bytes: &[u8]) -> Route {
        classify(bytes, &self.limits, self.has_hardware())
    }

    /// How an image with `header` and region `roi` is decoded: the output to allocate
    /// (`width` × `height` interleaved RGB) and the window of it that is the region asked
    /// for (see [`decode_region`]); with `chroma_margin` as [`EncodedImage::chroma_margin`]
    /// (the image is then submitted with the same).
    pub fn region_to_decode(
        &self,
        header: &JpegHeader,
        roi: Option<Roi>,
        chroma_margin: bool,
    ) -> Result<DecodeRegion, NvjpegError> {
        decode_region(
            header,
            roi,
            self.pad_roi || (chroma_margin && needs_margin(header)),
        )
    }

    /// Header facts as nvJPEG reads them (`nvjpegGetImageInfo`), for per-image checks.
    pub fn get_image_info(&self, bytes: &[u8]) -> Result<NvjpegImageInfo, NvjpegError> {
        self.ctx.bind()?;
        self.default.image_info(bytes)
    }

    /// Queues the decode of every image on `stream` and returns at once, the encoded bytes
    /// already copied (the caller's may go), but for those marked
    /// [`EncodedImage::pinned`], read in place. Per image, [`Self::finish`] then gives the
    /// decoded size, or [`NvjpegError::CpuFallback`] for an image to decode on the CPU
    /// (decided on the host first, or nvJPEG failed on it). `Err` for the whole batch: too
    /// many images (a caller error) or a lost CUDA context (fatal).
    ///
    /// # Safety
    /// - `stream` is null or a valid `CUstream`/`cudaStream_t` of this decoder's context, and
    ///   every `output` is device memory of that context, at least `len` bytes, not used by
    ///   anything else until the batch is finished (or its fence done).
    /// - The batch is finished (or its fence waited on) before the outputs are read or
    ///   freed.
    /// - The bytes of every image marked [`EncodedImage::pinned`] are pinned host memory
    ///   that stays alive and unchanged until the host has seen the batch's fence complete.
    pub unsafe fn submit(
        &mut self,
        stream: *mut c_void,
        images: &[EncodedImage<'_>],
    ) -> Result<Submitted, NvjpegError> {
        let n = images.len();
        if n > self.config.max_batch {
            return Err(NvjpegError::InvalidArgument(format!(
                "batch of {n} is over max_batch {}",
                self.config.max_batch
            )));
        }
        if let Some(e) = &self.broken {
            return Err(e.clone());
        }
        self.ctx.bind()?;
        let mut results: Vec<Option<Result<DecodedInfo, NvjpegError>>> = vec![None; n];
        let mut jobs = Vec::new();
        for (i, im) in images.iter().enumerate() {
            match self.prepare(i, im) {
                Ok(job) => jobs.push(job),
                Err(e) => results[i] = Some(Err(e)),
            }
        }
        if jobs.is_empty() {
            return Ok(Submitted {
                fence: None,
                results: results.into_iter().map(finished).collect(),
            });
        }
        self.feed.calls += 1;
        let t = Instant::now();
        let k = self.ring.begin()?;
        self.feed.slot_wait += t.elapsed();
        let t = Instant::now();
        let staged = {
            // What the caller staged in pinned memory is read in place; the rest is copied.
            let to_copy: Vec<&[u8]> = jobs
                .iter()
                .map(|j| &images[j.index])
                .filter(|im| !im.pinned)
                .map(|im| im.bytes)
                .collect();
            let copies = if to_copy.is_empty() {
                Vec::new()
            } else {
                match self.ring.stage(k, &to_copy) {
                    Ok(s) => s,
                    Err(e) if e.is_fatal() => return Err(e),
                    // No pinned memory for the copies: this batch is decoded on the CPU.
                    Err(e) => {
                        let reason = FallbackReason::NvjpegFailed(format!("staging: {e}"));
                        for job in &jobs {
                            results[job.index] =
                                Some(Err(NvjpegError::CpuFallback(reason.clone())));
                        }
                        return Ok(Submitted {
                            fence: None,
                            results: results.into_iter().map(finished).collect(),
                        });
                    }
                }
            };
            let mut copies = copies.into_iter();
            let staged: Vec<(*const u8, usize)> = jobs
                .iter()
                .map(|j| {
                    let im = &images[j.index];
                    match im.pinned {
                        true => (im.bytes.as_ptr(), im.bytes.len()),
                        false => copies.next().expect("a copy per image not pinned"),
                    }
                })
                .collect();
            self.feed.pinned_images += (jobs.len() - to_copy.len()) as u64;
            staged
        };
        self.feed.staging += t.elapsed();
        // Engines first: what they accept goes in one call; the rest, or all of it if the
        // call fails, goes the decoupled way.
        let t = Instant::now();
        let mut decoupled: Vec<usize> = Vec::new();
        let mut hw_jobs: Vec<usize> = Vec::new();
        for (j, job) in jobs.iter().enumerate() {
            let im = &images[job.index];
            let accepted = job.route == GpuRoute::Hardware
                && self.hardware.as_ref().is_some_and(|hw| {
                    im.engines_checked || hw.supports(im.bytes, job.region.decode).unwrap_or(false)
                });
            if accepted {
                hw_jobs.push(j);
            } else {
                decoupled.push(j);
            }
        }
        self.feed.checks += t.elapsed();
        let t = Instant::now();
        if !hw_jobs.is_empty() {
            let batch: Vec<HwImage> = hw_jobs
                .iter()
                .map(|&j| HwImage {
                    data: staged[j].0,
                    len: staged[j].1,
                    dest: jobs[j].dest,
                    roi: jobs[j].region.decode,
                })
                .collect();
            let queued = match (self.hardware.as_ref(), self.ring.payload_mut(k)) {
                // SAFETY: the context is current; the slot's last batch is done (`begin`);
                // the staged bytes live in the slot until its fence; the outputs per the
                // contract.
                (Some(hw), Some(slot)) => unsafe { hw.decode(slot, &batch, stream) },
                _ => Err(NvjpegError::InvalidArgument("no hardware slot".into())),
            };
            match queued {
                Ok(()) => {
                    self.feed.engine_images += hw_jobs.len() as u64;
                    for &j in &hw_jobs {
                        let job = &jobs[j];
                        results[job.index] = Some(Ok(info(job, GpuRoute::Hardware)));
                    }
                }
                Err(e) => {
                    tracing::debug!("batched hardware decode failed ({e}); decoding one by one");
                    decoupled.extend(hw_jobs);
                }
            }
        }
        self.feed.engines_call += t.elapsed();
        let t = Instant::now();
        for j in decoupled {
            let job = &mut jobs[j];
            let pixels = job.facts.width * job.facts.height;
            // SAFETY: the context is current; the staged bytes live until the batch's fence
            // (the ring slot is sealed with it below); the outputs per the contract.
            let r = unsafe {
                self.decoupled.decode(
                    self.ctx.as_ref(),
                    staged[j].0,
                    staged[j].1,
                    pixels,
                    job.region.decode,
                    &mut job.dest,
                    stream,
                )
            };
            match r {
                Err(e) if e.is_fatal() => return Err(e),
                r => results[job.index] = Some(r.map(|()| info(job, GpuRoute::Hybrid))),
            }
        }
        self.feed.decoupled += t.elapsed();
        let fence = match self.ctx.record(stream) {
            Ok(f) => f,
            Err(e) => {
                self.broken = Some(e.clone());
                return Err(e);
            }
        };
        self.ring.seal(k, fence.clone());
        Ok(Submitted {
            fence: Some(fence),
            results: results.into_iter().map(finished).collect(),
        })
    }

    /// Waits (sleeping) for a submitted batch and says, per image, how it went: the decoded
    /// size and window, or [`NvjpegError::CpuFallback`] (decode it on the CPU). The GPU work
    /// failing without losing the context sends every image of the batch that was on the
    /// GPU to the CPU ([`FallbackReason::NvjpegFailed`]); a lost context is a fatal `Err`.
    pub fn finish(
        &self,
        batch: Submitted,
    ) -> Result<Vec<Result<DecodedInfo, NvjpegError>>, NvjpegError> {
        let Some(fence) = batch.fence else {
            return Ok(batch.results);
        };
        self.ctx.bind()?;
        match fence.wait() {
            Ok(()) => Ok(batch.results),
            Err(e) if e.is_fatal() => Err(e),
            Err(e) => {
                tracing::warn!(
                    "nvJPEG batch failed on the GPU ({e}); decoding its images on the CPU"
                );
                Ok(batch
                    .results
                    .into_iter()
                    .map(|r| match r {
                        Ok(_) => Err(NvjpegError::CpuFallback(FallbackReason::NvjpegFailed(
                            e.to_string(),
                        ))),
                        other => other,
                    })
                    .collect())
            }
        }
    }

    /// [`Self::submit`] then [`Self::finish`]: decodes a batch and waits for it.
    ///
    /// # Safety
    /// As [`Self::submit`].
    pub unsafe fn decode(
        &mut self,
        stream: *mut c_void,
        images: &[EncodedImage<'_>],
    ) -> Result<Vec<Result<DecodedInfo, NvjpegError>>, NvjpegError> {
        // SAFETY: forwarded contract; `finish` waits before returning.
        let submitted = unsafe { self.submit(stream, images)? };
        self.finish(submitted)
    }

    /// Host checks for one image: route, ROI region, output size.
    fn prepare(&self, index: usize, im: &EncodedImage<'_>) -> Result<Job, NvjpegError> {
        let (route, facts) = match route_header(im.header, self.has_hardware()) {
            Route::Cpu(reason) => return Err(NvjpegError::CpuFallback(reason)),
            Route::Gpu(r, f) => (r, f),
        };
        let region = self.region_to_decode(im.header, im.roi, im.chroma_margin)?;
        output_size(region.width, region.height, None, im.output)?;
        let dest = im.output.as_image();
        Ok(Job {
            index,
            facts,
            region,
            dest,
            route,
        })
    }
}

impl Drop for BatchDecoder {
    fn drop(&mut self) {
        // Nothing may be destroyed or freed while queued work uses it, and the nvJPEG
        // objects are destroyed with their context current.
        if let Err(e) = self.ctx.bind() {
            tracing::warn!("dropping the nvJPEG decoder: {e}");
        }
        self.ring.wait_all();
        self.decoupled.wait_all();
    }
}

fn finished(r: Option<Result<DecodedInfo, NvjpegError>>) -> Result<DecodedInfo, NvjpegError> {
    r.unwrap_or(Err(NvjpegError::InvalidArgument(
        "image not processed".into(),
    )))
}

/// The size written for a `stored_w` × `stored_h` image and `roi`, after checking that the
/// ROI lies inside the image and that `out` can hold it as interleaved RGB.
pub fn output_size(
    stored_w: usize,
    stored_h: usize,
    roi: Option<Roi>,
    out: DeviceOutput,
) -> Result<(usize, usize), NvjpegError> {
    let (width, height) = match roi {
        None => (stored_w, stored_h),
        Some(r) => {
            if r.width == 0
                || r.height == 0
                || r.x.checked_add(r.width).is_none_or(|e| e > stored_w)
                || r.y.checked_add(r.height).is_none_or(|e| e > stored_h)
            {
                return Err(NvjpegError::InvalidArgument(format!(
                    "ROI {r:?} is not inside the {stored_w}x{stored_h} image"
                )));
            }
            (r.width, r.height)
        }
    };
    let row = width.checked_mul(3);
    let need = row.and_then(|row| {
        out.pitch
            .checked_mul(height.saturating_sub(1))
            .and_then(|v| v.checked_add(row))
    });
    let fits = match (row, need) {
        (Some(row), Some(need)) => out.pitch >= row && need <= out.len,
        _ => false,
    };
    if out.ptr == 0 || !fits || width == 0 || height == 0 {
        return Err(NvjpegError::InvalidArgument(format!(
            "output (address {:#x}, pitch {}, {} bytes) can't hold {width}x{height} RGB",
            out.ptr, out.pitch, out.len
        )));
    }
    Ok((width, height))
}

fn info(job: &Job, route: GpuRoute) -> DecodedInfo {
    DecodedInfo {
        width: job.region.width,
        height: job.region.height,
        window: job.region.window,
        stored_width: job.facts.width,
        stored_height: job.facts.height,
        components: job.facts.components,
        subsampling: job
            .facts
            .subsampling()
            .unwrap_or(super::super::fallback::Subsampling::S444),
        orientation: job.facts.orientation,
        roi: job.region.decode,
        route,
    }
}
