//! What the read stage takes its samples from: a listed data set of files, read one by one by
//! index (outside any lock, on the reader threads), or a stream of tar shards, read front to
//! back on threads of its own and handed out ready.

use std::path::Path;
use std::sync::Arc;

use crossbeam_channel::Receiver;

use crate::error::{Error, SampleErrorKind};

use super::dataset::Dataset;
use super::schedule::{batches, Position, Schedule, Step};
use super::shards::samples::{LabelFrom, SampleRules};
use super::shards::set::ShardSet;
use super::shards::stream::{ShardStep, ShardStream};
use super::ReaderConfig;

/// A reader's data set.
#[derive(Debug, Clone)]
pub enum Source {
    /// Image files, listed (random access by index).
    Files(Arc<Dataset>),
    /// WebDataset tar shards (read sequentially).
    Shards(Arc<ShardSet>),
}

/// The read stage's walk through a source, epoch after epoch.
pub enum Steps {
    /// A data set of files: the schedule says which file is next.
    Files(Schedule, Arc<Dataset>),
    /// Shards: the stream hands out samples already read.
    Shards(ShardStream),
}

/// How a walk through a source goes: what it hands on, for how long, from where.
#[derive(Debug, Clone)]
pub struct Walk {
    /// Samples per batch (for files, what decides whether a shorter part is padded).
    pub batch: usize,
    /// Image members over this many bytes are refused unread (files are checked as they
    /// are read).
    pub max_bytes: u64,
    /// Whether the pipeline uses labels (a shard sample without one is then damaged).
    pub labels: bool,
    /// Epochs to walk (`None`: without end).
    pub epochs: Option<u64>,
    /// Where the walk starts.
    pub start: Position,
    /// Disconnected when the pipeline stops: a walk waiting for a shard's next sample gives
    /// up then rather than hold the stop up.
    pub stop: Receiver<()>,
}

/// The next thing the read stage hands on.
#[derive(Debug)]
pub enum Next {
    /// File `path` is to be read (outside the schedule's lock).
    File {
        /// Sequence number of the step.
        seq: u64,
        /// Its epoch.
        epoch: u64,
        /// Its position in the epoch.
        pos: usize,
        /// Its index in the data set.
        index: usize,
        /// The file.
        path: Arc<Path>,
        /// Its label.
        label: i64,
    },
    /// A sample already read.
    Ready {
        /// Sequence number of the step.
        seq: u64,
        /// Its epoch.
        epoch: u64,
        /// Its position in the epoch.
        pos: usize,
        /// Its number in the data set.
        index: usize,
        /// `shard:member`.
        path: Arc<Path>,
        /// Its label.
        label: i64,
        /// Its bytes, or why there are none.
        bytes: Result<Arc<Vec<u8>>, SampleErrorKind>,
    },
    /// Every sample of `epoch` has been handed on.
    EpochEnd {
        /// Sequence number of the step.
        seq: u64,
        /// The epoch.
        epoch: u64,
    },
}

impl Source {
    /// Lists the data set `config` describes.
    pub fn open(config: &ReaderConfig) -> Result<Source, Error> {
        match &config.shards {
            Some(s) => Ok(Source::Shards(Arc::new(ShardSet::open(s)?))),
            None => Ok(Source::Files(Arc::new(Dataset::list(config)?))),
        }
    }

    /// Problems met while listing.
    pub fn warnings(&self) -> &[String] {
        match self {
            Source::Files(d) => &d.warnings,
            Source::Shards(s) => &s.warnings,
        }
    }

    /// Samples in the whole data set.
    pub fn len(&self) -> usize {
        match self {
            Source::Files(d) => d.entries.len(),
            Source::Shards(s) => s.total,
        }
    }

    /// True for a data set without samples (never the case once listed).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Real samples per epoch for this process's part (its rank's part of the data set),
    /// padding not counted.
    pub fn samples_per_epoch(&self, config: &ReaderConfig) -> usize {
        match self {
            Source::Shards(s) => s.config.split.samples_per_epoch(s.total),
            Source::Files(d) => config.epoch_order(1).samples_per_epoch(d.entries.len()),
        }
    }

    /// Samples the walk takes per epoch, padding included, in batches of `batch`: for files,
    /// the schedule's one flagged repeat where a shorter part needs it to have as many
    /// batches as the others ([`EpochOrder`](super::schedule::EpochOrder)); shards give
    /// every rank as many samples already (see [`RankSplit`](super::shards::schedule::RankSplit)).
    pub fn scheduled_per_epoch(&self, config: &ReaderConfig, batch: usize) -> usize {
        match self {
            Source::Shards(_) => self.samples_per_epoch(config),
            Source::Files(d) => config
                .epoch_order(batch)
                .scheduled_per_epoch(d.entries.len()),
        }
    }

    /// Batches per epoch for this process's part, in batches of `batch`: the same on every
    /// rank (with several ranks, bad samples skipped included: the assembler pads).
    pub fn batches_per_epoch(&self, config: &ReaderConfig, batch: usize) -> usize {
        match self {
            Source::Shards(_) => batches(
                self.scheduled_per_epoch(config, batch),
                batch,
                config.last_batch,
            ),
            Source::Files(d) => config.epoch_order(batch).batches_per_epoch(d.entries.len()),
        }
    }

    /// Class names by label (label `i` is `class_names()[i]`): a folder of class folders'
    /// names, or a shard set's from its index (`stokehold pack` writes them); empty where the
    /// data set has none (a flat folder, a list file, shards without an index).
    pub fn class_names(&self) -> Vec<String> {
        match self {
            Source::Files(d) => d
                .classes
                .iter()
                .map(|c| c.to_string_lossy().into_owned())
                .collect(),
            Source::Shards(s) => s.classes.clone(),
        }
    }

    /// The listed files, for a data set of files.
    pub fn dataset(&self) -> Option<&Arc<Dataset>> {
        match self {
            Source::Files(d) => Some(d),
            Source::Shards(_) => None,
        }
    }

    /// The walk through the data set that `walk` describes.
    pub fn steps(&self, config: &ReaderConfig, walk: Walk) -> Steps {
        match self {
            Source::Shards(set) => {
                let c = &set.config;
                let rules = SampleRules {
                    extensions: config.extensions.clone(),
                    label: if walk.labels {
                        c.label.clone()
                    } else {
                        LabelFrom::None
                    },
                    max_bytes: walk.max_bytes,
                };
                Steps::Shards(ShardStream::new(
                    set.clone(),
                    Arc::new(c.clone()),
                    Arc::new(rules),
                    (walk.epochs, walk.start),
                    walk.stop,
                ))
            }
            Source::Files(d) => Steps::Files(
                Schedule::new(
                    config.epoch_order(walk.batch),
                    d.entries.len(),
                    walk.epochs,
                    walk.start,
                ),
                d.clone(),
            ),
        }
    }
}

impl Steps {
    /// The next step; `None` after the last epoch's end.
    pub fn next_step(&mut self) -> Option<Next> {
        match self {
            Steps::Files(schedule, ds) => Some(match schedule.next_step()? {
                Step::Sample {
                    seq,
                    epoch,
                    pos,
                    index,
                } => {
                    let e = &ds.entries[index];
                    Next::File {
                        seq,
                        epoch,
                        pos,
                        index,
                        path: e.path.clone(),
                        label: e.label,
                    }
                }
                Step::EpochEnd { seq, epoch } => Next::EpochEnd { seq, epoch },
            }),
            Steps::Shards(stream) => Some(match stream.next_step()? {
                ShardStep::Sample {
                    seq,
                    epoch,
                    pos,
                    sample,
                } => Next::Ready {
                    seq,
                    epoch,
                    pos,
                    index: sample.index,
                    path: sample.path.into(),
                    label: sample.label,
                    bytes: sample.bytes,
                },
                ShardStep::EpochEnd { seq, epoch } => Next::EpochEnd { seq, epoch },
            }),
        }
    }
}
