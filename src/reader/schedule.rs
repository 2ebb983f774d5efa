//! The sample schedule: which sample comes next, epoch after epoch (each epoch's order
//! shuffled from the seed and cut to this rank's part, padded so that every rank has as many
//! batches), where a run stands ([`Position`]), and what
//! becomes of an epoch's last, incomplete batch ([`LastBatch`]).

use crate::rng::{domain, key, SampleRng};

/// What to do with the last, incomplete batch of an epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LastBatch {
    /// Return it with fewer samples.
    #[default]
    Partial,
    /// Leave its samples out.
    Drop,
    /// Fill it by repeating its last sample; the batch says how many are padding.
    Pad,
}

impl LastBatch {
    /// Pipeline-file names.
    pub const NAMES: &'static [&'static str] = &["partial", "drop", "pad"];

    /// Parses a pipeline-file name.
    pub fn from_name(s: &str) -> Option<LastBatch> {
        match s {
            "partial" => Some(LastBatch::Partial),
            "drop" => Some(LastBatch::Drop),
            "pad" => Some(LastBatch::Pad),
            _ => None,
        }
    }
}

/// Where a run stands: enough to resume it and get the same remaining batches.
///
/// It prints and parses as `seed:epoch:sample:batch:batch_size:rank:world_size`:
/// ```
/// use stokehold::pipeline::Position;
/// let p: Position = "1:2:130:2:64:0:1".parse()?;
/// assert_eq!((p.epoch, p.sample, p.batch_size, p.world_size), (2, 130, 64, 1));
/// assert_eq!(p.to_string(), "1:2:130:2:64:0:1");
/// assert_eq!(p.at_start_of(3).to_string(), "1:3:0:0:64:0:1");
/// // What a run printed before the batch size, or the ranks, were recorded still parses
/// // (0: not known).
/// assert_eq!("1:2:130:2".parse::<Position>()?.batch_size, 0);
/// assert_eq!("1:2:130:2:64".parse::<Position>()?.world_size, 0);
/// assert!("1:2".parse::<Position>().is_err());
/// # Ok::<(), stokehold::pipeline::PositionError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Position {
    /// The seed of the run (resuming with another seed is refused).
    pub seed: u64,
    /// Epoch of the next sample.
    pub epoch: u64,
    /// Position of the next sample in that epoch's order.
    pub sample: usize,
    /// Index the next batch will have in its epoch.
    pub batch: usize,
    /// Samples per batch of the run that recorded it (resuming with another batch size is
    /// refused: its batches would not be the ones the run would have given); 0 where it is not
    /// known, and then not checked.
    pub batch_size: usize,
    /// The rank that recorded it (resuming mid-epoch as another rank, or among another
    /// number of ranks, is refused: `sample` counts in the rank's part of the epoch).
    pub rank: usize,
    /// The number of ranks of the run that recorded it; 0 where the ranks are not known,
    /// and then not checked.
    pub world_size: usize,
}

impl Position {
    /// Where a run with `seed` and batches of `batch_size` starts: its first epoch's first
    /// sample (on every rank).
    pub fn start(seed: u64, batch_size: usize) -> Position {
        Position {
            seed,
            batch_size,
            ..Position::default()
        }
    }

    /// The same run's position at the start of `epoch`.
    pub fn at_start_of(self, epoch: u64) -> Position {
        Position {
            epoch,
            sample: 0,
            batch: 0,
            ..self
        }
    }

    /// Whether it is at an epoch's start, where the batches to come do not depend on the
    /// batch size or the ranks: a run may go on from there with others.
    pub fn at_epoch_start(&self) -> bool {
        self.sample == 0 && self.batch == 0
    }
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}:{}:{}:{}:{}:{}",
            self.seed,
            self.epoch,
            self.sample,
            self.batch,
            self.batch_size,
            self.rank,
            self.world_size
        )
    }
}

/// Text that is not a [`Position`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "'{text}' is not a position: give seed:epoch:sample:batch:batch_size:rank:world_size, as a \
     run prints it"
)]
pub struct PositionError {
    /// The text given.
    pub text: String,
}

impl std::str::FromStr for Position {
    type Err = PositionError;

    fn from_str(s: &str) -> Result<Position, PositionError> {
        let bad = || PositionError {
            text: s.to_string(),
        };
        let mut numbers = [0u64; 7];
        let mut count = 0;
        for part in s.split(':') {
            let slot = numbers.get_mut(count).ok_or_else(bad)?;
            *slot = part.trim().parse().map_err(|_| bad())?;
            count += 1;
        }
        // Four and five numbers: printed before the batch size, or the ranks, were recorded.
        if !matches!(count, 4 | 5 | 7) {
            return Err(bad());
        }
        let size = |n: u64| usize::try_from(n).map_err(|_| bad());
        Ok(Position {
            seed: numbers[0],
            epoch: numbers[1],
            sample: size(numbers[2])?,
            batch: size(numbers[3])?,
            batch_size: size(numbers[4])?,
            rank: size(numbers[5])?,
            world_size: size(numbers[6])?,
        })
    }
}

/// The part of an epoch's order that rank `rank` of `world_size` reads, for `n` samples:
/// contiguous, disjoint from the other ranks' parts, and near-equal (the first
/// `n % world_size` ranks have one sample more than the others).
///
/// ```
/// use stokehold::reader::schedule::rank_range;
/// let parts: Vec<_> = (0..3).map(|r| rank_range(10, r, 3)).collect();
/// assert_eq!(parts, vec![0..4, 4..7, 7..10]);
/// ```
pub fn rank_range(n: usize, rank: usize, world_size: usize) -> std::ops::Range<usize> {
    let world_size = world_size.max(1);
    let (per, extra) = (n / world_size, n % world_size);
    let start = rank * per + rank.min(extra);
    let len = if rank < world_size {
        per + usize::from(rank < extra)
    } else {
        0
    };
    start.min(n)..(start + len).min(n)
}

/// The whole dataset's order in `epoch`: shuffled from (`seed`, `epoch`), or in listing order.
fn whole_order(n: usize, seed: u64, epoch: u64, shuffle: bool) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    if shuffle {
        SampleRng::from_key(key(&[domain::SHUFFLE, seed, epoch])).shuffle(&mut order);
    }
    order
}

/// The sample indices this rank reads in `epoch`, in order: its [`rank_range`] of the
/// whole dataset's order, which every rank shuffles the same way (from `seed` and `epoch`).
/// The ranks' parts are disjoint and together hold every sample once; their lengths differ
/// by at most one. ([`EpochOrder::of`] adds the padding that evens out their batch counts.)
pub fn epoch_order(
    n: usize,
    seed: u64,
    epoch: u64,
    shuffle: bool,
    rank: usize,
    world_size: usize,
) -> Vec<usize> {
    let order = whole_order(n, seed, epoch, shuffle);
    order[rank_range(n, rank, world_size)].to_vec()
}

/// Batches an epoch of `samples` samples gives under `last_batch`.
pub(crate) fn batches(samples: usize, batch: usize, last_batch: LastBatch) -> usize {
    let batch = batch.max(1);
    match last_batch {
        LastBatch::Drop => samples / batch,
        LastBatch::Partial | LastBatch::Pad => samples.div_ceil(batch),
    }
}

/// How each epoch's order is made: shuffled from (seed, epoch) or not, and which rank of how
/// many this process is (see [`epoch_order`]).
///
/// Every rank gets as many batches per epoch (data-parallel training deadlocks when one rank
/// has a batch more than another). The ranks' parts differ by at most one sample, and only
/// when that sample would give the longer parts one more batch does a shorter part read one
/// more: a repeat of its first sample, at the end of its epoch, which its batch counts as
/// padding ([`Batch::padded`](crate::pipeline::Batch::padded)). So the real samples of the
/// ranks are disjoint and together are the whole dataset.
///
/// ```
/// use stokehold::reader::schedule::{EpochOrder, LastBatch};
/// // 10 samples, 3 ranks, batches of 2: parts of 4, 3 and 3 samples.
/// let rank = |rank| EpochOrder {
///     shuffle: true,
///     rank,
///     world_size: 3,
///     batch: 2,
///     last_batch: LastBatch::Partial,
/// };
/// assert_eq!(rank(0).batches_per_epoch(10), 2);
/// // Rank 1's 3 samples make 2 batches already: no padding.
/// assert_eq!((rank(1).samples_per_epoch(10), rank(1).padding(10)), (3, 0));
/// // With batches of 3, 4 samples make 2 batches and 3 only 1: a repeat evens them out.
/// let by_3 = EpochOrder { batch: 3, ..rank(1) };
/// assert_eq!((by_3.padding(10), by_3.batches_per_epoch(10)), (1, 2));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochOrder {
    /// Reshuffle each epoch.
    pub shuffle: bool,
    /// This process's rank (from 0).
    pub rank: usize,
    /// Number of ranks.
    pub world_size: usize,
    /// Samples per batch (with `last_batch`, what decides whether a rank needs padding).
    pub batch: usize,
    /// What becomes of an epoch's last, incomplete batch.
    pub last_batch: LastBatch,
}

impl EpochOrder {
    /// The sample indices this rank reads in `epoch` of a dataset of `entries` samples: its
    /// part of the epoch's order, then the padding sample if it needs one (see
    /// [`EpochOrder::padding`]).
    pub fn of(&self, entries: usize, seed: u64, epoch: u64) -> Vec<usize> {
        let whole = whole_order(entries, seed, epoch, self.shuffle);
        let part = rank_range(entries, self.rank, self.world_size);
        let mut order = whole[part.clone()].to_vec();
        if self.padding(entries) > 0 {
            // A repeat of the part's own first sample (of the epoch's, for an empty part).
            if let Some(&first) = whole.get(part.start).or(whole.first()) {
                order.push(first);
            }
        }
        order
    }

    /// Real samples per epoch for this rank of a dataset of `entries` samples (its part of
    /// the order, padding not counted).
    pub fn samples_per_epoch(&self, entries: usize) -> usize {
        rank_range(entries, self.rank, self.world_size).len()
    }

    /// Padding samples per epoch (0 or 1): one when this rank's part would give a batch
    /// fewer than the longest part gives.
    pub fn padding(&self, entries: usize) -> usize {
        if entries == 0 {
            return 0;
        }
        let own = self.samples_per_epoch(entries);
        let longest = entries.div_ceil(self.world_size.max(1));
        let fewer = batches(own, self.batch, self.last_batch)
            < batches(longest, self.batch, self.last_batch);
        usize::from(own < longest && fewer)
    }

    /// Samples this rank reads per epoch, padding included.
    pub fn scheduled_per_epoch(&self, entries: usize) -> usize {
        self.samples_per_epoch(entries) + self.padding(entries)
    }

    /// Batches per epoch, the same for every rank (bad samples skipped or not: the assembler
    /// pads a rank they cut short).
    pub fn batches_per_epoch(&self, entries: usize) -> usize {
        batches(
            self.scheduled_per_epoch(entries),
            self.batch,
            self.last_batch,
        )
    }
}

/// The next thing to read, from a [`Schedule`]; `seq` numbers every step of the run in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A sample: position `pos` of `epoch`'s order, dataset index `index`.
    Sample {
        /// Sequence number.
        seq: u64,
        /// Its epoch.
        epoch: u64,
        /// Its position in the epoch's order.
        pos: usize,
        /// Its index in the dataset.
        index: usize,
    },
    /// Every sample of `epoch` has been scheduled.
    EpochEnd {
        /// Sequence number.
        seq: u64,
        /// The epoch that ended.
        epoch: u64,
    },
}

/// Walks the epochs' orders: the next sample (or epoch end) to read, in sequence.
#[derive(Debug)]
pub struct Schedule {
    entries: usize,
    seed: u64,
    epochs: Option<u64>,
    order_by: EpochOrder,
    seq: u64,
    epoch: u64,
    order: Vec<usize>,
    /// Position in `order` of the next sample; `order.len()` means the epoch end is next.
    pos: usize,
}

impl Schedule {
    /// The schedule of a dataset of `entries` samples in the order `order_by` makes, for
    /// `epochs` epochs (`None`: without end), starting at `start`.
    pub fn new(
        order_by: EpochOrder,
        entries: usize,
        epochs: Option<u64>,
        start: Position,
    ) -> Schedule {
        Schedule {
            entries,
            seed: start.seed,
            epochs,
            order_by,
            seq: 0,
            epoch: start.epoch,
            order: order_by.of(entries, start.seed, start.epoch),
            pos: start.sample,
        }
    }

    /// The next step; `None` after the last epoch's end.
    pub fn next_step(&mut self) -> Option<Step> {
        if self.epochs.is_some_and(|n| self.epoch >= n) {
            return None;
        }
        let seq = self.seq;
        self.seq += 1;
        if let Some(&index) = self.order.get(self.pos) {
            self.pos += 1;
            return Some(Step::Sample {
                seq,
                epoch: self.epoch,
                pos: self.pos - 1,
                index,
            });
        }
        let epoch = self.epoch;
        self.epoch += 1;
        self.pos = 0;
        if self.epochs.is_none_or(|n| self.epoch < n) {
            self.order = self.order_by.of(self.entries, self.seed, self.epoch);
        }
        Some(Step::EpochEnd { seq, epoch })
    }
}
