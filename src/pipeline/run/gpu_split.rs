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
    /// CPU's share is larger, would otherwise move both figures away from what the timed
    /// epochs allowed. The workers are those running at the later moment. `None` when no
    /// image went to the engines in that span.
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
#[path = "gpu_split_tests.rs"]
mod tests;
