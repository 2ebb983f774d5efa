//! The progress bar of `run` and `bench`: images so far, the epoch, the rate (defined as
//! the final throughput is: images delivered over wall time since the first request) and
//! the time left.

use std::time::Instant;

use crate::Batch;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar over `total` samples (a spinner when the run is unbounded).
pub struct Progress {
    bar: ProgressBar,
    started: Instant,
    images: u64,
    skipped: u64,
    epochs: Option<u64>,
}

impl Progress {
    /// A bar over `total` samples of `epochs` epochs; hidden unless `visible` (and unless
    /// stderr is a terminal, which indicatif checks).
    pub fn new(total: Option<u64>, epochs: Option<u64>, visible: bool) -> Progress {
        let (bar, template) = match total {
            Some(n) => (
                ProgressBar::new(n),
                "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} images  {msg}  \
                 {eta} left",
            ),
            None => (
                ProgressBar::new_spinner(),
                "{spinner} [{elapsed_precise}] {pos} images  {msg}",
            ),
        };
        bar.set_style(
            ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_draw_target(if visible {
            ProgressDrawTarget::stderr_with_hz(4)
        } else {
            ProgressDrawTarget::hidden()
        });
        Progress {
            bar,
            started: Instant::now(),
            images: 0,
            skipped: 0,
            epochs,
        }
    }

    /// Counts a batch the consumer took.
    pub fn batch(&mut self, b: &Batch) {
        let images = (b.len() - b.padded) as u64;
        self.images += images;
        self.skipped += b.skipped.len() as u64;
        self.bar.inc(images + b.skipped.len() as u64);
        let epoch = match self.epochs {
            Some(n) => format!("epoch {}/{n}", b.epoch + 1),
            None => format!("epoch {}", b.epoch + 1),
        };
        let rate = rate(self.images, self.started.elapsed().as_secs_f64());
        let skipped = match self.skipped {
            0 => String::new(),
            n => format!("  {n} skipped"),
        };
        self.bar
            .set_message(format!("{epoch}  {rate} img/s{skipped}"));
    }

    /// Sets the run's length once it is known: `total` samples of `epochs` epochs (a
    /// bench's warm-up lasts until the pipeline's pools settled).
    pub fn set_length(&mut self, total: u64, epochs: u64) {
        self.bar.set_length(total);
        self.epochs = Some(epochs);
    }

    /// Runs `f` with the bar out of the way (for lines printed during the run).
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.bar.suspend(f)
    }

    /// Removes the bar from the screen.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// A rate with about three significant digits: `1234`, `56.7`, `8.91`.
fn rate(images: u64, seconds: f64) -> String {
    let r = images as f64 / seconds.max(1e-9);
    if r >= 100.0 {
        format!("{r:.0}")
    } else if r >= 10.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_keep_about_three_digits() {
        assert_eq!(rate(12344, 10.0), "1234");
        assert_eq!(rate(567, 10.0), "56.7");
        assert_eq!(rate(89, 10.0), "8.90");
        assert_eq!(rate(0, 0.0), "0.00");
    }
}
