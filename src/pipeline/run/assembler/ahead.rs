//! Decoding ahead of the assembler (the GPU path). The samples the device decodes go, in
//! groups of `engine_chunk` as they arrive, to the feeding thread, which makes the decoder's
//! host call (nvJPEG's parse and submission: most of the host time per image) while the
//! assembler builds and launches the batches before them. A sample leaves this queue for the
//! assembler in order, once its decode is queued on the device — so a sample the device
//! refused and the CPU then failed on reaches the assembler as the failed sample it is, before
//! its batch is drawn up, exactly as on the CPU path.
//!
//! ```text
//! assembler  take … take  │ launch N │ take … take │ launch N+1 │
//! feeding       [submit group of N+1 ……………][submit group of N+2 ……………]
//! ```
//! At most [`GROUPS_OUT`] groups are with the feeding thread at once (one submitting, one
//! waiting), so it never waits for the assembler between groups; the queue holds at most
//! [`HELD_GROUPS`] groups' worth of samples before the assembler waits for a group back.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, TryRecvError};

use crate::error::Error;

use super::super::cpu_stage::{Failure, Output, Processed, ProcessedSample};
use super::super::gather::Gather;
use super::super::gpu_plan::{Prepared, Source};
use super::super::gpu_stage::{GpuStage, GROUPS_OUT};
use super::super::stats::{add_ns, Stats};

/// Groups' worth of samples the queue holds before the assembler waits for the feeding
/// thread rather than take more samples.
const HELD_GROUPS: usize = 3;

/// Samples, in order, sent to the feeding thread together.
type Group = Vec<(u64, ProcessedSample)>;

enum Slot {
    /// For the assembler.
    Ready(Processed),
    /// For the device, not sent yet.
    Unsent(ProcessedSample),
    /// With the feeding thread.
    Sent,
}

/// The in-order queue between the samples' arrival and the assembler.
pub(super) struct Ahead {
    queue: VecDeque<Slot>,
    /// The sequence number of the queue's front.
    front_seq: u64,
    unsent: usize,
    groups_out: usize,
    /// An epoch end (or the input's end) waits behind unsent samples: send them now.
    flush: bool,
    chunk: usize,
    to_feeder: Sender<Group>,
    from_feeder: Receiver<Result<Group, Error>>,
}

/// The feeding thread's end of the queue.
pub(super) struct Feeder {
    groups: Receiver<Group>,
    decoded: Sender<Result<Group, Error>>,
}

impl Ahead {
    /// The queue and the feeding thread's end of it, for groups of `chunk` samples.
    pub(super) fn new(chunk: usize) -> (Ahead, Feeder) {
        let (to_feeder, groups) = crossbeam_channel::unbounded();
        let (decoded, from_feeder) = crossbeam_channel::unbounded();
        let ahead = Ahead {
            queue: VecDeque::new(),
            front_seq: 0,
            unsent: 0,
            groups_out: 0,
            flush: false,
            chunk: chunk.max(1),
            to_feeder,
            from_feeder,
        };
        (ahead, Feeder { groups, decoded })
    }

    /// Adds the next item in order (sequence number `seq`).
    pub(super) fn push(&mut self, seq: u64, d: Processed) {
        if self.queue.is_empty() {
            self.front_seq = seq;
        }
        debug_assert_eq!(self.front_seq + self.queue.len() as u64, seq);
        match d {
            Processed::Sample(s) if for_device(&s) => {
                self.unsent += 1;
                self.queue.push_back(Slot::Unsent(s));
            }
            d => {
                self.flush |= matches!(d, Processed::EpochEnd { .. }) && self.unsent > 0;
                self.queue.push_back(Slot::Ready(d));
            }
        }
    }

    /// The input ended: what is unsent goes now.
    pub(super) fn flush(&mut self) {
        self.flush |= self.unsent > 0;
    }

    /// Sends the unsent samples to the feeding thread, a group of at most `chunk` (the
    /// oldest) at a time, when there are a group's worth (or a flush asks for them) and it
    /// has room. A group is never larger, so neither is its decode area.
    pub(super) fn send(&mut self) {
        while self.groups_out < GROUPS_OUT
            && (self.unsent >= self.chunk || (self.flush && self.unsent > 0))
        {
            let n = self.unsent.min(self.chunk);
            let mut group = Vec::with_capacity(n);
            for (k, slot) in self.queue.iter_mut().enumerate() {
                if group.len() == n {
                    break;
                }
                if matches!(slot, Slot::Unsent(_)) {
                    if let Slot::Unsent(s) = std::mem::replace(slot, Slot::Sent) {
                        group.push((self.front_seq + k as u64, s));
                    }
                }
            }
            self.unsent -= n;
            self.flush &= self.unsent > 0;
            // Counted even if the feeding thread is gone: waiting for it then says so.
            let _ = self.to_feeder.send(group);
            self.groups_out += 1;
        }
    }

    /// Takes the groups the feeding thread has finished, waiting for one when `wait` and a
    /// group is out.
    pub(super) fn receive(&mut self, wait: bool) -> Result<(), Error> {
        let gone = || Error::Cuda("the feeding thread stopped with decodes to submit".into());
        let mut block = wait;
        while self.groups_out > 0 {
            let r = if block {
                self.from_feeder.recv().map_err(|_| gone())?
            } else {
                match self.from_feeder.try_recv() {
                    Ok(r) => r,
                    Err(TryRecvError::Empty) => return Ok(()),
                    Err(TryRecvError::Disconnected) => return Err(gone()),
                }
            };
            block = false;
            self.groups_out -= 1;
            for (seq, s) in r? {
                let k = (seq - self.front_seq) as usize;
                self.queue[k] = Slot::Ready(Processed::Sample(s));
            }
        }
        Ok(())
    }

    /// The next item for the assembler, if its decode is queued (or it needs none).
    pub(super) fn pop(&mut self) -> Option<Processed> {
        if !matches!(self.queue.front(), Some(Slot::Ready(_))) {
            return None;
        }
        self.front_seq += 1;
        match self.queue.pop_front() {
            Some(Slot::Ready(d)) => Some(d),
            _ => None,
        }
    }

    /// Whether the assembler should wait for the feeding thread rather than for more
    /// samples: it has a group out, and the queue is full or can't send another group.
    pub(super) fn must_wait(&self) -> bool {
        self.groups_out > 0
            && (self.queue.len() >= HELD_GROUPS * self.chunk
                || (self.groups_out >= GROUPS_OUT && self.unsent >= self.chunk))
    }

    /// Samples to gather before the next group is due (at least one): the assembler wakes
    /// once a group (it copies no pixels on this path; epoch ends, failures and the feeding
    /// thread wake it anyway).
    pub(super) fn wanted(&self) -> usize {
        self.chunk.saturating_sub(self.unsent).max(1)
    }

    /// Whether the queue's front is ready for the assembler.
    pub(super) fn front_ready(&self) -> bool {
        matches!(self.queue.front(), Some(Slot::Ready(_)))
    }

    /// Items still queued.
    pub(super) fn len(&self) -> usize {
        self.queue.len()
    }

    /// Groups with the feeding thread.
    pub(super) fn groups_out(&self) -> usize {
        self.groups_out
    }
}

impl Feeder {
    /// The feeding thread: submits each group's decodes, then hands the group back and
    /// wakes the assembler; ends when the assembler drops its end.
    pub(super) fn run(self, gpu: &GpuStage, stats: &Stats, wake: &Gather<Processed>) {
        for mut group in self.groups.iter() {
            let t0 = Instant::now();
            let r = decode_group(gpu, &mut group).map(|()| group);
            add_ns(&stats.feeder_busy_ns, t0.elapsed());
            if self.decoded.send(r).is_err() {
                return;
            }
            wake.nudge();
        }
    }
}

/// Whether a sample has an output the device still has to decode.
fn for_device(s: &ProcessedSample) -> bool {
    let Ok((values, _)) = &s.result else {
        return false;
    };
    values
        .iter()
        .any(|v| matches!(v, Output::Device(p) if needs_decode(p)))
}

fn needs_decode(p: &Prepared) -> bool {
    matches!(
        p,
        Prepared::Chain {
            source: Source::Device { decoded: None, .. },
            ..
        }
    )
}

/// Submits the decodes of a group's samples in one call; a sample the device refused and
/// the CPU failed on becomes a failed sample.
fn decode_group(gpu: &GpuStage, group: &mut Group) -> Result<(), Error> {
    let mut owners = Vec::with_capacity(group.len());
    let mut samples = Vec::with_capacity(group.len());
    for (k, (_, s)) in group.iter_mut().enumerate() {
        if let Ok((values, _)) = &mut s.result {
            for v in values.iter_mut() {
                if let Output::Device(p) = v {
                    if needs_decode(p) {
                        owners.push(k);
                        samples.push(&mut **p);
                    }
                }
            }
        }
    }
    let outcome = gpu.decode(&mut samples)?;
    drop(samples);
    for (k, failed) in owners.into_iter().zip(outcome) {
        if let Some(kind) = failed {
            let s = &mut group[k].1;
            if s.result.is_ok() {
                s.result = Err(Failure::Sample(kind));
            }
        }
    }
    Ok(())
}

/// Starts the feeding thread in `scope` (named for the thread statistics).
pub(super) fn start_feeder<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    feeder: Feeder,
    gpu: Arc<GpuStage>,
    stats: Arc<Stats>,
    wake: &'env Gather<Processed>,
) -> std::io::Result<std::thread::ScopedJoinHandle<'scope, ()>> {
    let pools = crate::scratch::bound();
    std::thread::Builder::new()
        .name("stokehold-feed".into())
        .spawn_scoped(scope, move || {
            // The files it lets go of go back to the pipeline's pools, for its readers.
            let _pools = pools.as_ref().map(|p| p.bind());
            feeder.run(&gpu, &stats, wake)
        })
}
