//! The simulated training step of `bench`: none, a sleep (`--consumer-ms`: is the run
//! loader-bound?), or a fixed amount of CPU work (`--consumer-busy-ms`: how much does the
//! pipeline slow a consumer that computes?). And what the pipeline's threads do meanwhile.

use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::pipeline::run::threads::{self, ThreadUse};
use crate::pipeline::Pipeline;

/// What the consumer does with each batch.
pub enum Consumer {
    /// Nothing: the loader's own speed.
    Idle,
    /// Sleeps: a training step that leaves the CPU to the pipeline (a GPU's).
    Sleep(Duration),
    /// Computes: a training step that needs a core of its own.
    Busy(BusyWork),
}

impl Consumer {
    /// The consumer `--consumer-ms` or `--consumer-busy-ms` asks for.
    pub fn from_flags(sleep_ms: Option<f64>, busy_ms: Option<f64>) -> Consumer {
        match (sleep_ms, busy_ms) {
            (_, Some(ms)) => Consumer::Busy(BusyWork::calibrate(ms)),
            (Some(ms), None) => Consumer::Sleep(Duration::from_secs_f64(ms.max(0.0) / 1000.0)),
            (None, None) => Consumer::Idle,
        }
    }

    /// The step's nominal length in milliseconds (`None` without a step).
    pub fn step_ms(&self) -> Option<f64> {
        match self {
            Consumer::Idle => None,
            Consumer::Sleep(d) => Some(d.as_secs_f64() * 1000.0),
            Consumer::Busy(w) => Some(w.ms),
        }
    }

    /// One step, after taking a batch.
    pub fn step(&self) {
        match self {
            Consumer::Idle => {}
            Consumer::Sleep(d) => std::thread::sleep(*d),
            Consumer::Busy(w) => {
                black_box(w.run());
            }
        }
    }
}

/// A fixed amount of computation: `rounds` rounds of an integer hash, each depending on
/// the last, so that it takes a fixed number of cycles on a core it has to itself and longer
/// exactly when something takes that core (or its cache) from it. A timed spin would
/// instead take the same wall time however much work it lost.
pub struct BusyWork {
    /// Rounds per step.
    pub rounds: u64,
    /// The milliseconds asked for, which `rounds` take on an idle core.
    pub ms: f64,
}

/// Rounds per calibration probe: a few milliseconds, long enough for the clock.
const PROBE_ROUNDS: u64 = 1 << 22;
/// Probes timed; the fastest gives the rate of an undisturbed core.
const PROBES: usize = 12;

impl BusyWork {
    /// The work that takes `ms` milliseconds on this machine's core, timed now (before the
    /// pipeline starts): the fastest of several probes, so that another program's burst
    /// during one of them does not shorten the work.
    pub fn calibrate(ms: f64) -> BusyWork {
        let mut fastest = f64::INFINITY;
        for _ in 0..PROBES {
            let t0 = Instant::now();
            black_box(spin(black_box(PROBE_ROUNDS)));
            fastest = fastest.min(t0.elapsed().as_secs_f64() / PROBE_ROUNDS as f64);
        }
        BusyWork {
            rounds: ((ms.max(0.0) / 1000.0) / fastest.max(1e-12)).round() as u64,
            ms,
        }
    }

    /// One step's work; the result only keeps the compiler from dropping it.
    pub fn run(&self) -> u64 {
        spin(black_box(self.rounds))
    }
}

/// `rounds` rounds of xorshift and a multiply, each on the last one's result.
fn spin(rounds: u64) -> u64 {
    let mut x = black_box(0x9E37_79B9_7F4A_7C15u64);
    for _ in 0..rounds {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
    }
    x
}

/// Times `steps` consumer steps on batches already made (`held`, taken in turn): the
/// consumer's speed when no pipeline runs beside it; `None` where `stop` said so (Ctrl-C).
pub fn on_premade<T>(
    consumer: &Consumer,
    held: &[T],
    steps: u64,
    stop: &dyn Fn() -> bool,
) -> Option<Duration> {
    let t0 = Instant::now();
    for i in 0..steps as usize {
        black_box(&held[i % held.len().max(1)]);
        consumer.step();
        if stop() {
            return None;
        }
    }
    Some(t0.elapsed())
}

/// What the pipeline's threads did while its queue was full.
pub struct WhileFull {
    /// What they used during the window.
    pub used: ThreadUse,
    /// The window, after the queue filled and the threads went quiet.
    pub window: Duration,
    /// False when they had not gone quiet within the time allowed: the window then started
    /// anyway, and the figures show what kept them busy.
    pub settled: bool,
    /// False when the queue did not fill within the time allowed.
    pub full: bool,
}

/// How long to wait for the queue to fill, and then for the threads to go quiet.
const FILL_LIMIT: Duration = Duration::from_secs(60);
const SETTLE_LIMIT: Duration = Duration::from_secs(5);
/// A quiet interval: no wake-up and under 0.1 ms of CPU in this long.
const QUIET: Duration = Duration::from_millis(100);

/// Takes no batch from `p` until its queue is full (`prefetch` batches) and its threads
/// have finished the samples they had credits for; then counts, over `window`, what the
/// threads use doing nothing: parked threads use nothing, a polling one wakes, a spinning
/// one burns CPU.
pub fn while_full(p: &Pipeline, prefetch: usize, window: Duration) -> WhileFull {
    let t0 = Instant::now();
    while p.ready_batches() < prefetch && t0.elapsed() < FILL_LIMIT {
        std::thread::sleep(Duration::from_millis(10));
    }
    let full = p.ready_batches() >= prefetch;
    let t0 = Instant::now();
    let mut settled = false;
    let mut last = threads::pipeline_threads();
    while t0.elapsed() < SETTLE_LIMIT {
        std::thread::sleep(QUIET);
        let now = threads::pipeline_threads();
        let used = now.since(&last);
        last = now;
        if used.wakeups == 0 && used.cpu < Duration::from_micros(100) {
            settled = true;
            break;
        }
    }
    let before = threads::pipeline_threads();
    let t0 = Instant::now();
    std::thread::sleep(window);
    let used = threads::pipeline_threads().since(&before);
    WhileFull {
        used,
        window: t0.elapsed(),
        settled,
        full,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_work_is_fixed_rounds_of_a_chain_that_cannot_be_skipped() {
        assert_eq!(BusyWork::calibrate(0.0).rounds, 0);
        assert!(BusyWork::calibrate(2.0).rounds > 0);
        // Each round changes the result: the compiler can't fold the loop away.
        let results: std::collections::HashSet<u64> = (0..64).map(spin).collect();
        assert_eq!(results.len(), 64);
    }
}
