//! Which decoder takes a JPEG the engines could take: the JPEG engines, or our CPU decoder on
//! the worker threads (its pixels uploaded into the same batch). The JPEG engines are fed by
//! one thread whose host work per image (nvJPEG parses every stream, and that does not
//! spread over threads: docs/performance.md) bounds their rate; the
//! workers have time left after preparing every sample. The split gives the CPU the share
//! that finishes both at once, from what each measures as the run goes:
//!
//! ```text
//! W workers, p = host time preparing a sample, d = CPU time decoding one, e = the engines'
//! feeding thread's time per image:   W / (p + s·d) = 1 / ((1 − s)·e)   ⇒   s = (W·e − p) / (W·e + d)
//! ```
//!
//! where W is the workers the cores can run beside the consumer and the feeding thread: at
//! most the cores less one (the consumer's: a training loop's Python thread) and less the
//! part of the feeding thread's call that takes one (nvJPEG's call spins while it waits for
//! the device, and on a machine with few cores that is a worker's core); the share is
//! clamped to `[0, MAX_SHARE]`, re-estimated every `ADAPT_EVERY` engine images (a quarter of
//! that for the first four) from what was measured since the last estimate, blended half and
//! half with it: the engines' call slows by 4–5× once a training loop or our own kernels keep
//! the SMs busy (docs/performance.md), and a run-long average would follow that only slowly.
//!
//! When the warm-up ends ([`DecoderSplit::hold`]) the CPU's pixels get a budget: each batch's
//! CPU decodes carry at most that many pixel bytes (a sample that would pass it goes to the
//! engines), because they are uploaded through buffers sized then, and a batch that carried
//! more would allocate again. The budget leaves room above what the warm-up reached (twice
//! its share, at least a quarter more of the batch, and at least the balance with the
//! engines' call [`SLOWDOWN`] times slower than the warm-up measured: [`headroom`]), so
//! that a share that must rise later — the training loop starting after the loader's first
//! batches — can, and the stage sizes its buffers for it. (On an H200 a quarter more was
//! not enough: beside a ResNet-50 loop the share sat at its ceiling, 0.25, the feeding
//! thread busy the whole run, and the loop ran at 93%.) Which samples
//! go to the CPU is a hash of (seed, epoch, index) against the share, so a run is the same
//! whatever the threads' timing — and which decoder took a sample changes nothing else about
//! it: the same parameters, the same skips (`docs/gpu.md`).

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// The most the CPU takes (the engines stay busy).
const MAX_SHARE: f64 = 0.9;

/// Batches whose CPU decodes are counted against the budget at once (the workers prepare
/// a few batches ahead of the one being filled).
const BUDGET_BATCHES: usize = 16;

/// Engine images between two estimates (once the first four are made).
const ADAPT_EVERY: u64 = 256;

/// The split is idle where fewer than one in this many samples were the engines' to take.
const IDLE_ONE_IN: u64 = 16;

/// The weight of the last window's measurements in an estimate (the rest is the estimate
/// before).
const RECENT: f64 = 0.5;

/// How many times slower the engines' call may get after the warm-up than it measured then:
/// beside a training loop or our own kernels it took 250–284 µs an image on an H200 against
/// 55–60 alone (4.2–5.2×, docs/performance.md), and a margin.
const SLOWDOWN: f64 = 6.0;

/// The most bytes the headroom gives a batch's CPU pixels (a warm-up batch that carried more
/// keeps what it carried).
const MAX_BUDGET_BYTES: usize = 192 << 20;

/// The share the CPU may reach after the warm-up, in millionths, when it reached `most`
/// during it and `slowed` is the balance with the engines [`SLOWDOWN`] times slower: twice
/// `most`, at least a quarter of the batch more, and at least `slowed`, within [`MAX_SHARE`].
pub(crate) fn headroom(most: u32, slowed: u32) -> u32 {
    let (most, slowed) = (f64::from(most) / 1e6, f64::from(slowed) / 1e6);
    let ceiling = (2.0 * most)
        .max(most + 0.25)
        .max(slowed)
        .min(MAX_SHARE)
        .max(most);
    (ceiling * 1e6).round() as u32
}

/// What a batch's CPU decodes may carry once the warm-up is over ([`DecoderSplit::hold`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Budget {
    /// Pixel bytes of the split's choosing a batch's CPU decodes may carry.
    pub(crate) per_batch: usize,
    /// How much more that is than the most of the split's choosing a warm-up batch carried.
    pub(crate) above_warm_up: usize,
    /// The most bytes of images the engines can't take that a warm-up batch carried (on top
    /// of the budget: the split does not choose them).
    pub(crate) forced: usize,
    /// The most CPU-decoded bytes a warm-up batch carried (of either kind).
    pub(crate) carried: usize,
}

impl Budget {
    /// The most CPU-decoded bytes a later batch may carry: the budget, the images the
    /// engines can't take, and a quarter of the budget more (bad samples shift where batches
    /// begin, and a batch then carries part of its neighbour's budget).
    pub(crate) fn most_per_batch(&self) -> usize {
        self.per_batch + self.per_batch / 4 + self.forced
    }

    /// How much more that is than a warm-up batch carried: the room the CPU pixels'
    /// buffers need beyond what the warm-up sized.
    pub(crate) fn rise(&self) -> usize {
        self.most_per_batch().saturating_sub(self.carried)
    }
}

/// How many of something, and the nanoseconds they took.
#[derive(Debug, Default, Clone, Copy)]
struct Count {
    n: u64,
    ns: u64,
}

impl Count {
    /// The nanoseconds per item since `before`, if any came.
    fn per_item_since(self, before: Count) -> Option<f64> {
        let n = self.n.saturating_sub(before.n);
        (n > 0).then(|| self.ns.saturating_sub(before.ns) as f64 / n as f64)
    }
}

/// The counters an estimate reads.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    /// Engine images and the feeding thread's wall time, then its CPU time.
    engine: Count,
    engine_cpu: Count,
    /// Samples prepared and the workers' time; CPU decodes and theirs.
    prepare: Count,
    decode: Count,
}

/// The per-image costs an estimate is made of (ns), and the counters they were last
/// measured at.
#[derive(Debug, Default)]
struct Window {
    at: Counts,
    engine: Option<f64>,
    engine_cpu: Option<f64>,
    prepare: Option<f64>,
    decode: Option<f64>,
}

/// `old` blended with the window's `new` ([`RECENT`]), or whichever there is.
fn blend(old: Option<f64>, new: Option<f64>) -> Option<f64> {
    match (old, new) {
        (Some(o), Some(v)) => Some(RECENT * v + (1.0 - RECENT) * o),
        (o, v) => v.or(o),
    }
}

/// The split and what it is computed from (shared by the workers and the feeding thread).
#[derive(Debug, Default)]
pub(crate) struct DecoderSplit {
    /// The CPU's share, in millionths.
    cpu_ppm: AtomicU32,
    /// The most the share has been, in millionths.
    most_ppm: AtomicU32,
    /// The most the share may become (`u32::MAX` until [`DecoderSplit::hold`]).
    ceiling_ppm: AtomicU32,
    /// Estimates made so far, and those the ceiling lowered (the balance was above it).
    estimates: AtomicU32,
    capped: AtomicU32,
    /// Samples the share picked that went to the engines: their batch's budget was spent.
    over_budget: AtomicU64,
    /// Samples per batch.
    batch: usize,
    /// The most pixel bytes decoded on the CPU that one batch carried (measured at launch),
    /// the most of those the split did not send (images the engines can't take), and the
    /// most it did.
    most_bytes: AtomicUsize,
    most_forced: AtomicUsize,
    most_chosen: AtomicUsize,
    /// Pixel bytes of the samples decoded so far (either decoder), and how many.
    pixel_bytes: AtomicU64,
    pixel_images: AtomicU64,
    /// Pixel bytes of CPU decodes a batch may carry once held (`usize::MAX` until then).
    budget: AtomicUsize,
    /// Bytes reserved per batch: ((epoch, batch in the epoch), bytes), by batch modulo the
    /// length.
    reserved: Mutex<Vec<((u64, usize), usize)>>,
    /// Whether the share adapts (`STOKEHOLD_CPU_DECODE_SHARE` fixes it).
    fixed: bool,
    /// Worker threads running (more once the worker gate opens).
    workers: AtomicU32,
    /// The machine's cores (the workers' and the feeding thread's).
    cores: u32,
    /// Samples prepared, and the workers' time preparing them (decodes excluded).
    pub(crate) prepared: AtomicU64,
    pub(crate) prepare_ns: AtomicU64,
    /// Samples decoded on the CPU by the split, and the time.
    pub(crate) cpu_images: AtomicU64,
    pub(crate) cpu_ns: AtomicU64,
    /// Images given to the engines, and the feeding thread's time submitting them (wall
    /// time, and the part of it the thread was on a core).
    pub(crate) engine_images: AtomicU64,
    pub(crate) engine_ns: AtomicU64,
    pub(crate) engine_cpu_ns: AtomicU64,
    /// Their pixels, in thousandths of a megapixel.
    pub(crate) engine_kpx: AtomicU64,
    next_estimate: AtomicU64,
    /// What the estimates are made of (only the feeding thread estimates).
    window: Mutex<Window>,
}

impl DecoderSplit {
    /// A split for `workers` worker threads on `cores` cores and batches of `batch`,
    /// starting with the CPU's share at 0 (or fixed by `STOKEHOLD_CPU_DECODE_SHARE`, a
    /// fraction, for tuning runs).
    pub(crate) fn new(workers: usize, cores: usize, batch: usize) -> DecoderSplit {
        let fixed = std::env::var("STOKEHOLD_CPU_DECODE_SHARE")
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| (0.0..=1.0).contains(v));
        DecoderSplit::with_share(workers, cores, batch, fixed)
    }

    /// [`DecoderSplit::new`] with the share fixed at `fixed`, or adapting (`None`).
    fn with_share(workers: usize, cores: usize, batch: usize, fixed: Option<f64>) -> DecoderSplit {
        let ppm = fixed.map_or(0, |s| (s * 1e6) as u32);
        DecoderSplit {
            cpu_ppm: AtomicU32::new(ppm),
            most_ppm: AtomicU32::new(ppm),
            ceiling_ppm: AtomicU32::new(u32::MAX),
            fixed: fixed.is_some(),
            workers: AtomicU32::new(workers.max(1) as u32),
            cores: cores.max(1) as u32,
            batch: batch.max(1),
            budget: AtomicUsize::new(usize::MAX),
            reserved: Mutex::new(vec![((u64::MAX, 0), 0); BUDGET_BATCHES]),
            next_estimate: AtomicU64::new(ADAPT_EVERY / 4),
            ..DecoderSplit::default()
        }
    }

    /// The CPU's share now.
    pub(crate) fn cpu_share(&self) -> f64 {
        f64::from(self.cpu_ppm.load(Ordering::Relaxed)) / 1e6
    }

    /// Whether sample `index` of `epoch`, at position `pos` of the epoch, goes to the CPU
    /// decoder, which would give it `bytes` of pixels: the share picks it, and once held,
    /// its batch's budget has room for it (then taken).
    pub(crate) fn to_cpu(
        &self,
        seed: u64,
        (epoch, index, pos): (u64, usize, usize),
        bytes: usize,
    ) -> bool {
        let ppm = self.cpu_ppm.load(Ordering::Relaxed);
        if ppm == 0 {
            return false;
        }
        let h = crate::rng::SampleRng::from_key(
            seed ^ epoch.rotate_left(32) ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        )
        .below(1_000_000);
        if h >= u64::from(ppm) {
            return false;
        }
        let taken = self.reserve((epoch, pos / self.batch), bytes);
        if !taken {
            self.over_budget.fetch_add(1, Ordering::Relaxed);
        }
        taken
    }

    /// Takes `bytes` of batch `at`'s budget, if it has them. Bad samples shift where batches
    /// begin by a few positions; a batch then carries part of its neighbour's budget.
    fn reserve(&self, at: (u64, usize), bytes: usize) -> bool {
        let budget = self.budget.load(Ordering::Relaxed);
        if budget == usize::MAX {
            return true;
        }
        let mut reserved = self.reserved.lock().unwrap_or_else(|p| p.into_inner());
        let n = reserved.len();
        let (owner, used) = &mut reserved[at.1 % n];
        if *owner == (u64::MAX, 0) || *owner < at {
            *owner = at;
            *used = 0;
        } else if *owner > at {
            // A batch more than the ring's length behind: the engines take it.
            return false;
        }
        if *used + bytes > budget {
            return false;
        }
        *used += bytes;
        true
    }

    /// Counts a launched batch that carried `bytes` of pixels decoded on the CPU, of
    /// `images` images, `forced` of them not the split's choice (the engines can't take them).
    pub(crate) fn carried(&self, bytes: usize, images: usize, forced: usize) {
        self.most_bytes.fetch_max(bytes, Ordering::Relaxed);
        self.most_forced.fetch_max(forced, Ordering::Relaxed);
        self.most_chosen
            .fetch_max(bytes.saturating_sub(forced), Ordering::Relaxed);
        self.decoded_pixels(bytes, images);
    }

    /// Counts `images` decoded (by either decoder) into `bytes` of pixels.
    pub(crate) fn decoded_pixels(&self, bytes: usize, images: usize) {
        self.pixel_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        self.pixel_images
            .fetch_add(images as u64, Ordering::Relaxed);
    }

    /// Counts a sample prepared in `d` (its CPU decode, if any, not included).
    pub(crate) fn prepared(&self, d: Duration) {
        self.prepared.fetch_add(1, Ordering::Relaxed);
        self.prepare_ns
            .fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }

    /// Counts a CPU decode the split sent, taking `d`.
    pub(crate) fn decoded_on_cpu(&self, d: Duration) {
        self.cpu_images.fetch_add(1, Ordering::Relaxed);
        self.cpu_ns
            .fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }

    /// Counts `n` images submitted to the engines in `(wall, cpu)` of the feeding thread's
    /// time, and re-estimates the share every so often.
    pub(crate) fn submitted(&self, n: usize, pixels: u64, (d, cpu): (Duration, Duration)) {
        self.engine_kpx.fetch_add(pixels / 1000, Ordering::Relaxed);
        let total = self.engine_images.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
        self.engine_ns
            .fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
        self.engine_cpu_ns
            .fetch_add(cpu.as_nanos() as u64, Ordering::Relaxed);
        if self.fixed || total < self.next_estimate.load(Ordering::Relaxed) {
            return;
        }
        // The first few estimates come sooner: the warm-up waits for the share to settle.
        let every = if self.estimates.load(Ordering::Relaxed) < 4 {
            ADAPT_EVERY / 4
        } else {
            ADAPT_EVERY
        };
        self.next_estimate.store(total + every, Ordering::Relaxed);
        if let Some((s, measured)) = self.estimate() {
            let wanted = (s * 1e6) as u32;
            let ppm = wanted.min(self.ceiling_ppm.load(Ordering::Relaxed));
            if ppm < wanted {
                self.capped.fetch_add(1, Ordering::Relaxed);
            }
            self.cpu_ppm.store(ppm, Ordering::Relaxed);
            // The headroom is built on shares the CPU's measured decode time gave, not on
            // the first estimate's guess of it.
            if measured {
                self.most_ppm.fetch_max(ppm, Ordering::Relaxed);
            }
            self.estimates.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether the share has had time to settle: fixed, or estimated twice (the first
    /// estimate guesses the CPU's decode time; the second has measured it).
    pub(crate) fn settled(&self) -> bool {
        self.fixed || self.estimates.load(Ordering::Relaxed) >= 2
    }

    /// Whether the split has settled ([`DecoderSplit::settled`]) or has nothing to settle:
    /// [`DecoderSplit::idle`]. The warm-up waits for the split where there is one to make,
    /// and does not wait forever where there is none.
    pub(crate) fn settled_or_idle(&self) -> bool {
        self.settled() || self.idle()
    }

    /// Whether the engines take almost none of the samples (fewer than one in
    /// [`IDLE_ONE_IN`] of those prepared went to them or to the split's CPU share): a device
    /// without engines, or photos they don't take (PNGs, progressive JPEGs). A rate, not a
    /// count: small batches meet the warm-up's other conditions before the engines have
    /// taken the images two estimates need.
    pub(crate) fn idle(&self) -> bool {
        let split =
            self.engine_images.load(Ordering::Relaxed) + self.cpu_images.load(Ordering::Relaxed);
        let prepared = self.prepared.load(Ordering::Relaxed);
        prepared > 0 && split * IDLE_ONE_IN < prepared
    }

    /// Counts `n` workers running from now on (`WorkerGate`).
    pub(crate) fn set_workers(&self, n: usize) {
        self.workers.store(n.max(1) as u32, Ordering::Relaxed);
    }

    /// The most the share has been (what the warm-up measured, until it ends).
    pub(crate) fn most_share(&self) -> f64 {
        f64::from(self.most_ppm.load(Ordering::Relaxed)) / 1e6
    }

    /// The most the share may become now (`None` until [`DecoderSplit::hold`]), how many
    /// estimates wanted more, and how many samples the share picked went to the engines
    /// because their batch's budget was spent: what held the CPU back since the warm-up.
    pub(crate) fn ceiling(&self) -> (Option<f64>, u32, u64) {
        let c = self.ceiling_ppm.load(Ordering::Relaxed);
        let ceiling = (c != u32::MAX).then(|| f64::from(c) / 1e6);
        (
            ceiling,
            self.capped.load(Ordering::Relaxed),
            self.over_budget.load(Ordering::Relaxed),
        )
    }

    /// Ends the warm-up: from now on the share stays at or below [`headroom`] of the most it
    /// has been and of the balance with slower engines, and a batch's CPU decodes of the
    /// split's choosing carry at most [`Budget::per_batch`] bytes: what that share of the
    /// samples the engines take takes at the mean image's size and a quarter more (at most
    /// [`MAX_BUDGET_BYTES`]), or the most a batch carried of them if that is more. The stage
    /// sizes the CPU pixels' buffers for it and for the images the engines can't take. A
    /// share fixed by `STOKEHOLD_CPU_DECODE_SHARE` keeps what the warm-up carried.
    pub(crate) fn hold(&self) -> Budget {
        let most = self.most_ppm.load(Ordering::Relaxed);
        // Idle (the engines took almost no sample): no room below, so no share to rise to.
        let ceiling = if self.fixed || self.idle() {
            most
        } else {
            headroom(most, (self.slowed_balance() * 1e6) as u32)
        };
        self.ceiling_ppm.store(ceiling, Ordering::Relaxed);
        // (A share from guessed estimates may stand above it until the next estimate.)
        self.cpu_ppm.fetch_min(ceiling, Ordering::Relaxed);
        let carried = self.most_bytes.load(Ordering::Relaxed);
        let chosen = self.most_chosen.load(Ordering::Relaxed);
        let images = self.pixel_images.load(Ordering::Relaxed).max(1);
        let mean = self.pixel_bytes.load(Ordering::Relaxed) as f64 / images as f64;
        // The share applies to the samples the engines take (the split sends some of them
        // to the CPU): no room where they take almost none.
        let room = match self.idle() {
            true => 0.0,
            false => f64::from(ceiling) / 1e6 * self.batch as f64 * mean * 1.25,
        };
        let per_batch = if self.fixed {
            chosen
        } else {
            chosen.max((room as usize).min(MAX_BUDGET_BYTES))
        };
        self.budget.store(per_batch, Ordering::Relaxed);
        Budget {
            per_batch,
            above_warm_up: per_batch - chosen,
            forced: self.most_forced.load(Ordering::Relaxed),
            carried,
        }
    }

    /// The counts a timing model's limit is computed from, now ([`ModelledCounts`]).
    pub(crate) fn modelled_counts(
        &self,
        model: crate::cuda::TimingModel,
        batch: usize,
    ) -> ModelledCounts {
        ModelledCounts {
            model,
            batch,
            workers: self.workers.load(Ordering::Relaxed),
            prepared: self.prepared.load(Ordering::Relaxed),
            engine_images: self.engine_images.load(Ordering::Relaxed),
            engine_kpx: self.engine_kpx.load(Ordering::Relaxed),
            host_ns: self.prepare_ns.load(Ordering::Relaxed) + self.cpu_ns.load(Ordering::Relaxed),
        }
    }

    /// The share that finishes both decoders at once (module docs), once each has a
    /// measurement: the per-image costs measured since the last estimate, blended with the
    /// ones before ([`RECENT`]); and whether the CPU's decode time was measured (the first
    /// estimates guess it).
    fn estimate(&self) -> Option<(f64, bool)> {
        let count = |n: &AtomicU64, ns: &AtomicU64| Count {
            n: n.load(Ordering::Relaxed),
            ns: ns.load(Ordering::Relaxed),
        };
        let now = Counts {
            engine: count(&self.engine_images, &self.engine_ns),
            engine_cpu: count(&self.engine_images, &self.engine_cpu_ns),
            prepare: count(&self.prepared, &self.prepare_ns),
            decode: count(&self.cpu_images, &self.cpu_ns),
        };
        let mut w = self.window.lock().unwrap_or_else(|p| p.into_inner());
        let at = w.at;
        w.engine = blend(w.engine, now.engine.per_item_since(at.engine));
        w.engine_cpu = blend(w.engine_cpu, now.engine_cpu.per_item_since(at.engine_cpu));
        w.prepare = blend(w.prepare, now.prepare.per_item_since(at.prepare));
        w.decode = blend(w.decode, now.decode.per_item_since(at.decode));
        w.at = now;
        Some((self.balance(&w, 1.0)?, w.decode.is_some()))
    }

    /// The balance (module docs) from the window's costs, with the engines' call `slower`
    /// times slower than measured (the slowing a wait, not a core's time: docs/performance.md),
    /// or `None` before both decoders' sides are measured.
    fn balance(&self, w: &Window, slower: f64) -> Option<f64> {
        let (e, p) = (w.engine?, w.prepare?);
        let cpu = w.engine_cpu.unwrap_or(e);
        let e = e * slower;
        // The workers that have a core: the cores less the consumer's and the feeding
        // thread's part of one. None: nothing for the CPU.
        let on_core = (cpu / e.max(1.0)).clamp(0.0, 1.0);
        let workers = f64::from(self.workers.load(Ordering::Relaxed))
            .min(f64::from(self.cores) - 1.0 - on_core);
        if workers <= 0.0 {
            return Some(0.0);
        }
        // Before the CPU has decoded any: a sample's prepare time is a lower bound no one
        // would use; take 20 times it (a photo's decode is 10–40 times its header's parse).
        let d = w.decode.unwrap_or(20.0 * p);
        Some(((workers * e - p) / (workers * e + d)).clamp(0.0, MAX_SHARE))
    }

    /// The balance with the engines [`SLOWDOWN`] times slower than the estimates so far
    /// measured them (0 before they have). Where the warm-up gave the CPU nothing, its decode
    /// time is the estimate's guess (20 times a sample's prepare): unlike the most share
    /// reached, which is doubled, this only sizes the room, and without it a warm-up whose
    /// engines kept up alone would leave the CPU none once they slow.
    fn slowed_balance(&self) -> f64 {
        let w = self.window.lock().unwrap_or_else(|p| p.into_inner());
        self.balance(&w, SLOWDOWN).unwrap_or(0.0)
    }
}

/// On an emulated device with a timing model: the split's counts at one moment, from which
/// [`ModelledCounts::limit_since`] gives the images per second the modelled device and the
/// workers, as measured, allow between two such moments.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelledCounts {
    model: crate::cuda::TimingModel,
    batch: usize,
    /// Worker threads running at that moment.
    workers: u32,
    prepared: u64,
    engine_images: u64,
    engine_kpx: u64,
    /// The workers' time preparing samples and decoding the CPU's share (ns).
    host_ns: u64,
}

impl ModelledCounts {
    /// The most images per second since `earlier` (since the start without it): the
    /// device's limit for the images the engines decoded, over their share of the images,
    /// or the workers' (preparing every sample, decoding the CPU's share), the smaller.
    /// Measured over the same span as the run it is held against: a warm-up, where the
    /// CPU's share is larger, would otherwise lower the workers' figure below what the
    /// timed epochs allowed. `None` when no image went to the engines in that span.
    pub fn limit_since(&self, earlier: Option<&ModelledCounts>) -> Option<f64> {
        let (prepared, engine, kpx, host_ns) = match earlier {
            Some(e) => (
                self.prepared.saturating_sub(e.prepared),
                self.engine_images.saturating_sub(e.engine_images),
                self.engine_kpx.saturating_sub(e.engine_kpx),
                self.host_ns.saturating_sub(e.host_ns),
            ),
            None => (
                self.prepared,
                self.engine_images,
                self.engine_kpx,
                self.host_ns,
            ),
        };
        if prepared == 0 || engine == 0 {
            return None;
        }
        let mp = kpx as f64 / 1000.0 / engine as f64;
        // The chroma rebuild's three launches and the chain's.
        let device = self.model.device_limit(mp, self.batch, 4.0) * prepared as f64 / engine as f64;
        let workers = f64::from(self.workers) * prepared as f64 * 1e9 / host_ns.max(1) as f64;
        Some(device.min(workers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_balances_the_two_decoders() {
        let s = DecoderSplit::new(16, 32, 256);
        // The H100's figures: 53 µs per engine image, 30 µs to prepare, 1.25 ms to decode.
        s.prepared.store(1000, Ordering::Relaxed);
        s.prepare_ns.store(30_000_000, Ordering::Relaxed);
        s.cpu_images.store(100, Ordering::Relaxed);
        s.cpu_ns.store(125_000_000, Ordering::Relaxed);
        let call = Duration::from_micros(53 * ADAPT_EVERY);
        s.submitted(ADAPT_EVERY as usize, 0, (call, call));
        let share = s.cpu_share();
        assert!((share - 0.39).abs() < 0.01, "{share}");
        // Both finish together: W / (p + s·d) = 1 / ((1 − s)·e).
        let (w, p, d, e) = (16.0, 30.0, 1250.0, 53.0);
        let cpu = w / (p + share * d);
        let engines = 1.0 / ((1.0 - share) * e);
        assert!((cpu / engines - 1.0).abs() < 0.02, "{cpu} {engines}");
        // Fast engines, few workers: nothing for the CPU.
        let t = DecoderSplit::new(1, 32, 256);
        t.prepared.store(10, Ordering::Relaxed);
        t.prepare_ns.store(1_000_000, Ordering::Relaxed);
        let call = Duration::from_micros(ADAPT_EVERY);
        t.submitted(ADAPT_EVERY as usize, 0, (call, call));
        assert_eq!(t.cpu_share(), 0.0);
    }

    #[test]
    fn the_modelled_limit_is_the_timed_spans_not_the_warm_ups() {
        let model = crate::cuda::TimingModel::named("h100").unwrap();
        let s = DecoderSplit::new(2, 2, 256);
        let count = |prepared: u64, prepare_ms: u64, cpu: u64, cpu_ms: u64, engine: u64| {
            s.prepared.fetch_add(prepared, Ordering::Relaxed);
            s.prepare_ns
                .fetch_add(prepare_ms * 1_000_000, Ordering::Relaxed);
            s.cpu_images.fetch_add(cpu, Ordering::Relaxed);
            s.cpu_ns.fetch_add(cpu_ms * 1_000_000, Ordering::Relaxed);
            s.engine_images.fetch_add(engine, Ordering::Relaxed);
            s.engine_kpx.fetch_add(engine * 200, Ordering::Relaxed);
        };
        // A warm-up where the CPU decoded half of 1,000 images at 1.25 ms each...
        count(1000, 30, 500, 625, 500);
        let warm = s.modelled_counts(model, 256);
        // ...then 2,000 images all to the engines, 30 µs each to prepare.
        count(2000, 60, 0, 0, 2000);
        let now = s.modelled_counts(model, 256);
        let timed = now.limit_since(Some(&warm)).unwrap();
        // Over the timed span: the device's limit for 0.2 MP images, or 2 workers at 30 µs.
        let expected = model.device_limit(0.2, 256, 4.0).min(2.0 * 1e6 / 30.0);
        assert!((timed / expected - 1.0).abs() < 1e-9, "{timed} {expected}");
        // Since the start, the warm-up's CPU decodes bind the workers: 3,000 samples in
        // 715 ms of two workers' time.
        let whole = now.limit_since(None).unwrap();
        let workers_whole = 2.0 * 3000.0 / 0.715;
        assert!(
            (whole / workers_whole - 1.0).abs() < 1e-9,
            "{whole} {workers_whole}"
        );
        assert!(whole < timed / 2.0, "{whole} {timed}");
        // Nothing to the engines in the span: no limit.
        assert_eq!(now.limit_since(Some(&now)), None);
    }

    /// One estimate's window: 1,000 samples prepared at `prepare_us` each, a tenth of them
    /// decoded on the CPU at 1.25 ms, and engine images at `engine_us` until an estimate is
    /// due. Returns the share.
    fn window(s: &DecoderSplit, prepare_us: u64, engine_us: u64) -> f64 {
        window_on_core(s, prepare_us, engine_us, 1.0)
    }

    /// [`window`], the feeding thread on a core for `on_core` of its call.
    fn window_on_core(s: &DecoderSplit, prepare_us: u64, engine_us: u64, on_core: f64) -> f64 {
        let engine = engine_us as f64;
        window_of(s, prepare_us, (100, 1250), (engine, engine * on_core))
    }

    /// One estimate's window: 1,000 samples prepared at `prepare_us` each, `decodes` of
    /// them decoded on the CPU at `decode_us`, and engine images at `engine` µs of the
    /// feeding thread's wall and CPU time each until an estimate is due. Returns the share.
    fn window_of(
        s: &DecoderSplit,
        prepare_us: u64,
        (decodes, decode_us): (u64, u64),
        engine: (f64, f64),
    ) -> f64 {
        let n = 1000;
        s.prepared.fetch_add(n, Ordering::Relaxed);
        s.prepare_ns
            .fetch_add(n * prepare_us * 1000, Ordering::Relaxed);
        s.cpu_images.fetch_add(decodes, Ordering::Relaxed);
        s.cpu_ns
            .fetch_add(decodes * decode_us * 1000, Ordering::Relaxed);
        // Enough engine images to make the next estimate due.
        let due = s.next_estimate.load(Ordering::Relaxed);
        let k = due
            .saturating_sub(s.engine_images.load(Ordering::Relaxed))
            .max(1);
        let us = |per: f64| Duration::from_secs_f64(per * k as f64 / 1e6);
        s.submitted(k as usize, 0, (us(engine.0), us(engine.1)));
        s.cpu_share()
    }

    #[test]
    fn the_share_follows_the_engines_when_they_slow_down() {
        // 4 workers; the engines' call at 55 µs (alone), then 250 µs (beside a training
        // loop): the H200's figures.
        let s = DecoderSplit::new(4, 32, 256);
        let balanced = |e: f64| (4.0 * e - 30.0) / (4.0 * e + 1250.0);
        let mut share = 0.0;
        for _ in 0..8 {
            share = window(&s, 30, 55);
        }
        assert!((share - balanced(55.0)).abs() < 0.01, "{share}");
        let before = share;
        for _ in 0..6 {
            share = window(&s, 30, 250);
        }
        // Within 2% of the balance at the new speed after six windows, whatever the run's
        // average (which would still be at 55 µs for most of its images).
        assert!((share - balanced(250.0)).abs() < 0.02, "{before} {share}");
    }

    #[test]
    fn a_split_the_engines_take_too_little_for_does_not_hold_up_the_warm_up() {
        // Nothing for the engines (no engines, or photos they don't take): nothing to settle.
        let s = DecoderSplit::new(4, 32, 256);
        s.prepared.store(1000, Ordering::Relaxed);
        assert!(!s.settled() && s.settled_or_idle());
        // One in 16 of the samples theirs: the warm-up waits for two estimates, however few
        // images that is so far (small batches), then not.
        let call = Duration::from_micros(55 * ADAPT_EVERY / 4);
        s.submitted((ADAPT_EVERY / 4) as usize, 0, (call, call));
        assert!(!s.settled() && !s.settled_or_idle());
        s.submitted((ADAPT_EVERY / 4) as usize, 0, (call, call));
        assert!(s.settled() && s.settled_or_idle());
        // Fewer than one in 16: idle.
        let few = DecoderSplit::new(4, 32, 256);
        few.prepared.store(1100, Ordering::Relaxed);
        few.submitted(68, 0, (call, call));
        assert!(!few.settled() && few.settled_or_idle());
    }

    #[test]
    fn after_the_hold_the_share_rises_to_its_headroom_and_no_higher() {
        let s = DecoderSplit::new(4, 32, 256);
        for _ in 0..8 {
            window(&s, 30, 55);
        }
        assert!(s.settled());
        let most = s.cpu_share();
        s.decoded_pixels(256 * 1000, 256);
        s.hold();
        // Engines 20 times slower: the balance is far above the most the warm-up saw; the
        // share rises to the balance at SLOWDOWN times the warm-up's engines (above twice
        // the most and a quarter more here), not beyond, and says its estimates were capped.
        let balanced = |e: f64| (4.0 * e - 30.0) / (4.0 * e + 1250.0);
        for _ in 0..10 {
            window(&s, 30, 1100);
        }
        let (ceiling, capped, _) = s.ceiling();
        let ceiling = ceiling.expect("held");
        assert!(
            (s.cpu_share() - ceiling).abs() < 1e-6,
            "{most} {}",
            s.cpu_share()
        );
        assert!(
            (ceiling - balanced(55.0 * SLOWDOWN)).abs() < 1e-3,
            "{most} {ceiling}"
        );
        assert!(ceiling > most + 0.25, "{most} {ceiling}");
        assert!(capped >= 9, "{capped}");
        // Lower still follows the measurements.
        for _ in 0..10 {
            window(&s, 30, 40);
        }
        assert!(s.cpu_share() < most, "{most} {}", s.cpu_share());
    }

    #[test]
    fn workers_count_only_where_the_cores_have_room_beside_the_feeding_thread() {
        // 2 workers on 3 cores (one the consumer's), the engines' call at 250 µs: spinning,
        // it takes a core (one worker is left); waiting (a fifth of it on a core), 1.8
        // workers are. On 2 cores, spinning, none: the CPU takes no share.
        let balanced = |w: f64| (w * 250.0 - 30.0) / (w * 250.0 + 1250.0);
        let spinning = DecoderSplit::new(2, 3, 256);
        let waiting = DecoderSplit::new(2, 3, 256);
        let full = DecoderSplit::new(2, 2, 256);
        let roomy = DecoderSplit::new(2, 16, 256);
        // One core (a cgroup's limit): none either, however slow the engines.
        let one = DecoderSplit::new(4, 1, 256);
        let (mut a, mut b, mut c, mut d, mut e) = (0.0, 0.0, 0.0, 1.0, 1.0);
        for _ in 0..4 {
            a = window_on_core(&spinning, 30, 250, 1.0);
            b = window_on_core(&waiting, 30, 250, 0.2);
            c = window_on_core(&roomy, 30, 250, 1.0);
            d = window_on_core(&full, 30, 250, 1.0);
            e = window_on_core(&one, 30, 2000, 1.0);
        }
        assert_eq!((d, e), (0.0, 0.0));
        assert!((a - balanced(1.0)).abs() < 0.01, "{a}");
        assert!((b - balanced(1.8)).abs() < 0.01, "{b}");
        assert!((c - balanced(2.0)).abs() < 0.01, "{c}");
    }

    #[test]
    fn a_guess_of_the_cpus_decode_time_does_not_raise_the_headroom() {
        // The first estimate guesses the CPU's decode time (20 times a sample's prepare: a
        // share of 0.23 here); only measured estimates count towards the headroom.
        let s = DecoderSplit::new(4, 32, 256);
        s.prepared.store(1000, Ordering::Relaxed);
        s.prepare_ns.store(30_000_000, Ordering::Relaxed);
        let call = Duration::from_micros(55 * ADAPT_EVERY / 4);
        s.submitted((ADAPT_EVERY / 4) as usize, 0, (call, call));
        assert!(s.cpu_share() > 0.2, "{}", s.cpu_share());
        assert_eq!(s.most_ppm.load(Ordering::Relaxed), 0);
        // Measured (1.25 ms a decode): 0.13, and that is the most.
        let measured = window(&s, 30, 55);
        assert!((measured - 0.13).abs() < 0.01, "{measured}");
        assert_eq!(s.most_ppm.load(Ordering::Relaxed), (measured * 1e6) as u32);
    }

    #[test]
    fn the_budget_leaves_room_for_the_headroom_within_its_cap_and_not_for_a_fixed_share() {
        // A warm-up that reached 10% of a batch of 100 images of 10 kB: 100 kB a batch. The
        // headroom, 35%, at a quarter more: 437,500 bytes.
        let s = DecoderSplit::new(4, 32, 100);
        s.most_ppm.store(100_000, Ordering::Relaxed);
        s.carried(100_000, 10, 0);
        s.decoded_pixels(900_000, 90);
        let b = s.hold();
        assert_eq!(
            b,
            Budget {
                per_batch: 437_500,
                above_warm_up: 337_500,
                forced: 0,
                carried: 100_000
            }
        );
        assert_eq!(s.ceiling_ppm.load(Ordering::Relaxed), 350_000);
        // Large images: the headroom's bytes are capped, never below what a batch carried.
        let big = DecoderSplit::new(4, 32, 256);
        big.most_ppm.store(400_000, Ordering::Relaxed);
        big.carried(300 << 20, 100, 0);
        big.decoded_pixels(256 * (3 << 20), 256);
        assert_eq!(big.hold().per_batch, 300 << 20);
        let capped = DecoderSplit::new(4, 32, 256);
        capped.most_ppm.store(200_000, Ordering::Relaxed);
        capped.carried(100 << 20, 50, 0);
        capped.decoded_pixels(256 * (3 << 20), 256);
        assert_eq!(capped.hold().per_batch, MAX_BUDGET_BYTES);
        // A fixed share keeps what the warm-up carried, and its ceiling.
        let fixed = DecoderSplit::with_share(4, 32, 100, Some(0.1));
        fixed.carried(100_000, 10, 0);
        fixed.decoded_pixels(900_000, 90);
        assert_eq!(
            fixed.hold(),
            Budget {
                per_batch: 100_000,
                above_warm_up: 0,
                forced: 0,
                carried: 100_000
            }
        );
        assert_eq!(fixed.ceiling_ppm.load(Ordering::Relaxed), 100_000);
    }

    #[test]
    fn the_budget_counts_the_images_the_engines_cannot_take_once() {
        // A batch of 100 carried 600 kB from the CPU: 500 kB the engines can't take, 100 kB
        // the split sent; half the samples were the engines' (450) or the split's (50).
        let s = DecoderSplit::new(4, 32, 200);
        s.most_ppm.store(100_000, Ordering::Relaxed);
        s.carried(600_000, 60, 500_000);
        s.decoded_pixels(1_000_000, 200);
        s.prepared.store(1000, Ordering::Relaxed);
        s.engine_images.store(450, Ordering::Relaxed);
        s.cpu_images.store(50, Ordering::Relaxed);
        // The headroom of a batch of 200 at the mean image's size (the 260 counted), a
        // quarter more, of the split's; the forced bytes come on top, once.
        let b = s.hold();
        let ceiling = f64::from(s.ceiling_ppm.load(Ordering::Relaxed)) / 1e6;
        let room = (ceiling * 200.0 * (1_600_000.0 / 260.0) * 1.25) as usize;
        assert_eq!(
            b,
            Budget {
                per_batch: room,
                above_warm_up: room - 100_000,
                forced: 500_000,
                carried: 600_000
            }
        );
        assert_eq!(b.rise(), room + room / 4 + 500_000 - 600_000);
        // A device without engines: nothing of the split's, and no room to rise into.
        let idle = DecoderSplit::new(4, 32, 100);
        idle.carried(600_000, 60, 600_000);
        idle.decoded_pixels(1_000_000, 100);
        idle.prepared(Duration::from_micros(30));
        let b = idle.hold();
        assert_eq!((b.per_batch, b.forced, b.rise()), (0, 600_000, 0));
    }

    #[test]
    fn the_headroom_is_twice_the_share_a_quarter_more_or_the_slowed_balance() {
        assert_eq!(headroom(0, 0), 250_000);
        assert_eq!(headroom(100_000, 0), 350_000);
        assert_eq!(headroom(400_000, 0), 800_000);
        assert_eq!(headroom(600_000, 0), 900_000);
        assert_eq!(headroom(950_000, 0), 950_000);
        assert_eq!(headroom(4_000, 370_000), 370_000);
        assert_eq!(headroom(100_000, 990_000), 900_000);
    }

    #[test]
    fn a_warm_up_with_idle_sms_leaves_room_for_a_training_loop_beside_the_engines() {
        // The H200 beside ResNet-50 (2026-11-27): 4 workers, ~200 µs to prepare a sample,
        // 1.6 ms to decode one; the engines' call 55 µs during the warm-up (share ~0.01),
        // then 246 µs a call's image (the wait not on a core). The balance then is ~0.30;
        // the old headroom (a quarter more) held the share at 0.25 and the loop at 93%.
        let s = DecoderSplit::new(4, 16, 256);
        let feed = |s: &DecoderSplit, wall_us: f64| window_of(s, 200, (10, 1600), (wall_us, 55.0));
        for _ in 0..8 {
            feed(&s, 55.0);
        }
        let warm = s.cpu_share();
        assert!(warm < 0.05, "{warm}");
        s.decoded_pixels(256 * 300_000, 256);
        s.hold();
        let mut share = 0.0;
        for _ in 0..10 {
            share = feed(&s, 246.0);
        }
        let balanced = (4.0 * 246.0 - 200.0) / (4.0 * 246.0 + 1600.0);
        assert!((share - balanced).abs() < 0.01, "{warm} {share} {balanced}");
        assert_eq!(s.ceiling().1, 0, "the ceiling did not bind");
        // Then the engines give the feeding thread the rate the loop needs (4.7k img/s).
        assert!(1e6 / ((1.0 - share) * 246.0) > 4700.0, "{share}");
    }

    #[test]
    fn after_the_hold_a_batch_decodes_on_the_cpu_no_more_bytes_than_its_budget() {
        let s = DecoderSplit::new(4, 32, 10);
        s.cpu_ppm.store(1_000_000, Ordering::Relaxed);
        // Before the hold: no budget.
        assert!((0..10).all(|i| s.to_cpu(7, (0, i, i), 1000)));
        s.carried(2500, 3, 0);
        s.carried(1500, 2, 0);
        // The headroom of a share of 0 is 0.25 of a batch of 10 images of 800 bytes, a
        // quarter more: 2,500 bytes, as much as the most a batch carried.
        assert_eq!(
            s.hold(),
            Budget {
                per_batch: 2500,
                above_warm_up: 0,
                forced: 0,
                carried: 2500
            }
        );
        // The hold brought the share down to its ceiling; every sample to the CPU again, to
        // see the bytes' budget alone.
        assert_eq!(s.cpu_ppm.load(Ordering::Relaxed), 250_000);
        s.cpu_ppm.store(1_000_000, Ordering::Relaxed);
        // Batch 0 of epoch 1 (positions 0..10): two samples of 1000 fit, a third does not;
        // a smaller one still does.
        let picks: Vec<bool> = (0..4).map(|i| s.to_cpu(7, (1, i, i), 1000)).collect();
        assert_eq!(picks, [true, true, false, false]);
        assert!(s.to_cpu(7, (1, 4, 4), 500));
        // The next batch has a budget of its own; a batch a ring's length behind has none.
        assert!(s.to_cpu(7, (1, 10, 10), 2500));
        let far = 10 * (BUDGET_BATCHES + 1);
        assert!(s.to_cpu(7, (1, far, far), 100));
        assert!(!s.to_cpu(7, (1, 15, 15), 100));
        // Each sample the share picked and the budget sent to the engines is counted.
        assert_eq!(s.ceiling().2, 3);
    }

    #[test]
    fn which_sample_goes_where_depends_on_the_sample_alone() {
        let s = DecoderSplit::new(4, 32, 256);
        s.cpu_ppm.store(300_000, Ordering::Relaxed);
        let picks: Vec<bool> = (0..1000).map(|i| s.to_cpu(7, (1, i, i), 100)).collect();
        let again: Vec<bool> = (0..1000).map(|i| s.to_cpu(7, (1, i, i), 100)).collect();
        assert_eq!(picks, again);
        let n = picks.iter().filter(|&&b| b).count();
        assert!((250..350).contains(&n), "{n} of 1000 at a share of 0.3");
    }
}
