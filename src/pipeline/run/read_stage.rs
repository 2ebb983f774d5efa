//! The read stage: reader threads take the source's next step while they hold a credit,
//! read that sample's file (or take the shard sample already read) and hand the bytes on to
//! the workers.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crossbeam_channel::Sender;

use crate::error::SampleErrorKind;
use crate::reader::file_io::read_file;
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
        path: PathBuf,
        label: i64,
        bytes: Result<Arc<Vec<u8>>, SampleErrorKind>,
    },
    /// Every sample of `epoch` has been handed on.
    EpochEnd { seq: u64, epoch: u64 },
}

/// One reader thread's share of the stage (clone it for each thread).
#[derive(Clone)]
pub(super) struct ReadStage {
    /// The walk through the source, shared by the readers.
    pub(super) steps: Arc<Mutex<Steps>>,
    /// One credit per step: the assembler gives them back as it takes samples, which bounds
    /// the samples in flight.
    pub(super) credits: StageInput<()>,
    pub(super) out: Sender<Loaded>,
    pub(super) stats: Arc<Stats>,
    /// Files over this many bytes are refused unread.
    pub(super) max_bytes: u64,
}

impl ReadStage {
    /// Reads until the schedule ends, the workers are gone or the pipeline shuts down.
    pub(super) fn run(self) {
        self.credits
            .run(|()| self.next_loaded(), |item| self.out.send(item).is_ok());
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
    let r = read_file(path, max_bytes);
    add_ns(&stats.read_ns, t0.elapsed());
    if let Ok(b) = &r {
        stats
            .read_bytes
            .fetch_add(b.len() as u64, std::sync::atomic::Ordering::Relaxed);
    }
    r.map(Arc::new)
}
