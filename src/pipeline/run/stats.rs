//! Counting what a running pipeline does: counters and stage times every thread adds to
//! ([`Stats`]), copies of them for the user ([`StatsSnapshot`]) and each epoch's summary.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::cuda::gpu_device::{DeviceCounters, GpuDevice, MemoryUse};
use crate::error::{Error, SampleError};

use super::ledger::Ledger;

pub use super::gpu_split::ModelledCounts;

/// Counters and stage times, shared by all threads.
#[derive(Debug, Default)]
pub struct Stats {
    /// The counts of what was made and of what was handed out (the consumer's figures).
    pub(super) ledger: Mutex<Ledger>,
    /// Batches made (the GPU path's warm-up counts them).
    pub(super) batches_made: AtomicU64,
    pub(super) read_ns: AtomicU64,
    pub(super) read_bytes: AtomicU64,
    pub(super) op_ns: Vec<AtomicU64>,
    pub(super) assemble_ns: AtomicU64,
    /// When the assembling thread started, and its time since waiting for samples or for
    /// room in the batch queue.
    pub(super) assembler_start: Mutex<Option<std::time::Instant>>,
    pub(super) assembler_wait_ns: AtomicU64,
    /// The feeding thread's time submitting decodes (GPU path).
    pub(super) feeder_busy_ns: AtomicU64,
    pub(super) in_place: AtomicU64,
    pub(super) batch_images: AtomicU64,
    pub(super) consumer_wait_ns: AtomicU64,
    /// Every finished epoch's summary (the consumer's: the ledger's count of them).
    pub(super) epochs: Mutex<Vec<EpochSummary>>,
    pub(super) queue_samples: AtomicU64,
    pub(super) queue_sum: AtomicU64,
    /// GPU path: host time preparing samples (headers, setups, CPU decodes), summed.
    pub(super) gpu_prep_ns: AtomicU64,
    /// GPU path: device time of the decodes and of the kernels (events).
    pub(super) gpu_decode_ns: AtomicU64,
    pub(super) gpu_kernels_ns: AtomicU64,
    /// GPU path: where samples' pixels came from, by source and cause.
    pub(super) gpu_sources: Mutex<BTreeMap<String, u64>>,
    /// GPU path: the device's memory, last read.
    pub(super) gpu_memory: Mutex<Option<MemoryUse>>,
    /// GPU path: what the device is (`None` on the CPU path, unless it uploads batches).
    pub(super) gpu_device: Mutex<Option<String>>,
    /// True when the device only takes the CPU path's batches (`batch_memory`).
    pub(super) gpu_uploads_only: AtomicBool,
    /// True when the device only pins the CPU path's host batches (`batch_memory =
    /// "pinned"`).
    pub(super) gpu_pinned_only: AtomicBool,
    /// GPU path: the most batches launched and not yet done on the device at once.
    pub(super) gpu_in_flight_max: AtomicU64,
    /// GPU path: the times the host waited for a decode area's earlier batch to be done
    /// (`DevicePool::host_waits`).
    pub(super) gpu_area_waits: AtomicU64,
    /// GPU path: the workers running, and parked at the worker gate.
    pub(super) gpu_workers_running: AtomicU64,
    pub(super) gpu_workers_parked: AtomicU64,
    pub(super) gpu_reader_hold: AtomicU64,
    /// GPU path: cuts in groups whose area was past the settled size.
    pub(super) gpu_groups_split: AtomicU64,
    /// GPU path: batches whose chroma was rebuilt in parts, their planes past the settled
    /// size.
    pub(super) gpu_chroma_in_parts: AtomicU64,
    /// GPU path: images decoded on the CPU uploaded from their worker's pinned copy.
    pub(super) gpu_host_pinned: AtomicU64,
    /// GPU path: the device's allocation counters at the end of the first epoch, and last
    /// read.
    pub(super) gpu_counters_warm: Mutex<Option<DeviceCounters>>,
    pub(super) gpu_counters: Mutex<Option<DeviceCounters>>,
    /// GPU path: the decoders' shares and rates, last read.
    pub(super) gpu_decoders: Mutex<Option<DecoderStats>>,
}

/// What a pipeline's device does, as the statistics report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DeviceRole {
    /// The GPU path: decodes and kernels.
    GpuPath,
    /// Only takes the CPU path's finished batches (`batch_memory = "gpu"`).
    Uploads,
    /// Only pins the CPU path's host batches (`batch_memory = "pinned"`).
    Pins,
}

/// What each decoder of the GPU path took (see `gpu_split`): the JPEG engines, fed by one
/// thread, and the CPU decoder on the workers for its share of what the engines could take.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DecoderStats {
    /// Images given to the engines.
    pub engine_images: u64,
    /// The feeding thread's time submitting them.
    pub engine_busy: Duration,
    /// Images of the engines' kind the split sent to the CPU.
    pub cpu_images: u64,
    /// The workers' time decoding those (summed over threads).
    pub cpu_busy: Duration,
    /// The CPU's share now.
    pub cpu_share: f64,
    /// The most the share may become since the warm-up ended (`None` before: see
    /// `gpu_split`); the CPU's pixels' buffers, sized then, set it.
    pub cpu_share_ceiling: Option<f64>,
    /// Estimates of the share that wanted more than the ceiling.
    pub estimates_capped: u32,
    /// Samples the share picked for the CPU that went to the engines, their batch's byte
    /// budget spent (see `gpu_split`).
    pub over_budget: u64,
    /// On an emulated device with a timing model: what the limit the modelled device and
    /// the workers allow is computed from ([`ModelledCounts::limit_since`]).
    pub modelled: Option<ModelledCounts>,
    /// The feeding thread's time inside the device's decoder, by phase (`None` before the
    /// first submission is read).
    pub engine_feed: Option<crate::nvjpeg::FeedTimes>,
}

impl DecoderStats {
    pub(super) fn of(s: &super::gpu_split::DecoderSplit) -> DecoderStats {
        let (ceiling, capped, over_budget) = s.ceiling();
        DecoderStats {
            engine_images: s.engine_images.load(Ordering::Relaxed),
            engine_busy: Duration::from_nanos(s.engine_ns.load(Ordering::Relaxed)),
            cpu_images: s.cpu_images.load(Ordering::Relaxed),
            cpu_busy: Duration::from_nanos(s.cpu_ns.load(Ordering::Relaxed)),
            cpu_share: s.cpu_share(),
            cpu_share_ceiling: ceiling,
            estimates_capped: capped,
            over_budget,
            modelled: None,
            engine_feed: None,
        }
    }
}

/// What happened in one epoch.
#[derive(Debug, Clone, Default)]
pub struct EpochSummary {
    /// The epoch.
    pub epoch: u64,
    /// Samples delivered (padding excluded).
    pub images: u64,
    /// Batches delivered.
    pub batches: u64,
    /// Bad samples skipped.
    pub skipped: u64,
    /// Bad samples replaced.
    pub replaced: u64,
    /// Good samples left out by `last_batch = "drop"`.
    pub dropped: u64,
    /// Every bad sample met in the epoch (skipped or replaced), with its path and cause,
    /// including those after the epoch's last batch, which no batch carries.
    pub errors: Vec<SampleError>,
}

impl EpochSummary {
    /// Logs the summary: a warning where the epoch had bad samples, unless they are the
    /// epoch before's (`before`) again — a benchmark's hundred short epochs over one bad file
    /// warn once.
    fn log(&self, before: Option<&EpochSummary>) {
        let batches = match self.batches {
            1 => "1 batch".to_string(),
            n => format!("{n} batches"),
        };
        let epoch = self.epoch;
        if self.skipped + self.replaced == 0 {
            tracing::info!("epoch {epoch}: {} images in {batches}", self.images);
            return;
        }
        let bad = |s: &EpochSummary| {
            let mut v: Vec<usize> = s.errors.iter().map(|e| e.index).collect();
            v.sort_unstable();
            (s.skipped, s.replaced, v)
        };
        if before.is_some_and(|b| bad(b) == bad(self)) {
            tracing::info!(
                "epoch {epoch}: {} images in {batches}; the bad samples of epoch {} again ({} \
                 skipped, {} replaced)",
                self.images,
                epoch.saturating_sub(1),
                self.skipped,
                self.replaced
            );
        } else {
            let bad = if self.skipped == 1 {
                "bad sample"
            } else {
                "bad samples"
            };
            tracing::warn!(
                "epoch {epoch}: {} images in {batches}; {} {bad} skipped, {} replaced",
                self.images,
                self.skipped,
                self.replaced
            );
        }
    }
}

/// A copy of the statistics at one moment. The counts of images, batches, bad samples and
/// epochs are those of the batches handed out (the pipeline works ahead of its consumer:
/// the batches waiting in its queue count once they are taken; where the run is over,
/// everything counts, the bad samples after the last batch included); the stage times are
/// of all the work done.
#[derive(Debug, Clone, Default)]
pub struct StatsSnapshot {
    /// Samples handed out (padding excluded).
    pub images: u64,
    /// Bad samples skipped.
    pub skipped: u64,
    /// Bad samples replaced by others (`on_error = "replace"`).
    pub replaced: u64,
    /// Good samples left out by `last_batch = "drop"`.
    pub dropped: u64,
    /// Repeats added by `last_batch = "pad"`.
    pub padded: u64,
    /// Batches handed out.
    pub batches: u64,
    /// Mean number of ready batches in the queue when the consumer asked for one.
    pub mean_queue_depth: f64,
    /// Per-epoch summaries, for finished epochs (whose last batch was handed out).
    pub epochs: Vec<EpochSummary>,
    /// Time the reader threads spent reading files (summed over threads).
    pub read: Duration,
    /// Bytes read.
    pub read_bytes: u64,
    /// Time spent in each operator (summed over threads), by operator name.
    pub ops: Vec<(String, Duration)>,
    /// Time spent assembling batches.
    pub assemble: Duration,
    /// The assembling thread's time since it started, less its waits for samples, for the
    /// feeding thread and for room in the batch queue: the time of its own work (on the GPU
    /// path also launching the kernels), which one thread does for every batch.
    pub assembler_busy: Duration,
    /// The GPU path's feeding thread's time submitting decodes (nvJPEG's host call, for the
    /// JPEG engines): one thread does it for every image the device decodes.
    pub feeder_busy: Duration,
    /// Images put into batches (padding excluded), counted per image output.
    pub batch_images: u64,
    /// Of those, the images a worker wrote straight into their place in the batch (no copy).
    pub in_place: u64,
    /// Time the consumer waited inside `next_batch`.
    pub consumer_wait: Duration,
    /// Skipped samples by cause.
    pub skipped_by_cause: BTreeMap<&'static str, u64>,
    /// Replaced samples (`on_error = "replace"`) by cause.
    pub replaced_by_cause: BTreeMap<&'static str, u64>,
    /// The device's figures: the GPU path's, or the CPU path's uploads or pinned batches
    /// (`batch_memory`); `None` for batches in ordinary host memory on the CPU path.
    pub gpu: Option<GpuStats>,
}

/// What the GPU path did.
#[derive(Debug, Clone, Default)]
pub struct GpuStats {
    /// The device (and its JPEG decoder).
    pub device: String,
    /// True when the device only took the CPU path's finished batches (`batch_memory`): no
    /// decode, no kernels.
    pub uploads_only: bool,
    /// True when the device only pinned the CPU path's host batches (`batch_memory =
    /// "pinned"`; `uploads_only` too): no copies to the device either.
    pub pinned_only: bool,
    /// Host time preparing samples: headers, random parameters, CPU decodes (summed over
    /// the worker threads).
    pub prepare: Duration,
    /// Device time decoding (decode stream, between events).
    pub decode: Duration,
    /// Device time of the chain kernels and uploads (kernel stream, between events).
    pub kernels: Duration,
    /// Where samples' pixels came from: `device-decoder:hardware`, `device-decoder:hybrid`,
    /// `cpu-decoder:<cause>` (CMYK, progressive, …), `cpu-operators` (the chain can't take
    /// the sample), `device-decoder-refused` (refused at submission, decoded on the CPU).
    pub sources: BTreeMap<String, u64>,
    /// Device and pinned memory in use and at their peak.
    pub memory: MemoryUse,
    /// The most batches in flight at once: launched (decodes and kernels queued) and not
    /// yet done on the device.
    pub batches_in_flight: u64,
    /// The times the host waited for an earlier batch's kernels to be done with a decode
    /// area before the JPEG engines could write it (they don't wait for their stream:
    /// `docs/gpu.md`). Only after the warm-up, which allocates rather than wait (or where
    /// the device had no room for another area); few or none: the pool settles with as
    /// many areas as the warm-up had in use at once, and one to spare under 64 MB.
    pub decode_area_waits: u64,
    /// The cuts made in groups of samples after the warm-up (a group in three parts counts
    /// two): their decode area would have been larger than the areas the pool settled on (a
    /// large photo's wide crop among the rest), and settled areas serve the parts rather
    /// than an allocation. Rare: the areas are sized for a group's sum six deviations above
    /// its mean.
    pub decode_groups_split: u64,
    /// The worker threads running.
    pub workers_running: u64,
    /// The worker threads parked at the worker gate: beside JPEG engines the default runs
    /// half the cores' workers and parks the rest until the photos show the engines take
    /// almost none of them (then every core's runs).
    pub workers_parked: u64,
    /// The most samples a reader hands the workers at once: a few beside JPEG engines, where
    /// the workers only parse headers; one where they decode every photo (no engines, the
    /// gate opened, or shards).
    pub reader_hold: u64,
    /// The batches whose chroma was rebuilt in parts after the warm-up, one after the other
    /// in the settled scratch buffer: their planes would have needed a larger one. Rare, as
    /// [`GpuStats::decode_groups_split`].
    pub chroma_rebuilt_in_parts: u64,
    /// Images decoded on the CPU that went up from the pinned copy their worker made (the
    /// rest the assembling thread copied: no room in the workers' slabs).
    pub host_images_pinned_by_workers: u64,
    /// The device's allocations, frees and event creations so far.
    pub counters: DeviceCounters,
    /// Of those, the ones after the first epoch (`None` before it ends): zero in a steady
    /// state.
    pub after_warm_up: Option<DeviceCounters>,
    /// The decoders' shares and rates.
    pub decoders: DecoderStats,
}

impl Stats {
    /// Empty statistics for a pipeline of `operators` per-sample operators.
    pub(super) fn new(operators: usize) -> Stats {
        Stats {
            op_ns: (0..operators).map(|_| AtomicU64::new(0)).collect(),
            ..Stats::default()
        }
    }

    /// A copy of the counters, the operators' times under `op_names` (in node order).
    pub(super) fn snapshot(&self, op_names: impl Iterator<Item = String>) -> StatsSnapshot {
        let handed = self.ledger.lock().map(|l| l.handed()).unwrap_or_default();
        StatsSnapshot {
            images: handed.images,
            skipped: handed.skipped,
            replaced: handed.replaced,
            mean_queue_depth: {
                let n = self.queue_samples.load(Ordering::Relaxed);
                if n == 0 {
                    0.0
                } else {
                    self.queue_sum.load(Ordering::Relaxed) as f64 / n as f64
                }
            },
            epochs: self.epochs_up_to(handed.epochs),
            dropped: handed.dropped,
            padded: handed.padded,
            batches: handed.batches,
            read: ns(&self.read_ns),
            read_bytes: self.read_bytes.load(Ordering::Relaxed),
            ops: op_names.zip(&self.op_ns).map(|(n, t)| (n, ns(t))).collect(),
            assemble: ns(&self.assemble_ns),
            assembler_busy: self
                .assembler_start
                .lock()
                .ok()
                .and_then(|s| *s)
                .map_or(Duration::ZERO, |s| {
                    s.elapsed().saturating_sub(ns(&self.assembler_wait_ns))
                }),
            feeder_busy: ns(&self.feeder_busy_ns),
            batch_images: self.batch_images.load(Ordering::Relaxed),
            in_place: self.in_place.load(Ordering::Relaxed),
            consumer_wait: ns(&self.consumer_wait_ns),
            skipped_by_cause: handed.skipped_by_cause(),
            replaced_by_cause: handed.replaced_by_cause(),
            gpu: self.gpu_snapshot(),
        }
    }

    fn gpu_snapshot(&self) -> Option<GpuStats> {
        let device = self.gpu_device.lock().ok()?.clone()?;
        Some(GpuStats {
            device,
            uploads_only: self.gpu_uploads_only.load(Ordering::Relaxed),
            pinned_only: self.gpu_pinned_only.load(Ordering::Relaxed),
            prepare: ns(&self.gpu_prep_ns),
            decode: ns(&self.gpu_decode_ns),
            kernels: ns(&self.gpu_kernels_ns),
            sources: self
                .gpu_sources
                .lock()
                .map(|m| m.clone())
                .unwrap_or_default(),
            memory: self
                .gpu_memory
                .lock()
                .ok()
                .and_then(|m| *m)
                .unwrap_or_default(),
            batches_in_flight: self.gpu_in_flight_max.load(Ordering::Relaxed),
            decode_area_waits: self.gpu_area_waits.load(Ordering::Relaxed),
            decode_groups_split: self.gpu_groups_split.load(Ordering::Relaxed),
            workers_running: self.gpu_workers_running.load(Ordering::Relaxed),
            workers_parked: self.gpu_workers_parked.load(Ordering::Relaxed),
            reader_hold: self.gpu_reader_hold.load(Ordering::Relaxed),
            chroma_rebuilt_in_parts: self.gpu_chroma_in_parts.load(Ordering::Relaxed),
            host_images_pinned_by_workers: self.gpu_host_pinned.load(Ordering::Relaxed),
            counters: self.gpu_counters_now(),
            decoders: self
                .gpu_decoders
                .lock()
                .ok()
                .and_then(|d| *d)
                .unwrap_or_default(),
            after_warm_up: self
                .gpu_counters_warm
                .lock()
                .ok()
                .and_then(|w| *w)
                .map(|w| self.gpu_counters_now().since(&w)),
        })
    }

    fn gpu_counters_now(&self) -> DeviceCounters {
        self.gpu_counters
            .lock()
            .ok()
            .and_then(|c| *c)
            .unwrap_or_default()
    }

    /// Names the pipeline's device, `reason` (the device report), and what it does.
    pub(super) fn set_device(&self, reason: &str, role: DeviceRole) {
        if let Ok(mut d) = self.gpu_device.lock() {
            *d = Some(reason.to_string());
        }
        let uploads_only = matches!(role, DeviceRole::Uploads | DeviceRole::Pins);
        self.gpu_uploads_only.store(uploads_only, Ordering::Relaxed);
        self.gpu_pinned_only
            .store(role == DeviceRole::Pins, Ordering::Relaxed);
    }

    /// Reads `dev`'s memory and allocation counters (after each batch).
    pub(super) fn record_device(&self, dev: &dyn GpuDevice) {
        if let Ok(mut m) = self.gpu_memory.lock() {
            *m = Some(dev.memory());
        }
        if let Ok(mut c) = self.gpu_counters.lock() {
            *c = Some(dev.counters());
        }
    }

    /// Ends the warm-up, once per pipeline (when is for the stage to decide): `settle` sizes
    /// the stage's pools for what they saw, then `dev`'s counters become the baseline that
    /// `allocations after warm-up` counts from. Later calls do nothing.
    pub(super) fn end_warm_up(
        &self,
        dev: &dyn GpuDevice,
        settle: impl FnOnce() -> Result<(), Error>,
    ) -> Result<(), Error> {
        let mut baseline = self
            .gpu_counters_warm
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if baseline.is_none() {
            settle()?;
            *baseline = Some(dev.counters());
            // The counters `stats()` reads are then no older than the baseline.
            self.record_device(dev);
        }
        Ok(())
    }

    /// Counts a cut in a group whose area was past the settled size (`GpuStage::decode`).
    pub(super) fn count_split_group(&self) {
        self.gpu_groups_split.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a batch whose chroma was rebuilt in parts (`GpuStage::rebuild_chroma`).
    pub(super) fn count_chroma_in_parts(&self) {
        self.gpu_chroma_in_parts.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a sample's pixel source on the GPU path.
    pub(super) fn count_gpu_source(&self, source: &str) {
        if let Ok(mut m) = self.gpu_sources.lock() {
            // The name is copied only the first time (this runs for every sample).
            match m.get_mut(source) {
                Some(n) => *n += 1,
                None => {
                    m.insert(source.to_string(), 1);
                }
            }
        }
    }

    /// Summaries of the epochs finished so far, as far as the consumer has been handed
    /// their batches.
    pub(super) fn epoch_summaries(&self) -> Vec<EpochSummary> {
        let handed = self.ledger.lock().map(|l| l.handed().epochs).unwrap_or(0);
        self.epochs_up_to(handed)
    }

    /// Logs the summaries of the finished epochs `from..to` (in the order they finished): the
    /// consumer's thread does, once handed an epoch's last batch, so that the log follows
    /// what the consumer was given rather than the batches made ahead.
    pub(super) fn log_epochs(&self, range: std::ops::Range<usize>) {
        if let Ok(v) = self.epochs.lock() {
            let end = range.end.min(v.len());
            for i in range.start.min(end)..end {
                v[i].log(i.checked_sub(1).map(|b| &v[b]));
            }
        }
    }

    /// The summaries of the first `n` epochs (those finished).
    fn epochs_up_to(&self, n: usize) -> Vec<EpochSummary> {
        self.epochs
            .lock()
            .map(|v| v[..n.min(v.len())].to_vec())
            .unwrap_or_default()
    }

    /// Counts an image put into a batch (`in_place`: written there by its worker).
    pub(super) fn count_image(&self, in_place: bool) {
        self.batch_images.fetch_add(1, Ordering::Relaxed);
        if in_place {
            self.in_place.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Adds `d` to a time counter.
pub(super) fn add_ns(a: &AtomicU64, d: Duration) {
    a.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
}

fn ns(a: &AtomicU64) -> Duration {
    Duration::from_nanos(a.load(Ordering::Relaxed))
}
