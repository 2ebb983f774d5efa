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
//! clamped to `[0, MAX_SHARE]`, re-estimated every `ADAPT_EVERY` engine images (a quarter of that for the first four). When the
//! warm-up ends ([`DecoderSplit::hold`]) the share is held at or below the most it reached
//! until then, and each batch's CPU decodes at or below the most pixel bytes a batch carried
//! (a sample that would pass it goes to the engines): the CPU's pixels are uploaded through
//! buffers sized during the warm-up, so a batch that carried more would allocate again.
//! Which samples
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

/// The split and what it is computed from (shared by the workers and the feeding thread).
#[derive(Debug, Default)]
pub(crate) struct DecoderSplit {
    /// The CPU's share, in millionths.
    cpu_ppm: AtomicU32,
    /// The most the share has been, in millionths.
    most_ppm: AtomicU32,
    /// The most the share may become (`u32::MAX` until [`DecoderSplit::hold`]).
    ceiling_ppm: AtomicU32,
    /// Estimates made so far.
    estimates: AtomicU32,
    /// Samples per batch.
    batch: usize,
    /// The most pixel bytes decoded on the CPU that one batch carried (measured at launch).
    most_bytes: AtomicUsize,
    /// Pixel bytes of CPU decodes a batch may carry once held (`usize::MAX` until then).
    budget: AtomicUsize,
    /// Bytes reserved per batch: ((epoch, batch in the epoch), bytes), by batch modulo the
    /// length.
    reserved: Mutex<Vec<((u64, usize), usize)>>,
    /// Whether the share adapts (`STOKEHOLD_CPU_DECODE_SHARE` fixes it).
    fixed: bool,
    workers: u32,
    /// Samples prepared, and the workers' time preparing them (decodes excluded).
    pub(crate) prepared: AtomicU64,
    pub(crate) prepare_ns: AtomicU64,
    /// Samples decoded on the CPU by the split, and the time.
    pub(crate) cpu_images: AtomicU64,
    pub(crate) cpu_ns: AtomicU64,
    /// Images given to the engines, and the feeding thread's time submitting them.
    pub(crate) engine_images: AtomicU64,
    pub(crate) engine_ns: AtomicU64,
    /// Their pixels, in thousandths of a megapixel.
    pub(crate) engine_kpx: AtomicU64,
    next_estimate: AtomicU64,
}

impl DecoderSplit {
    /// A split for `workers` worker threads and batches of `batch`, starting with the CPU's
    /// share at 0 (or fixed by `STOKEHOLD_CPU_DECODE_SHARE`, a fraction, for tuning runs).
    pub(crate) fn new(workers: usize, batch: usize) -> DecoderSplit {
        let fixed = std::env::var("STOKEHOLD_CPU_DECODE_SHARE")
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| (0.0..=1.0).contains(v));
        let ppm = fixed.map_or(0, |s| (s * 1e6) as u32);
        DecoderSplit {
            cpu_ppm: AtomicU32::new(ppm),
            most_ppm: AtomicU32::new(ppm),
            ceiling_ppm: AtomicU32::new(u32::MAX),
            fixed: fixed.is_some(),
            workers: workers.max(1) as u32,
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
        h < u64::from(ppm) && self.reserve((epoch, pos / self.batch), bytes)
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

    /// Counts a launched batch that carried `bytes` of pixels decoded on the CPU.
    pub(crate) fn carried(&self, bytes: usize) {
        self.most_bytes.fetch_max(bytes, Ordering::Relaxed);
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

    /// Counts `n` images submitted to the engines in `d` of the feeding thread's time, and
    /// re-estimates the share every so often.
    pub(crate) fn submitted(&self, n: usize, pixels: u64, d: Duration) {
        self.engine_kpx.fetch_add(pixels / 1000, Ordering::Relaxed);
        let total = self.engine_images.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
        self.engine_ns
            .fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
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
        if let Some(s) = self.estimate() {
            let ppm = ((s * 1e6) as u32).min(self.ceiling_ppm.load(Ordering::Relaxed));
            self.cpu_ppm.store(ppm, Ordering::Relaxed);
            self.most_ppm.fetch_max(ppm, Ordering::Relaxed);
            self.estimates.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether the share has had time to settle: fixed, or estimated twice (the first
    /// estimate guesses the CPU's decode time; the second has measured it).
    pub(crate) fn settled(&self) -> bool {
        self.fixed || self.estimates.load(Ordering::Relaxed) >= 2
    }

    /// Ends the warm-up: from now on the share stays at or below the most it has been, and
    /// a batch's CPU decodes at or below the most bytes a batch carried.
    pub(crate) fn hold(&self) {
        let most = self.most_ppm.load(Ordering::Relaxed);
        self.ceiling_ppm.store(most, Ordering::Relaxed);
        let bytes = self.most_bytes.load(Ordering::Relaxed);
        self.budget.store(bytes, Ordering::Relaxed);
    }

    /// What a timing model's device and the workers, measured, take at most, in images per
    /// second: the device's limit for what it decodes over the share of images it decodes,
    /// or the workers' (preparing every sample, decoding the CPU's), the smaller.
    pub(crate) fn modelled_limit(
        &self,
        model: &crate::cuda::emu::TimingModel,
        batch: usize,
    ) -> Option<f64> {
        let prepared = self.prepared.load(Ordering::Relaxed);
        let engine = self.engine_images.load(Ordering::Relaxed);
        if prepared == 0 || engine == 0 {
            return None;
        }
        let mp = self.engine_kpx.load(Ordering::Relaxed) as f64 / 1000.0 / engine as f64;
        // The chroma rebuild's three launches and the chain's.
        let device = model.device_limit(mp, batch, 4.0) * prepared as f64 / engine as f64;
        let host_ns = self.prepare_ns.load(Ordering::Relaxed) + self.cpu_ns.load(Ordering::Relaxed);
        let workers = f64::from(self.workers) * prepared as f64 * 1e9 / host_ns.max(1) as f64;
        Some(device.min(workers))
    }

    /// The share that finishes both decoders at once (module docs), once each has a
    /// measurement.
    fn estimate(&self) -> Option<f64> {
        let per = |ns: &AtomicU64, n: &AtomicU64| {
            let n = n.load(Ordering::Relaxed);
            (n > 0).then(|| ns.load(Ordering::Relaxed) as f64 / n as f64)
        };
        let e = per(&self.engine_ns, &self.engine_images)?;
        let p = per(&self.prepare_ns, &self.prepared)?;
        // Before the CPU has decoded any: a sample's prepare time is a lower bound no one
        // would use; take 20 times it (a photo's decode is 10–40 times its header's parse).
        let d = per(&self.cpu_ns, &self.cpu_images).unwrap_or(20.0 * p);
        let w = f64::from(self.workers);
        Some(((w * e - p) / (w * e + d)).clamp(0.0, MAX_SHARE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_balances_the_two_decoders() {
        let s = DecoderSplit::new(16, 256);
        // The H100's figures: 53 µs per engine image, 30 µs to prepare, 1.25 ms to decode.
        s.prepared.store(1000, Ordering::Relaxed);
        s.prepare_ns.store(30_000_000, Ordering::Relaxed);
        s.cpu_images.store(100, Ordering::Relaxed);
        s.cpu_ns.store(125_000_000, Ordering::Relaxed);
        s.submitted(
            ADAPT_EVERY as usize,
            0,
            Duration::from_micros(53 * ADAPT_EVERY),
        );
        let share = s.cpu_share();
        assert!((share - 0.39).abs() < 0.01, "{share}");
        // Both finish together: W / (p + s·d) = 1 / ((1 − s)·e).
        let (w, p, d, e) = (16.0, 30.0, 1250.0, 53.0);
        let cpu = w / (p + share * d);
        let engines = 1.0 / ((1.0 - share) * e);
        assert!((cpu / engines - 1.0).abs() < 0.02, "{cpu} {engines}");
        // Fast engines, few workers: nothing for the CPU.
        let t = DecoderSplit::new(1, 256);
        t.prepared.store(10, Ordering::Relaxed);
        t.prepare_ns.store(1_000_000, Ordering::Relaxed);
        t.submitted(ADAPT_EVERY as usize, 0, Duration::from_micros(ADAPT_EVERY));
        assert_eq!(t.cpu_share(), 0.0);
    }

    #[test]
    fn after_the_hold_the_share_rises_no_higher_than_it_had_been() {
        let s = DecoderSplit::new(16, 256);
        let estimate = |prepare_us: u64| {
            s.prepared.store(1000, Ordering::Relaxed);
            s.prepare_ns
                .store(prepare_us * 1_000_000, Ordering::Relaxed);
            s.cpu_images.store(100, Ordering::Relaxed);
            s.cpu_ns.store(125_000_000, Ordering::Relaxed);
            s.engine_images.store(0, Ordering::Relaxed);
            s.engine_ns.store(0, Ordering::Relaxed);
            s.next_estimate.store(ADAPT_EVERY, Ordering::Relaxed);
            s.submitted(
                ADAPT_EVERY as usize,
                0,
                Duration::from_micros(53 * ADAPT_EVERY),
            );
            s.cpu_share()
        };
        assert!(!s.settled());
        let high = estimate(30);
        let low = estimate(400);
        assert!(low < high, "{low} {high}");
        assert!(s.settled());
        s.hold();
        // Cheaper preparing would give the CPU more than it ever had: held at the most.
        let again = estimate(1);
        assert!((again - high).abs() < 1e-6, "{again} {high}");
        // Lower still follows the measurements.
        assert!((estimate(400) - low).abs() < 1e-6);
    }

    #[test]
    fn after_the_hold_a_batch_decodes_on_the_cpu_no_more_bytes_than_one_carried() {
        let s = DecoderSplit::new(4, 10);
        s.cpu_ppm.store(1_000_000, Ordering::Relaxed);
        // Before the hold: no budget.
        assert!((0..10).all(|i| s.to_cpu(7, (0, i, i), 1000)));
        s.carried(2500);
        s.carried(1500);
        s.hold();
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
    }

    #[test]
    fn which_sample_goes_where_depends_on_the_sample_alone() {
        let s = DecoderSplit::new(4, 256);
        s.cpu_ppm.store(300_000, Ordering::Relaxed);
        let picks: Vec<bool> = (0..1000).map(|i| s.to_cpu(7, (1, i, i), 100)).collect();
        let again: Vec<bool> = (0..1000).map(|i| s.to_cpu(7, (1, i, i), 100)).collect();
        assert_eq!(picks, again);
        let n = picks.iter().filter(|&&b| b).count();
        assert!((250..350).contains(&n), "{n} of 1000 at a share of 0.3");
    }
}
