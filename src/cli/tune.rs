//! `stokehold tune`: times each (threads, prefetch) pair long enough to measure, prints
//! each one's spread, and recommends a setting only as firmly as the spread allows. The
//! prefetch queue only matters beside a consumer that takes time: without a training step
//! (`--consumer-ms`) the file's depth is kept and said to be.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::bench::{measure, Timing};
use super::options::{self, RunOpts};
use super::output::outln;

/// Arguments of `stokehold tune`.
#[derive(Args)]
pub struct TuneArgs {
    /// The pipeline file.
    pipeline: PathBuf,
    #[command(flatten)]
    opts: RunOpts,
    /// Thread counts to try (default: 1 up to the core count, and one more).
    #[arg(long, value_delimiter = ',')]
    thread_counts: Vec<usize>,
    /// Prefetch depths to try (default: 1, 2 and 4 with a training step, else the file's).
    #[arg(long, value_delimiter = ',')]
    prefetch_depths: Vec<usize>,
    /// Simulate a training step of this many milliseconds per batch (as `bench` does): the
    /// prefetch queue is only worth tuning beside one.
    #[arg(long, value_name = "MS")]
    consumer_ms: Option<f64>,
    /// Without --epochs: repeat each trial's timed epochs until they took this long.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    min_seconds: f64,
}

/// One trial's result.
struct Trial {
    threads: usize,
    prefetch: usize,
    /// Median, lowest and highest epoch throughput (all equal with one timed epoch).
    median: f64,
    low: f64,
    high: f64,
    /// Whether the spread was measured (two timed epochs or more).
    spread_known: bool,
}

/// Epoch-to-epoch variation (half the range, of the median) above which a trial says
/// more about noise than about the setting.
const NOISY: f64 = 0.10;

/// Tries every pair and prints the table and the advice.
pub fn tune(args: &TuneArgs) -> Result<ExitCode> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads: Vec<usize> = if args.thread_counts.is_empty() {
        (1..=cores + 1).collect()
    } else {
        args.thread_counts.clone()
    };
    let checked = options::load(&args.pipeline, Some(&args.opts))?;
    let consumer = super::consumer::Consumer::from_flags(args.consumer_ms, None);
    let stepping = consumer.step_ms().is_some();
    let depths = match (&args.prefetch_depths[..], stepping) {
        ([], true) => vec![1, 2, 4],
        ([], false) => vec![checked.loaded.spec.settings.prefetch],
        (given, _) => given.to_vec(),
    };
    anyhow::ensure!(
        threads.iter().chain(&depths).all(|&n| n >= 1),
        "thread counts and prefetch depths must be at least 1"
    );
    // Epochs long enough on their own are timed once (as many as small ones take).
    let timing = Timing::from(&args.opts, args.min_seconds, 1);
    outln!(
        "{:>8} {:>9} {:>12} {:>21}",
        "threads",
        "prefetch",
        "img/s",
        "spread over epochs"
    )?;
    let interrupt = super::interrupt::Interrupt::install_stopping(
        "this trial, then advising on the trials run",
    )?;
    let mut trials = Vec::new();
    'trials: for &t in &threads {
        for &d in &depths {
            if interrupt.requested() {
                break 'trials;
            }
            let mut spec = checked.loaded.spec.clone();
            spec.settings.threads = Some(t);
            spec.settings.prefetch = d;
            let m = measure(spec, timing, &consumer, false)?;
            let trial = match m.spread() {
                Some((median, low, high)) => Trial {
                    threads: t,
                    prefetch: d,
                    median,
                    low,
                    high,
                    spread_known: true,
                },
                None => {
                    let tp = m.throughput();
                    Trial {
                        threads: t,
                        prefetch: d,
                        median: tp,
                        low: tp,
                        high: tp,
                        spread_known: false,
                    }
                }
            };
            let spread = if trial.spread_known {
                format!("{:.1} – {:.1}", trial.low, trial.high)
            } else {
                "—".to_string()
            };
            outln!("{t:>8} {d:>9} {:>12.1} {spread:>21}", trial.median)?;
            trials.push(trial);
        }
    }
    let all = threads.len() * depths.len();
    if interrupt.requested() && trials.len() < all {
        outln!("interrupted: {} of {all} trials run", trials.len())?;
    }
    for line in advice(&trials, cores, stepping, !args.prefetch_depths.is_empty()) {
        outln!("{line}")?;
    }
    if interrupt.requested() {
        return Ok(ExitCode::from(super::interrupt::EXIT_STATUS));
    }
    Ok(ExitCode::SUCCESS)
}

/// What the trials support saying: the best setting when it stands clear of the others'
/// spread; otherwise the cheapest (fewest threads, then least prefetch) of those that
/// can't be told apart from the best, said as such. Without a consumer step (`stepping`)
/// the prefetch depths' figures say nothing about a training run, and the advice says so;
/// it names a depth where there was a step or the depths were asked for (`depths_given`).
fn advice(trials: &[Trial], cores: usize, stepping: bool, depths_given: bool) -> Vec<String> {
    let Some(best) = trials.iter().max_by(|a, b| a.median.total_cmp(&b.median)) else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    if trials.iter().any(|t| !t.spread_known) {
        lines.push(
            "only one timed epoch per trial, so the spread is unknown: pass --epochs 3 (or \
             more) to measure it"
                .to_string(),
        );
    }
    let noisy = trials.iter().filter(|t| is_noisy(t)).count();
    if noisy > 0 {
        lines.push(format!(
            "{noisy} of {} trials varied by more than ±{:.0}% from epoch to epoch: the data \
             may be too small or the machine busy; use more data (--data) or a longer \
             --min-seconds",
            trials.len(),
            NOISY * 100.0
        ));
    }
    // Trials whose spread reaches the best one's: the measurements can't rank them. Where
    // either spread is noise (an epoch of a tiny data set taken from the queue in
    // microseconds: "2,400 – 4,000,000 img/s"), it reaches the other's, and a setting at
    // half the speed would tie: then the medians are compared, within the noise bound.
    let by_median = |t: &Trial| is_noisy(best) || is_noisy(t);
    let mut tied: Vec<&Trial> = trials
        .iter()
        .filter(|t| {
            if by_median(t) {
                t.median >= best.median * (1.0 - NOISY)
            } else {
                t.high >= best.low
            }
        })
        .collect();
    let by_median = trials.iter().any(by_median);
    tied.sort_by_key(|t| (t.threads, t.prefetch));
    let pick = tied.first().copied().unwrap_or(best);
    let within = if by_median {
        format!(
            "within {:.0}% of the best's median ({:.1} img/s; its spread is too wide to compare \
             by)",
            NOISY * 100.0,
            best.median
        )
    } else {
        format!(
            "within the measured spread of the best ({:.1} img/s)",
            best.median
        )
    };
    if tied.len() > 1 {
        let list: Vec<String> = tied
            .iter()
            .map(|t| format!("{}/{}", t.threads, t.prefetch))
            .collect();
        lines.push(format!(
            "no clear winner: {} settings (threads/prefetch: {}) are {within}; the cheapest of \
             them is threads = {}, prefetch = {}",
            tied.len(),
            list.join(", "),
            pick.threads,
            pick.prefetch
        ));
    } else {
        let clear = if by_median {
            format!(
                "its median more than {:.0}% above the others'",
                NOISY * 100.0
            )
        } else {
            "clear of the other settings' spread".to_string()
        };
        lines.push(format!(
            "best: threads = {}, prefetch = {} ({:.1} img/s on {cores} cores, {clear})",
            pick.threads, pick.prefetch, pick.median
        ));
    }
    if stepping || depths_given {
        lines.push(format!(
            "put `threads = {t}` and `prefetch = {d}` in the [pipeline] table, or pass \
             --threads {t} --prefetch {d}",
            t = pick.threads,
            d = pick.prefetch
        ));
    } else {
        lines.push(format!(
            "put `threads = {t}` in the [pipeline] table, or pass --threads {t}",
            t = pick.threads
        ));
    }
    if !stepping {
        lines.push(
            "prefetch: without a training step the queue stays full whatever its depth, so \
             these runs can't tell depths apart; pass --consumer-ms with your step's time to \
             tune it"
                .to_string(),
        );
    }
    lines
}

/// Whether a trial's epochs varied by more than ±[`NOISY`] of its median.
fn is_noisy(t: &Trial) -> bool {
    (t.high - t.low) / 2.0 > NOISY * t.median
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(threads: usize, prefetch: usize, low: f64, high: f64) -> Trial {
        Trial {
            threads,
            prefetch,
            median: (low + high) / 2.0,
            low,
            high,
            spread_known: true,
        }
    }

    #[test]
    fn overlapping_spreads_give_the_cheapest_of_them() {
        let trials = [
            trial(1, 1, 100.0, 104.0),
            trial(2, 1, 180.0, 190.0),
            trial(2, 2, 185.0, 195.0),
            trial(3, 1, 188.0, 192.0),
        ];
        let a = advice(&trials, 2, true, false);
        assert!(a[0].starts_with("no clear winner: 3 settings"), "{a:?}");
        assert!(a[0].ends_with("threads = 2, prefetch = 1"), "{a:?}");
        assert!(a[1].contains("--threads 2 --prefetch 1"), "{a:?}");
    }

    #[test]
    fn a_clear_winner_is_named_as_such() {
        let trials = [trial(1, 1, 100.0, 104.0), trial(2, 1, 180.0, 190.0)];
        let a = advice(&trials, 2, true, false);
        assert!(a[0].starts_with("best: threads = 2, prefetch = 1"), "{a:?}");
    }

    #[test]
    fn noisy_or_unmeasured_spreads_are_said() {
        let mut one = trial(1, 1, 100.0, 100.0);
        one.spread_known = false;
        let a = advice(&[one, trial(2, 1, 100.0, 200.0)], 2, true, false);
        assert!(a[0].starts_with("only one timed epoch"), "{a:?}");
        assert!(a[1].starts_with("1 of 2 trials varied"), "{a:?}");
    }

    #[test]
    fn spreads_that_are_noise_are_not_a_tie_at_half_the_speed() {
        // A data set of 24 images: an epoch taken from the queue in microseconds.
        let noisy = |threads, median| Trial {
            threads,
            prefetch: 2,
            median,
            low: 2_400.0,
            high: 3_987_373.0,
            spread_known: true,
        };
        let a = advice(&[noisy(1, 4_100.0), noisy(2, 8_300.0)], 2, false, false);
        let best = a
            .iter()
            .find(|l| l.starts_with("best: "))
            .expect("a winner");
        assert!(best.starts_with("best: threads = 2,"), "{a:?}");
        assert!(best.contains("median more than 10% above"), "{a:?}");
        // A clean best against a noisy cheaper setting at half its speed: no tie either.
        let clean = trial(2, 2, 8_000.0, 8_600.0);
        let a = advice(&[noisy(1, 4_100.0), clean], 2, false, false);
        assert!(
            a.iter().any(|l| l.starts_with("best: threads = 2,")),
            "{a:?}"
        );
        // Medians within the bound still tie, the cheapest named.
        let a = advice(&[noisy(1, 8_000.0), noisy(2, 8_300.0)], 2, false, false);
        let tie = a.iter().find(|l| l.starts_with("no clear winner")).unwrap();
        assert!(tie.contains("within 10% of the best's median"), "{a:?}");
        assert!(tie.ends_with("threads = 1, prefetch = 2"), "{a:?}");
    }

    #[test]
    fn without_a_consumer_step_prefetch_is_not_advised_on() {
        let trials = [trial(2, 2, 180.0, 190.0)];
        let a = advice(&trials, 2, false, false);
        let last = a.last().unwrap();
        assert!(
            last.starts_with("prefetch: without a training step"),
            "{a:?}"
        );
        assert!(
            a.iter().any(|l| l.ends_with("or pass --threads 2")),
            "{a:?}"
        );
        let b = advice(&trials, 2, true, false);
        assert!(!b.iter().any(|l| l.starts_with("prefetch:")), "{b:?}");
        assert!(
            b.iter().any(|l| l.ends_with("--threads 2 --prefetch 2")),
            "{b:?}"
        );
    }
}
