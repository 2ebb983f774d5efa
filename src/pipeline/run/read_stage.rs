//! The read stage: reader threads take the source's next step while they hold a credit,
//! read that sample's file (or take the shard sample already read) and hand the bytes on to
//! the workers.
//!
//! On the GPU path beside JPEG engines a reader of files hands samples on a few at a time
//! ([`Hold`]): there the workers only parse headers, faster than a reader reads, so they wait
//! for each sample, and a sample handed on alone woke a worker — which, with the feeding
//! thread on a core of its own, took the reader's core until it was done: a wake-up and a
//! preemption a sample. Where the workers are the slow stage (the CPU path, a GPU without
//! engines, every core's worker decoding once the worker gate opens) they find samples
//! waiting, and one at a time keeps them all busy to a batch's last sample; a shard's next
//! sample may keep a reader waiting, so shards go one at a time too.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{select, Sender};

use crate::error::SampleErrorKind;
use crate::reader::file_io::read_file_shared;
use crate::reader::source::{Next, Steps};

use super::stage_loop::StageInput;
use super::stats::{add_ns, Stats};

/// What a reader hands to the workers, in schedule order (`seq`).
#[derive(Debug)]
pub(super) enum Loaded {
    /// A sample's file (or why it could not be read).
    Sample {
        seq: u64,
        epoch: u64,
        pos: usize,
        index: usize,
        path: Arc<Path>,
        label: i64,
        bytes: Result<Arc<Vec<u8>>, SampleErrorKind>,
    },
    /// Every sample of `epoch` has been handed on.
    EpochEnd { seq: u64, epoch: u64 },
}

/// Samples a reader hands on together (one held in place: the CPU path hands them on one at
/// a time, without allocating).
pub(super) type LoadedGroup = smallvec::SmallVec<[Loaded; 1]>;

/// One reader thread's share of the stage (clone it for each thread).
#[derive(Clone)]
pub(super) struct ReadStage {
    /// The walk through the source, shared by the readers.
    pub(super) steps: Arc<Mutex<Steps>>,
    /// One credit per step, a number of them to a message: the assembler gives them back as
    /// it takes samples, which bounds the samples in flight.
    pub(super) credits: StageInput<usize>,
    /// Samples in schedule order, as many at once as were read together.
    pub(super) out: Sender<LoadedGroup>,
    pub(super) stats: Arc<Stats>,
    /// Files over this many bytes are refused unread.
    pub(super) max_bytes: u64,
    /// The most samples handed on at once.
    pub(super) hold: Hold,
    /// How long a reader holds its first sample at most ([`HOLD_FOR`]).
    pub(super) hold_for: Duration,
}

/// Samples a reader of the GPU path beside JPEG engines reads before it hands them on
/// together, while it has the credits to read them at once.
pub(super) const GPU_PATH_HOLD: usize = 16;

/// How long a reader holds its first sample at most: slow reads hand samples on sooner.
pub(super) const HOLD_FOR: Duration = Duration::from_millis(2);

/// The most samples a reader hands on at once, shared by the readers and lowered to one
/// where the workers turn out to be the slow stage (the worker gate opening).
#[derive(Debug, Clone)]
pub(crate) struct Hold(Arc<AtomicUsize>);

impl Hold {
    /// At most `most` samples at once (at least one).
    pub(crate) fn new(most: usize) -> Hold {
        Hold(Arc::new(AtomicUsize::new(most.max(1))))
    }

    /// The most samples handed on at once now.
    pub(crate) fn most(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    /// From now on, one sample at a time.
    pub(crate) fn one_at_a_time(&self) {
        self.0.store(1, Ordering::Relaxed);
    }
}

impl ReadStage {
    /// Reads until the schedule ends, the workers are gone or the pipeline shuts down.
    pub(super) fn run(self) {
        super::threads::below_the_consumer();
        let credits = &self.credits;
        // Credits come a handful to a message; this reader spends its own one per step.
        let mut balance = 0;
        loop {
            if balance == 0 {
                select! {
                    recv(credits.items) -> c => match c {
                        Ok(n) => balance += n,
                        Err(_) => return,
                    },
                    recv(credits.shutdown) -> _ => return,
                }
                continue;
            }
            if !credits.running() {
                return;
            }
            let first = Instant::now();
            let most = self.hold.most();
            // Room for more once a second sample comes: one alone is held in place.
            let mut held = LoadedGroup::new();
            let more = loop {
                let Some(item) = self.next_loaded() else {
                    break false;
                };
                balance -= 1;
                // An epoch's last samples go at once: the next step may wait (a shard's
                // shuffle buffer filling).
                let epoch_end = matches!(item, Loaded::EpochEnd { .. });
                if held.len() == 1 {
                    held.reserve(most.saturating_sub(1));
                }
                held.push(item);
                if epoch_end || held.len() >= most || first.elapsed() >= self.hold_for {
                    break true;
                }
                // Only credits at hand: waiting for one would hold what was read.
                if !credits.running() {
                    break true;
                }
                if balance == 0 {
                    match credits.items.try_recv() {
                        Ok(n) => balance += n,
                        Err(_) => break true,
                    }
                }
            };
            // Never blocks: the channel has room for every credit, and each item spent one.
            if !held.is_empty() && self.out.send(held).is_err() {
                return;
            }
            if !more {
                return;
            }
        }
    }

    /// The source's next step, its file read (`None` once the schedule ends).
    fn next_loaded(&self) -> Option<Loaded> {
        // A shard's sample comes out of `next_step` (its shard's own thread reads the tar
        // stream): the time a reader waits for it counts as reading, as a file's read does in
        // `read_sample`.
        let step = match self.steps.lock() {
            Ok(mut s) => {
                let t0 = Instant::now();
                let step = s.next_step();
                if matches!(step, Some(Next::Ready { .. })) {
                    add_ns(&self.stats.read_ns, t0.elapsed());
                }
                step
            }
            Err(_) => None,
        };
        Some(match step? {
            Next::EpochEnd { seq, epoch } => Loaded::EpochEnd { seq, epoch },
            Next::File {
                seq,
                epoch,
                pos,
                index,
                path,
                label,
            } => {
                let bytes = read_sample(&path, self.max_bytes, &self.stats);
                Loaded::Sample {
                    seq,
                    epoch,
                    pos,
                    index,
                    path,
                    label,
                    bytes,
                }
            }
            Next::Ready {
                seq,
                epoch,
                pos,
                index,
                path,
                label,
                bytes,
            } => {
                if let Ok(b) = &bytes {
                    self.stats
                        .read_bytes
                        .fetch_add(b.len() as u64, std::sync::atomic::Ordering::Relaxed);
                }
                Loaded::Sample {
                    seq,
                    epoch,
                    pos,
                    index,
                    path,
                    label,
                    bytes,
                }
            }
        })
    }
}

/// Reads a sample's file, counting the time and bytes.
pub(super) fn read_sample(
    path: &Path,
    max_bytes: u64,
    stats: &Stats,
) -> Result<Arc<Vec<u8>>, SampleErrorKind> {
    let t0 = Instant::now();
    let r = read_file_shared(path, max_bytes);
    add_ns(&stats.read_ns, t0.elapsed());
    if let Ok(b) = &r {
        stats
            .read_bytes
            .fetch_add(b.len() as u64, std::sync::atomic::Ordering::Relaxed);
    }
    r
}

#[cfg(test)]
#[path = "read_stage_tests.rs"]
mod tests;
