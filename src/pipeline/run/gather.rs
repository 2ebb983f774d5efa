//! The workers' finished samples on their way to the assembler, gathered so that the
//! assembler wakes once per batch rather than once per sample: each wake-up costs both sides
//! a futex call and a context switch, time the workers lose on a machine with few cores
//! (`docs/performance.md`).

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// A many-to-one queue whose receiver sleeps until it has as many items as it asked for.
#[derive(Debug)]
pub(crate) struct Gather<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

#[derive(Debug)]
struct State<T> {
    items: Vec<T>,
    /// The receiver is woken once this many items are waiting.
    wake_at: usize,
    /// Set by an item the receiver must see at once (an epoch end, a failure).
    urgent: bool,
    /// Senders still running.
    senders: usize,
    /// Closed by the receiver's side: senders stop.
    closed: bool,
}

/// How often a receiver with nothing to do checks for shutdown anyway; a safety net only,
/// every real event wakes it.
const RECHECK: Duration = Duration::from_millis(100);

impl<T> Gather<T> {
    /// A queue fed by `senders` senders, each of which calls [`Gather::sender_done`] once.
    pub(crate) fn new(senders: usize) -> Gather<T> {
        Gather {
            state: Mutex::new(State {
                items: Vec::new(),
                wake_at: 1,
                urgent: false,
                senders,
                closed: false,
            }),
            ready: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // A panic while holding this lock leaves the queue consistent (pushes and drains are
        // single calls), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds an item, waking the receiver when it has asked for this many or `urgent`;
    /// false once the queue is closed.
    pub(crate) fn push(&self, item: T, urgent: bool) -> bool {
        let mut s = self.lock();
        if s.closed {
            return false;
        }
        s.items.push(item);
        s.urgent |= urgent;
        if s.urgent || s.items.len() >= s.wake_at {
            self.ready.notify_one();
        }
        true
    }

    /// A sender is finished; the last one wakes the receiver.
    pub(crate) fn sender_done(&self) {
        let mut s = self.lock();
        s.senders = s.senders.saturating_sub(1);
        if s.senders == 0 {
            self.ready.notify_one();
        }
    }

    /// Wakes the receiver now (from a thread that is not a sender: it has something else
    /// for it), or makes its next wait return at once.
    pub(crate) fn nudge(&self) {
        self.lock().urgent = true;
        self.ready.notify_one();
    }

    /// Stops the senders and wakes the receiver.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    /// Waits until `want` items (at least one) are waiting, an urgent one came, every sender
    /// is finished or the queue is closed, or `stop()` says so at a periodic check; then moves
    /// every waiting item into `out`. False when nothing more will come.
    pub(crate) fn take(&self, want: usize, out: &mut Vec<T>, stop: impl Fn() -> bool) -> bool {
        let mut s = self.lock();
        s.wake_at = want.max(1);
        while !s.closed && !s.urgent && s.senders > 0 && s.items.len() < s.wake_at {
            let (guard, timeout) = self
                .ready
                .wait_timeout(s, RECHECK)
                .unwrap_or_else(|p| p.into_inner());
            s = guard;
            if timeout.timed_out() && stop() {
                return false;
            }
        }
        s.urgent = false;
        let moved = s.items.len();
        out.append(&mut s.items);
        !(moved == 0 && (s.closed || s.senders == 0))
    }
}

/// Calls [`Gather::sender_done`] when a sender's thread ends, however it ends.
pub(crate) struct SenderGuard<'a, T>(pub(crate) &'a Gather<T>);

impl<T> Drop for SenderGuard<'_, T> {
    fn drop(&mut self) {
        self.0.sender_done();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_receiver_gets_every_item_and_then_the_end() {
        let g = Arc::new(Gather::new(3));
        let senders: Vec<_> = (0..3)
            .map(|t| {
                let g = g.clone();
                std::thread::spawn(move || {
                    let _done = SenderGuard(&*g);
                    for i in 0..1000 {
                        assert!(g.push(t * 1000 + i, i % 97 == 0));
                    }
                })
            })
            .collect();
        let mut got = Vec::new();
        let mut want = 64;
        loop {
            let mut batch = Vec::new();
            if !g.take(want, &mut batch, || false) {
                break;
            }
            got.extend(batch);
            want = 1 + got.len() % 50;
        }
        for s in senders {
            s.join().unwrap();
        }
        got.sort_unstable();
        assert_eq!(got, (0..3000).collect::<Vec<_>>());
    }

    #[test]
    fn a_receiver_waiting_for_more_than_will_come_still_wakes() {
        let g = Arc::new(Gather::new(1));
        let g2 = g.clone();
        let t = std::thread::spawn(move || {
            let _done = SenderGuard(&*g2);
            g2.push(7, false);
        });
        let mut out = Vec::new();
        // Asks for 100 items; the sender finishing ends the wait.
        while g.take(100, &mut out, || false) {}
        t.join().unwrap();
        assert_eq!(out, vec![7]);
    }

    #[test]
    fn closing_stops_senders_and_the_receiver() {
        let g: Gather<u32> = Gather::new(1);
        g.close();
        assert!(!g.push(1, false));
        let mut out = Vec::new();
        assert!(!g.take(10, &mut out, || false));
    }

    #[test]
    fn the_stop_check_ends_a_wait_nothing_else_would() {
        let g: Gather<u32> = Gather::new(1);
        let mut out = Vec::new();
        assert!(!g.take(10, &mut out, || true));
    }
}
