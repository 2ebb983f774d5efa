//! The end of an epoch: the rest of its samples handed out under the last-batch policy
//! (padded with repeats, partial, or dropped), then, with several ranks, batches of padding
//! until this rank has yielded as many as every rank does; the epoch's summary.

use crate::error::Error;
use crate::reader::schedule::LastBatch;

use super::super::fill::ImageFill;
use super::super::gpu_stage::DeviceFill;
use super::super::stats::EpochSummary;
use super::super::template::Kept;
use super::{Assembler, Filling};

impl Assembler {
    /// Closes epoch `epoch`: its device samples settled, its last batches handed out
    /// (`finish_epoch`), its summary logged and recorded; false to stop.
    pub(super) fn end_epoch(&mut self, epoch: u64) -> bool {
        // Every sample of the epoch is taken: its tentative batches are ours alone.
        self.links.placing.buffers.epoch_ended(epoch);
        if let Err(e) = self.settle_device() {
            return self.fail(e);
        }
        if let Some(gpu) = &self.links.gpu {
            // Whatever the first epoch needed is allocated now.
            if let Err(e) = gpu.check_warm_up(true) {
                return self.fail(e);
            }
        }
        let ok = self.finish_epoch(epoch);
        // Bad samples after the epoch's last batch stay in the epoch's summary; they are not
        // carried into the next epoch's first batch.
        self.skipped.clear();
        self.replaced.clear();
        // Logged once the consumer has the epoch's last batch (`Pipeline::finish`).
        let summary = std::mem::take(&mut self.summary);
        if let Ok(mut v) = self.links.stats.epochs.lock() {
            v.push(EpochSummary { epoch, ..summary });
        }
        if let Ok(mut l) = self.links.stats.ledger.lock() {
            l.made.epochs += 1;
            l.epoch_ended();
        }
        self.summary.epoch = epoch + 1;
        self.batch_in_epoch = 0;
        self.next_pos = 0;
        ok
    }

    /// True with several ranks: then every rank yields exactly `batches_per_epoch` batches,
    /// whatever bad samples cost it (see [`super::super::template`]).
    pub(super) fn evens_out(&self) -> bool {
        self.links.graph.reader.world_size > 1
    }

    /// Hands out the rest of the epoch under the last-batch policy, then, with several ranks,
    /// batches of padding until this rank has yielded as many as every rank does. A batch
    /// with more of them to follow resumes at the last good sample: a run resumed there
    /// reads it again to pad with (counting it once more), so it too yields them all.
    fn finish_epoch(&mut self, epoch: u64) -> bool {
        let settings = self.links.settings;
        let capacity = self.links.capacity;
        let per_epoch = self.links.batches_per_epoch;
        let owed = if self.evens_out() {
            per_epoch.saturating_sub(self.batch_in_epoch)
        } else {
            0
        };
        let resume = |a: &Assembler| {
            if a.evens_out() && a.batch_in_epoch + 1 < per_epoch {
                settings.position(epoch, a.last_good_pos, a.batch_in_epoch + 1)
            } else {
                settings.position(epoch + 1, 0, 0)
            }
        };
        if !self.samples.is_empty() {
            let last_batch = self.links.settings.last_batch;
            // Short of batches (bad samples skipped), the incomplete batch is one of those
            // owed: whole, so that only an epoch's last batch is ever smaller.
            let whole = match last_batch {
                LastBatch::Pad => true,
                LastBatch::Partial => owed > 1,
                LastBatch::Drop => owed > 0,
            };
            if whole || last_batch == LastBatch::Partial {
                let pad = if whole {
                    capacity.saturating_sub(self.samples.len())
                } else {
                    0
                };
                if let Err(e) = self.pad(pad) {
                    return self.fail(e);
                }
                let at = resume(self);
                if !self.emit(epoch, pad, at) {
                    return false;
                }
            } else {
                let n = (self.samples.len() - std::mem::take(&mut self.rank_padding)) as u64;
                if let Ok(mut l) = self.links.stats.ledger.lock() {
                    l.made.dropped += n;
                }
                self.summary.dropped += n;
                self.samples.clear();
                self.filling.clear();
            }
        }
        while self.evens_out() && self.batch_in_epoch < per_epoch {
            if let Err(e) = self.fill_with_template(epoch) {
                return self.fail(e);
            }
            let at = resume(self);
            if !self.emit(epoch, capacity, at) {
                return false;
            }
        }
        true
    }

    /// Fills the batch with repeats of the kept sample (a batch of padding), or says why
    /// there is none.
    fn fill_with_template(&mut self, epoch: u64) -> Result<(), Error> {
        let capacity = self.links.capacity;
        let reader = &self.links.graph.reader;
        let Some(t) = &self.template else {
            return Err(Error::Dataset(format!(
                "rank {} of {}: no sample of epoch {epoch} so far was good, so there is none to \
                 repeat as the padding that gives this rank as many batches as the other ranks \
                 ({} per epoch); the bad samples are listed above: fix or remove those files",
                reader.rank, reader.world_size, self.links.batches_per_epoch
            )));
        };
        let pool = self.links.placing.buffers.pool().clone();
        let mut filling = Vec::with_capacity(t.outputs.len());
        for kept in &t.outputs {
            filling.push(match kept {
                Kept::Image(im) => Filling::Images(ImageFill::start_copied(im, &pool, capacity)?),
                Kept::Label(l) => Filling::Labels(vec![*l]),
                Kept::Device(p) => {
                    let mut d = DeviceFill::default();
                    d.push(p.clone());
                    Filling::Device(d)
                }
            });
        }
        let sample = t.sample.clone();
        let path = sample.path.display().to_string();
        self.filling = filling;
        self.samples.push(sample);
        // Submitted for decoding before its repeats join it (the device takes note of the
        // newest sample only).
        self.settle_device()?;
        if self.samples.is_empty() {
            return Err(Error::Dataset(format!(
                "the sample kept to pad epoch {epoch} with ({path}) failed on the device"
            )));
        }
        self.pad(capacity - 1)
    }

    /// Fills the batch with `pad` repeats of its last sample (`last_batch = "pad"`).
    fn pad(&mut self, pad: usize) -> Result<(), Error> {
        let pool = self.links.placing.buffers.pool().clone();
        let capacity = self.links.capacity;
        let last = self.samples.last().expect("non-empty").clone();
        for _ in 0..pad {
            for f in &mut self.filling {
                match f {
                    Filling::Images(b) => b.repeat_last(&pool, capacity)?,
                    Filling::Labels(l) => l.push(*l.last().expect("non-empty")),
                    Filling::Device(d) => d.repeat_last(),
                }
            }
            self.samples.push(last.clone());
        }
        Ok(())
    }
}
