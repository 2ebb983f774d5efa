//! One rank's stream of shard samples, epoch after epoch: its parts of shards are read a few
//! at a time on threads of their own (each into a small bounded queue), taken in schedule
//! order, and drawn through the shuffle buffer, so the order is the same whatever the read-ahead;
//! resuming mid-epoch replays the buffer's draws on sample numbers and loads only the samples
//! still buffered at that point.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, select, unbounded, Receiver, Sender, TryRecvError};

use crate::error::SampleErrorKind;
use crate::reader::schedule::Position;

use super::open::open_shard;
use super::samples::{Item, SampleRules, ShardItems};
use super::schedule::{replay, Segment, ShuffleBuffer};
use super::set::{ShardConfig, ShardSet};

/// Samples one shard part may queue ahead of the one being taken.
const QUEUE: usize = 16;

/// A sample read from a shard (or why it could not be).
#[derive(Debug)]
pub struct ShardSample {
    /// Its number in the shard set (shards in listed order, then items in shard order).
    pub index: usize,
    /// `shard:member`.
    pub path: PathBuf,
    /// Its label (-1 without one).
    pub label: i64,
    /// Its image member's bytes.
    pub bytes: Result<Arc<Vec<u8>>, SampleErrorKind>,
}

/// One input of the epoch: its number in the rank's epoch and the sample.
type Input = (usize, ShardSample);

/// What the stream hands out next.
#[derive(Debug)]
pub enum ShardStep {
    /// A sample at position `pos` of `epoch`.
    Sample {
        /// Sequence number of the step in the run.
        seq: u64,
        /// Its epoch.
        epoch: u64,
        /// Its position in the epoch.
        pos: usize,
        /// The sample.
        sample: ShardSample,
    },
    /// Every sample of `epoch` has been handed out.
    EpochEnd {
        /// Sequence number.
        seq: u64,
        /// The epoch.
        epoch: u64,
    },
}

/// Reads the parts of one epoch, `read_ahead` at a time, in order.
struct Feed {
    segments: VecDeque<(Segment, usize)>,
    /// Each part being read: its samples, and its thread (none where the system refused
    /// one: then its samples are reported missing).
    running: VecDeque<(Receiver<Input>, Option<JoinHandle<()>>)>,
    read_ahead: usize,
    set: Arc<ShardSet>,
    config: Arc<ShardConfig>,
    rules: Arc<SampleRules>,
    /// Inputs numbered below this are delivered only when in `wanted` (a resume).
    replayed: usize,
    wanted: Arc<HashSet<usize>>,
    /// Disconnected when the pipeline stops (see [`Feed::next`]).
    stop: Receiver<()>,
    /// Set when the feed is dropped: its parts stop at their next sample.
    dropped: Arc<AtomicBool>,
}

impl Feed {
    fn new(
        segments: Vec<Segment>,
        set: Arc<ShardSet>,
        config: Arc<ShardConfig>,
        rules: Arc<SampleRules>,
        read_ahead: usize,
        (replayed, wanted): (usize, HashSet<usize>),
        stop: Receiver<()>,
    ) -> Feed {
        let mut first = 0;
        let mut numbered = VecDeque::new();
        for s in segments {
            // Parts wholly replayed with nothing wanted from them are not read at all.
            let needed = first + s.take > replayed
                || wanted.iter().any(|&w| (first..first + s.take).contains(&w));
            if needed {
                numbered.push_back((s, first));
            }
            first += s.take;
        }
        Feed {
            segments: numbered,
            running: VecDeque::new(),
            read_ahead: read_ahead.max(1),
            set,
            config,
            rules,
            replayed,
            wanted: Arc::new(wanted),
            stop,
            dropped: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The next input of the epoch; `None` at its end, or once the pipeline stops (a reader
    /// thread waiting here for a slow shard must not hold the stop up).
    fn next(&mut self) -> Option<Input> {
        loop {
            while self.running.len() < self.read_ahead {
                let Some((seg, first)) = self.segments.pop_front() else {
                    break;
                };
                let (tx, rx) = bounded(QUEUE);
                let part = Part {
                    seg,
                    first,
                    set: self.set.clone(),
                    config: self.config.clone(),
                    rules: self.rules.clone(),
                    replayed: self.replayed,
                    wanted: self.wanted.clone(),
                    dropped: self.dropped.clone(),
                };
                // The thread reads a copy of the part (Arcs and numbers); where the system
                // refuses the thread, its samples are reported missing with the reason.
                let theirs = part.clone();
                let spawned = std::thread::Builder::new()
                    .name("stokehold-shard".into())
                    .spawn(move || theirs.read(&tx));
                let running = match spawned {
                    Ok(handle) => (rx, Some(handle)),
                    Err(e) => {
                        let (all_tx, all_rx) = unbounded();
                        part.all_missing(&all_tx, &format!("no thread to read the shard: {e}"));
                        (all_rx, None)
                    }
                };
                self.running.push_back(running);
            }
            let (rx, _) = self.running.front()?;
            select! {
                recv(rx) -> input => match input {
                    Ok(input) => return Some(input),
                    Err(_) => {
                        if let Some((_, Some(h))) = self.running.pop_front() {
                            let _ = h.join();
                        }
                    }
                },
                recv(self.stop) -> _ => return None,
            }
        }
    }
}

/// How long dropping a feed waits for its parts' threads to end.
const DROP_GRACE: Duration = Duration::from_millis(200);

impl Drop for Feed {
    fn drop(&mut self) {
        // Each part stops at its next sample (the flag, or its queue's receiver gone). One
        // waiting on the network (each read bounded by the http read timeout, see
        // `super::http`) is left to end on its own rather than hold up the pipeline's drop.
        self.dropped.store(true, Ordering::Relaxed);
        let threads: Vec<JoinHandle<()>> = self.running.drain(..).filter_map(|(_, h)| h).collect();
        let deadline = Instant::now() + DROP_GRACE;
        for h in threads {
            while !h.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            if h.is_finished() {
                let _ = h.join();
            } else {
                tracing::debug!("a shard thread still waits on its shard; it ends on its own");
            }
        }
    }
}

/// One part of one shard, read on its own thread.
#[derive(Clone)]
struct Part {
    seg: Segment,
    /// The epoch number of its first item.
    first: usize,
    set: Arc<ShardSet>,
    config: Arc<ShardConfig>,
    rules: Arc<SampleRules>,
    replayed: usize,
    wanted: Arc<HashSet<usize>>,
    /// Set when the feed is gone: stop.
    dropped: Arc<AtomicBool>,
}

impl Part {
    fn wanted(&self, n: usize) -> bool {
        n >= self.replayed || self.wanted.contains(&n)
    }

    fn dropped(&self) -> bool {
        self.dropped.load(Ordering::Relaxed)
    }

    /// The part's `k`-th sample, missing for `why`.
    fn missing(&self, k: usize, why: &str) -> Input {
        let name = self.set.shards[self.seg.shard].display();
        let base = self.set.bases[self.seg.shard] + self.seg.skip;
        (
            self.first + k,
            ShardSample {
                index: base + k,
                path: PathBuf::from(format!("{name}:#{}", self.seg.skip + k)),
                label: -1,
                bytes: Err(SampleErrorKind::Missing {
                    shard: name.to_string(),
                    why: why.to_string(),
                }),
            },
        )
    }

    /// Every wanted sample of the part, missing for `why`.
    fn all_missing(&self, tx: &Sender<Input>, why: &str) {
        for k in 0..self.seg.take {
            if self.wanted(self.first + k) && tx.send(self.missing(k, why)).is_err() {
                return;
            }
        }
    }

    fn read(self, tx: &Sender<Input>) {
        let shard = &self.set.shards[self.seg.shard];
        let name = shard.display();
        let base = self.set.bases[self.seg.shard] + self.seg.skip;
        let missing = |k: usize, why: &str| self.missing(k, why);
        let read = match open_shard(shard, self.config.retry) {
            Ok(r) => r,
            Err(e) => {
                self.all_missing(tx, &format!("the shard could not be opened: {e}"));
                return;
            }
        };
        let mut items = ShardItems::new(read, self.rules.clone());
        let mut held = 0;
        let counted = self.set.counts[self.seg.shard];
        let short = |held: usize, cut: Option<&str>| {
            let ended = match cut {
                Some(at) => format!("the shard is cut short ({at}) after {held} items"),
                None => format!("the shard ends after {held} items"),
            };
            if self.set.indexed[self.seg.shard] {
                format!("{ended}, the index lists {counted}")
            } else {
                format!("{ended}, {counted} were counted before the run")
            }
        };
        for _ in 0..self.seg.skip {
            if self.dropped() || items.next_item(false).is_none() {
                break;
            }
            held += 1;
        }
        for k in 0..self.seg.take {
            if self.dropped() {
                return;
            }
            let n = self.first + k;
            let want = self.wanted(n);
            let input = if held < self.seg.skip + k {
                missing(k, &short(held, items.cut()))
            } else {
                match items.next_item(want) {
                    None => missing(k, &short(held, items.cut())),
                    Some(item) => {
                        held += 1;
                        let (member, label, bytes) = match item {
                            Item::Sample {
                                member,
                                image,
                                label,
                            } => (member, label, Ok(Arc::new(image))),
                            Item::Damaged { member, kind } => (member, -1, Err(kind)),
                        };
                        (
                            n,
                            ShardSample {
                                index: base + k,
                                path: PathBuf::from(format!("{name}:{member}")),
                                label,
                                bytes,
                            },
                        )
                    }
                }
            };
            if want && tx.send(input).is_err() {
                return;
            }
        }
    }
}

/// One rank's samples, epoch after epoch (see the module doc).
pub struct ShardStream {
    set: Arc<ShardSet>,
    config: Arc<ShardConfig>,
    rules: Arc<SampleRules>,
    seed: u64,
    epochs: Option<u64>,
    seq: u64,
    epoch: u64,
    /// Samples per epoch for this rank.
    per_epoch: usize,
    /// Position in the epoch of the next sample.
    pos: usize,
    buffer: ShuffleBuffer<ShardSample>,
    feed: Feed,
    stop: Receiver<()>,
}

impl ShardStream {
    /// The stream of `set` for `epochs` epochs (`None`: without end) from `start`; it ends
    /// early once `stop` is disconnected (the pipeline stops).
    pub fn new(
        set: Arc<ShardSet>,
        config: Arc<ShardConfig>,
        rules: Arc<SampleRules>,
        (epochs, start): (Option<u64>, Position),
        stop: Receiver<()>,
    ) -> ShardStream {
        let per_epoch = config.split.samples_per_epoch(set.total);
        let pos = start.sample.min(per_epoch);
        let at = (start.seed, start.epoch, pos);
        let (buffer, feed) = Self::epoch(&set, &config, &rules, at, stop.clone());
        ShardStream {
            set,
            config,
            rules,
            seed: start.seed,
            epochs,
            seq: 0,
            epoch: start.epoch,
            per_epoch,
            pos,
            buffer,
            feed,
            stop,
        }
    }

    /// The buffer and inputs of `epoch`, `pos` samples in (`at` = (seed, epoch, pos)).
    fn epoch(
        set: &Arc<ShardSet>,
        config: &Arc<ShardConfig>,
        rules: &Arc<SampleRules>,
        (seed, epoch, pos): (u64, u64, usize),
        stop: Receiver<()>,
    ) -> (ShuffleBuffer<ShardSample>, Feed) {
        let split = config.split;
        let size = if split.shuffle {
            config.shuffle_buffer
        } else {
            1
        };
        let segments = split.segments(&set.counts, seed, epoch);
        let inputs: usize = segments.iter().map(|s| s.take).sum();
        let (held, replayed) = replay(size, seed, epoch, split.rank, inputs, pos);
        let wanted: HashSet<usize> = held.iter().copied().collect();
        let mut feed = Feed::new(
            segments,
            set.clone(),
            config.clone(),
            rules.clone(),
            config.read_ahead,
            (replayed, wanted),
            stop,
        );
        let mut buffer = ShuffleBuffer::new(size, seed, epoch, split.rank);
        if pos > 0 {
            let mut got: HashMap<usize, ShardSample> = HashMap::new();
            while got.len() < held.len() {
                let Some((n, s)) = feed.next() else { break };
                got.insert(n, s);
            }
            let items = held.iter().filter_map(|n| got.remove(n)).collect();
            buffer = ShuffleBuffer::resumed(size, seed, epoch, split.rank, items, pos as u64);
        }
        (buffer, feed)
    }

    /// Samples per epoch for this rank.
    pub fn samples_per_epoch(&self) -> usize {
        self.per_epoch
    }

    /// Whether the pipeline stopped.
    fn stopped(&self) -> bool {
        matches!(self.stop.try_recv(), Err(TryRecvError::Disconnected))
    }

    /// The next step; `None` after the last epoch's end, or once the pipeline stopped.
    pub fn next_step(&mut self) -> Option<ShardStep> {
        if self.epochs.is_some_and(|n| self.epoch >= n) || self.stopped() {
            return None;
        }
        let seq = self.seq;
        self.seq += 1;
        if self.pos < self.per_epoch {
            while self.buffer.wants() {
                match self.feed.next() {
                    Some((_, s)) => self.buffer.push(s),
                    None => break,
                }
            }
            // A feed cut short by the stop is no end of the epoch.
            if self.stopped() {
                return None;
            }
            if let Some(sample) = self.buffer.draw() {
                self.pos += 1;
                return Some(ShardStep::Sample {
                    seq,
                    epoch: self.epoch,
                    pos: self.pos - 1,
                    sample,
                });
            }
        }
        let epoch = self.epoch;
        self.epoch += 1;
        self.pos = 0;
        if self.epochs.is_none_or(|n| self.epoch < n) {
            let (buffer, feed) = Self::epoch(
                &self.set,
                &self.config,
                &self.rules,
                (self.seed, self.epoch, 0),
                self.stop.clone(),
            );
            self.buffer = buffer;
            self.feed = feed;
        }
        Some(ShardStep::EpochEnd { seq, epoch })
    }
}
