//! The emulated device's check of stream order: each access that a queued copy, decode or
//! kernel makes to device memory must be ordered after every earlier access it conflicts
//! with (either one writes) — by running on the same stream, by an event its stream waited
//! for, or by a wait of the host before the work was queued. That is all a GPU promises, and
//! the JPEG engines' writes keep less: only the host's waits order them
//! ([`Order::engines_op`]).
//! The emulation's stream threads may happen to run two unordered accesses in a harmless
//! order where a GPU runs them in the other (a decode still writing while a kernel reads),
//! so the emulated device faults on the first unordered pair, naming both.
//!
//! Vector clocks: lane 0 is the host (what it saw complete, and its own copies to the host),
//! lane `s + 1` stream `s`. Each queued operation gets its lane's next number and a view:
//! its stream's clock joined with the host's when it was queued (for the JPEG engines' writes,
//! the host's alone: [`Order::engines_op`]). Each touched range of an
//! allocation keeps the accesses not yet superseded (a later ordered write over the same
//! bytes supersedes all, a later ordered read the reads), so the record stays as small as
//! the work in flight.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A vector clock: the last operation of each lane known to have happened.
pub(crate) type Clock = Vec<u64>;

fn join(into: &mut Clock, other: &Clock) {
    if into.len() < other.len() {
        into.resize(other.len(), 0);
    }
    for (a, b) in into.iter_mut().zip(other) {
        *a = (*a).max(*b);
    }
}

/// The lane of the host.
const HOST: usize = 0;

fn lane_of(stream: usize) -> usize {
    stream + 1
}

fn lane_name(lane: usize) -> String {
    if lane == HOST {
        "the host".into()
    } else {
        format!("stream {}", lane - 1)
    }
}

/// One queued operation: its lane, its number there, and what it is ordered after.
#[derive(Debug, Clone)]
pub(crate) struct Op {
    lane: usize,
    seq: u64,
    view: Arc<Clock>,
    /// Starts after its stream's earlier work (every operation but the JPEG engines').
    stream_ordered: bool,
}

impl Op {
    /// Whether operation `seq` of `lane` happened before this one.
    fn after(&self, lane: usize, seq: u64) -> bool {
        (self.stream_ordered && lane == self.lane) || self.view.get(lane).is_some_and(|&v| v >= seq)
    }
}

/// How an access uses its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Use {
    Read,
    Write,
}

impl Use {
    fn name(self) -> &'static str {
        match self {
            Use::Read => "reads",
            Use::Write => "writes",
        }
    }
}

/// The clocks of the host and every stream, advanced as work is queued.
#[derive(Debug, Default)]
pub(crate) struct Order {
    lanes: Mutex<Vec<Clock>>,
}

impl Order {
    fn with_lanes<T>(&self, lane: usize, f: impl FnOnce(&mut Vec<Clock>) -> T) -> T {
        let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        if lanes.len() <= lane {
            lanes.resize(lane + 1, Clock::new());
        }
        f(&mut lanes)
    }

    /// The stream's clock, joined with what the host saw (work queued after a host wait is
    /// ordered after what it waited for).
    fn caught_up(lanes: &mut [Clock], lane: usize) -> &mut Clock {
        let host = lanes[HOST].clone();
        let clock = &mut lanes[lane];
        join(clock, &host);
        clock
    }

    /// A new operation queued on `stream`.
    pub(crate) fn op(&self, stream: usize) -> Op {
        self.queued(stream, true)
    }

    /// A new operation queued on `stream` that starts without waiting for the stream's
    /// earlier work or the events it waits for: the JPEG engines write their outputs when
    /// nvJPEG is called (measured on H100s with nvJPEG 12.3 to 13.2: `docs/gpu.md`, "The
    /// JPEG engines and stream order"), so only what the host saw complete comes before
    /// it. Later work on the stream, and events recorded there, still come after it.
    pub(crate) fn engines_op(&self, stream: usize) -> Op {
        self.queued(stream, false)
    }

    /// The next operation of `stream`'s lane, ordered after its stream's earlier work or
    /// only after what the host saw.
    fn queued(&self, stream: usize, stream_ordered: bool) -> Op {
        let lane = lane_of(stream);
        self.with_lanes(lane, |lanes| {
            let host = lanes[HOST].clone();
            let clock = Self::caught_up(lanes, lane);
            if clock.len() <= lane {
                clock.resize(lane + 1, 0);
            }
            clock[lane] += 1;
            Op {
                lane,
                seq: clock[lane],
                view: Arc::new(if stream_ordered { clock.clone() } else { host }),
                stream_ordered,
            }
        })
    }

    /// A new operation of the host (a copy to the host, after its wait).
    pub(crate) fn host_op(&self) -> Op {
        self.with_lanes(HOST, |lanes| {
            let clock = &mut lanes[HOST];
            if clock.is_empty() {
                clock.push(0);
            }
            clock[HOST] += 1;
            Op {
                lane: HOST,
                seq: clock[HOST],
                view: Arc::new(clock.clone()),
                stream_ordered: true,
            }
        })
    }

    /// What an event recorded on `stream` now stands for.
    pub(crate) fn record(&self, stream: usize) -> Clock {
        let lane = lane_of(stream);
        self.with_lanes(lane, |lanes| Self::caught_up(lanes, lane).clone())
    }

    /// `stream` waits for an event standing for `clock`.
    pub(crate) fn wait(&self, stream: usize, clock: &Clock) {
        let lane = lane_of(stream);
        self.with_lanes(lane, |lanes| join(&mut lanes[lane], clock));
    }

    /// The host saw an event standing for `clock` complete.
    pub(crate) fn host_saw(&self, clock: &Clock) {
        self.with_lanes(HOST, |lanes| join(&mut lanes[HOST], clock));
    }

    /// The host saw every stream's work so far complete.
    pub(crate) fn host_saw_all(&self) {
        self.with_lanes(HOST, |lanes| {
            let all = lanes.iter().fold(Clock::new(), |mut acc, c| {
                join(&mut acc, c);
                acc
            });
            join(&mut lanes[HOST], &all);
        });
    }
}

/// One access still to be checked against: bytes `start..end` of an allocation.
#[derive(Debug, Clone)]
struct Touch {
    start: u64,
    end: u64,
    lane: usize,
    seq: u64,
    write: bool,
    what: &'static str,
}

/// The accesses not yet superseded, per allocation (by its start address).
#[derive(Debug, Default)]
pub(crate) struct Touches {
    allocs: Mutex<HashMap<u64, Vec<Touch>>>,
}

impl Touches {
    /// Checks that `op`'s access to `start..end` of the allocation at `alloc` is ordered
    /// after every earlier access it conflicts with, and records it; `Err` names the
    /// unordered pair.
    pub(crate) fn touch(
        &self,
        alloc: u64,
        (start, end): (u64, u64),
        how: Use,
        op: &Op,
        what: &'static str,
    ) -> Result<(), String> {
        if start >= end {
            return Ok(());
        }
        let write = how == Use::Write;
        let mut allocs = self.allocs.lock().unwrap_or_else(|p| p.into_inner());
        let touches = allocs.entry(alloc).or_default();
        let overlaps = |t: &Touch| t.start < end && start < t.end;
        if let Some(t) = touches
            .iter()
            .find(|t| overlaps(t) && (t.write || write) && !op.after(t.lane, t.seq))
        {
            let (from, to) = (start.max(t.start), end.min(t.end));
            return Err(format!(
                "stream order: {what} on {} {} bytes {from:#x}..{to:#x}, which {} on {} {} \
                 with no event or host wait between them (a race on a GPU)",
                lane_name(op.lane),
                how.name(),
                t.what,
                lane_name(t.lane),
                if t.write { "writes" } else { "reads" },
            ));
        }
        // What this access supersedes: earlier ordered accesses over the same bytes (all of
        // them for a write; reads for a read), cut down to the bytes outside its range.
        let mut kept = Vec::with_capacity(touches.len() + 1);
        for t in touches.drain(..) {
            let superseded = overlaps(&t) && op.after(t.lane, t.seq) && (write || !t.write);
            if !superseded {
                kept.push(t);
                continue;
            }
            if t.start < start {
                kept.push(Touch {
                    end: start,
                    ..t.clone()
                });
            }
            if end < t.end {
                kept.push(Touch { start: end, ..t });
            }
        }
        kept.push(Touch {
            start,
            end,
            lane: op.lane,
            seq: op.seq,
            write,
            what,
        });
        *touches = kept;
        Ok(())
    }

    /// Forgets the accesses to the allocation at `alloc` (freed, or its address reused).
    pub(crate) fn forget(&self, alloc: u64) {
        self.allocs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&alloc);
    }

    /// Accesses on record (for the test that the record stays small).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.allocs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .map(Vec::len)
            .sum()
    }
}
