//! The loop every stage thread runs: take the next item from its input until the input closes
//! or the pipeline shuts down, work on it, and hand the result on until the next stage is
//! gone. Each way of ending is a return, so a stage thread never outlives its neighbours.

use crossbeam_channel::{select, Receiver};

/// What a stage thread takes its items from: its input, and the pipeline's shutdown.
pub(super) struct StageInput<I> {
    pub(super) items: Receiver<I>,
    pub(super) shutdown: Receiver<()>,
}

// Not derived: that would ask `I: Clone`, and each thread of a stage takes a copy.
impl<I> Clone for StageInput<I> {
    fn clone(&self) -> Self {
        StageInput {
            items: self.items.clone(),
            shutdown: self.shutdown.clone(),
        }
    }
}

impl<I> StageInput<I> {
    /// Whether the pipeline is still running (its shutdown has not fired): for a thread that
    /// works through several items between two waits on its input.
    pub(super) fn running(&self) -> bool {
        matches!(
            self.shutdown.try_recv(),
            Err(crossbeam_channel::TryRecvError::Empty)
        )
    }

    /// Runs this thread as a stage over the input ([`run_stage`]), below the consumer's
    /// priority (stage threads yield the core to the training loop: `threads.rs`).
    pub(super) fn run<O>(&self, work: impl FnMut(I) -> Option<O>, send: impl FnMut(O) -> bool) {
        super::threads::below_the_consumer();
        run_stage(&self.items, &self.shutdown, work, send)
    }
}

/// Runs one stage thread: for each item of `input`, until `input` closes or `shutdown`
/// fires, hands `work(item)` to `send`. Stops when `work` has nothing more (`None`) or `send`
/// says the next stage is gone (`false`).
pub(super) fn run_stage<I, O>(
    input: &Receiver<I>,
    shutdown: &Receiver<()>,
    mut work: impl FnMut(I) -> Option<O>,
    mut send: impl FnMut(O) -> bool,
) {
    loop {
        let item = select! {
            recv(input) -> i => match i { Ok(i) => i, Err(_) => return },
            recv(shutdown) -> _ => return,
        };
        let Some(out) = work(item) else {
            return;
        };
        if !send(out) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_ends_with_its_input_its_work_its_output_or_the_shutdown() {
        let (tx, rx) = crossbeam_channel::unbounded::<u32>();
        let (stop_tx, stop) = crossbeam_channel::bounded::<()>(1);
        for i in 0..10 {
            tx.send(i).unwrap();
        }
        // The work says when it is done: items after that stay unread.
        let mut out = Vec::new();
        run_stage(
            &rx,
            &stop,
            |i| (i < 3).then_some(i * 2),
            |o| {
                out.push(o);
                true
            },
        );
        assert_eq!(out, [0, 2, 4]);
        // The next stage gone: the item it refused is the last one taken.
        let mut taken = 0;
        run_stage(&rx, &stop, Some, |_| {
            taken += 1;
            taken < 2
        });
        assert_eq!((taken, rx.len()), (2, 4));
        // The input closed: everything left is handed on, then the loop ends.
        drop(tx);
        let mut rest = Vec::new();
        run_stage(&rx, &stop, Some, |o| {
            rest.push(o);
            true
        });
        assert_eq!(rest, [6, 7, 8, 9]);
        // The shutdown ends a stage waiting on an input that stays open.
        let (_open, waiting) = crossbeam_channel::unbounded::<u32>();
        stop_tx.send(()).unwrap();
        run_stage(&waiting, &stop, Some, |_: u32| true);
    }
}
