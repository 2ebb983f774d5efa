//! A timing model for the emulated device (`STOKEHOLD_EMU_MODEL=h100`): instead of computing
//! pixels it takes the time a real device took, so that the GPU executor's design — batches
//! in flight, the decoders' split, what the host waits for — can be measured on a machine
//! without a GPU. Decoding costs the submitting thread its host time, busy on a core as
//! nvJPEG's call is (it parses every stream before the engines start), then the engines' time on the decode stream; each
//! kernel launch costs the kernel stream its time. Nothing else changes: the CPU decoder's
//! share runs for real on the workers.
//!
//! The H100 figures come from `tools/nvjpeg-probe` on an H100 80GB HBM3 (driver 580.159.04,
//! nvJPEG 13.0.1) on 2026-11-26, `docs/performance.md`: the host time of
//! `nvjpegDecodeBatchedEx` per image was 53 µs for imagenet-400 (0.203 MP mean) and 231 µs
//! for the same photos at 3x the side (1.82 MP), all of it CPU time, and it did not spread
//! over threads; the engines were never what bounded a run, so their time is an upper bound
//! consistent with both sets (7 engines); the kernels' time is the first run's (0.28 s for
//! 47 batches of 256, 23 µs an image). `h100-interp` is the decoder as it was before,
//! asking nvJPEG to interpolate chroma: 177 µs of host time per 0.2 MP photo.
//!
//! `h100-training` is `h100` beside a training loop: on an H200 (2026-11-27,
//! `docs/performance.md`) the same call took ~250 µs an image once a ResNet-50 loop kept the
//! SMs busy (one training step a call), against 55–60 µs alone. The model adds the
//! difference, 195 µs an image, once 4,096 images have been submitted (the loop starts after
//! the loader's first batches), as a wait that takes no core (the machine that measured it had
//! 16; the call's own 55 µs still does): what the decoders' split must follow after its
//! warm-up.

use std::time::Duration;

/// What each part of the work costs on the modelled device.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimingModel {
    /// The model's name (`h100`, `h100-interp`).
    pub name: &'static str,
    /// The submitting thread's host time per image, fixed part (µs).
    pub submit_us: f64,
    /// The submitting thread's host time per image, per megapixel (µs).
    pub submit_us_per_mp: f64,
    /// JPEG engines.
    pub engines: usize,
    /// One engine's time per image, fixed part (µs).
    pub engine_us: f64,
    /// One engine's time per image, per megapixel (µs).
    pub engine_us_per_mp: f64,
    /// A kernel launch's time, fixed part (µs).
    pub launch_us: f64,
    /// A kernel launch's time per sample (µs).
    pub launch_us_per_sample: f64,
    /// Images submitted before [`TimingModel::wait_us`] applies (a trainer starting).
    pub wait_after_images: u64,
    /// The submitting call's wait per image for the device, once it applies (µs): a wait,
    /// not a core's time.
    pub wait_us: f64,
}

impl TimingModel {
    /// The model named `name`, or `None`.
    pub fn named(name: &str) -> Option<TimingModel> {
        let h100 = TimingModel {
            name: "h100",
            submit_us: 31.0,
            submit_us_per_mp: 110.0,
            engines: 7,
            engine_us: 40.0,
            engine_us_per_mp: 500.0,
            launch_us: 100.0,
            launch_us_per_sample: 5.0,
            wait_after_images: 0,
            wait_us: 0.0,
        };
        match name {
            "h100" => Some(h100),
            "h100-interp" => Some(TimingModel {
                name: "h100-interp",
                submit_us: 150.0,
                submit_us_per_mp: 135.0,
                ..h100
            }),
            "h100-training" => Some(TimingModel {
                name: "h100-training",
                wait_after_images: 4096,
                wait_us: 195.0,
                ..h100
            }),
            _ => None,
        }
    }

    /// The submitting thread's time for images of `mp` megapixels each.
    pub fn submit_time(&self, mp: &[f64]) -> Duration {
        Duration::from_secs_f64(
            mp.iter()
                .map(|m| self.submit_us + self.submit_us_per_mp * m)
                .sum::<f64>()
                / 1e6,
        )
    }

    /// The submitting call's wait for the device for `n` images when `before` had been
    /// submitted ahead of them (zero until [`TimingModel::wait_after_images`]).
    pub fn wait_time(&self, before: u64, n: usize) -> Duration {
        let waiting = (before + n as u64).saturating_sub(self.wait_after_images.max(before));
        Duration::from_secs_f64(self.wait_us * waiting as f64 / 1e6)
    }

    /// The engines' time for images of `mp` megapixels each (spread over the engines).
    pub fn engine_time(&self, mp: &[f64]) -> Duration {
        let total: f64 = mp
            .iter()
            .map(|m| self.engine_us + self.engine_us_per_mp * m)
            .sum();
        let longest = mp
            .iter()
            .map(|m| self.engine_us + self.engine_us_per_mp * m)
            .fold(0.0, f64::max);
        Duration::from_secs_f64((total / self.engines.max(1) as f64).max(longest) / 1e6)
    }

    /// One kernel launch's time over `samples` samples.
    pub fn launch_time(&self, samples: u32) -> Duration {
        Duration::from_secs_f64(
            (self.launch_us + self.launch_us_per_sample * f64::from(samples)) / 1e6,
        )
    }

    /// The most images per second the modelled device takes (with its call's wait, where
    /// it has one), for images of `mp` megapixels on average all decoded by the engines, with `launches` kernel launches
    /// per batch of `batch`: the feeding thread's, the engines' and the kernel stream's
    /// limits, the smallest.
    pub fn device_limit(&self, mp: f64, batch: usize, launches: f64) -> f64 {
        let feed = 1e6 / (self.submit_us + self.submit_us_per_mp * mp + self.wait_us);
        let engines = self.engines as f64 * 1e6 / (self.engine_us + self.engine_us_per_mp * mp);
        let per_batch_us =
            launches * self.launch_us + 3.0 * self.launch_us_per_sample * batch as f64;
        let kernels = batch as f64 * 1e6 / per_batch_us.max(1.0);
        feed.min(engines).min(kernels)
    }
}

/// Keeps the calling thread busy for `d`: nvJPEG's host call is CPU time (the probe's
/// figure), so the model takes a core for it, as the real call does, rather than sleep.
pub fn busy_for(d: Duration) {
    let until = std::time::Instant::now() + d;
    while std::time::Instant::now() < until {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_h100_model_gives_the_probes_figures() {
        let m = TimingModel::named("h100").unwrap();
        // 53 µs at 0.203 MP, 231 µs at 1.82 MP (±5%).
        let small = m.submit_time(&[0.203]).as_secs_f64() * 1e6;
        let big = m.submit_time(&[1.82]).as_secs_f64() * 1e6;
        assert!(
            (small - 53.0).abs() < 3.0 && (big - 231.0).abs() < 12.0,
            "{small} {big}"
        );
        // The engines are not the bound: the feeding thread is.
        assert!(m.engine_time(&[0.203; 7]).as_secs_f64() * 1e6 < small * 7.0);
        let i = TimingModel::named("h100-interp").unwrap();
        let slow = i.submit_time(&[0.203]).as_secs_f64() * 1e6;
        assert!((slow - 177.0).abs() < 9.0, "{slow}");
        assert!(TimingModel::named("b200").is_none());
        // Beside a training loop: no wait for the first 4,096 images, 195 µs an image after.
        let t = TimingModel::named("h100-training").unwrap();
        assert_eq!(t.wait_time(0, 4000), Duration::ZERO);
        assert_eq!(m.wait_time(10_000, 100), Duration::ZERO);
        let part = t.wait_time(4000, 200).as_secs_f64() * 1e6;
        assert!((part - 104.0 * 195.0).abs() < 1.0, "{part}");
        let all = t.wait_time(5000, 10).as_secs_f64() * 1e6;
        assert!((all - 1950.0).abs() < 1.0, "{all}");
    }
}
