//! The running pipeline: the [`Pipeline`] a consumer takes batches from, and its stages, one
//! file each in the order data flows: `read_stage` (reader threads) → `cpu_stage` (workers)
//! → `placement` (the batch buffers workers write into) → `gather` → `assembler` → the
//! consumer; on the GPU path `gpu_prep` (workers preparing samples on the host, `gpu_plan`)
//! replaces `cpu_stage`, and for the assembler `gpu_decode` decodes each batch on the device
//! and `gpu_stage` transforms it there. `start` wires the threads; [`stats`] counts; [`device`] chooses the device;
//! [`memory`] checks that the batches fit in memory before anything starts; [`threads`] reads
//! what the threads cost the process; `warnings` says what the start found worth telling.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use crate::cuda::gpu_device::GpuDevice;
use crate::cuda::pinned_pool::PinnedPool;
use crate::error::Error;
use crate::reader::dataset::Dataset;
use crate::reader::schedule::Position;
use crate::reader::source::Source;
use crate::scratch::ScratchPools;

use super::batch::{Batch, BatchBufferPool};
use super::graph::Graph;
use super::spec::PipelineSpec;

mod area_sizes;
mod assembler;
mod cpu_stage;
pub mod device;
mod fill;
mod gather;
mod gpu_chain;
mod gpu_chroma;
mod gpu_decode;
mod gpu_decoded;
mod gpu_huffman;
mod gpu_launch;
mod gpu_plan;
mod gpu_prep;
mod gpu_split;
mod gpu_stage;
mod gpu_staging;
mod handoff;
mod ledger;
pub mod memory;
mod pin;
mod place_buffer;
mod placement;
mod read_stage;
mod run_settings;
mod stage_loop;
mod start;
pub mod stats;
mod template;
pub mod threads;
mod upload;
mod warnings;
mod worker_gate;

#[cfg(test)]
mod batch_memory_support;
#[cfg(test)]
mod damaged_tests;
#[cfg(test)]
mod gpu_decode_tests;
#[cfg(test)]
mod gpu_huffman_tests;
#[cfg(test)]
mod gpu_tests;
#[cfg(test)]
mod pin_tests;
#[cfg(test)]
mod plan_tests;
#[cfg(test)]
mod split_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod upload_tests;
#[cfg(test)]
mod upsampling_tests;

pub use device::{choose_device, choose_device_for, DeviceReport};
pub use stats::{DecoderStats, EpochSummary, GpuStats, ModelledCounts, Stats, StatsSnapshot};
pub use warnings::{StartWarning, START_WARNINGS_TARGET};

/// A running pipeline: take batches with [`Pipeline::next_batch`], or iterate over it.
///
/// Iterate over `&mut pipeline` to keep the pipeline for its statistics afterwards
/// (iterating over `pipeline` itself consumes it):
/// ```
/// use stokehold::pipeline::{file, Pipeline};
/// let data = stokehold::builtin_data::ensure(&stokehold::builtin_data::default_dir())?;
/// let mut spec = file::load("pipelines/resnet50-eval.toml".as_ref())?.spec;
/// spec.set_data(&data);
/// let mut pipeline = Pipeline::new(spec)?;
/// for batch in &mut pipeline {
///     let batch = batch?;
///     let images = batch.images("images").unwrap();
///     println!("{:?}, {} bad samples", images.shape(), batch.skipped.len());
/// }
/// for epoch in pipeline.epoch_summaries() {
///     println!("epoch {}: {} images", epoch.epoch, epoch.images);
/// }
/// println!("{}", pipeline.device());
/// # Ok::<(), stokehold::Error>(())
/// ```
///
/// Dropping a pipeline stops and joins its threads, whatever they are doing, and frees its
/// pools; other pipelines in the process are not disturbed.
pub struct Pipeline {
    /// Processed samples on their way to the assembler (closed on drop to wake it).
    gathered: Arc<gather::Gather<cpu_stage::Processed>>,
    batches: Receiver<Result<Batch, Error>>,
    shutdown: Option<Sender<()>>,
    threads: Vec<JoinHandle<()>>,
    stats: Arc<Stats>,
    graph: Arc<Graph>,
    source: Source,
    per_epoch: usize,
    batches_per_epoch: usize,
    /// The pool this pipeline's batch buffers come from and go back to.
    batch_pool: Arc<BatchBufferPool>,
    device: DeviceReport,
    worker_threads: usize,
    /// The scratch pools of this pipeline's threads.
    scratch: Arc<ScratchPools>,
    /// The GPU stage, on the GPU path.
    gpu: Option<Arc<gpu_stage::GpuStage>>,
    /// The device the CPU path uploads its batches to (`batch_memory`).
    upload_device: Option<Arc<dyn GpuDevice>>,
    /// The pool of the CPU path's pinned host batches (`batch_memory = "pinned"`).
    pinned_pool: Option<Arc<PinnedPool>>,
    /// What the start found worth a warning.
    warnings: Vec<StartWarning>,
    finished: bool,
    /// Finished epochs whose summaries are logged.
    epochs_logged: usize,
}

impl Pipeline {
    /// Validates `spec`, lists the dataset and starts the threads.
    pub fn new(spec: PipelineSpec) -> Result<Pipeline, Error> {
        let graph = Graph::build(&spec).map_err(|e| crate::pipeline::file::spec_error(&spec, e))?;
        Self::from_graph(graph)
    }

    /// Starts a pipeline from a validated graph.
    pub fn from_graph(graph: Graph) -> Result<Pipeline, Error> {
        let settings = &graph.spec.settings;
        let start = Position::start(settings.seed, settings.batch);
        Self::start(graph, start)
    }

    /// Resumes a run at `position` (from [`Batch::resume`] of the last batch consumed):
    /// the batches that follow are the ones the uninterrupted run would have given.
    pub fn resume(spec: PipelineSpec, position: Position) -> Result<Pipeline, Error> {
        let graph = Graph::build(&spec).map_err(|e| crate::pipeline::file::spec_error(&spec, e))?;
        Self::resume_graph(graph, position)
    }

    /// Resumes a validated graph at `position`.
    pub fn resume_graph(graph: Graph, position: Position) -> Result<Pipeline, Error> {
        if position.seed != graph.spec.settings.seed {
            return Err(Error::Invalid {
                at: "setting 'seed'".into(),
                message: format!(
                    "the position was recorded with seed {}, the pipeline has seed {}",
                    position.seed, graph.spec.settings.seed
                ),
                help: Some("resume with the seed the run started with".into()),
            });
        }
        Self::start(graph, position)
    }

    /// The next batch; `None` once every epoch has been delivered (or after an error).
    pub fn next_batch(&mut self) -> Option<Result<Batch, Error>> {
        if self.finished {
            return None;
        }
        self.log_epoch_summaries();
        let queued = self.batches.len();
        let t0 = Instant::now();
        let r = self.batches.recv();
        stats::add_ns(&self.stats.consumer_wait_ns, t0.elapsed());
        self.count_queue(queued);
        self.finish(r.ok())
    }

    /// The next batch as [`Pipeline::next_batch`] gives it, or [`Waited::TimedOut`] when none
    /// came within `timeout`: for a consumer that must stay responsive while it waits (a
    /// Python caller checks for Ctrl-C between waits). Ask again after a timeout; nothing is
    /// lost.
    ///
    /// ```
    /// use std::time::Duration;
    /// use stokehold::pipeline::{file, run::Waited, Pipeline};
    /// let data = stokehold::builtin_data::ensure(&stokehold::builtin_data::default_dir())?;
    /// let mut spec = file::load("pipelines/resnet50-eval.toml".as_ref())?.spec;
    /// spec.set_data(&data);
    /// let mut pipeline = Pipeline::new(spec)?;
    /// let batch = loop {
    ///     match pipeline.next_batch_timeout(Duration::from_millis(100)) {
    ///         Waited::Ready(next) => break next,
    ///         Waited::TimedOut => continue, // check for an interruption here
    ///     }
    /// };
    /// assert!(batch.is_some_and(|b| b.is_ok()));
    /// # Ok::<(), stokehold::Error>(())
    /// ```
    pub fn next_batch_timeout(&mut self, timeout: Duration) -> Waited {
        if self.finished {
            return Waited::Ready(None);
        }
        self.log_epoch_summaries();
        let queued = self.batches.len();
        let t0 = Instant::now();
        let r = self.batches.recv_timeout(timeout);
        stats::add_ns(&self.stats.consumer_wait_ns, t0.elapsed());
        match r {
            Err(RecvTimeoutError::Timeout) => Waited::TimedOut,
            Ok(r) => {
                self.count_queue(queued);
                Waited::Ready(self.finish(Some(r)))
            }
            Err(RecvTimeoutError::Disconnected) => Waited::Ready(self.finish(None)),
        }
    }

    /// Counts how many batches were ready when one was asked for (a waiting consumer counts
    /// once, however many slices it waited in).
    fn count_queue(&self, queued: usize) {
        self.stats.queue_samples.fetch_add(1, Ordering::Relaxed);
        self.stats
            .queue_sum
            .fetch_add(queued as u64, Ordering::Relaxed);
    }

    /// What the consumer gets for a received item (`None`: the channel closed).
    fn finish(&mut self, r: Option<Result<Batch, Error>>) -> Option<Result<Batch, Error>> {
        let mut ledger = self.stats.ledger.lock().unwrap_or_else(|p| p.into_inner());
        let r = match r {
            Some(Ok(b)) => {
                ledger.batch_handed();
                Some(Ok(b))
            }
            Some(Err(e)) => {
                ledger.all_handed();
                self.finished = true;
                Some(Err(e))
            }
            None => {
                ledger.all_handed();
                self.finished = true;
                None
            }
        };
        drop(ledger);
        if self.finished {
            self.log_epoch_summaries();
        }
        r
    }

    /// Logs the summaries of the epochs finished with the batches handed out so far and not
    /// yet logged. An epoch's summary follows its last batch: it is logged when the consumer
    /// asks for the batch after (having printed or logged what it was handed), at the run's
    /// end, or when the pipeline is dropped — or now, by a consumer that knows an epoch
    /// ended without asking for the next batch (Python's loop over an epoch).
    pub fn log_epoch_summaries(&mut self) {
        let handed = self.stats.ledger.lock().map_or(0, |l| l.handed().epochs);
        if handed > self.epochs_logged {
            self.stats.log_epochs(self.epochs_logged..handed);
            self.epochs_logged = handed;
        }
    }

    /// Statistics so far.
    pub fn stats(&self) -> StatsSnapshot {
        if let Some(g) = &self.gpu {
            g.read_timings(self.finished);
        }
        self.stats
            .snapshot(self.graph.nodes.iter().map(|n| n.name.to_string()))
    }

    /// Summaries of the epochs finished so far: those whose last batch was handed out (and
    /// every one, once the run is over).
    pub fn epoch_summaries(&self) -> Vec<EpochSummary> {
        self.stats.epoch_summaries()
    }

    /// Samples per epoch for this rank (before skipping and the last-batch policy; the
    /// padding that evens out the ranks' batch counts not included).
    pub fn samples_per_epoch(&self) -> usize {
        self.per_epoch
    }

    /// Batches per epoch for this rank, the same on every one
    /// whatever bad samples cost it: with several ranks an epoch that skips cut short is
    /// evened out with batches of padding (flagged in [`Batch::padded`]). A single process is
    /// not padded: under `on_error = "skip"` its epoch with bad samples may have fewer.
    pub fn batches_per_epoch(&self) -> usize {
        self.batches_per_epoch
    }

    /// The pool this pipeline's batch buffers come from: a delivered batch's image buffers
    /// go back to it when the batch (and anything sharing its buffers) is dropped.
    pub fn batch_pool(&self) -> &Arc<BatchBufferPool> {
        &self.batch_pool
    }

    /// The listed data set of files (empty for a shard reader: see [`Pipeline::source`]).
    pub fn dataset(&self) -> &Dataset {
        static NO_FILES: Dataset = Dataset {
            entries: Vec::new(),
            classes: Vec::new(),
            warnings: Vec::new(),
        };
        self.source.dataset().map_or(&NO_FILES, |d| &**d)
    }

    /// Class names by label, whatever the data set is (see [`Source::class_names`]):
    ///
    /// ```
    /// use stokehold::pipeline::{file, Pipeline};
    /// let data = stokehold::builtin_data::ensure(&stokehold::builtin_data::default_dir())?;
    /// let mut spec = file::load("pipelines/resnet50-eval.toml".as_ref())?.spec;
    /// spec.set_data(&data);
    /// let pipeline = Pipeline::new(spec)?;
    /// // Label i is the i-th class folder in sorted order.
    /// let mut folders = stokehold::builtin_data::CLASSES.to_vec();
    /// folders.sort();
    /// assert_eq!(pipeline.class_names(), folders);
    /// # Ok::<(), stokehold::Error>(())
    /// ```
    pub fn class_names(&self) -> Vec<String> {
        self.source.class_names()
    }

    /// The data set: files, or tar shards with their sample counts.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// The validated graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Which path runs, and why.
    pub fn device(&self) -> &DeviceReport {
        &self.device
    }

    /// The device batches are handed out on: the GPU path's, the one the CPU path uploads
    /// to, or the one that pins its host batches (`batch_memory`); `None` for batches in
    /// ordinary host memory. For a consumer's streams ([`GpuDevice::new_stream`],
    /// [`crate::pipeline::batch::DeviceTensor::use_on_stream`],
    /// [`crate::pipeline::batch::PinnedTensor::use_on_stream`]).
    pub fn gpu_device(&self) -> Option<Arc<dyn GpuDevice>> {
        let gpu = self.gpu.as_ref().map(|g| g.device().clone());
        let pin = || self.pinned_pool.as_ref().map(|p| p.device().clone());
        gpu.or_else(|| self.upload_device.clone()).or_else(pin)
    }

    /// Idle buffers in the GPU path's device pool (`None` on the CPU path): a delivered
    /// batch's device memory goes back there when the batch (and every tensor sharing its
    /// memory) is dropped.
    pub fn idle_device_buffers(&self) -> Option<usize> {
        self.gpu.as_ref().map(|g| g.idle_buffers())
    }

    /// Pinned buffers back in the pool of pinned host batches (`None` unless `batch_memory
    /// = "pinned"`): a delivered batch's pinned memory goes back there when the batch (and
    /// every tensor sharing its memory) is dropped.
    pub fn idle_pinned_buffers(&self) -> Option<usize> {
        self.pinned_pool.as_ref().map(|p| p.back())
    }

    /// Batches made and waiting for the consumer: the queue is full at the `prefetch`
    /// setting, when the pipeline's threads have nothing to do until the next batch is taken.
    pub fn ready_batches(&self) -> usize {
        self.batches.len()
    }

    /// What the start found worth a warning (each logged too, the first time in the process):
    /// problems met listing the
    /// data, labels the data set doesn't have, a build that makes everything slower.
    pub fn warnings(&self) -> &[StartWarning] {
        &self.warnings
    }

    /// Worker threads in use (on the GPU path, those the worker gate lets run).
    pub fn worker_threads(&self) -> usize {
        self.gpu
            .as_ref()
            .map_or(self.worker_threads, |g| g.gate.running())
    }

    /// The scratch pools this pipeline's threads recycle sample buffers in (its own: no
    /// other pipeline uses, sizes or empties them).
    pub fn scratch_pools(&self) -> &Arc<ScratchPools> {
        &self.scratch
    }
}

/// What [`Pipeline::next_batch_timeout`] gave.
#[derive(Debug)]
pub enum Waited {
    /// What [`Pipeline::next_batch`] would have given: the next batch, the error that ended
    /// the run, or `None` at the end.
    Ready(Option<Result<Batch, Error>>),
    /// No batch came within the time given.
    TimedOut,
}

/// Batches until the last epoch ends or an error (the error is the last item). For
/// `for batch in &mut pipeline`, the standard library's iterator over `&mut I` applies.
impl Iterator for Pipeline {
    type Item = Result<Batch, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_batch()
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        // Disconnecting the shutdown channel wakes every thread blocked in a select; closing
        // the gathered results wakes the assembler.
        self.shutdown.take();
        self.gathered.close();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // The epochs the consumer finished and did not ask past still get their summaries
        // (after the join: the assembler has recorded every epoch end it reached).
        self.log_epoch_summaries();
    }
}
