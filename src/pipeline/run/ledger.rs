//! What the consumer has been handed. The assembler makes batches ahead of the consumer (the
//! `prefetch` queue, and the one it is sending); the counts a user reads — images, batches,
//! bad samples by cause, finished epochs — are those of the batches handed out, so the
//! running totals are kept as of each batch made until the consumer takes it.

use std::collections::{BTreeMap, VecDeque};

use crate::error::SampleErrorKind;

/// The categories bad samples are counted by.
const CAUSES: [&str; 8] = SampleErrorKind::CATEGORIES;

/// Running totals, as of one batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Totals {
    /// Samples put into batches (padding excluded).
    pub(super) images: u64,
    /// Bad samples skipped.
    pub(super) skipped: u64,
    /// Bad samples replaced by others.
    pub(super) replaced: u64,
    /// Good samples left out by `last_batch = "drop"`.
    pub(super) dropped: u64,
    /// Repeats added by `last_batch = "pad"`.
    pub(super) padded: u64,
    /// Batches.
    pub(super) batches: u64,
    /// Finished epochs.
    pub(super) epochs: usize,
    skipped_by_cause: [u64; CAUSES.len()],
    replaced_by_cause: [u64; CAUSES.len()],
}

impl Totals {
    /// Counts a bad sample of `kind`, replaced or skipped.
    pub(super) fn count_bad(&mut self, kind: &SampleErrorKind, replaced: bool) {
        let k = kind.category_index();
        if replaced {
            self.replaced += 1;
            self.replaced_by_cause[k] += 1;
        } else {
            self.skipped += 1;
            self.skipped_by_cause[k] += 1;
        }
    }

    /// Skipped samples by cause (the causes met).
    pub(super) fn skipped_by_cause(&self) -> BTreeMap<&'static str, u64> {
        by_cause(&self.skipped_by_cause)
    }

    /// Replaced samples by cause (the causes met).
    pub(super) fn replaced_by_cause(&self) -> BTreeMap<&'static str, u64> {
        by_cause(&self.replaced_by_cause)
    }
}

fn by_cause(counts: &[u64; CAUSES.len()]) -> BTreeMap<&'static str, u64> {
    CAUSES
        .iter()
        .zip(counts)
        .filter(|(_, &n)| n > 0)
        .map(|(&c, &n)| (c, n))
        .collect()
}

/// The totals of what was made, and of what was handed out.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    /// Everything the assembler has counted.
    pub(super) made: Totals,
    /// The totals as of each batch made and not yet handed out, oldest first (at most the
    /// queue's batches and the one being sent: no allocation once it has held that many).
    pending: VecDeque<Totals>,
    handed: Totals,
}

impl Ledger {
    /// A batch was made, with the totals now.
    pub(super) fn batch_made(&mut self) {
        self.pending.push_back(self.made);
    }

    /// An epoch ended: its end (the samples dropped, the bad samples after its last batch,
    /// the epoch finished) goes with its last batch — or shows at once, where the consumer
    /// already has that batch.
    pub(super) fn epoch_ended(&mut self) {
        match self.pending.back_mut() {
            Some(last) => *last = self.made,
            None => self.handed = self.made,
        }
    }

    /// The consumer took the oldest batch made.
    pub(super) fn batch_handed(&mut self) {
        if let Some(t) = self.pending.pop_front() {
            self.handed = t;
        }
    }

    /// The run is over (finished or failed): everything counted is the consumer's.
    pub(super) fn all_handed(&mut self) {
        self.pending.clear();
        self.handed = self.made;
    }

    /// The totals of what the consumer was handed.
    pub(super) fn handed(&self) -> Totals {
        self.handed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::DecodeError;

    #[test]
    fn every_category_of_bad_sample_has_its_own_count() {
        let kinds = [
            SampleErrorKind::Read("x".into()),
            SampleErrorKind::Decode(DecodeError::Unsupported("x".into())),
            SampleErrorKind::Decode(DecodeError::Limits("x".into())),
            SampleErrorKind::Decode(DecodeError::UnknownFormat),
            SampleErrorKind::Decode(DecodeError::Corrupt("x".into())),
            SampleErrorKind::Decode(DecodeError::Window("x".into())),
            SampleErrorKind::Op {
                op: "x".into(),
                message: "x".into(),
            },
            SampleErrorKind::Settings {
                op: "x".into(),
                message: "x".into(),
            },
        ];
        let mut t = Totals::default();
        for k in &kinds {
            t.count_bad(k, false);
        }
        let by = t.skipped_by_cause();
        assert_eq!(by.len(), kinds.len(), "{by:?}");
        assert!(!by.contains_key("other"), "{by:?}");
        assert_eq!(t.skipped, kinds.len() as u64);
    }

    #[test]
    fn the_consumer_sees_the_totals_of_the_batches_it_took() {
        let mut l = Ledger::default();
        // Two batches made ahead of the consumer, a bad sample after them.
        for _ in 0..2 {
            l.made.images += 4;
            l.made.batches += 1;
            l.batch_made();
        }
        l.made
            .count_bad(&SampleErrorKind::Decode(DecodeError::UnknownFormat), false);
        assert_eq!(l.handed().batches, 0);
        l.batch_handed();
        assert_eq!((l.handed().batches, l.handed().images), (1, 4));
        // The epoch ends after its second batch: its end goes with that batch.
        l.made.epochs += 1;
        l.epoch_ended();
        assert_eq!(l.handed().epochs, 0);
        l.batch_handed();
        let h = l.handed();
        assert_eq!((h.batches, h.images, h.skipped, h.epochs), (2, 8, 1, 1));
        // An epoch that ends once the consumer has everything shows at once.
        l.made.dropped += 3;
        l.made.epochs += 1;
        l.epoch_ended();
        assert_eq!((l.handed().dropped, l.handed().epochs), (3, 2));
        // A batch made, then the run over: everything is the consumer's.
        l.made.batches += 1;
        l.batch_made();
        l.all_handed();
        assert_eq!(l.handed(), l.made);
    }
}
