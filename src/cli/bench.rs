//! `stokehold bench`: times whole epochs after a warm-up (the first epoch, and the next
//! while the pipeline's own warm-up runs: [`timed_run`]), repeating them until the
//! timed part is long enough to mean something, and prints their spread and a throughput
//! line. [`measure`] is also what `tune` times each trial with. With `--consumer-busy-ms`
//! it also says how much the pipeline slows a consumer that computes ([`busy_report`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;

use crate::pipeline::run::threads::{self, role_of, ThreadSnapshot, ThreadUse};
use crate::pipeline::{Batch, Pipeline, PipelineSpec, StatsSnapshot};

use super::consumer::{self, Consumer};
use super::heap;
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
    /// Simulate a training step that computes on the CPU for this many milliseconds per
    /// batch (a fixed amount of work, calibrated before the run), and report how much the
    /// pipeline slows it against the same steps on batches already made, and what the
    /// pipeline's threads do while its queue is full.
    #[arg(long, value_name = "MS", conflicts_with = "consumer_ms")]
    consumer_busy_ms: Option<f64>,
    /// Without --epochs: repeat timed epochs (at least 3) until they took this long.
    #[arg(long, value_name = "SECONDS", default_value_t = 3.0)]
    min_seconds: f64,
    /// Print per-stage statistics at the end (the whole run, warm-up included).
    #[arg(long)]
    stats: bool,
}

/// How long to time: exactly `epochs` epochs, or at least `min_epochs` and `min_seconds`.
#[derive(Clone, Copy)]
pub struct Timing {
    /// Exactly this many timed epochs (`--epochs`).
    pub epochs: Option<u64>,
    /// Otherwise at least this many...
    pub min_epochs: u64,
    /// ...taking at least this long together.
    pub min_seconds: f64,
    /// Count heap allocations over the timed epochs (`--stats`; [`super::heap`]).
    pub count_heap: bool,
}

impl Timing {
    /// The timing `--epochs` and `--min-seconds` ask for, timing at least `min_epochs`
    /// epochs when `--epochs` is not given.
    pub fn from(opts: &RunOpts, min_seconds: f64, min_epochs: u64) -> Timing {
        Timing {
            epochs: opts
                .settings
                .int("epochs")
                .and_then(|n| u64::try_from(n).ok()),
            min_epochs,
            min_seconds,
            count_heap: false,
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
    /// Epochs before the timed ones (the warm-up: [`timed_run`]).
    pub warm_up_epochs: u64,
    /// Statistics of the whole run, warm-up included...
    pub stats: StatsSnapshot,
    /// ...and as they were when the warm-up ended.
    pub stats_at_warm_end: Option<StatsSnapshot>,
    /// ...which took this long.
    pub run_seconds: f64,
    /// What the pipeline's threads used during the timed epochs, in all and by name.
    pub thread_use: ThreadUse,
    pub thread_use_by_name: BTreeMap<String, ThreadUse>,
    /// Heap allocations in the process during the timed epochs, where counted
    /// ([`Timing::count_heap`] and an allocator that counts: [`super::heap`]).
    pub heap_allocations: Option<u64>,
    /// Stopped by Ctrl-C: the timed part ends at the last batch taken, part of an epoch
    /// included (its rate is not among [`Measurement::epoch_rates`]).
    pub interrupted: bool,
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

/// Runs `spec` for its warm-up epochs and then the timed epochs `timing` asks for, the
/// consumer doing its step on each batch.
pub fn measure(
    spec: PipelineSpec,
    timing: Timing,
    consumer: &Consumer,
    verbose: bool,
) -> Result<Measurement> {
    timed_run(spec, timing, consumer, verbose, false, &|| false).map(|(m, _)| m)
}

/// What a timed run leaves for more measuring: the pipeline, still running (unbounded), and
/// the batch it delivered after the timed epochs.
pub struct Running {
    pub pipeline: Pipeline,
    pub next: Option<Batch>,
}

/// Epochs at most in the warm-up.
const MAX_WARM_UP_EPOCHS: u64 = 20;

/// The epochs' times: the warm-up's, then each timed epoch's rate.
struct EpochClock {
    /// When the warm-up ended (the last warm-up epoch's last batch).
    warm_end: Option<Instant>,
    warm_epochs: u64,
    epoch_start: Instant,
    rates: Vec<f64>,
}

impl EpochClock {
    fn new(start: Instant) -> EpochClock {
        EpochClock {
            warm_end: None,
            warm_epochs: 0,
            epoch_start: start,
            rates: Vec::new(),
        }
    }

    /// Closes an epoch of `images` at `end`: a timed one's rate, or a warm-up epoch, the
    /// last one where it began with the pipeline warm (`began_warm`).
    fn close(&mut self, end: Instant, images: u64, began_warm: bool) {
        if self.warm_end.is_some() {
            let secs = (end - self.epoch_start).as_secs_f64();
            self.rates.push(images as f64 / secs.max(1e-9));
        } else {
            self.warm_epochs += 1;
            if began_warm || self.warm_epochs >= MAX_WARM_UP_EPOCHS {
                self.warm_end = Some(end);
            }
        }
        self.epoch_start = end;
    }
}

/// Whether the pipeline's own warm-up is over: on the GPU path the pools settle after the
/// first epoch and 16 batches (and the decoders' split).
fn pipeline_warm(p: &Pipeline) -> bool {
    p.stats().gpu.is_none_or(|g| g.after_warm_up.is_some())
}

/// [`measure`]; with `keep_running`, the pipeline runs on past the timed epochs and is
/// handed back. The warm-up is the epochs until one that began with the pipeline's own
/// warm-up over ([`pipeline_warm`]), that one included, at most [`MAX_WARM_UP_EPOCHS`].
/// Where `stop` says so after a batch (Ctrl-C), the timed part ends with that batch.
fn timed_run(
    mut spec: PipelineSpec,
    timing: Timing,
    consumer: &Consumer,
    verbose: bool,
    keep_running: bool,
    stop: &dyn Fn() -> bool,
) -> Result<(Measurement, Option<Running>)> {
    // Run unbounded and stop at the first batch after the timed epochs, with the pipeline's
    // threads still there to be counted (a pipeline whose input ended has let its threads
    // go, and their use with them).
    spec.settings.epochs = None;
    let batch = spec.settings.batch;
    let mut p = Pipeline::new(spec)?;
    if verbose {
        options::describe(&p);
    }
    let per_epoch = p.samples_per_epoch() as u64;
    // The warm-up's length is known once it ends: one epoch on the CPU path, two or more on
    // the GPU path's.
    let warm_up_guess = if pipeline_warm(&p) { 1 } else { 2 };
    let mut progress = Progress::new(
        timing.epochs.map(|n| (n + warm_up_guess) * per_epoch),
        timing.epochs.map(|n| n + warm_up_guess),
        verbose,
    );
    let started = Instant::now();
    let mut epoch = 0u64;
    let mut last_arrival = Instant::now();
    let mut clock = EpochClock::new(last_arrival);
    // Whether the pipeline's warm-up was over when this epoch began: its pools settle on the
    // producer's side, and the epoch the consumer then meets pays for it.
    let mut began_warm = pipeline_warm(&p);
    let (mut epoch_images, mut images, mut batches) = (0u64, 0u64, 0u64);
    let mut waited = Duration::ZERO;
    let mut threads_at_warm_end = ThreadSnapshot::default();
    let mut stats_at_warm_end = None;
    let heap = timing.count_heap.then(heap::Counter::start).flatten();
    let mut heap_at_warm_end = 0;
    let mut next = None;
    let mut interrupted = false;
    loop {
        let asked = Instant::now();
        let Some(b) = p.next_batch() else {
            clock.close(last_arrival, epoch_images, true);
            break;
        };
        let b = b?;
        let now = Instant::now();
        if b.epoch != epoch {
            let was_warming = clock.warm_end.is_none();
            clock.close(last_arrival, epoch_images, began_warm);
            began_warm = pipeline_warm(&p);
            if was_warming && clock.warm_end.is_some() {
                threads_at_warm_end = threads::pipeline_threads();
                stats_at_warm_end = Some(p.stats());
                heap_at_warm_end = heap.as_ref().map_or(0, heap::Counter::read);
                if let Some(n) = timing.epochs {
                    let epochs = clock.warm_epochs + n;
                    progress.set_length(epochs * per_epoch, epochs);
                }
            }
            (epoch, epoch_images) = (b.epoch, 0);
            let timed = clock
                .warm_end
                .map_or(0.0, |w| (last_arrival - w).as_secs_f64());
            let timed_epochs = clock.rates.len() as u64;
            let long_enough = match timing.epochs {
                Some(n) => timed_epochs >= n,
                None => timed_epochs >= timing.min_epochs && timed >= timing.min_seconds,
            };
            if long_enough {
                next = Some(b);
                break;
            }
        }
        let n = (b.len() - b.padded) as u64;
        epoch_images += n;
        if clock.warm_end.is_some() {
            images += n;
            batches += 1;
            waited += now - asked;
        }
        last_arrival = now;
        progress.batch(&b);
        consumer.step();
        if stop() {
            interrupted = true;
            break;
        }
    }
    let threads_now = threads::pipeline_threads();
    // None where the input ended before the warm-up did: nothing was timed.
    let heap_allocations = heap
        .filter(|_| clock.warm_end.is_some())
        .map(|h| h.read().saturating_sub(heap_at_warm_end));
    let used = threads_now.since(&threads_at_warm_end);
    let used_by_name = threads_now.since_by_name(&threads_at_warm_end);
    progress.finish();
    // To the last epoch's end; interrupted, to the last batch.
    let end = if interrupted {
        last_arrival
    } else {
        clock.epoch_start
    };
    let seconds = clock
        .warm_end
        .map_or(0.0, |w| end.saturating_duration_since(w).as_secs_f64());
    let m = Measurement {
        device: p.device().device,
        threads: p.worker_threads(),
        batch,
        images,
        batches,
        seconds,
        waited: waited.as_secs_f64(),
        epoch_rates: clock.rates,
        warm_up_epochs: clock.warm_epochs,
        stats: p.stats(),
        stats_at_warm_end,
        run_seconds: started.elapsed().as_secs_f64(),
        thread_use: used,
        thread_use_by_name: used_by_name,
        heap_allocations,
        interrupted,
    };
    let running = keep_running.then_some(Running { pipeline: p, next });
    Ok((m, running))
}

/// Below this many seconds or batches, a timed part measures start-up and noise.
const MEANINGFUL_SECONDS: f64 = 1.0;
const MEANINGFUL_BATCHES: u64 = 10;
/// Epochs whose rates vary by more than this (± % of the median) are not worth a median.
const NOISY_SPREAD_PERCENT: f64 = 10.0;
/// Below this many batches an epoch's own time is mostly the pipeline's hand-over between
/// epochs.
const MEANINGFUL_BATCHES_PER_EPOCH: u32 = 8;

/// Half the range of the epochs' rates, in % of their median.
fn spread_percent(median: f64, lo: f64, hi: f64) -> f64 {
    50.0 * (hi - lo) / median.max(1e-9)
}

/// Why the epochs' median is not worth quoting, when their rates vary by more than
/// [`NOISY_SPREAD_PERCENT`] (`spread`, ± % of the median) with `per_epoch` batches in each.
fn noisy_epochs(spread: f64, per_epoch: f64) -> Option<String> {
    if spread <= NOISY_SPREAD_PERCENT {
        return None;
    }
    let why = if per_epoch < f64::from(MEANINGFUL_BATCHES_PER_EPOCH) {
        format!(
            "an epoch of {per_epoch:.0} batch(es) is too short to time on its own (the pipeline \
             works ahead into the next one); use more data for per-epoch rates"
        )
    } else {
        "the machine may be busy".to_string()
    };
    Some(format!(
        "the epochs' rates vary by ±{spread:.0}%, so their median is noise: {why}. The \
         throughput line (the whole timed part) is the figure to quote"
    ))
}

/// Benchmarks the pipeline; the last line has the fields the peer scripts print.
pub fn bench(args: &BenchArgs) -> Result<ExitCode> {
    let checked = options::load(&args.pipeline, Some(&args.opts))?;
    let timing = Timing {
        count_heap: args.stats,
        ..Timing::from(&args.opts, args.min_seconds, 3)
    };
    let prefetch = checked.loaded.spec.settings.prefetch;
    // Calibrated before the pipeline starts, on an idle core.
    let consumer = Consumer::from_flags(args.consumer_ms, args.consumer_busy_ms);
    let busy = matches!(consumer, Consumer::Busy(_));
    let interrupt =
        super::interrupt::Interrupt::install_stopping("this batch, then reporting what was timed")?;
    let (m, running) = timed_run(checked.loaded.spec, timing, &consumer, true, busy, &|| {
        interrupt.requested()
    })?;
    let busy_lines = match running {
        Some(running) if !m.interrupted => {
            busy_report(&consumer, &m, running, prefetch, &|| interrupt.requested())?
        }
        _ => None,
    };
    // Stopped after the timed part (during the busy consumer's own steps), it stands.
    let stopped = interrupt.requested();
    let busy_cut = busy_lines.is_none() && !m.interrupted;
    if args.stats {
        stats::print(&m.stats, m.run_seconds)?;
    }
    if m.interrupted && m.images == 0 {
        outln!(
            "interrupted in the warm-up ({} epoch(s)): nothing was timed",
            m.warm_up_epochs
        )?;
        return Ok(ExitCode::from(super::interrupt::EXIT_STATUS));
    }
    let epochs = m.epoch_rates.len();
    let warm_up = match m.warm_up_epochs {
        1 => "a warm-up epoch".to_string(),
        n => format!("{n} warm-up epochs (until the pipeline's pools settled)"),
    };
    let spread = m
        .spread()
        .map(|(median, lo, hi)| (median, lo, hi, spread_percent(median, lo, hi)));
    let part = if m.interrupted {
        " and part of another"
    } else {
        ""
    };
    match spread {
        Some((median, lo, hi, spread)) => outln!(
            "timed {epochs} epochs{part} after {warm_up} in {:.2} s: median {median:.1} img/s \
             per epoch (lowest {lo:.1}, highest {hi:.1}, ±{spread:.1}%)",
            m.seconds,
        )?,
        None if epochs == 0 => outln!(
            "timed part of an epoch after {warm_up} in {:.2} s (no epoch's rate: interrupted)",
            m.seconds
        )?,
        None => outln!(
            "timed {epochs} epoch{part} after {warm_up} in {:.2} s (no spread from one epoch)",
            m.seconds
        )?,
    }
    let per_epoch = m.batches as f64 / epochs.max(1) as f64;
    if let Some(why) = spread.and_then(|(.., s)| noisy_epochs(s, per_epoch)) {
        eprintln!("{}: {why}", super::logs::label(tracing::Level::WARN));
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
    if args.stats || busy {
        let per_batch = m.batches.max(1) as f64;
        outln!(
            "pipeline threads during the timed epochs: {:.1} ms CPU and {:.1} wake-ups per batch \
             ({} threads)",
            m.thread_use.cpu.as_secs_f64() * 1000.0 / per_batch,
            m.thread_use.wakeups as f64 / per_batch,
            m.thread_use.threads
        )?;
        if args.stats {
            for (name, used) in &m.thread_use_by_name {
                outln!(
                    "  {:<16} x{}: {:.1} ms CPU, {:.1} wake-ups, {:.1} preemptions per batch",
                    role_of(name),
                    used.threads,
                    used.cpu.as_secs_f64() * 1000.0 / per_batch,
                    used.wakeups as f64 / per_batch,
                    used.preempted as f64 / per_batch
                )?;
            }
            match m.heap_allocations {
                Some(n) => outln!(
                    "heap allocations during the timed epochs: {n} ({:.1} an image; Rust's \
                     allocations and reallocations, every thread of the process; libjpeg's \
                     own pools not counted)",
                    n as f64 / m.images.max(1) as f64
                )?,
                None => outln!(
                    "heap allocations: not counted (over timed epochs, where the program's \
                     allocator counts: stokehold::cli::heap)"
                )?,
            }
        }
    }
    if let Some(ms) = consumer.step_ms() {
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
    for line in busy_lines.into_iter().flatten() {
        outln!("{line}")?;
    }
    // `--stats` printed it with the statistics.
    if let Some(peak) = stats::peak_rss_bytes().filter(|_| !args.stats) {
        outln!("peak resident memory {:.1} MB", peak as f64 / 1e6)?;
    }
    let modelled = |s: &StatsSnapshot| s.gpu.as_ref()?.decoders.modelled;
    let device = modelled(&m.stats).and_then(|now| {
        // Over the timed epochs, as the bounds below and the throughput held against them.
        now.limit_since(m.stats_at_warm_end.as_ref().and_then(modelled).as_ref())
    });
    if let Some(device) = device {
        // The host bound: this machine's cores at the pipeline threads' measured CPU per
        // image (on a small machine the readers, workers and feeding thread share them).
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let images = m.images.max(1) as f64;
        let cpu_us = m.thread_use.cpu.as_secs_f64() * 1e6 / images;
        let host = if cpu_us > 0.0 {
            cores as f64 * 1e6 / cpu_us
        } else {
            f64::INFINITY
        };
        // The serial bounds: one thread assembles every batch and launches its kernels,
        // one feeds the engines every image they decode (their own time per image,
        // modelled waits included), over the timed epochs (the pipeline made its images a
        // little ahead of them).
        let (warm_images, warm_busy, warm_feed) = m
            .stats_at_warm_end
            .as_ref()
            .map_or((0, Duration::ZERO, Duration::ZERO), |w| {
                (w.images, w.assembler_busy, w.feeder_busy)
            });
        let timed_images = m.stats.images.saturating_sub(warm_images).max(1) as f64;
        let per_image = |t: Duration| t.as_secs_f64() * 1e6 / timed_images;
        let rate = |us: f64| if us > 0.0 { 1e6 / us } else { f64::INFINITY };
        let (busy_us, feed_us) = (
            per_image(m.stats.assembler_busy.saturating_sub(warm_busy)),
            per_image(m.stats.feeder_busy.saturating_sub(warm_feed)),
        );
        let (serial, feed) = (rate(busy_us), rate(feed_us));
        let limit = device.min(host).min(serial).min(feed);
        outln!(
            "modelled limit: {limit:.0} img/s, reached {:.1}% (the timing model's device with \
             these workers: {device:.0}; {cores} cores at the pipeline's {cpu_us:.1} µs of CPU \
             per image: {host:.0}; the feeding thread, which submits the engines' decodes, at \
             {feed_us:.1} µs an image: {feed:.0}; the assembling thread, which launches the \
             kernels, at {busy_us:.1} µs an image: {serial:.0})",
            100.0 * m.throughput() / limit
        )?;
    }
    if m.interrupted {
        outln!("interrupted: the throughput below counts the batches taken before Ctrl-C")?;
    } else if busy && busy_cut {
        outln!("interrupted after the timed epochs: the consumer's slowdown was not measured")?;
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
    if stopped {
        return Ok(ExitCode::from(super::interrupt::EXIT_STATUS));
    }
    Ok(ExitCode::SUCCESS)
}

/// Batches held for the consumer's run on pre-made batches (it takes them in turn).
const HELD_BATCHES: usize = 4;
/// How long the queue-full window lasts.
const FULL_WINDOW: Duration = Duration::from_secs(1);

/// After the timed epochs of a busy consumer: holds a few batches, counts what the pipeline's
/// threads do while its queue is full, stops the pipeline, then runs the consumer's steps on
/// the held batches alone. The lines to print, `consumer slowed by S%` last.
fn busy_report(
    consumer: &Consumer,
    m: &Measurement,
    running: Running,
    prefetch: usize,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Vec<String>>> {
    let Running {
        mut pipeline,
        mut next,
    } = running;
    let mut held = Vec::with_capacity(HELD_BATCHES);
    while held.len() < HELD_BATCHES {
        match next.take() {
            Some(b) => held.push(b),
            None => match pipeline.next_batch() {
                Some(b) => held.push(b?),
                None => break,
            },
        }
    }
    let full = consumer::while_full(&pipeline, prefetch, FULL_WINDOW);
    // The pipeline's threads end here: the steps below run with nothing beside them.
    drop(pipeline);
    // Ctrl-C: no slowdown to report.
    let Some(premade) = consumer::on_premade(consumer, &held, m.batches, stop) else {
        return Ok(None);
    };
    let mut lines = Vec::new();
    if let Consumer::Busy(w) = consumer {
        lines.push(format!(
            "consumer: {} ms of computation per batch ({} rounds of an integer hash, \
             calibrated on an idle core before the run)",
            w.ms, w.rounds
        ));
    }
    let steps = m.batches.max(1) as f64;
    let fed = m.seconds / steps;
    let alone = premade.as_secs_f64() / steps;
    lines.push(format!(
        "consumer: {} steps fed by the pipeline took {:.1} ms each ({:.1}% of it waiting for a \
         batch), the same steps on {} batches already made {:.1} ms each",
        m.batches,
        fed * 1000.0,
        100.0 * m.waited / m.seconds.max(1e-9),
        held.len(),
        alone * 1000.0
    ));
    let quiet = match (full.full, full.settled) {
        (true, true) => "",
        (false, _) => " (the queue did not fill: the figures include making batches)",
        (true, false) => " (the threads had not gone quiet after 5 s)",
    };
    lines.push(format!(
        "pipeline threads while the queue was full: {:.3} ms CPU and {} wake-ups in {:.2} s \
         ({} threads){quiet}",
        full.used.cpu.as_secs_f64() * 1000.0,
        full.used.wakeups,
        full.window.as_secs_f64(),
        full.used.threads
    ));
    lines.push(format!(
        "consumer slowed by {:.1}%",
        100.0 * (fed / alone.max(1e-12) - 1.0)
    ));
    Ok(Some(lines))
}

#[cfg(test)]
mod tests {
    use super::noisy_epochs;

    #[test]
    fn a_wide_spread_of_epochs_is_called_noise_and_says_why() {
        assert_eq!(noisy_epochs(9.9, 1.0), None);
        let short = noisy_epochs(54.0, 1.0).expect("±54% is noise");
        assert!(
            short.contains("±54%") && short.contains("an epoch of 1 batch(es)"),
            "{short}"
        );
        let busy = noisy_epochs(12.0, 40.0).expect("±12% is noise");
        assert!(
            busy.contains("busy") && !busy.contains("an epoch of"),
            "{busy}"
        );
    }
}
