//! Which decoder takes a JPEG the engines could take: the JPEG engines, or our CPU decoder on
//! the worker threads (its pixels uploaded into the same batch). The JPEG engines are fed by
//! one thread whose host work per image (nvJPEG parses every stream: 53 µs for a photo of
//! 0.2 MP on an H100's host, and it does not spread over threads) bounds their rate; the
//! workers have time left after preparing every sample. The split gives the CPU the share
//! that finishes both at once, from what each measures as the run goes:
//!
//! ```text
//! W workers, p = host time preparing a sample, d = CPU time decoding one, e = the engines'
//! feeding thread's time per image:   W / (p + s·d) = 1 / ((1 − s)·e)   ⇒   s = (W·e − p) / (W·e + d)
//! ```
//!
//! clamped to `[0, MAX_SHARE]`, re-estimated every `ADAPT_EVERY` engine images. Which samples
//! go to the CPU is a hash of (seed, epoch, index) against the share, so a run is the same
//! whatever the threads' timing — and which decoder took a sample changes nothing else about
//! it: the same parameters, the same skips (`docs/gpu.md`).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// The most the CPU takes (the engines stay busy).
const MAX_SHARE: f64 = 0.9;

/// Engine images between two estimates.
const ADAPT_EVERY: u64 = 256;

/// The split and what it is computed from (shared by the workers and the feeding thread).
#[derive(Debug, Default)]
pub(crate) struct DecoderSplit {
    /// The CPU's share, in millionths.
    cpu_ppm: AtomicU32,
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
    /// A split for `workers` worker threads, starting with the CPU's share at 0 (or fixed
    /// by `STOKEHOLD_CPU_DECODE_SHARE`, a fraction, for tuning runs).
    pub(crate) fn new(workers: usize) -> DecoderSplit {
        let fixed = std::env::var("STOKEHOLD_CPU_DECODE_SHARE")
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| (0.0..=1.0).contains(v));
        DecoderSplit {
            cpu_ppm: AtomicU32::new(fixed.map_or(0, |s| (s * 1e6) as u32)),
            fixed: fixed.is_some(),
            workers: workers.max(1) as u32,
            next_estimate: AtomicU64::new(ADAPT_EVERY),
            ..DecoderSplit::default()
        }
    }

    /// The CPU's share now.
    pub(crate) fn cpu_share(&self) -> f64 {
        f64::from(self.cpu_ppm.load(Ordering::Relaxed)) / 1e6
    }

    /// Whether sample `index` of `epoch` goes to the CPU decoder.
    pub(crate) fn to_cpu(&self, seed: u64, epoch: u64, index: usize) -> bool {
        let ppm = self.cpu_ppm.load(Ordering::Relaxed);
        if ppm == 0 {
            return false;
        }
        let h = crate::rng::SampleRng::from_key(
            seed ^ epoch.rotate_left(32) ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        )
        .below(1_000_000);
        h < u64::from(ppm)
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
        self.next_estimate
            .store(total + ADAPT_EVERY, Ordering::Relaxed);
        if let Some(s) = self.estimate() {
            self.cpu_ppm.store((s * 1e6) as u32, Ordering::Relaxed);
        }
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
        let s = DecoderSplit::new(16);
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
        let t = DecoderSplit::new(1);
        t.prepared.store(10, Ordering::Relaxed);
        t.prepare_ns.store(1_000_000, Ordering::Relaxed);
        t.submitted(ADAPT_EVERY as usize, 0, Duration::from_micros(ADAPT_EVERY));
        assert_eq!(t.cpu_share(), 0.0);
    }

    #[test]
    fn which_sample_goes_where_depends_on_the_sample_alone() {
        let s = DecoderSplit::new(4);
        s.cpu_ppm.store(300_000, Ordering::Relaxed);
        let picks: Vec<bool> = (0..1000).map(|i| s.to_cpu(7, 1, i)).collect();
        let again: Vec<bool> = (0..1000).map(|i| s.to_cpu(7, 1, i)).collect();
        assert_eq!(picks, again);
        let n = picks.iter().filter(|&&b| b).count();
        assert!((250..350).contains(&n), "{n} of 1000 at a share of 0.3");
    }
}
