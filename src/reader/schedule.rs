//! The sample schedule: which sample comes next, epoch after epoch (each epoch's order
//! shuffled from the seed and cut to this shard), where a run stands ([`Position`]), and what
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
/// It prints and parses as `seed:epoch:sample:batch`:
/// ```
/// use stokehold::pipeline::Position;
/// let p: Position = "1:2:130:2".parse().unwrap();
/// assert_eq!((p.epoch, p.sample), (2, 130));
/// assert_eq!(p.to_string(), "1:2:130:2");
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
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}:{}:{}",
            self.seed, self.epoch, self.sample, self.batch
        )
    }
}

impl std::str::FromStr for Position {
    type Err = String;

    fn from_str(s: &str) -> Result<Position, String> {
        let parts: Vec<&str> = s.split(':').collect();
        let bad = || format!("'{s}' is not a position (seed:epoch:sample:batch)");
        if parts.len() != 4 {
            return Err(bad());
        }
        Ok(Position {
            seed: parts[0].parse().map_err(|_| bad())?,
            epoch: parts[1].parse().map_err(|_| bad())?,
            sample: parts[2].parse().map_err(|_| bad())?,
            batch: parts[3].parse().map_err(|_| bad())?,
        })
    }
}

/// The sample indices this shard reads in `epoch`, in order.
///
/// All shards shuffle the whole dataset the same way (from `seed` and `epoch`), pad the order
/// by wrapping around to a multiple of `num_shards`, and take every `num_shards`-th index from
/// `shard_id` (PyTorch DistributedSampler's scheme): shards are disjoint up to the padding and
/// equally long.
pub fn epoch_order(
    n: usize,
    seed: u64,
    epoch: u64,
    shuffle: bool,
    shard_id: usize,
    num_shards: usize,
) -> Vec<usize> {
    if n == 0 {
        return Vec::new();
    }
    let mut order: Vec<usize> = (0..n).collect();
    if shuffle {
        SampleRng::from_key(key(&[domain::SHUFFLE, seed, epoch])).shuffle(&mut order);
    }
    let per_shard = n.div_ceil(num_shards);
    (0..per_shard)
        .map(|k| order[(k * num_shards + shard_id) % n])
        .collect()
}

/// How each epoch's order is made: shuffled from (seed, epoch) or not, and which shard of how
/// many this process reads (see [`epoch_order`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochOrder {
    /// Reshuffle each epoch.
    pub shuffle: bool,
    /// This shard.
    pub shard_id: usize,
    /// Number of shards.
    pub num_shards: usize,
}

impl EpochOrder {
    /// The sample indices this shard reads in `epoch` of a dataset of `entries` samples.
    pub fn of(&self, entries: usize, seed: u64, epoch: u64) -> Vec<usize> {
        epoch_order(
            entries,
            seed,
            epoch,
            self.shuffle,
            self.shard_id,
            self.num_shards,
        )
    }

    /// Samples per epoch for this shard of a dataset of `entries` samples.
    pub fn samples_per_epoch(&self, entries: usize) -> usize {
        if entries == 0 {
            0
        } else {
            entries.div_ceil(self.num_shards)
        }
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
