//! The GPU stage: the device side of the GPU path. A feeding thread submits the device's
//! samples to its JPEG decoder in groups as they arrive, ahead of the assembler
//! (`assembler::ahead`, `gpu_decode`); the assembler's thread, once a batch is complete, runs
//! the kernels over it on the kernel stream (here): the fancy chroma rebuilt from the JPEG
//! engines' output (`kernels/chroma.cu`), then the fused chain, into a pooled output buffer
//! handed to the consumer as a [`DeviceTensor`].
//!
//! # Streams, events, batches in flight
//!
//! ```text
//! feeding thread    submit group g … submit group g+1 …         submit group g+2 …
//! decode stream         [dec g ………]     [dec g+1 ………]             [dec g+2 …]
//! assembler         take N's samples   launch N  take N+1's samples   launch N+1
//! kernel stream                  wait(dec g) [chroma N][chain N]  wait(dec g+1) [… N+1]
//! consumer          uses N−2 …………………………… N−1 …………………………………… N ……
//! ```
//! The host never waits for work it has just queued: a group's decodes are submitted while
//! the assembler launches the batches before it, the kernels wait for them on the device, and
//! a batch goes to the consumer with its ready event before its kernels have run. A group and
//! a batch need not line up (a skipped sample moves the batch's boundary): a decode area goes
//! back to its pool once every batch that reads it is done ([`DecodeArea`]). Several batches
//! are in flight at once — decoding, in the kernels, queued for the consumer — bounded by the
//! batch queue (`prefetch`) and by the pinned upload ring, whose next slot the host waits for
//! only when every slot's batch is still on the device. Buffers come from pools that keep
//! them (with release events, waited for on the device — except the decode areas, which the
//! JPEG engines write without waiting for their stream, so the host must have seen them free:
//! `DevicePool::for_engines`), so after the first batches nothing is allocated; `--stats`
//! counts it (`allocations after warm-up`).
//!
//! # Memory bound
//!
//! With `B` = batch size, `prefetch` = the batch queue's length, `K` = the upload ring's
//! slots (batches whose kernels may be queued at once):
//! ```text
//! device ≤ (prefetch + K + 1) × out_batch        queued, held by the consumer, being written
//!        + (K + 1) × 1.5 × decoded_batch         engines' output (its chroma rebuilt in
//!                                                place) and the rebuild's scratch planes
//!        + (K + 1) × jitter_batch (with jitter)  u8 images between the jitter's launches
//!        + (K + 1) × (descriptors + tap tables)  < 1 MB for B = 256
//!        + idle pool buffers                     reused before anything is allocated
//!        + nvJPEG's own buffers                  from its caches, bounded by its ring slots
//! pinned ≤ K × (descriptors + tap tables + pixels decoded or computed on the CPU)
//!        + ring_depth × encoded bytes of a sub-batch (nvJPEG's staging ring; only of
//!          what the workers could not stage)
//!        + the staging slabs: ≤ 32 × 8 MB, as many as the warm-up filled at once
//!        + the pixel slabs (what the workers decode, uploaded in place): ≤ 64 × 16 MB,
//!          as many as the warm-up filled at once and half as many again
//! ```
//! where `out_batch` = B × output sample bytes, `decoded_batch` = Σ over the batch of
//! 3 × (the region the decoder writes, in pixels: the crop window's region of interest, an
//! MCU wider on each side for subsampled chroma, or the whole image without a crop), and
//! `jitter_batch` = B × output height × width × 3. A consumer that keeps batches keeps
//! their memory too.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use crate::cuda::gpu_device::{Event, GpuDevice};
use crate::cuda::pool::{DevicePool, PinnedLease, PinnedRing};
use crate::cuda::staging::StagedBytes;
use crate::pipeline::device_tensor::ConsumerStreams;

use super::area_sizes::AreaSizes;
pub(super) use super::gpu_decoded::{DecodeArea, Decoded, DeviceDecoded, Rebuild};
use super::gpu_plan::{GpuPlan, Prepared};
use super::gpu_split::DecoderSplit;
pub(crate) use super::gpu_staging::WorkerStaging;
use super::read_stage::{Hold, GPU_PATH_HOLD};
use super::stats::Stats;
use super::worker_gate::{WorkerGate, DECIDE_AFTER};

pub(super) use super::gpu_plan::ALIGN;

/// Slots of the pinned upload ring: batches whose kernels may be queued at once before the
/// host waits for the oldest (see the module docs).
pub(super) const UPLOAD_SLOTS: usize = 4;

/// The warm-up is the first epoch, at least this many batches, and two estimates of the
/// split between the decoders where the engines take enough images for them
/// ([`DecoderSplit::settled_or_idle`]): the split settles within them,
/// and with it the sizes later batches ask for (a first epoch of a few batches does not meet
/// them). At its end every pool is sized for what it saw, and the split's share is held at
/// or below its headroom above the most it reached ([`DecoderSplit::hold`]), the CPU's
/// pixels' buffers sized for that.
pub(super) const WARM_UP_BATCHES: u64 = 16;

/// Groups of samples with the feeding thread at once (`assembler::ahead`): one it submits,
/// one next, so it never waits for the assembler between them.
pub(super) const GROUPS_OUT: usize = 2;

/// What a batch's buffer of the chain's descriptors and taps (`ChainDescs::device_len`)
/// needs beyond its samples' bytes at most: six parts each aligned, and a table's first
/// entry each.
pub(super) const DESC_SLACK: usize = 6 * ALIGN + 8;

/// Decode areas alive at once in a steady state: the groups with the feeding thread, and the
/// two a batch being filled may draw from (a group and a batch need not line up).
const AREAS_OUT: usize = GROUPS_OUT + 2;

/// Events created when the stage starts (see [`GpuStage::new`]).
const EVENTS_AHEAD: usize = 64;

/// Encoded bytes the decoder still reads (the files', and their pinned copies), until the
/// event.
pub(super) type KeptBytes = (Event, Vec<Arc<Vec<u8>>>, Vec<StagedBytes>);

/// Host bytes staged for the kernel stream: appended to one pinned lease, copied up at once
/// into one device buffer (for descriptors and tables) or straight to their place.
pub(super) struct Staging<'a> {
    pub(super) lease: PinnedLease<'a>,
    at: usize,
}

impl<'a> Staging<'a> {
    /// Staging into `lease`, from its start.
    pub(super) fn new(lease: PinnedLease<'a>) -> Staging<'a> {
        Staging { lease, at: 0 }
    }

    /// Appends `bytes` to the lease; their offset in it.
    pub(super) fn put(&mut self, bytes: &[u8]) -> usize {
        let at = self.at;
        self.lease.bytes()[at..at + bytes.len()].copy_from_slice(bytes);
        self.at = (at + bytes.len()).next_multiple_of(ALIGN);
        at
    }
}

/// The device side of the GPU path (one per pipeline).
pub(crate) struct GpuStage {
    pub(super) dev: Arc<dyn GpuDevice>,
    pub(super) pools: Pools,
    /// Descriptors, tap tables and pixels computed on the CPU, for the kernel stream.
    pub(super) uploads: Mutex<PinnedRing>,
    pub(super) streams: Arc<ConsumerStreams>,
    pub(super) plan: Arc<GpuPlan>,
    pub(super) stats: Arc<Stats>,
    pub(super) batch: usize,
    /// Outputs out at once in steady state: the consumer's queue (`prefetch`), the batch it
    /// holds and the one being launched.
    outputs_out: usize,
    /// Samples the decoder gets per submission (the last of a batch may be fewer).
    pub(super) engine_chunk: usize,
    /// Timing events not read yet: (kernels?, start, end).
    timings: Mutex<VecDeque<(bool, Event, Event)>>,
    /// Encoded bytes the decoder still reads, until each event.
    pub(super) kept: Mutex<Vec<KeptBytes>>,
    /// Ready events of the batches launched and not known done.
    in_flight: Mutex<VecDeque<Event>>,
    /// The first epoch has ended (half of the warm-up: see [`WARM_UP_BATCHES`]).
    first_epoch_over: std::sync::atomic::AtomicBool,
    /// The warm-up is over and the pools have settled (checked after every batch).
    warm: std::sync::atomic::AtomicBool,
    /// Which decoder takes what the engines could (shared with the workers).
    pub(super) split: Arc<DecoderSplit>,
    /// Where the workers copy the engines' encoded files and the pixels they decode
    /// (shared with them).
    pub(super) staging: Arc<WorkerStaging>,
    /// The sizes of the images the decode areas were made of (what they are sized for when
    /// the warm-up ends).
    pub(super) area_sizes: AreaSizes,
    /// The sizes of the images each batch carried that the engines can't take (until the
    /// warm-up ends): the host images' area and the CPU pixels' buffers are sized for them.
    pub(super) forced_sizes: AreaSizes,
    /// Each sample's bytes of the chain's descriptors and taps (until the warm-up ends):
    /// the descriptor buffers are sized for a batch of the largest.
    pub(super) desc_sizes: AreaSizes,
    /// The workers beyond the default, parked until the engines show they take almost none
    /// of the photos.
    pub(super) gate: Arc<WorkerGate>,
    /// What the readers hand on at once: a few samples beside JPEG engines (the workers only
    /// parse headers), one once the gate lets every core's worker decode.
    pub(super) hold: Hold,
}

impl Drop for GpuStage {
    fn drop(&mut self) {
        // The decoder may still read encoded bytes (the workers' pinned copies among them,
        // whose slabs are freed with the stage): they go only once their decodes are done.
        let kept = std::mem::take(self.kept.get_mut().unwrap_or_else(|p| p.into_inner()));
        for (event, _, _) in &kept {
            if let Err(e) = self.dev.synchronize(event) {
                tracing::debug!("waiting for a decode before dropping its bytes: {e}");
            }
        }
    }
}

impl std::fmt::Debug for GpuStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuStage").field("dev", &self.dev).finish()
    }
}

/// The stage's device memory, one pool per role (a role's buffers settle on one size: see
/// [`DevicePool`]).
pub(super) struct Pools {
    /// The batches handed to the consumer.
    pub(super) outputs: Arc<DevicePool>,
    /// What the JPEG engines write.
    pub(super) decoded: Arc<DevicePool>,
    /// What the prep workers' own GPU decoders write (`gpu_huffman`).
    pub(super) worker_decoded: Arc<DevicePool>,
    /// Pixels decoded on the CPU, uploaded.
    pub(super) host: Arc<DevicePool>,
    /// The scratch planes of the chroma rebuild.
    pub(super) planes: Arc<DevicePool>,
    /// Descriptors and tap tables.
    pub(super) descs: Arc<DevicePool>,
    /// The u8 images between the color jitter's launches.
    pub(super) jitter: Arc<DevicePool>,
}

impl Pools {
    fn new(dev: &Arc<dyn GpuDevice>) -> Pools {
        Pools {
            outputs: DevicePool::of_one_size(dev.clone()),
            decoded: DevicePool::for_engines(dev.clone()),
            worker_decoded: DevicePool::new(dev.clone()),
            host: DevicePool::new(dev.clone()),
            planes: DevicePool::new(dev.clone()),
            descs: DevicePool::new(dev.clone()),
            jitter: DevicePool::new(dev.clone()),
        }
    }

    fn all(&self) -> [&Arc<DevicePool>; 7] {
        [
            &self.outputs,
            &self.decoded,
            &self.worker_decoded,
            &self.host,
            &self.planes,
            &self.descs,
            &self.jitter,
        ]
    }
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
/// those the device decodes submitted as they come (`gpu_decode`).
#[derive(Debug, Default)]
pub(crate) struct DeviceFill {
    pub(super) entries: Vec<Entry>,
    /// The decode areas the samples are in: the kernels wait for each one's decodes.
    pub(super) areas: Vec<Arc<DecodeArea>>,
}

impl DeviceFill {
    /// Appends a prepared sample (decoded already when the feeding thread took it ahead).
    pub(crate) fn push(&mut self, p: Box<Prepared>) {
        self.entries.push(Entry::Sample {
            prepared: *p,
            decoded: None,
        });
        self.adopt(self.entries.len() - 1);
    }

    /// Takes over where the device decoded sample `i`, if it has: the entry points at it, and
    /// the fill keeps its area.
    pub(super) fn adopt(&mut self, i: usize) {
        let Some(Entry::Sample {
            prepared:
                Prepared::Chain {
                    source: super::gpu_plan::Source::Device { decoded: from, .. },
                    ..
                },
            decoded,
        }) = self.entries.get_mut(i)
        else {
            return;
        };
        let Some(d) = from.take() else {
            return;
        };
        *decoded = Some(d.at);
        if !self.areas.iter().rev().any(|a| Arc::ptr_eq(a, &d.area)) {
            self.areas.push(d.area);
        }
    }

    /// Appends a repeat of the last sample.
    pub(crate) fn repeat_last(&mut self) {
        self.entries.push(Entry::Repeat);
    }

    /// The sample to keep for padding (see [`super::template`]): the last one the device
    /// decodes (a cheap copy: its encoded bytes are shared), else the last one.
    pub(super) fn kept_index(&self) -> Option<usize> {
        let sample = |e: &Entry| matches!(e, Entry::Sample { .. });
        let on_device = |e: &Entry| {
            matches!(
                e,
                Entry::Sample {
                    prepared: Prepared::Chain {
                        source: super::gpu_plan::Source::Device { .. },
                        ..
                    },
                    ..
                }
            )
        };
        let entries = &self.entries;
        entries
            .iter()
            .rposition(on_device)
            .or_else(|| entries.iter().rposition(sample))
    }

    /// Sample `i` as prepared (`None` for a repeat).
    pub(super) fn prepared(&self, i: usize) -> Option<&Prepared> {
        match self.entries.get(i)? {
            Entry::Sample { prepared, .. } => Some(prepared),
            Entry::Repeat => None,
        }
    }

    /// Removes sample `i` (one that can't be decoded).
    pub(crate) fn remove(&mut self, i: usize) {
        self.entries.remove(i);
    }
}

impl GpuStage {
    pub(crate) fn new(
        dev: Arc<dyn GpuDevice>,
        plan: Arc<GpuPlan>,
        stats: Arc<Stats>,
        (batch, prefetch): (usize, usize),
        (workers, parked): (usize, usize),
    ) -> GpuStage {
        // The events a steady state keeps alive at once (per batch in flight: a sub-batch's
        // two, the kernels' two, a consumer's release), created now: later batches record
        // them again rather than create more.
        dev.create_events_ahead(EVENTS_AHEAD);
        let dev_engines = dev.describe().hardware_decoder;
        GpuStage {
            staging: Arc::new(WorkerStaging::new(&dev)),
            pools: Pools::new(&dev),
            uploads: Mutex::new(PinnedRing::new(dev.clone(), UPLOAD_SLOTS)),
            streams: ConsumerStreams::new(dev.clone()),
            dev,
            plan,
            stats,
            batch,
            outputs_out: prefetch + 2,
            engine_chunk: engine_chunk(batch),
            timings: Mutex::new(VecDeque::new()),
            kept: Mutex::new(Vec::new()),
            in_flight: Mutex::new(VecDeque::new()),
            first_epoch_over: std::sync::atomic::AtomicBool::new(false),
            warm: std::sync::atomic::AtomicBool::new(false),
            area_sizes: AreaSizes::default(),
            forced_sizes: AreaSizes::default(),
            desc_sizes: AreaSizes::default(),
            gate: Arc::new(WorkerGate::new(workers, parked)),
            hold: Hold::new(if dev_engines { GPU_PATH_HOLD } else { 1 }),
            split: Arc::new(DecoderSplit::new(
                workers,
                std::thread::available_parallelism().map_or(1, |n| n.get()),
                batch,
            )),
        }
    }

    /// The device.
    pub(crate) fn device(&self) -> &Arc<dyn GpuDevice> {
        &self.dev
    }

    /// Idle buffers in the device pools.
    pub(crate) fn idle_buffers(&self) -> usize {
        self.pools.all().iter().map(|p| p.idle_count()).sum()
    }

    /// Queues a pair of timing events for the statistics (`kernels`: the kernel stream's).
    pub(super) fn push_timing(&self, kernels: bool, start: Event, end: Event) {
        self.timings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back((kernels, start, end));
    }

    /// Counts a launched batch as in flight until `ready`; records the most at once. Checks,
    /// without waiting, that the device has not failed (a fault of queued work shows here,
    /// before the batch reaches the consumer).
    pub(super) fn launched(&self, ready: &Event) -> Result<(), crate::error::Error> {
        let mut q = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        while let Some(e) = q.front() {
            if self.dev.is_complete(e)? {
                q.pop_front();
            } else {
                break;
            }
        }
        q.push_back(ready.clone());
        self.stats
            .gpu_in_flight_max
            .fetch_max(q.len() as u64, Ordering::Relaxed);
        drop(q);
        self.stats
            .gpu_area_waits
            .store(self.pools.decoded.host_waits(), Ordering::Relaxed);
        let s = &self.stats;
        s.gpu_workers_running
            .store(self.gate.running() as u64, Ordering::Relaxed);
        s.gpu_workers_parked
            .store(self.gate.parked() as u64, Ordering::Relaxed);
        s.gpu_reader_hold
            .store(self.hold.most() as u64, Ordering::Relaxed);
        // Here, not where a consumer drops a batch: freeing waits for the whole device.
        for p in self.pools.all() {
            p.trim_done();
        }
        Ok(())
    }

    /// Called at each epoch's end and after each batch: once the warm-up is over (see
    /// [`WARM_UP_BATCHES`]) every pool is sized for what it needed, and allocations from
    /// then on are counted.
    pub(crate) fn check_warm_up(&self, epoch_ended: bool) -> Result<(), crate::error::Error> {
        if epoch_ended {
            self.first_epoch_over.store(true, Ordering::Relaxed);
        }
        let batches = self.stats.batches_made.load(Ordering::Relaxed);
        let first_epoch_over = self.first_epoch_over.load(Ordering::Relaxed);
        if self.gate.undecided()
            && (first_epoch_over || self.split.prepared.load(Ordering::Relaxed) >= DECIDE_AFTER)
            && self.gate.decide(self.split.idle(), batches)
        {
            self.split.set_workers(self.gate.running());
            self.hold.one_at_a_time();
            tracing::info!(
                "the JPEG engines take almost none of these photos: {} workers decode them, one per core",
                self.gate.running()
            );
        }
        if self.warm.load(Ordering::Relaxed)
            || !first_epoch_over
            || batches < WARM_UP_BATCHES
            || !self.split.settled_or_idle()
            || !self.gate.lets_warm_up_end(batches)
        {
            return Ok(());
        }
        self.stats.end_warm_up(self.dev.as_ref(), || {
            // The CPU's pixels' buffers are sized for the share the split may rise to: the
            // host images' device area (one at a time: taken and given back within a launch)
            // for the most a later batch may carry (`Budget::most_per_batch`), the workers'
            // pinned slabs and the upload ring for its rise above the warm-up's.
            let mut budget = self.split.hold();
            // The images the engines can't take vary from batch to batch, in sizes as a
            // decode area's group does and in number with the shuffle (`area_sizes`): on a
            // device without engines, every image of a batch.
            let forced = &self.forced_sizes;
            let most = forced.likely_most_in_group(self.batch);
            budget.forced = budget.forced.max(forced.bound(most));
            forced.close();
            if budget.most_per_batch() > 0 {
                self.pools.host.raise_high_water(budget.most_per_batch());
                self.pools.host.expect_out(1);
            }
            self.staging.settle(budget);
            // A batch's descriptors and taps grow with its crops' extent in the photos: sized
            // for a batch of the largest samples the warm-up saw (which saw every photo), on
            // the device and, above the most a warm-up batch staged, in the upload ring.
            let descs = self.desc_sizes.largest_sum(self.batch);
            let mut descs_rise = 0;
            if descs > 0 {
                let bound = descs + DESC_SLACK;
                self.pools.descs.raise_high_water(bound);
                descs_rise = bound.saturating_sub(self.desc_sizes.largest_group());
            }
            self.desc_sizes.close();
            self.uploads
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .make_room(budget.rise() + descs_rise);
            // The warm-up may not have seen the consumer's queue full.
            self.pools.outputs.expect_out(self.outputs_out);
            self.pools.decoded.expect_out(AREAS_OUT);
            // A group's decode area for the spread of its images' sizes (`area_sizes`), not
            // only the groups the warm-up saw: for the most images the engines took in one
            // group, and the split's most share of a group more (it may give those back).
            let chunk = self.engine_chunk;
            let split_most = (self.split.most_share() * chunk as f64).ceil() as usize;
            let engine_images = (self.area_sizes.most_in_group() + split_most).min(chunk);
            self.pools
                .decoded
                .raise_high_water(self.area_sizes.bound(engine_images));
            self.area_sizes.close();
            // A batch's chroma planes take at most half its engine images' bytes (3 per
            // chroma block of 2 pixels for 4:2:2, of 4 for 4:2:0, against 3 per pixel) and
            // each image's descriptor and alignment; a batch past that is rebuilt in parts.
            if self.pools.planes.high_water() > 0 {
                let per_batch = (engine_images * self.batch.div_ceil(chunk)).min(self.batch);
                let each = ALIGN + std::mem::size_of::<crate::cuda::desc::ChromaDesc>();
                self.pools
                    .planes
                    .raise_high_water(self.area_sizes.bound(per_batch) / 2 + self.batch * each);
            }
            for pool in self.pools.all() {
                pool.settle()?;
            }
            self.uploads
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .settle()
        })?;
        self.warm.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Adds the device time of finished work to the statistics (all of it with `wait`).
    pub(crate) fn read_timings(&self, wait: bool) {
        let mut t = self.timings.lock().unwrap_or_else(|p| p.into_inner());
        while let Some((kernels, start, end)) = t.front() {
            // Elapsed times exist only once both events are reached: at the end of a run the
            // last ones are waited for (cuEventElapsedTime on an unreached event is an error).
            let reached = if wait {
                self.dev.synchronize(end).is_ok()
            } else {
                self.dev.is_complete(end).unwrap_or(true)
            };
            if !wait && !reached {
                break;
            }
            if let Some(d) = reached.then(|| self.dev.elapsed(start, end).ok()).flatten() {
                let counter = if *kernels {
                    &self.stats.gpu_kernels_ns
                } else {
                    &self.stats.gpu_decode_ns
                };
                counter.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
            }
            t.pop_front();
        }
        self.stats.record_device(self.dev.as_ref());
        if let Ok(mut d) = self.stats.gpu_decoders.lock() {
            let mut s = super::stats::DecoderStats::of(&self.split);
            s.modelled = self
                .dev
                .timing_model()
                .map(|m| self.split.modelled_counts(m, self.batch));
            s.engine_feed = self.dev.feed_times();
            *d = Some(s);
        }
    }
}

/// Samples per decoder submission for batches of `batch`: the engines take a whole batch
/// best (each call has a fixed cost; `docs/performance.md` has the measurement), but a batch much larger than that is submitted in parts so that decoding
/// starts while it fills. `STOKEHOLD_ENGINE_CHUNK` overrides it (for tuning on a GPU).
pub(super) fn engine_chunk(batch: usize) -> usize {
    std::env::var("STOKEHOLD_ENGINE_CHUNK")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(batch.min(256))
        .max(1)
}
