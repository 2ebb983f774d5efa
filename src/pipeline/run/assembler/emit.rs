//! Handing a batch to the consumer: its outputs finished (copied images, uploads, the GPU
//! stage's launch), a sample kept to pad with when ranks are evened out, the counts.

use std::sync::atomic::Ordering;
use std::time::Instant;

use crossbeam_channel::select;

use crate::pipeline::batch::{Batch, BatchOutput};
use crate::reader::schedule::Position;

use super::super::stats::add_ns;
use super::super::template::{copy_sample, Kept, Template};
use super::{Assembler, Filling};

impl Assembler {
    /// Hands the batch being filled to the consumer; its last `padded` samples are repeats
    /// (`last_batch = "pad"`), after any padding of this rank's part.
    pub(super) fn emit(&mut self, epoch: u64, padded: usize, resume: Position) -> bool {
        let t0 = Instant::now();
        let padded = padded + std::mem::take(&mut self.rank_padding);
        let pool = self.links.placing.buffers.pool().clone();
        let capacity = self.links.capacity;
        // With several ranks, a sample of each batch with a real one is kept to pad with.
        let kept_at = (self.evens_out() && padded < self.samples.len()).then(|| {
            self.filling
                .iter()
                .find_map(|f| match f {
                    Filling::Device(d) => d.kept_index(),
                    _ => None,
                })
                .unwrap_or(self.samples.len() - 1)
        });
        let mut old_kept = match kept_at {
            Some(_) => self.template.take().map(|t| t.outputs).unwrap_or_default(),
            None => Vec::new(),
        }
        .into_iter();
        let mut kept = Vec::new();
        let mut outputs = Vec::with_capacity(self.filling.len());
        for f in std::mem::take(&mut self.filling) {
            let mut slot = old_kept.next();
            outputs.push(match f {
                Filling::Images(b) => match b.finish(&pool, capacity) {
                    Ok(t) => {
                        if let Some(i) = kept_at {
                            copy_sample(&t, i, &mut slot);
                        }
                        match (&mut self.links.upload, &mut self.links.pin) {
                            (Some(u), _) => match u.upload(t, epoch) {
                                Ok(t) => BatchOutput::Device(t),
                                Err(e) => return self.fail(e),
                            },
                            (None, Some(p)) => match p.pin(t, epoch) {
                                Ok(t) => BatchOutput::Pinned(t),
                                Err(e) => return self.fail(e),
                            },
                            (None, None) => BatchOutput::Images(t),
                        }
                    }
                    Err(e) => return self.fail(e),
                },
                Filling::Labels(l) => {
                    slot = kept_at.and_then(|i| l.get(i)).map(|&l| Kept::Label(l));
                    BatchOutput::Labels(l)
                }
                Filling::Device(d) => {
                    slot = kept_at
                        .and_then(|i| d.prepared(i))
                        .map(|p| Kept::Device(Box::new(p.clone())));
                    let gpu = self
                        .links
                        .gpu
                        .clone()
                        .expect("device fills on the GPU path");
                    match gpu.launch(d) {
                        Ok(t) => BatchOutput::Device(t),
                        Err(e) => return self.fail(e),
                    }
                }
            });
            kept.extend(slot);
        }
        let samples = std::mem::take(&mut self.samples);
        if let Some(i) = kept_at {
            if kept.len() == outputs.len() {
                self.template = Some(Template {
                    sample: samples[i].clone(),
                    outputs: kept,
                });
            }
        }
        let real = (samples.len() - padded) as u64;
        let stats = &self.links.stats;
        if let Ok(mut l) = stats.ledger.lock() {
            l.made.images += real;
            l.made.padded += padded as u64;
            l.made.batches += 1;
            // Before the batch goes: the consumer may take it at once.
            l.batch_made();
        }
        stats.batches_made.fetch_add(1, Ordering::Relaxed);
        self.summary.images += real;
        self.summary.batches += 1;
        let batch = Batch {
            epoch,
            index: self.batch_in_epoch,
            names: self.names.clone(),
            outputs,
            samples,
            padded,
            skipped: std::mem::take(&mut self.skipped),
            replaced: std::mem::take(&mut self.replaced),
            resume,
        };
        self.batch_in_epoch += 1;
        add_ns(&stats.assemble_ns, t0.elapsed());
        let waited = std::time::Instant::now();
        let sent = select! {
            send(self.links.out, Ok(batch)) -> r => r.is_ok(),
            recv(self.links.shutdown) -> _ => false,
        };
        add_ns(&stats.assembler_wait_ns, waited.elapsed());
        self.links.placing.buffers.delivered(epoch);
        if let Some(gpu) = &self.links.gpu {
            if let Err(e) = gpu.check_warm_up(false) {
                return self.fail(e);
            }
        }
        sent
    }
}
