//! An epoch of shards for one rank: the shard order from (seed, epoch), this rank's
//! contiguous part of it (equal for every rank, wrapping around to the start for the last
//! few), and the shuffle buffer's choices, each a pure function of the seed, the epoch and
//! the rank, so that any thread count and any resume give the same order.

use crate::rng::{domain, key, SampleRng};

/// Part of one shard that a rank reads: items `skip..skip + take` of shard `shard`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// The shard (index in the listed order).
    pub shard: usize,
    /// Items of the shard before this part.
    pub skip: usize,
    /// Items in this part.
    pub take: usize,
}

/// Which shards, which ranks, shuffled or not: what makes each epoch's schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankSplit {
    /// Reshuffle the shard order each epoch.
    pub shuffle: bool,
    /// This process's rank (from 0).
    pub rank: usize,
    /// Number of ranks.
    pub world_size: usize,
}

impl RankSplit {
    /// Samples every rank reads per epoch: the whole set divided by the ranks, rounded up.
    pub fn samples_per_epoch(&self, total: usize) -> usize {
        total.div_ceil(self.world_size)
    }

    /// The shard order of `epoch`: all ranks compute the same.
    pub fn shard_order(&self, counts: &[usize], seed: u64, epoch: u64) -> Vec<usize> {
        let mut order: Vec<usize> = (0..counts.len()).collect();
        if self.shuffle {
            SampleRng::from_key(key(&[domain::SHARD_ORDER, seed, epoch])).shuffle(&mut order);
        }
        order
    }

    /// The parts of shards this rank reads in `epoch`, in order.
    ///
    /// The epoch's shards, in [`RankSplit::shard_order`], are taken as one sequence of
    /// `total` samples; rank `r` reads positions `r·L .. (r+1)·L` of it, `L` =
    /// [`RankSplit::samples_per_epoch`], wrapping to the start past the end. So every rank
    /// reads `L` samples, ranks are disjoint but for the fewer than `world_size` samples the
    /// last ranks repeat from the start, and together they read every sample.
    pub fn segments(&self, counts: &[usize], seed: u64, epoch: u64) -> Vec<Segment> {
        let total: usize = counts.iter().sum();
        let per_rank = self.samples_per_epoch(total);
        if per_rank == 0 {
            return Vec::new();
        }
        let order = self.shard_order(counts, seed, epoch);
        let mut want_start = (self.rank * per_rank) % total;
        let mut left = per_rank;
        let mut out = Vec::new();
        while left > 0 {
            // Walk the order to the shard holding position `want_start`.
            let mut at = 0;
            for &s in &order {
                let n = counts[s];
                if want_start < at + n {
                    let skip = want_start - at;
                    let take = (n - skip).min(left);
                    out.push(Segment {
                        shard: s,
                        skip,
                        take,
                    });
                    left -= take;
                    want_start += take;
                    if left == 0 {
                        break;
                    }
                }
                at += n;
            }
            want_start %= total;
        }
        out
    }
}

/// The shuffle buffer: inputs go in, and each output is drawn from the buffered ones at a
/// position chosen from (seed, epoch, rank, output number). With size 1 it is first in,
/// first out.
#[derive(Debug)]
pub struct ShuffleBuffer<T> {
    items: Vec<T>,
    size: usize,
    key: u64,
    /// Outputs drawn so far.
    drawn: u64,
}

impl<T> ShuffleBuffer<T> {
    /// A buffer of `size` items (at least 1) for one rank's epoch.
    pub fn new(size: usize, seed: u64, epoch: u64, rank: usize) -> ShuffleBuffer<T> {
        ShuffleBuffer {
            items: Vec::new(),
            size: size.max(1),
            key: key(&[domain::SHUFFLE_BUFFER, seed, epoch, rank as u64]),
            drawn: 0,
        }
    }

    /// A buffer resumed with `items` (in buffer order) after `drawn` draws.
    pub fn resumed(
        size: usize,
        seed: u64,
        epoch: u64,
        rank: usize,
        items: Vec<T>,
        drawn: u64,
    ) -> ShuffleBuffer<T> {
        let mut b = ShuffleBuffer::new(size, seed, epoch, rank);
        b.items = items;
        b.drawn = drawn;
        b
    }

    /// True while the buffer wants more input before the next draw.
    pub fn wants(&self) -> bool {
        self.items.len() < self.size
    }

    /// Adds an input.
    pub fn push(&mut self, item: T) {
        self.items.push(item);
    }

    /// Draws the next output (once inputs run out, the buffer drains).
    pub fn draw(&mut self) -> Option<T> {
        if self.items.is_empty() {
            return None;
        }
        let j = if self.size == 1 {
            0
        } else {
            (key(&[self.key, self.drawn]) % self.items.len() as u64) as usize
        };
        self.drawn += 1;
        Some(self.items.swap_remove(j))
    }

    /// The buffered items, in buffer order.
    pub fn items(&self) -> &[T] {
        &self.items
    }

    /// Takes the buffered items out, in buffer order (outputs drawn so far are kept).
    pub fn take_items(&mut self) -> Vec<T> {
        std::mem::take(&mut self.items)
    }

    /// Outputs drawn so far.
    pub fn drawn(&self) -> u64 {
        self.drawn
    }
}

/// Where an epoch stands after `outputs` draws from a buffer fed `inputs` items in order:
/// the input numbers still in the buffer (in buffer order) and how many inputs were taken.
/// Resuming replays this on numbers alone, then loads only those inputs.
pub fn replay(
    size: usize,
    seed: u64,
    epoch: u64,
    rank: usize,
    inputs: usize,
    outputs: usize,
) -> (Vec<usize>, usize) {
    let mut b = ShuffleBuffer::new(size, seed, epoch, rank);
    let mut next = 0;
    for _ in 0..outputs {
        while b.wants() && next < inputs {
            b.push(next);
            next += 1;
        }
        if b.draw().is_none() {
            break;
        }
    }
    (b.take_items(), next)
}
