//! The assembler: takes the processed samples in schedule order, applies the bad-sample and
//! last-batch policies, builds each batch (on the buffers workers wrote into, or by copying)
//! and hands it to the consumer (`emit.rs`); it gives credits back to the readers as it
//! goes. An epoch's end, with its last batches and padding, is `epoch_end.rs`.

mod ahead;
mod emit;
mod epoch_end;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};

use crate::error::{Error, SampleError, SampleErrorKind};
use crate::pipeline::batch::{Batch, SampleInfo};
use crate::pipeline::graph::Graph;
use crate::pipeline::spec::OnError;
use crate::reader::schedule::Position;
use crate::value::Value;

use self::ahead::Ahead;
use super::cpu_stage::{Failure, Output, Processed, ProcessedSample};
use super::fill::ImageFill;
use super::gather::Gather;
use super::gpu_stage::{DeviceFill, GpuStage};
use super::pin::Pin;
use super::placement::Placing;
use super::run_settings::RunSettings;
use super::stats::{add_ns, EpochSummary, Stats};
use super::template::Template;
use super::upload::Upload;

/// Finished samples the assembler waits for before it wakes (see [`Assembler::run`]).
const GATHER_AT_ONCE: usize = 16;

/// Credits the assembler gives back at once (see [`Assembler::return_credit`]).
pub(super) fn credit_chunk(batch: usize) -> usize {
    (batch / 4).clamp(1, 16)
}

/// One output of the batch being filled.
enum Filling {
    Images(ImageFill),
    Labels(Vec<i64>),
    /// Images for the GPU stage (the GPU path).
    Device(DeviceFill),
}

/// The channels and shared state the assembler works with.
pub(super) struct Links {
    pub(super) graph: Arc<Graph>,
    pub(super) settings: RunSettings,
    pub(super) stats: Arc<Stats>,
    pub(super) placing: Arc<Placing>,
    pub(super) out: Sender<Result<Batch, Error>>,
    pub(super) credits: Sender<usize>,
    /// Credits in all: samples between the readers and the assembler's taking them.
    pub(super) credits_total: usize,
    pub(super) shutdown: Receiver<()>,
    /// Samples a batch buffer holds (see [`super::memory`]).
    pub(super) capacity: usize,
    /// This rank's real samples per epoch: a sample at a later position of the epoch's
    /// order is the padding that evens out the ranks' batch counts.
    pub(super) real_per_epoch: usize,
    /// Positions the walk takes each epoch, that padding included.
    pub(super) scheduled_per_epoch: usize,
    /// Batches every rank yields per epoch: with several ranks, an epoch that bad samples cut
    /// short is evened out to this with padding (see [`super::template`]).
    pub(super) batches_per_epoch: usize,
    /// The GPU stage, on the GPU path.
    pub(super) gpu: Option<Arc<GpuStage>>,
    /// The CPU path's uploads, with `batch_memory = "gpu"`.
    pub(super) upload: Option<Upload>,
    /// The CPU path's pinned host batches, with `batch_memory = "pinned"`.
    pub(super) pin: Option<Pin>,
}

pub(super) struct Assembler {
    links: Links,
    /// Credits earned but not yet given back (fewer than a chunk).
    owed_credits: usize,
    names: Arc<[String]>,
    /// The batch being filled: its outputs (empty until its first sample) and samples.
    filling: Vec<Filling>,
    samples: Vec<SampleInfo>,
    skipped: Vec<SampleError>,
    replaced: Vec<SampleError>,
    /// Bad samples logged already: by index, and a shard's missing ones by (shard, reason).
    reported: HashSet<usize>,
    reported_missing: HashSet<(String, String)>,
    batch_in_epoch: usize,
    /// Position in the current epoch's order after the last sample taken.
    next_pos: usize,
    /// Samples in the batch being filled that pad this rank's part (always its last ones).
    rank_padding: usize,
    /// Position in the epoch's order of the last good sample taken.
    last_good_pos: usize,
    /// The last good sample handed out, repeated to even out a short epoch (several ranks).
    template: Option<Template>,
    summary: EpochSummary,
}

impl Assembler {
    pub(super) fn new(links: Links, start: Position) -> Assembler {
        let g = &links.graph;
        let names: Arc<[String]> = g.outputs.iter().map(|&s| g.edge_names[s].clone()).collect();
        Assembler {
            links,
            owed_credits: 0,
            names,
            filling: Vec::new(),
            samples: Vec::new(),
            skipped: Vec::new(),
            replaced: Vec::new(),
            reported: HashSet::new(),
            reported_missing: HashSet::new(),
            batch_in_epoch: start.batch,
            next_pos: start.sample,
            rank_padding: 0,
            last_good_pos: 0,
            template: None,
            summary: EpochSummary {
                epoch: start.epoch,
                ..EpochSummary::default()
            },
        }
    }

    /// Takes the processed samples in order until they end, the consumer goes or an error
    /// stops the run. On the GPU path a feeding thread decodes the device's samples ahead of
    /// the assembler ([`ahead`]).
    pub(super) fn run(self, done: &Gather<Processed>) {
        if let Ok(mut s) = self.links.stats.assembler_start.lock() {
            *s = Some(std::time::Instant::now());
        }
        let Some(gpu) = self.links.gpu.clone() else {
            self.run_with(done, None);
            return;
        };
        let (queue, feeder) = Ahead::new(gpu.engine_chunk);
        let stats = self.links.stats.clone();
        std::thread::scope(|scope| {
            match ahead::start_feeder(scope, feeder, gpu, stats, done) {
                Ok(_) => self.run_with(done, Some(queue)),
                Err(e) => {
                    let _ = self.links.out.send(Err(Error::ThreadStart {
                        name: "stokehold-feed".into(),
                        source: e,
                    }));
                }
            }
            // The queue's end is dropped: the feeding thread ends after its group.
        });
    }

    /// [`Assembler::run`]'s loop; with `ahead` (the GPU path) samples pass through the
    /// decode-ahead queue on their way to [`Assembler::take`].
    fn run_with(mut self, done: &Gather<Processed>, mut ahead: Option<Ahead>) {
        let mut reorder: BTreeMap<u64, Processed> = BTreeMap::new();
        let mut arrived = Vec::new();
        let mut next = 0u64;
        let batch = self.links.settings.batch;
        let stats = self.links.stats.clone();
        loop {
            let waited = std::time::Instant::now();
            let more = if let Some(a) = ahead.as_mut().filter(|a| a.must_wait()) {
                // Nothing to do until the feeding thread hands a group back.
                let r = a.receive(true);
                add_ns(&stats.assembler_wait_ns, waited.elapsed());
                if let Err(e) = r {
                    self.fail(e);
                    return;
                }
                true
            } else {
                // Sleep until a few samples have come (never more than would finish the
                // batch being filled, were every one good and in order; epoch ends and
                // failures wake us anyway): fewer wake-ups, while the samples copied are
                // still warm in cache. On the GPU path, until the next group is due.
                let want = match &ahead {
                    // No more than can come: the samples out of order and the credits owed
                    // hold credits too.
                    Some(a) => a.wanted().min(
                        self.links
                            .credits_total
                            .saturating_sub(reorder.len() + self.owed_credits),
                    ),
                    None => batch
                        .saturating_sub(self.samples.len() + reorder.len())
                        .min(GATHER_AT_ONCE),
                };
                let more = done.take(want, &mut arrived, || self.shut_down());
                add_ns(&stats.assembler_wait_ns, waited.elapsed());
                more
            };
            for d in arrived.drain(..) {
                let seq = match &d {
                    Processed::Sample(s) => s.seq,
                    Processed::EpochEnd { seq, .. } => *seq,
                };
                reorder.insert(seq, d);
            }
            while let Some(d) = reorder.remove(&next) {
                self.return_credit();
                match ahead.as_mut() {
                    Some(a) => a.push(next, d),
                    None => {
                        if !self.take(d) {
                            return;
                        }
                    }
                }
                next += 1;
            }
            let shut_down = self.shut_down();
            if let Some(a) = ahead.as_mut().filter(|_| !shut_down) {
                // The input ended: what the queue holds goes out first.
                if !more {
                    a.flush();
                }
                if !self.advance(a, !more) {
                    return;
                }
            }
            if !more {
                return;
            }
        }
    }

    /// Sends the decode-ahead queue's due group, takes the groups the feeding thread has
    /// finished and every item ready in order; with `drain`, until the queue is empty.
    /// False to stop.
    fn advance(&mut self, ahead: &mut Ahead, drain: bool) -> bool {
        loop {
            ahead.send();
            let wait = drain && ahead.groups_out() > 0 && !ahead.front_ready();
            let waited = std::time::Instant::now();
            let r = ahead.receive(wait);
            if wait {
                add_ns(&self.links.stats.assembler_wait_ns, waited.elapsed());
            }
            if let Err(e) = r {
                return self.fail(e);
            }
            let mut took = false;
            while let Some(d) = ahead.pop() {
                took = true;
                if !self.take(d) {
                    return false;
                }
            }
            // Draining, every pass sends, waits for a group or takes something, until the
            // queue is empty.
            if !drain || ahead.len() == 0 || !(took || wait || ahead.groups_out() > 0) {
                return true;
            }
        }
    }

    /// The pipeline is shutting down (its consumer is gone).
    fn shut_down(&self) -> bool {
        matches!(
            self.links.shutdown.try_recv(),
            Err(crossbeam_channel::TryRecvError::Disconnected)
        )
    }

    /// Records a bad sample: reported once per file and cause in the log (once a process),
    /// counted every time. The samples a shard lacks for one reason are reported once, by the
    /// first (a shard cut short early can lack a thousand).
    fn report(&mut self, e: SampleError, replaced: bool) {
        let stats = &self.links.stats;
        let (first, more) = match &e.kind {
            SampleErrorKind::Missing { shard, why } => (
                self.reported_missing.insert((shard.clone(), why.clone())),
                "; the shard's other samples missing for the same reason are counted in the \
                 epoch's summary, not listed",
            ),
            _ => (self.reported.insert(e.index), ""),
        };
        if first {
            let verb = if replaced { "replaced" } else { "skipped" };
            super::warnings::warn_once(format!("{verb} {e}{more}"));
        }
        if replaced {
            self.summary.replaced += 1;
        } else {
            self.summary.skipped += 1;
        }
        if let Ok(mut l) = stats.ledger.lock() {
            l.made.count_bad(&e.kind, replaced);
        }
        self.summary.errors.push(e.clone());
        if replaced {
            self.replaced.push(e);
        } else {
            self.skipped.push(e);
        }
    }

    /// Gives a credit back to the readers, a chunk to a message so that a reader waiting for
    /// credits wakes once per chunk rather than once per sample.
    fn return_credit(&mut self) {
        self.owed_credits += 1;
        if self.owed_credits >= credit_chunk(self.links.capacity) {
            let _ = self
                .links
                .credits
                .try_send(std::mem::take(&mut self.owed_credits));
        }
    }

    /// Stops the run with `e` (the consumer gets it as its last result); always false.
    fn fail(&mut self, e: Error) -> bool {
        let _ = self.links.out.send(Err(e));
        false
    }

    /// Handles the next sample (or epoch end) in order; false to stop.
    fn take(&mut self, d: Processed) -> bool {
        let d = match d {
            Processed::EpochEnd { epoch, .. } => {
                return self.end_epoch(epoch);
            }
            Processed::Sample(d) => d,
        };
        let ProcessedSample {
            epoch,
            pos,
            mut index,
            mut path,
            label,
            replaced,
            mut result,
            ..
        } = d;
        let settings = &self.links.settings;
        let (batch_size, on_error) = (settings.batch, settings.on_error);
        self.next_pos = pos + 1;
        // The scheduled file's error comes first; the files tried in its place that failed
        // too are the epoch's own samples, counted where the epoch schedules them.
        if let Some(own) = replaced.into_iter().next() {
            if matches!(&result, Err(Failure::Sample(k)) if !k.is_settings()) {
                // No file tried in its place was good: the sample is skipped with its own
                // file's error, and nothing counts as replaced.
                (index, path) = (own.index, own.path.into());
                result = Err(Failure::Sample(own.kind));
            } else {
                self.report(own, true);
            }
        }
        match result {
            Err(Failure::Panic(message)) => {
                return self.fail(Error::WorkerPanic {
                    path: path.to_path_buf(),
                    message,
                });
            }
            Err(Failure::Sample(SampleErrorKind::Settings { op, message })) => {
                // Not this file's fault: every sample would fail alike, so the run stops
                // once rather than skip them all.
                let path = path.display().to_string();
                return self.fail(Error::Invalid {
                    at: format!("operator '{op}'"),
                    message,
                    help: Some(format!(
                        "every sample fails this way whatever its file (the first was {path}): \
                         change the operator's arguments"
                    )),
                });
            }
            Err(Failure::Sample(kind)) => {
                let e = SampleError {
                    path: path.to_path_buf(),
                    index,
                    kind,
                };
                if on_error == OnError::Fail {
                    return self.fail(Error::Sample(e));
                }
                // Later samples of the epoch move up a place: tell the workers.
                self.links.placing.buffers.skip(epoch);
                self.report(e, false);
            }
            Ok((values, params)) => {
                if let Err(e) = self.push(epoch, (index, path, label), values, params) {
                    return self.fail(e);
                }
                if pos >= self.links.real_per_epoch {
                    self.rank_padding += 1;
                }
                self.last_good_pos = pos;
                if self.samples.len() == batch_size {
                    // On the GPU path what the device has not decoded yet goes now; a sample
                    // that can't be decoded leaves room for the next ones.
                    if let Err(e) = self.settle_device() {
                        return self.fail(e);
                    }
                    if self.samples.len() < batch_size {
                        return true;
                    }
                    return self.emit(epoch, 0, self.resume_after_full_batch(epoch));
                }
            }
        }
        true
    }

    /// Where a run resumes after the full batch about to be handed out: the next epoch's
    /// start where it is the epoch's last (its batches all given, or, with one rank, its
    /// samples all taken: nothing follows it), as [`Self::finish_epoch`]'s last batch does,
    /// so that an epoch's end reads as one whatever the batch size divides; else the next
    /// sample.
    fn resume_after_full_batch(&self, epoch: u64) -> Position {
        let batches = self.batch_in_epoch + 1;
        let last = batches >= self.links.batches_per_epoch
            || (!self.evens_out() && self.next_pos >= self.links.scheduled_per_epoch);
        if last {
            self.links.settings.position(epoch + 1, 0, 0)
        } else {
            self.links.settings.position(epoch, self.next_pos, batches)
        }
    }

    /// Adds a good sample to the batch being filled: an image its worker wrote into this
    /// batch's buffer where it belongs costs nothing, any other is copied in (while its pixels
    /// are still warm in cache) and its buffer given back for later samples.
    fn push(
        &mut self,
        epoch: u64,
        (index, path, label): (usize, std::sync::Arc<std::path::Path>, i64),
        values: super::cpu_stage::Outputs,
        params: crate::ops::SampleParams,
    ) -> Result<(), Error> {
        let t0 = Instant::now();
        let capacity = self.links.capacity;
        let stats = &self.links.stats;
        let buffers = &self.links.placing.buffers;
        let pool = buffers.pool().clone();
        if self.filling.is_empty() {
            let mut filling = Vec::with_capacity(values.len());
            for (i, v) in values.into_iter().enumerate() {
                filling.push(match v {
                    Output::Placed(p) => {
                        let target = buffers.batch_buffer(epoch, i, &p);
                        let (f, in_place) = ImageFill::start_placed(&p, target, &pool, capacity)?;
                        stats.count_image(in_place);
                        Filling::Images(f)
                    }
                    Output::Value(Value::Image(im)) => {
                        stats.count_image(false);
                        // On the batch's buffer when workers fill this output, so a batch
                        // never has two buffers (see `super::memory`).
                        let target = if self.links.placing.is_placeable(i) {
                            buffers.batch_buffer_for(epoch, i, im.dtype(), im.pixels.len())
                        } else {
                            None
                        };
                        let f = ImageFill::start_on(target, &im, &pool, capacity)?;
                        crate::scratch::recycle_image(im);
                        Filling::Images(f)
                    }
                    Output::Value(Value::Label(l)) => {
                        let mut labels = Vec::new();
                        labels
                            .try_reserve_exact(capacity)
                            .map_err(|_| Error::Allocation {
                                what: "a batch's labels",
                                bytes: capacity as u64 * 8,
                            })?;
                        labels.push(l);
                        Filling::Labels(labels)
                    }
                    Output::Value(Value::Encoded(_)) => {
                        unreachable!("the graph refuses encoded outputs")
                    }
                    Output::Device(p) => {
                        stats.count_image(false);
                        let mut fill = DeviceFill::default();
                        fill.push(p);
                        Filling::Device(fill)
                    }
                });
            }
            self.filling = filling;
        } else {
            for (f, v) in self.filling.iter_mut().zip(values) {
                match (f, v) {
                    (Filling::Images(b), Output::Placed(p)) => {
                        let in_place = b.push_placed(&p, &pool, capacity)?;
                        stats.count_image(in_place);
                    }
                    (Filling::Images(b), Output::Value(Value::Image(im))) => {
                        stats.count_image(false);
                        b.push(&im, &pool, capacity)?;
                        crate::scratch::recycle_image(im);
                    }
                    (Filling::Labels(l), Output::Value(Value::Label(x))) => l.push(x),
                    (Filling::Device(d), Output::Device(p)) => {
                        stats.count_image(false);
                        d.push(p);
                    }
                    _ => unreachable!("an output keeps its type"),
                }
            }
        }
        buffers.took_good(epoch);
        self.samples.push(SampleInfo {
            index,
            path,
            label,
            params,
        });
        add_ns(&stats.assemble_ns, t0.elapsed());
        Ok(())
    }

    /// On the GPU path, submits the samples of the batch being filled that the device has
    /// not decoded (the feeding thread decodes the rest ahead: see [`ahead`]). A sample that
    /// can't be decoded (the device refused it, then the CPU failed on it) is taken out of
    /// the batch and reported like any bad sample; `Err` stops the run.
    fn settle_device(&mut self) -> Result<(), Error> {
        let Some(gpu) = self.links.gpu.clone() else {
            return Ok(());
        };
        let mut failed = Vec::new();
        for f in &mut self.filling {
            if let Filling::Device(d) = f {
                failed = gpu.resolve(d)?;
            }
        }
        let on_error = self.links.settings.on_error;
        for (i, kind) in failed.into_iter().rev() {
            // A rank's padding is always the batch's last samples.
            if i >= self.samples.len() - self.rank_padding {
                self.rank_padding -= 1;
            }
            let s = self.samples.remove(i);
            for f in &mut self.filling {
                match f {
                    Filling::Device(d) => d.remove(i),
                    Filling::Labels(l) => {
                        l.remove(i);
                    }
                    Filling::Images(_) => {}
                }
            }
            let e = SampleError {
                path: s.path.to_path_buf(),
                index: s.index,
                kind,
            };
            if on_error == OnError::Fail {
                return Err(Error::Sample(e));
            }
            self.report(e, false);
        }
        if self.samples.is_empty() {
            self.filling.clear();
        }
        Ok(())
    }
}
