//! `stokehold bench`: times whole epochs after a warm-up one, repeating them until the
//! timed part is long enough to mean something, and prints their spread and a throughput
//! line. [`measure`] is also what `tune` times each trial with.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::pipeline::{Pipeline, PipelineSpec, StatsSnapshot};
use anyhow::Result;
use clap::Args;

use super::options::{self, RunOpts};
use super::output::outln;
use super::progress::Progress;
use super::stats;

/// Arguments of `stokehold bench`.
#[derive(Args)]
pub struct BenchArgs {
    /// The pipeline file.
    pipeline: PathBuf,
    #[command(flatten)]
    opts: RunOpts,
    /// Simulate a training step of this many milliseconds per batch, and report whether
    /// the run is loader-bound or compute-bound.
    #[arg(long, value_name = "MS")]
    consumer_ms: Option<f64>,
    /// Without --epochs: repeat timed epochs (at least 3) until they took this long.
    #[arg(long, value_name = "SECONDS", default_value_t = 3.0)]
    min_seconds: f64,
    /// Print per-stage statistics at the end (the whole run, warm-up included).
    #[arg(long)]
    stats: bool,
}

/// How long to time: exactly `epochs` epochs, or at least `min_epochs` and `min_seconds`.
#[derive(Clone, Copy)]
pub struct Plan {
    /// Exactly this many timed epochs (`--epochs`).
    pub epochs: Option<u64>,
    /// Otherwise at least this many...
    pub min_epochs: u64,
    /// ...taking at least this long together.
    pub min_seconds: f64,
}

impl Plan {
    /// The plan `--epochs` and `--min-seconds` ask for, timing at least `min_epochs`
    /// epochs when `--epochs` is not given.
    pub fn from(opts: &RunOpts, min_seconds: f64, min_epochs: u64) -> Plan {
        Plan {
            epochs: opts
                .settings
                .int("epochs")
                .and_then(|n| u64::try_from(n).ok()),
            min_epochs,
            min_seconds,
        }
    }
}

/// What one timed run measured.
pub struct Measurement {
    pub device: &'static str,
    pub threads: usize,
    pub batch: usize,
    /// Images delivered in the timed epochs.
    pub images: u64,
    /// Batches delivered in the timed epochs.
    pub batches: u64,
    /// Wall time of the timed epochs.
    pub seconds: f64,
    /// Time the consumer spent waiting for batches during the timed epochs.
    pub waited: f64,
    /// Throughput of each timed epoch.
    pub epoch_rates: Vec<f64>,
    /// Statistics of the whole run, warm-up included...
    pub stats: StatsSnapshot,
    /// ...which took this long.
    pub run_seconds: f64,
}

impl Measurement {
    /// Images per second over the timed epochs.
    pub fn throughput(&self) -> f64 {
        self.images as f64 / self.seconds.max(1e-9)
    }

    /// Median, lowest and highest epoch throughput; `None` with fewer than two epochs.
    pub fn spread(&self) -> Option<(f64, f64, f64)> {
        if self.epoch_rates.len() < 2 {
            return None;
        }
        let mut r = self.epoch_rates.clone();
        r.sort_by(f64::total_cmp);
        let n = r.len();
        let median = if n % 2 == 1 {
            r[n / 2]
        } else {
            (r[n / 2 - 1] + r[n / 2]) / 2.0
        };
        Some((median, r[0], r[n - 1]))
    }
}

/// Runs `spec` for one warm-up epoch and then the timed epochs `plan` asks for;
/// `consumer_ms` simulates a training step per batch.
pub fn measure(
    mut spec: PipelineSpec,
    plan: Plan,
    consumer_ms: Option<f64>,
    verbose: bool,
) -> Result<Measurement> {
    // Repeating epochs until long enough: run unbounded and stop at an epoch's end.
    spec.settings.epochs = plan.epochs.map(|n| n + 1);
    let batch = spec.settings.batch;
    let mut p = Pipeline::new(spec)?;
    if verbose {
        options::describe(&p);
    }
    let per_epoch = p.samples_per_epoch() as u64;
    let mut progress = Progress::new(
        plan.epochs.map(|n| (n + 1) * per_epoch),
        plan.epochs.map(|n| n + 1),
        verbose,
    );
    let step = consumer_ms.map(|ms| Duration::from_secs_f64(ms.max(0.0) / 1000.0));
    let started = Instant::now();
    let mut epoch = 0u64;
    let mut last_arrival = Instant::now();
    let mut warm_end: Option<Instant> = None;
    let mut epoch_start = last_arrival;
    let (mut epoch_images, mut images, mut batches) = (0u64, 0u64, 0u64);
    let mut waited = Duration::ZERO;
    let mut epoch_rates = Vec::new();
    let mut close_epoch = |epoch: u64, end: Instant, epoch_images: u64| {
        if epoch == 0 {
            warm_end = Some(end);
        } else {
            let secs = (end - epoch_start).as_secs_f64();
            epoch_rates.push(epoch_images as f64 / secs.max(1e-9));
        }
        epoch_start = end;
        warm_end
    };
    loop {
        let asked = Instant::now();
        let Some(b) = p.next_batch() else {
            close_epoch(epoch, last_arrival, epoch_images);
            break;
        };
        let b = b?;
        let now = Instant::now();
        if b.epoch != epoch {
            let warm = close_epoch(epoch, last_arrival, epoch_images);
            (epoch, epoch_images) = (b.epoch, 0);
            let timed = warm.map_or(0.0, |w| (last_arrival - w).as_secs_f64());
            let long_enough =
                epoch > plan.min_epochs && timed >= plan.min_seconds && plan.epochs.is_none();
            if long_enough {
                break;
            }
        }
        let n = (b.len() - b.padded) as u64;
        epoch_images += n;
        if epoch > 0 {
            images += n;
            batches += 1;
            waited += now - asked;
        }
        last_arrival = now;
        progress.batch(&b);
        if let Some(step) = step {
            std::thread::sleep(step);
        }
    }
    progress.finish();
    let seconds = warm_end.map_or(0.0, |w| {
        epoch_start.saturating_duration_since(w).as_secs_f64()
    });
    Ok(Measurement {
        device: p.device().device,
        threads: p.worker_threads(),
        batch,
        images,
        batches,
        seconds,
        waited: waited.as_secs_f64(),
        epoch_rates,
        stats: p.stats(),
        run_seconds: started.elapsed().as_secs_f64(),
    })
}

/// Below this many seconds or batches, a timed part measures start-up and noise.
const MEANINGFUL_SECONDS: f64 = 1.0;
const MEANINGFUL_BATCHES: u64 = 10;

/// Benchmarks the pipeline; the last line has the fields the peer scripts print.
pub fn bench(args: &BenchArgs) -> Result<ExitCode> {
    let checked = options::load(&args.pipeline, Some(&args.opts))?;
    let plan = Plan::from(&args.opts, args.min_seconds, 3);
    let m = measure(checked.loaded.spec, plan, args.consumer_ms, true)?;
    if args.stats {
        stats::print(&m.stats, m.run_seconds)?;
    }
    let epochs = m.epoch_rates.len();
    match m.spread() {
        Some((median, lo, hi)) => outln!(
            "timed {epochs} epochs after a warm-up one in {:.2} s: median {median:.1} img/s \
             per epoch (lowest {lo:.1}, highest {hi:.1}, ±{:.1}%)",
            m.seconds,
            50.0 * (hi - lo) / median.max(1e-9)
        )?,
        None => outln!(
            "timed {epochs} epoch after a warm-up one in {:.2} s (no spread from one epoch)",
            m.seconds
        )?,
    }
    if m.seconds < MEANINGFUL_SECONDS || m.batches < MEANINGFUL_BATCHES {
        eprintln!(
            "{}: the timed part took {:.2} s over {} batches, too short to mean much; \
             leave out --epochs to repeat epochs for at least --min-seconds, or use more data",
            super::logs::label(tracing::Level::WARN),
            m.seconds,
            m.batches
        );
    }
    if let Some(ms) = args.consumer_ms {
        let wait_pct = 100.0 * m.waited / m.seconds.max(1e-9);
        let step_rate = m.batch as f64 / (ms / 1000.0);
        if wait_pct > 5.0 {
            outln!(
                "loader-bound: the {ms} ms training step waited for data {wait_pct:.1}% of the time; \
                 the step could take {step_rate:.0} img/s, the loader delivered {:.0} img/s \
                 (more threads, or the GPU path, would help)",
                m.throughput()
            )?;
        } else {
            outln!(
                "compute-bound: the {ms} ms training step waited for data {wait_pct:.1}% of the time; \
                 the loader keeps up with {step_rate:.0} img/s"
            )?;
        }
    }
    if let Some(peak) = stats::peak_rss_bytes() {
        outln!("peak resident memory {:.1} MB", peak as f64 / 1e6)?;
    }
    outln!(
        "device={} threads={} batch={} images={} seconds={:.3} throughput={:.1} img/s",
        m.device,
        m.threads,
        m.batch,
        m.images,
        m.seconds,
        m.throughput()
    )?;
    Ok(ExitCode::SUCCESS)
}
