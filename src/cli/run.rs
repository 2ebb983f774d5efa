//! `stokehold run`: runs a pipeline with a progress bar, prints a summary; stops cleanly on
//! Ctrl-C with the position to resume from, and resumes from one.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::pipeline::batch::BatchOutput;
use crate::pipeline::{Batch, Position};
use anyhow::Result;
use clap::Args;

use super::interrupt::{self, Interrupt};
use super::options::{self, RunOpts};
use super::output::outln;
use super::progress::Progress;
use super::stats;

/// Arguments of `stokehold run`.
#[derive(Args)]
pub struct RunArgs {
    /// The pipeline file.
    pipeline: PathBuf,
    #[command(flatten)]
    opts: RunOpts,
    /// Print per-stage statistics at the end.
    #[arg(long)]
    stats: bool,
    /// Continue a stopped run from POSITION (seed:epoch:sample:batch:batch_size:rank:world_size,
    /// as printed when it stopped): the batches that follow are those the whole run would
    /// have given. Mid-epoch, with the batch size and ranks it had; from an epoch's start,
    /// with any.
    #[arg(long, value_name = "POSITION")]
    resume: Option<Position>,
    /// Print a line per batch: epoch, index, images, skipped, a digest of its contents
    /// (same data, seed and settings: same digests) and the position after it.
    #[arg(long)]
    print_batches: bool,
    /// Simulate a training step of this many milliseconds per batch.
    #[arg(long, value_name = "MS")]
    consumer_ms: Option<f64>,
}

/// Runs the pipeline; exit status 130 when stopped by Ctrl-C, 1 when nothing was delivered.
pub fn run(args: &RunArgs) -> Result<ExitCode> {
    let interrupt = Interrupt::install()?;
    let checked = options::load(&args.pipeline, Some(&args.opts))?;
    let epochs = checked.graph.spec.settings.epochs;
    let (seed, batch_size) = (
        checked.graph.spec.settings.seed,
        checked.graph.spec.settings.batch,
    );
    let (rank, world_size) = (checked.graph.reader.rank, checked.graph.reader.world_size);
    // The start counts: listing the data set, starting the threads.
    let started = Instant::now();
    let mut p = options::start(checked, args.resume, true)?;
    let mut position = match args.resume {
        // The start took it: where it records another batch size or other ranks, it is an
        // epoch's start (which may go on with others) or predates their recording.
        Some(p) => Position {
            batch_size,
            rank,
            world_size,
            ..p
        },
        None => Position {
            rank,
            world_size,
            ..Position::start(seed, batch_size)
        },
    };
    let per_epoch = p.samples_per_epoch() as u64;
    let done = position.epoch * per_epoch + position.sample as u64;
    let mut progress = Progress::new(
        epochs.map(|e| (e * per_epoch).saturating_sub(done)),
        epochs,
        true,
    );
    let step = args
        .consumer_ms
        .map(|ms| Duration::from_secs_f64(ms.max(0.0) / 1000.0));
    let (mut images, mut skipped) = (0u64, 0u64);
    let mut interrupted = false;
    loop {
        if interrupt.requested() {
            interrupted = true;
            break;
        }
        let Some(b) = p.next_batch() else { break };
        let b = b?;
        images += (b.len() - b.padded) as u64;
        skipped += b.skipped.len() as u64;
        position = b.resume;
        interrupt.handed_out(position);
        progress.batch(&b);
        if args.print_batches {
            progress.suspend(|| outln!("{}", batch_line(&b)))?;
        }
        if let Some(step) = step {
            std::thread::sleep(step);
        }
    }
    let secs = started.elapsed().as_secs_f64();
    progress.finish();
    let st = p.stats();
    drop(p);
    if args.stats {
        stats::print(&st, secs)?;
    }
    let samples = |n: u64| if n == 1 { "sample" } else { "samples" };
    for (cause, n) in &st.skipped_by_cause {
        outln!("skipped {n} bad {} ({cause})", samples(*n))?;
    }
    for (cause, n) in &st.replaced_by_cause {
        outln!("replaced {n} bad {} ({cause})", samples(*n))?;
    }
    // A finished run also counts the bad samples after the last batch, which no batch
    // carries; a stopped one, only what the consumer was handed.
    if !interrupted {
        (images, skipped) = (st.images, st.skipped);
    }
    outln!(
        "images={images} skipped={skipped} seconds={secs:.3} throughput={:.1} img/s",
        images as f64 / secs.max(1e-9)
    )?;
    if interrupted {
        outln!("stopped at position {position}")?;
        outln!(
            "to continue, run the same command with --resume {position} (the same data, \
             seed and settings give the batches the whole run would have)"
        )?;
        return Ok(ExitCode::from(interrupt::EXIT_STATUS));
    }
    if images == 0 && skipped == 0 && args.resume.is_some() {
        outln!("nothing left to run: position {position} is the end of the run")?;
        return Ok(ExitCode::SUCCESS);
    }
    if images == 0 && st.dropped > 0 {
        anyhow::bail!(
            "the run delivered no image: last_batch = \"drop\" left out {} good {} (and {skipped} \
             bad were skipped), fewer than a batch; use a smaller batch or last_batch = \"partial\"",
            st.dropped,
            samples(st.dropped)
        );
    }
    if images == 0 && skipped > 0 {
        anyhow::bail!(
            "the run delivered no image: every sample it read was bad ({skipped} skipped, \
             causes above)"
        );
    }
    if images == 0 {
        anyhow::bail!(
            "the run delivered no image; check the warnings above, or run `stokehold check {}`",
            args.pipeline.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The `--print-batches` line of a batch.
fn batch_line(b: &Batch) -> String {
    format!(
        "batch epoch={} index={} images={} skipped={} replaced={} digest={:016x} resume={}",
        b.epoch,
        b.index,
        b.len() - b.padded,
        b.skipped.len(),
        b.replaced.len(),
        digest(b),
        b.resume
    )
}

/// A 64-bit FNV-1a digest of what a batch hands out: which samples, every output's
/// values and shapes, and the labels.
fn digest(b: &Batch) -> u64 {
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    h.write(&b.epoch.to_le_bytes());
    h.write(&(b.index as u64).to_le_bytes());
    for s in &b.samples {
        h.write(&(s.index as u64).to_le_bytes());
    }
    for out in &b.outputs {
        // A batch on the device or in pinned memory is digested as its host copy: the same
        // data, the same digest.
        let copied;
        let out = match out {
            BatchOutput::Device(t) => match t.to_host() {
                Ok(host) => {
                    copied = BatchOutput::Images(host);
                    &copied
                }
                Err(_) => continue,
            },
            BatchOutput::Pinned(t) => {
                copied = BatchOutput::Images(t.to_host());
                &copied
            }
            other => other,
        };
        match out {
            BatchOutput::Device(_) | BatchOutput::Pinned(_) => {}
            BatchOutput::Images(t) => {
                for shape in &t.shapes {
                    for d in shape {
                        h.write(&(*d as u64).to_le_bytes());
                    }
                }
                h.write(t.as_bytes());
            }
            BatchOutput::Labels(labels) => {
                for l in labels {
                    h.write(&l.to_le_bytes());
                }
            }
        }
    }
    h.0
}

struct Fnv(u64);

impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_the_published_test_vectors() {
        let mut h = Fnv(0xcbf2_9ce4_8422_2325);
        h.write(b"a");
        assert_eq!(h.0, 0xaf63_dc4c_8601_ec8c);
        let mut h = Fnv(0xcbf2_9ce4_8422_2325);
        h.write(b"foobar");
        assert_eq!(h.0, 0x8594_4171_f739_67e8);
    }
}
