//! The threaded executor: reader threads, worker threads and an assembler.
//!
//! ```text
//! readers --loaded--> workers --gathered--> assembler --batches(prefetch)--> consumer
//!    ^                                          |
//!    +---------------- credits -----------------+
//! ```
//! The readers walk the epochs' sample orders (one shared plan) and may only take the next
//! sample while they hold a credit; the assembler returns credits, a few at a time, once it
//! has taken those samples in order. So at most `credits` samples are in flight, and with the
//! bounded batch queue memory stays bounded whatever the consumer does. Results are reordered
//! by sequence number, so batches are the same whatever the thread count. Dropping the
//! [`Pipeline`] disconnects the shutdown channel every blocking call also waits on, closes the
//! gathered results, and joins every thread.

use std::any::Any;
use std::collections::{BTreeMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, select, unbounded, Receiver, Sender};

use crate::error::{DecodeError, Error, SampleError, SampleErrorKind};
use crate::ops::{OpParams, SampleContext};
use crate::reader::{epoch_order, Dataset};
use crate::rng::{domain, key};
use crate::value::{Value, ValueType};

use super::batch::{Batch, BatchOutput, BufferPool, SampleInfo};
use super::gather::{Gather, SenderGuard};
use super::graph::Graph;
use super::slots::{BatchSlots, ImageFill, Placed};
use super::spec::{DeviceChoice, LastBatch, OnError, PipelineSpec};

/// Counters and stage times, shared by all threads.
#[derive(Debug, Default)]
pub struct Stats {
    images: AtomicU64,
    skipped: AtomicU64,
    replaced: AtomicU64,
    dropped: AtomicU64,
    padded: AtomicU64,
    batches: AtomicU64,
    read_ns: AtomicU64,
    read_bytes: AtomicU64,
    op_ns: Vec<AtomicU64>,
    assemble_ns: AtomicU64,
    in_place: AtomicU64,
    batch_images: AtomicU64,
    consumer_wait_ns: AtomicU64,
    skipped_by_cause: Mutex<BTreeMap<&'static str, u64>>,
    epochs: Mutex<Vec<EpochSummary>>,
    queue_samples: AtomicU64,
    queue_sum: AtomicU64,
}

/// What happened in one epoch.
#[derive(Debug, Clone, Default)]
pub struct EpochSummary {
    /// The epoch.
    pub epoch: u64,
    /// Samples delivered (padding excluded).
    pub images: u64,
    /// Batches delivered.
    pub batches: u64,
    /// Bad samples skipped.
    pub skipped: u64,
    /// Bad samples replaced.
    pub replaced: u64,
    /// Good samples left out by `last_batch = "drop"`.
    pub dropped: u64,
    /// Every bad sample met in the epoch (skipped or replaced), with its path and cause,
    /// including those after the epoch's last batch, which no batch carries.
    pub errors: Vec<SampleError>,
}

/// Where a run stands: enough to resume it and get the same remaining batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Position {
    /// The seed of the run (resuming with another seed is refused).
    pub seed: u64,
    /// Epoch of the next sample.
    pub epoch: u64,
    /// Position of the next sample in that epoch's order.
    pub sample: usize,
    /// Index the next batch will have in its epoch.
    pub batch: usize,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}:{}:{}",
            self.seed, self.epoch, self.sample, self.batch
        )
    }
}

impl std::str::FromStr for Position {
    type Err = String;

    fn from_str(s: &str) -> Result<Position, String> {
        let parts: Vec<&str> = s.split(':').collect();
        let bad = || format!("'{s}' is not a position (seed:epoch:sample:batch)");
        if parts.len() != 4 {
            return Err(bad());
        }
        Ok(Position {
            seed: parts[0].parse().map_err(|_| bad())?,
            epoch: parts[1].parse().map_err(|_| bad())?,
            sample: parts[2].parse().map_err(|_| bad())?,
            batch: parts[3].parse().map_err(|_| bad())?,
        })
    }
}

/// A copy of the statistics at one moment.
#[derive(Debug, Clone, Default)]
pub struct StatsSnapshot {
    /// Samples delivered (padding excluded).
    pub images: u64,
    /// Bad samples skipped.
    pub skipped: u64,
    /// Bad samples replaced by others (`on_error = "replace"`).
    pub replaced: u64,
    /// Good samples left out by `last_batch = "drop"`.
    pub dropped: u64,
    /// Repeats added by `last_batch = "pad"`.
    pub padded: u64,
    /// Batches delivered.
    pub batches: u64,
    /// Mean number of ready batches in the queue when the consumer asked for one.
    pub mean_queue_depth: f64,
    /// Per-epoch summaries, for finished epochs.
    pub epochs: Vec<EpochSummary>,
    /// Time the reader threads spent reading files (summed over threads).
    pub read: Duration,
    /// Bytes read.
    pub read_bytes: u64,
    /// Time spent in each operator (summed over threads), by operator name.
    pub ops: Vec<(String, Duration)>,
    /// Time spent assembling batches.
    pub assemble: Duration,
    /// Images put into batches (padding excluded), counted per image output.
    pub batch_images: u64,
    /// Of those, the images a worker wrote straight into their place in the batch (no copy).
    pub in_place: u64,
    /// Time the consumer waited inside `next_batch`.
    pub consumer_wait: Duration,
    /// Skipped samples by cause.
    pub skipped_by_cause: BTreeMap<&'static str, u64>,
}

fn add_ns(a: &AtomicU64, d: Duration) {
    a.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
}

fn ns(a: &AtomicU64) -> Duration {
    Duration::from_nanos(a.load(Ordering::Relaxed))
}

/// The next thing a reader does, from the shared [`Plan`].
#[derive(Debug, Clone, Copy)]
enum Task {
    Sample {
        seq: u64,
        epoch: u64,
        pos: usize,
        index: usize,
    },
    EpochEnd {
        seq: u64,
        epoch: u64,
    },
}

/// Walks the epochs' orders: the next sample (or epoch end) to read, in sequence.
struct Plan {
    entries: usize,
    seed: u64,
    epochs: Option<u64>,
    shuffle: bool,
    shard: (usize, usize),
    seq: u64,
    epoch: u64,
    order: Vec<usize>,
    /// Position in `order` of the next sample; `order.len()` means the epoch end is next.
    pos: usize,
}

impl Plan {
    fn new(graph: &Graph, entries: usize, start: Position) -> Plan {
        let r = &graph.reader;
        let s = &graph.spec.settings;
        let mut p = Plan {
            entries,
            seed: s.seed,
            epochs: s.epochs,
            shuffle: r.shuffle,
            shard: (r.shard_id, r.num_shards),
            seq: 0,
            epoch: start.epoch,
            order: Vec::new(),
            pos: start.sample,
        };
        p.order = p.order_of(start.epoch);
        p
    }

    fn order_of(&self, epoch: u64) -> Vec<usize> {
        epoch_order(
            self.entries,
            self.seed,
            epoch,
            self.shuffle,
            self.shard.0,
            self.shard.1,
        )
    }

    /// The next task; `None` after the last epoch's end.
    fn next_task(&mut self) -> Option<Task> {
        if self.epochs.is_some_and(|n| self.epoch >= n) {
            return None;
        }
        let seq = self.seq;
        self.seq += 1;
        if let Some(&index) = self.order.get(self.pos) {
            self.pos += 1;
            return Some(Task::Sample {
                seq,
                epoch: self.epoch,
                pos: self.pos - 1,
                index,
            });
        }
        let epoch = self.epoch;
        self.epoch += 1;
        self.pos = 0;
        if self.epochs.is_none_or(|n| self.epoch < n) {
            self.order = self.order_of(self.epoch);
        }
        Some(Task::EpochEnd { seq, epoch })
    }
}

/// Per-sample work between the threads.
#[derive(Debug)]
enum Item {
    Sample {
        seq: u64,
        epoch: u64,
        pos: usize,
        index: usize,
        bytes: Result<Arc<Vec<u8>>, SampleErrorKind>,
    },
    EpochEnd {
        seq: u64,
        epoch: u64,
    },
}

struct Done {
    seq: u64,
    epoch: u64,
    /// Position of the sample in its epoch's order.
    pos: usize,
    /// The sample delivered (a replacement's index under `on_error = "replace"`).
    index: usize,
    /// Errors of samples this one replaced.
    replaced: Vec<SampleError>,
    result: Result<SampleOutput, Failure>,
}

#[derive(Debug)]
enum Failure {
    Sample(SampleErrorKind),
    Panic(String),
    EpochEnd,
}

/// Which path a pipeline runs on, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceReport {
    /// "cpu" or "gpu".
    pub device: &'static str,
    /// Why this path was taken, for `--device auto`.
    pub reason: String,
}

/// Why the GPU path isn't taken, for `--device auto|gpu`: what the probe found, and that
/// the executor's GPU stage is not wired yet (the kernels and nvJPEG layer exist).
fn gpu_unavailable_reason(device_id: usize) -> String {
    match crate::cuda::probe(device_id) {
        Ok(gpu) => format!(
            "found {} (device {}, sm_{}{}), but this build's executor has no GPU stage yet",
            gpu.name, gpu.device_id, gpu.compute_capability.0, gpu.compute_capability.1
        ),
        Err(Error::GpuUnavailable(m)) => m,
        Err(e) => e.to_string(),
    }
}

/// A running pipeline: iterate over it (or call [`Pipeline::next_batch`]) to get batches.
///
/// ```no_run
/// use stokehold::pipeline::{file, Pipeline};
/// let loaded = file::load("pipelines/resnet50-train.toml".as_ref())?;
/// let mut spec = loaded.spec;
/// stokehold::pipeline::executor::set_data_root(&mut spec, "photos/".as_ref());
/// for batch in Pipeline::new(spec)? {
///     let batch = batch?;
///     let images = batch.images("images").unwrap();
///     println!("{:?} {}", images.shape(), batch.skipped.len());
/// }
/// # Ok::<(), stokehold::Error>(())
/// ```
pub struct Pipeline {
    /// Finished samples on their way to the assembler (closed on drop to wake it).
    gathered: Arc<Gather<Done>>,
    batches: Receiver<Result<Batch, Error>>,
    shutdown: Option<Sender<()>>,
    threads: Vec<JoinHandle<()>>,
    stats: Arc<Stats>,
    graph: Arc<Graph>,
    dataset: Arc<Dataset>,
    per_epoch: usize,
    device: DeviceReport,
    worker_threads: usize,
    finished: bool,
}

/// Points the pipeline's file reader at `data`: a folder (its `root`) or a list file.
pub fn set_data_root(spec: &mut PipelineSpec, data: &Path) {
    let abs = if data.is_absolute() {
        data.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(data)
    };
    for op in spec
        .ops
        .iter_mut()
        .filter(|o| o.kind == crate::ops::READER_KIND)
    {
        if abs.is_file() {
            op.args
                .insert("list".into(), abs.to_string_lossy().into_owned().into());
            op.args.insert("root".into(), "".into());
        } else {
            op.args
                .insert("root".into(), abs.to_string_lossy().into_owned().into());
            op.args.remove("list");
        }
    }
}

/// True when the spec's reader has neither `root` nor `list`.
pub fn has_no_data(spec: &PipelineSpec) -> bool {
    spec.ops
        .iter()
        .filter(|o| o.kind == crate::ops::READER_KIND)
        .all(|o| {
            let empty = |k: &str| match o.args.get(k) {
                None => true,
                Some(crate::ops::ArgValue::Str(s)) => s.is_empty(),
                Some(_) => false,
            };
            empty("root") && empty("list")
        })
}

impl Pipeline {
    /// Validates `spec`, lists the dataset and starts the threads.
    pub fn new(spec: PipelineSpec) -> Result<Pipeline, Error> {
        let graph = Graph::build(&spec).map_err(|e| match &spec.file {
            Some(f) => Error::Config {
                file: f.clone(),
                line: 0,
                column: 0,
                message: format!("{}: {}", spec.describe(&e.at), e.message),
                help: e.help.clone(),
            },
            None => Error::Invalid {
                at: spec.describe(&e.at),
                message: e.message,
                help: e.help,
            },
        })?;
        Self::from_graph(graph)
    }

    /// Starts a pipeline from a validated graph.
    pub fn from_graph(graph: Graph) -> Result<Pipeline, Error> {
        let seed = graph.spec.settings.seed;
        Self::start(
            graph,
            Position {
                seed,
                ..Position::default()
            },
        )
    }

    /// Resumes a run at `position` (from [`Batch::resume`] of the last batch consumed):
    /// the batches that follow are the ones the uninterrupted run would have given.
    pub fn resume(spec: PipelineSpec, position: Position) -> Result<Pipeline, Error> {
        let graph = Graph::build(&spec).map_err(|e| Error::Invalid {
            at: spec.describe(&e.at),
            message: e.message,
            help: e.help,
        })?;
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

    fn start(mut graph: Graph, start: Position) -> Result<Pipeline, Error> {
        let settings = graph.spec.settings.clone();
        let device = match settings.device {
            DeviceChoice::Cpu => DeviceReport {
                device: "cpu",
                reason: "--device cpu".into(),
            },
            DeviceChoice::Auto => DeviceReport {
                device: "cpu",
                reason: format!(
                    "{}; the CPU path runs everything",
                    gpu_unavailable_reason(settings.device_id)
                ),
            },
            DeviceChoice::Gpu => {
                return Err(Error::GpuUnavailable(gpu_unavailable_reason(
                    settings.device_id,
                )))
            }
        };
        // Relative reader paths resolve against the pipeline file's folder.
        if let Some(dir) = graph.spec.file.as_ref().and_then(|f| f.parent()) {
            let r = &mut graph.reader;
            if !r.root.as_os_str().is_empty() && r.root.is_relative() {
                r.root = dir.join(&r.root);
            }
            if let Some(l) = r.list.as_mut().filter(|l| l.is_relative()) {
                *l = dir.join(&*l);
            }
        }
        let dataset = Arc::new(Dataset::list(&graph.reader)?);
        for w in &dataset.warnings {
            tracing::warn!("{w}");
        }
        let r = &graph.reader;
        let per_epoch =
            epoch_order(dataset.entries.len(), 0, 0, false, r.shard_id, r.num_shards).len();
        if r.last_batch == LastBatch::Drop && per_epoch < settings.batch {
            return Err(Error::Dataset(format!(
                "this shard has {per_epoch} samples per epoch, fewer than one batch of {} with last_batch = \"drop\"",
                settings.batch
            )));
        }
        let worker_threads = settings
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let graph = Arc::new(graph);
        let stats = Arc::new(Stats {
            op_ns: graph.nodes.iter().map(|_| AtomicU64::new(0)).collect(),
            ..Stats::default()
        });
        let (shutdown_tx, shutdown_rx) = bounded::<()>(0);
        // Enough samples in flight for every worker to stay busy while a batch is assembled.
        let credits = settings.batch + 4 * worker_threads + 8 + credit_chunk(settings.batch);
        crate::scratch::keep_up_to(credits);
        let (credit_tx, credit_rx) = bounded::<()>(credits);
        for _ in 0..credits {
            credit_tx.send(()).expect("capacity");
        }
        let (loaded_tx, loaded_rx) = unbounded::<Item>();
        // Workers write final images straight into the batch buffers the assembler hands out.
        let placing = Arc::new(Placing {
            slots: BatchSlots::new(
                settings.batch,
                (start.epoch, start.sample),
                Arc::new(BufferPool::default()),
            ),
            placeable: placeable_outputs(&graph),
        });
        let gathered = Arc::new(Gather::<Done>::new(worker_threads));
        let (batch_tx, batch_rx) = bounded::<Result<Batch, Error>>(settings.prefetch);
        let mut threads = Vec::new();

        // Readers: file reading runs ahead of decoding.
        let max_bytes = graph
            .nodes
            .iter()
            .filter_map(|n| n.op.max_input_bytes())
            .max()
            .unwrap_or(crate::decode::Limits::default().max_file_bytes);
        let io_threads = (worker_threads / 4).clamp(1, 4);
        let plan = Arc::new(Mutex::new(Plan::new(&graph, dataset.entries.len(), start)));
        for t in 0..io_threads {
            let (plan, credits, out, sd, ds, st) = (
                plan.clone(),
                credit_rx.clone(),
                loaded_tx.clone(),
                shutdown_rx.clone(),
                dataset.clone(),
                stats.clone(),
            );
            threads.push(spawn(&format!("stokehold-read-{t}"), move || loop {
                // One credit per sample or epoch end: the assembler gives them back as it
                // takes samples, which bounds the samples in flight.
                select! {
                    recv(credits) -> c => if c.is_err() { return },
                    recv(sd) -> _ => return,
                }
                let task = match plan.lock() {
                    Ok(mut p) => p.next_task(),
                    Err(_) => None,
                };
                let item = match task {
                    None => return,
                    Some(Task::EpochEnd { seq, epoch }) => Item::EpochEnd { seq, epoch },
                    Some(Task::Sample {
                        seq,
                        epoch,
                        pos,
                        index,
                    }) => Item::Sample {
                        seq,
                        epoch,
                        pos,
                        index,
                        bytes: read_sample(&ds.entries[index].path, max_bytes, &st),
                    },
                };
                if out.send(item).is_err() {
                    return;
                }
            }));
        }
        drop(loaded_tx);
        // Workers: decode and transform one sample at a time.
        for t in 0..worker_threads {
            let (inp, out, sd, ds, g, st, pl) = (
                loaded_rx.clone(),
                gathered.clone(),
                shutdown_rx.clone(),
                dataset.clone(),
                graph.clone(),
                stats.clone(),
                placing.clone(),
            );
            threads.push(spawn(&format!("stokehold-worker-{t}"), move || {
                let _leaving = SenderGuard(&*out);
                loop {
                    let item = select! {
                        recv(inp) -> i => match i { Ok(i) => i, Err(_) => return },
                        recv(sd) -> _ => return,
                    };
                    let done = match item {
                        Item::EpochEnd { seq, epoch } => Done {
                            seq,
                            epoch,
                            pos: 0,
                            index: 0,
                            replaced: Vec::new(),
                            result: Err(Failure::EpochEnd),
                        },
                        Item::Sample {
                            seq,
                            epoch,
                            pos,
                            index,
                            bytes,
                        } => process(&g, &ds, &st, &pl, max_bytes, seq, epoch, pos, index, bytes),
                    };
                    // The assembler needs epoch ends and failures at once; good samples it
                    // takes a batch at a time.
                    let urgent = done.result.is_err();
                    if !out.push(done, urgent) {
                        return;
                    }
                }
            }));
        }
        // Assembler.
        {
            let (sd, ds, g, st, gathered, pl) = (
                shutdown_rx.clone(),
                dataset.clone(),
                graph.clone(),
                stats.clone(),
                gathered.clone(),
                placing,
            );
            threads.push(spawn("stokehold-assembler", move || {
                Assembler::new(g, ds, st, pl, batch_tx, credit_tx, sd, start).run(&gathered);
                // Workers stop once nobody takes their results.
                gathered.close();
            }));
        }
        Ok(Pipeline {
            gathered,
            batches: batch_rx,
            shutdown: Some(shutdown_tx),
            threads,
            stats,
            graph,
            dataset,
            per_epoch,
            device,
            worker_threads,
            finished: false,
        })
    }

    /// The next batch; `None` once every epoch has been delivered (or after an error).
    pub fn next_batch(&mut self) -> Option<Result<Batch, Error>> {
        if self.finished {
            return None;
        }
        self.stats.queue_samples.fetch_add(1, Ordering::Relaxed);
        self.stats
            .queue_sum
            .fetch_add(self.batches.len() as u64, Ordering::Relaxed);
        let t0 = Instant::now();
        let r = self.batches.recv();
        add_ns(&self.stats.consumer_wait_ns, t0.elapsed());
        match r {
            Ok(Ok(b)) => Some(Ok(b)),
            Ok(Err(e)) => {
                self.finished = true;
                Some(Err(e))
            }
            Err(_) => {
                self.finished = true;
                None
            }
        }
    }

    /// Statistics so far.
    pub fn stats(&self) -> StatsSnapshot {
        let s = &self.stats;
        StatsSnapshot {
            images: s.images.load(Ordering::Relaxed),
            skipped: s.skipped.load(Ordering::Relaxed),
            replaced: s.replaced.load(Ordering::Relaxed),
            mean_queue_depth: {
                let n = s.queue_samples.load(Ordering::Relaxed);
                if n == 0 {
                    0.0
                } else {
                    s.queue_sum.load(Ordering::Relaxed) as f64 / n as f64
                }
            },
            epochs: s.epochs.lock().map(|v| v.clone()).unwrap_or_default(),
            dropped: s.dropped.load(Ordering::Relaxed),
            padded: s.padded.load(Ordering::Relaxed),
            batches: s.batches.load(Ordering::Relaxed),
            read: ns(&s.read_ns),
            read_bytes: s.read_bytes.load(Ordering::Relaxed),
            ops: self
                .graph
                .nodes
                .iter()
                .zip(&s.op_ns)
                .map(|(n, t)| (n.name.to_string(), ns(t)))
                .collect(),
            assemble: ns(&s.assemble_ns),
            batch_images: s.batch_images.load(Ordering::Relaxed),
            in_place: s.in_place.load(Ordering::Relaxed),
            consumer_wait: ns(&s.consumer_wait_ns),
            skipped_by_cause: s
                .skipped_by_cause
                .lock()
                .map(|m| m.clone())
                .unwrap_or_default(),
        }
    }

    /// Summaries of the epochs finished so far.
    pub fn epoch_summaries(&self) -> Vec<EpochSummary> {
        self.stats
            .epochs
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default()
    }

    /// Samples per epoch for this shard (before skipping and the last-batch policy).
    pub fn samples_per_epoch(&self) -> usize {
        self.per_epoch
    }

    /// The listed dataset.
    pub fn dataset(&self) -> &Dataset {
        &self.dataset
    }

    /// The validated graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Which path runs, and why.
    pub fn device(&self) -> &DeviceReport {
        &self.device
    }

    /// Worker threads in use.
    pub fn worker_threads(&self) -> usize {
        self.worker_threads
    }
}

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
        crate::scratch::release();
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(f)
        .expect("spawning a pipeline thread")
}

fn panic_message(p: Box<dyn Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

type SampleOutput = (Vec<Output>, Vec<(Arc<str>, OpParams)>);

/// One pipeline output of a sample: a value, or an image its operator wrote straight into
/// a slot of a batch buffer.
enum Output {
    Value(Value),
    Placed(Placed),
}

/// For each node, the pipeline output it may write straight into a batch slot: its one
/// output, an image of fixed type and size that is a pipeline output (once) and no other
/// node's input.
fn placeable_outputs(graph: &Graph) -> Vec<Option<usize>> {
    graph
        .nodes
        .iter()
        .map(|node| {
            let &[s] = node.outputs.as_slice() else {
                return None;
            };
            let fixed = matches!(
                graph.edge_types[s],
                ValueType::Image(t) if t.size.is_some() && t.channels.is_some()
            );
            let read_later = graph.nodes.iter().any(|n| n.inputs.contains(&s));
            let mut as_output = graph.outputs.iter().enumerate().filter(|(_, &o)| o == s);
            match (as_output.next(), as_output.next()) {
                (Some((i, _)), None) if fixed && !read_later => Some(i),
                _ => None,
            }
        })
        .collect()
}

/// Credits the assembler gives back at once (see [`Assembler::return_credit`]).
fn credit_chunk(batch: usize) -> usize {
    (batch / 4).clamp(1, 16)
}

/// Finished samples the assembler waits for before it wakes (see [`Assembler::run`]).
const GATHER_AT_ONCE: usize = 8;

/// How many replacements `on_error = "replace"` tries before giving up on a position.
const MAX_REPLACEMENTS: u64 = 16;

/// Opens a file for reading without waiting on it: a FIFO opened normally would block until
/// a writer came. One path lookup serves both the type check and the read.
fn open_without_blocking(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Regular files ignore O_NONBLOCK; only the type check below ever sees the FIFO.
        options.custom_flags(libc::O_NONBLOCK);
    }
    options.open(path)
}

/// Reads one file, refusing what isn't a regular file (a FIFO would block forever, a
/// directory can't be read) and anything over `max_bytes`, before allocating for it.
fn read_sample(
    path: &Path,
    max_bytes: u64,
    stats: &Stats,
) -> Result<Arc<Vec<u8>>, SampleErrorKind> {
    use std::io::Read;
    let t0 = Instant::now();
    let read = || -> Result<Vec<u8>, SampleErrorKind> {
        let file = open_without_blocking(path).map_err(|e| SampleErrorKind::Read(e.to_string()))?;
        let meta = file
            .metadata()
            .map_err(|e| SampleErrorKind::Read(e.to_string()))?;
        if !meta.is_file() {
            let what = if meta.is_dir() {
                "a directory"
            } else {
                "not a regular file"
            };
            return Err(SampleErrorKind::Read(format!("{what}, not an image file")));
        }
        if meta.len() > max_bytes {
            return Err(SampleErrorKind::Decode(DecodeError::Limits(format!(
                "file is {} bytes, over the limit of {max_bytes} (max_file_bytes)",
                meta.len()
            ))));
        }
        // One byte more than the size, so read_to_end sees the end without growing.
        let mut buf = crate::scratch::empty::<u8>(meta.len() as usize + 1);
        file.take(max_bytes + 1)
            .read_to_end(&mut buf)
            .map_err(|e| SampleErrorKind::Read(e.to_string()))?;
        if buf.len() as u64 > max_bytes {
            return Err(SampleErrorKind::Decode(DecodeError::Limits(format!(
                "file grew over the limit of {max_bytes} bytes (max_file_bytes) while being read"
            ))));
        }
        Ok(buf)
    };
    let r = read();
    add_ns(&stats.read_ns, t0.elapsed());
    if let Ok(b) = &r {
        stats
            .read_bytes
            .fetch_add(b.len() as u64, Ordering::Relaxed);
    }
    r.map(Arc::new)
}

/// Runs one sample, catching panics; under `on_error = "replace"` substitutes other samples
/// (chosen from the seed, epoch, position and attempt) until one succeeds.
#[allow(clippy::too_many_arguments)]
fn process(
    g: &Graph,
    ds: &Dataset,
    st: &Stats,
    placing: &Placing,
    max_bytes: u64,
    seq: u64,
    epoch: u64,
    pos: usize,
    planned: usize,
    bytes: Result<Arc<Vec<u8>>, SampleErrorKind>,
) -> Done {
    let run = |index: usize,
               bytes: Result<Arc<Vec<u8>>, SampleErrorKind>|
     -> Result<SampleOutput, Failure> {
        let bytes = bytes.map_err(Failure::Sample)?;
        let e = &ds.entries[index];
        catch_unwind(AssertUnwindSafe(|| {
            run_sample(g, st, placing, (epoch, pos), index, &e.path, e.label, bytes)
        }))
        .unwrap_or_else(|p| Err(Failure::Panic(panic_message(p))))
    };
    let mut index = planned;
    let mut result = run(index, bytes);
    let mut replaced = Vec::new();
    if g.spec.settings.on_error == OnError::Replace {
        let n = ds.entries.len() as u64;
        let mut attempt = 0;
        while let Err(Failure::Sample(kind)) = &result {
            if attempt == MAX_REPLACEMENTS {
                break;
            }
            replaced.push(SampleError {
                path: ds.entries[index].path.clone(),
                index,
                kind: kind.clone(),
            });
            attempt += 1;
            let k = key(&[
                domain::REPLACE,
                g.spec.settings.seed,
                epoch,
                pos as u64,
                attempt,
            ]);
            index = (k % n) as usize;
            result = run(index, read_sample(&ds.entries[index].path, max_bytes, st));
        }
    }
    Done {
        seq,
        epoch,
        pos,
        index,
        replaced,
        result,
    }
}

/// Where workers may write final images: the batch buffers and which nodes may.
struct Placing {
    slots: BatchSlots,
    /// By node, see [`placeable_outputs`].
    placeable: Vec<Option<usize>>,
}

/// Runs the per-sample operators of `graph` on one sample (`at`: its epoch and position
/// in the epoch's order).
#[allow(clippy::too_many_arguments)]
fn run_sample(
    graph: &Graph,
    stats: &Stats,
    placing: &Placing,
    at: (u64, usize),
    index: usize,
    path: &Path,
    label: i64,
    bytes: Arc<Vec<u8>>,
) -> Result<SampleOutput, Failure> {
    let mut slots: Vec<Option<Value>> = vec![None; graph.edge_names.len()];
    slots[graph.reader_encoded] = Some(Value::Encoded(bytes));
    if let Some(l) = graph.reader_labels {
        slots[l] = Some(Value::Label(label));
    }
    let epoch = at.0;
    let mut params = Vec::new();
    let mut placed: Vec<Option<Placed>> = vec![None; graph.outputs.len()];
    for (k, node) in graph.nodes.iter().enumerate() {
        let inputs: Vec<Value> = node
            .inputs
            .iter()
            .zip(&node.last_use)
            .map(|(&s, &last)| {
                if last {
                    slots[s].take()
                } else {
                    slots[s].clone()
                }
                .expect("inputs are produced before use")
            })
            .collect();
        let mut ctx = SampleContext {
            seed: graph.spec.settings.seed,
            epoch,
            index,
            path,
            op_key: node.key,
            op_name: &node.name,
            params: &mut params,
        };
        let t0 = Instant::now();
        let outs = match placing.placeable[k] {
            Some(i) => {
                let mut offer = placing.slots.offer(at.0, at.1, i);
                let outs = node.op.run_cpu_into(inputs, &mut ctx, &mut offer);
                // The slot's lease ends here, before the sample is handed on.
                placed[i] = offer.placed();
                outs
            }
            None => node.op.run_cpu(inputs, &mut ctx),
        }
        .map_err(Failure::Sample)?;
        add_ns(&stats.op_ns[k], t0.elapsed());
        for (&s, v) in node.outputs.iter().zip(outs) {
            slots[s] = Some(v);
        }
    }
    let outputs = graph
        .outputs
        .iter()
        .zip(placed)
        .map(|(&s, p)| match p {
            Some(p) => Output::Placed(p),
            None => Output::Value(slots[s].take().expect("outputs are produced")),
        })
        .collect();
    Ok((outputs, params))
}

fn count_image(stats: &Stats, in_place: bool) {
    stats.batch_images.fetch_add(1, Ordering::Relaxed);
    if in_place {
        stats.in_place.fetch_add(1, Ordering::Relaxed);
    }
}

/// One output of the batch being filled.
enum Filling {
    Images(ImageFill),
    Labels(Vec<i64>),
}

struct Assembler {
    graph: Arc<Graph>,
    dataset: Arc<Dataset>,
    stats: Arc<Stats>,
    out: Sender<Result<Batch, Error>>,
    credits: Sender<()>,
    /// Credits earned but not yet given back (fewer than a chunk).
    owed_credits: usize,
    shutdown: Receiver<()>,
    names: Arc<[String]>,
    /// The batch being filled: its outputs (empty until its first sample) and samples.
    filling: Vec<Filling>,
    samples: Vec<SampleInfo>,
    skipped: Vec<SampleError>,
    reported: HashSet<usize>,
    batch_in_epoch: usize,
    /// Position in the current epoch's order after the last sample taken.
    next_pos: usize,
    summary: EpochSummary,
    placing: Arc<Placing>,
}

impl Assembler {
    #[allow(clippy::too_many_arguments)]
    fn new(
        graph: Arc<Graph>,
        dataset: Arc<Dataset>,
        stats: Arc<Stats>,
        placing: Arc<Placing>,
        out: Sender<Result<Batch, Error>>,
        credits: Sender<()>,
        shutdown: Receiver<()>,
        start: Position,
    ) -> Assembler {
        let names: Arc<[String]> = graph
            .outputs
            .iter()
            .map(|&s| graph.edge_names[s].clone())
            .collect();
        Assembler {
            graph,
            dataset,
            stats,
            out,
            credits,
            owed_credits: 0,
            shutdown,
            names,
            filling: Vec::new(),
            samples: Vec::new(),
            skipped: Vec::new(),
            reported: HashSet::new(),
            batch_in_epoch: start.batch,
            next_pos: start.sample,
            summary: EpochSummary {
                epoch: start.epoch,
                ..EpochSummary::default()
            },
            placing,
        }
    }

    fn run(mut self, done: &Gather<Done>) {
        let mut reorder: BTreeMap<u64, Done> = BTreeMap::new();
        let mut arrived = Vec::new();
        let mut next = 0u64;
        let batch = self.graph.spec.settings.batch;
        loop {
            // Sleep until a few samples have come (never more than would finish the batch
            // being filled, were every one good and in order; epoch ends and failures wake us
            // anyway): fewer wake-ups, while the samples copied are still warm in cache.
            let want = batch
                .saturating_sub(self.samples.len() + reorder.len())
                .min(GATHER_AT_ONCE);
            let shut_down = || {
                matches!(
                    self.shutdown.try_recv(),
                    Err(crossbeam_channel::TryRecvError::Disconnected)
                )
            };
            if !done.take(want, &mut arrived, shut_down) {
                return;
            }
            for d in arrived.drain(..) {
                reorder.insert(d.seq, d);
            }
            while let Some(d) = reorder.remove(&next) {
                next += 1;
                if !self.take(d) {
                    return;
                }
            }
        }
    }

    /// Records a bad sample: reported once per file in the log, counted every time.
    fn report(&mut self, e: SampleError, replaced: bool) {
        if self.reported.insert(e.index) {
            if replaced {
                tracing::warn!("replaced {e}");
            } else {
                tracing::warn!("skipped {e}");
            }
        }
        if replaced {
            self.stats.replaced.fetch_add(1, Ordering::Relaxed);
            self.summary.replaced += 1;
        } else {
            self.stats.skipped.fetch_add(1, Ordering::Relaxed);
            self.summary.skipped += 1;
        }
        if let Ok(mut m) = self.stats.skipped_by_cause.lock() {
            *m.entry(e.kind.category()).or_default() += 1;
        }
        self.summary.errors.push(e.clone());
        self.skipped.push(e);
    }

    /// Gives a credit back to the readers, a chunk at a time so that a reader waiting for
    /// credits wakes once per chunk rather than once per sample.
    fn return_credit(&mut self) {
        self.owed_credits += 1;
        if self.owed_credits >= credit_chunk(self.graph.spec.settings.batch) {
            for _ in 0..std::mem::take(&mut self.owed_credits) {
                let _ = self.credits.try_send(());
            }
        }
    }

    /// Handles the next sample in order; false to stop.
    fn take(&mut self, d: Done) -> bool {
        let batch_size = self.graph.spec.settings.batch;
        if matches!(d.result, Err(Failure::EpochEnd)) {
            self.return_credit();
            return self.end_epoch(d.epoch);
        }
        self.next_pos = d.pos + 1;
        self.return_credit();
        for e in d.replaced {
            self.report(e, true);
        }
        match d.result {
            Err(Failure::EpochEnd) => unreachable!("handled above"),
            Err(Failure::Panic(message)) => {
                let path = self.dataset.entries[d.index].path.clone();
                let _ = self.out.send(Err(Error::WorkerPanic { path, message }));
                return false;
            }
            Err(Failure::Sample(kind)) => {
                let e = SampleError {
                    path: self.dataset.entries[d.index].path.clone(),
                    index: d.index,
                    kind,
                };
                if self.graph.spec.settings.on_error == OnError::Fail {
                    let _ = self.out.send(Err(Error::Sample(e)));
                    return false;
                }
                // Later samples of the epoch move up a place: tell the workers.
                self.placing.slots.skip(d.epoch);
                self.report(e, false);
            }
            Ok((values, params)) => {
                self.push(d.epoch, d.index, values, params);
                if self.samples.len() == batch_size {
                    let resume = Position {
                        seed: self.graph.spec.settings.seed,
                        epoch: d.epoch,
                        sample: self.next_pos,
                        batch: self.batch_in_epoch + 1,
                    };
                    return self.emit(d.epoch, 0, resume);
                }
            }
        }
        true
    }

    /// Adds a good sample to the batch being filled: an image its worker wrote into this
    /// batch's buffer where it belongs costs nothing, any other is copied in (while its pixels
    /// are still warm in cache) and its buffer given back for later samples.
    fn push(
        &mut self,
        epoch: u64,
        index: usize,
        values: Vec<Output>,
        params: Vec<(Arc<str>, OpParams)>,
    ) {
        let t0 = Instant::now();
        let batch = self.graph.spec.settings.batch;
        let slots = &self.placing.slots;
        let pool = slots.pool().clone();
        if self.filling.is_empty() {
            self.filling = values
                .into_iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Output::Placed(p) => {
                        let target = slots.batch_buffer(epoch, i, &p);
                        let (f, in_place) = ImageFill::start_placed(&p, target, &pool, batch);
                        count_image(&self.stats, in_place);
                        Filling::Images(f)
                    }
                    Output::Value(Value::Image(im)) => {
                        count_image(&self.stats, false);
                        let f = ImageFill::start_copied(&im, &pool, batch);
                        crate::scratch::recycle_image(im);
                        Filling::Images(f)
                    }
                    Output::Value(Value::Label(l)) => {
                        let mut labels = Vec::with_capacity(batch);
                        labels.push(l);
                        Filling::Labels(labels)
                    }
                    Output::Value(Value::Encoded(_)) => {
                        unreachable!("the graph refuses encoded outputs")
                    }
                })
                .collect();
        } else {
            for (f, v) in self.filling.iter_mut().zip(values) {
                match (f, v) {
                    (Filling::Images(b), Output::Placed(p)) => {
                        let in_place = b.push_placed(&p, &pool, batch);
                        count_image(&self.stats, in_place);
                    }
                    (Filling::Images(b), Output::Value(Value::Image(im))) => {
                        count_image(&self.stats, false);
                        b.push(&im, &pool, batch);
                        crate::scratch::recycle_image(im);
                    }
                    (Filling::Labels(l), Output::Value(Value::Label(x))) => l.push(x),
                    _ => unreachable!("an output keeps its type"),
                }
            }
        }
        slots.took_good(epoch);
        let e = &self.dataset.entries[index];
        self.samples.push(SampleInfo {
            index,
            path: e.path.clone(),
            label: e.label,
            params,
        });
        add_ns(&self.stats.assemble_ns, t0.elapsed());
    }

    fn end_epoch(&mut self, epoch: u64) -> bool {
        // Every sample of the epoch is taken: its tentative batches are ours alone.
        self.placing.slots.epoch_ended(epoch);
        let batch_size = self.graph.spec.settings.batch;
        let resume = Position {
            seed: self.graph.spec.settings.seed,
            epoch: epoch + 1,
            sample: 0,
            batch: 0,
        };
        let mut ok = true;
        if !self.samples.is_empty() {
            match self.graph.reader.last_batch {
                LastBatch::Partial => ok = self.emit(epoch, 0, resume),
                LastBatch::Drop => {
                    let n = self.samples.len() as u64;
                    self.stats.dropped.fetch_add(n, Ordering::Relaxed);
                    self.summary.dropped += n;
                    self.samples.clear();
                    self.filling.clear();
                }
                LastBatch::Pad => {
                    let pool = self.placing.slots.pool().clone();
                    let pad = batch_size - self.samples.len();
                    let last = self.samples.last().expect("non-empty").clone();
                    for _ in 0..pad {
                        for f in &mut self.filling {
                            match f {
                                Filling::Images(b) => b.repeat_last(&pool, batch_size),
                                Filling::Labels(l) => l.push(*l.last().expect("non-empty")),
                            }
                        }
                        self.samples.push(last.clone());
                    }
                    ok = self.emit(epoch, pad, resume);
                }
            }
        }
        // Bad samples after the epoch's last batch stay in the epoch's summary; they are not
        // carried into the next epoch's first batch.
        self.skipped.clear();
        let summary = std::mem::take(&mut self.summary);
        if summary.skipped + summary.replaced > 0 {
            tracing::warn!(
                "epoch {epoch}: {} images in {} batches; {} bad samples skipped, {} replaced",
                summary.images,
                summary.batches,
                summary.skipped,
                summary.replaced
            );
        } else {
            tracing::info!(
                "epoch {epoch}: {} images in {} batches",
                summary.images,
                summary.batches
            );
        }
        if let Ok(mut v) = self.stats.epochs.lock() {
            v.push(EpochSummary { epoch, ..summary });
        }
        self.summary.epoch = epoch + 1;
        self.batch_in_epoch = 0;
        self.next_pos = 0;
        ok
    }

    fn emit(&mut self, epoch: u64, padded: usize, resume: Position) -> bool {
        let t0 = Instant::now();
        let pool = self.placing.slots.pool().clone();
        let batch = self.graph.spec.settings.batch;
        let outputs: Vec<BatchOutput> = std::mem::take(&mut self.filling)
            .into_iter()
            .map(|f| match f {
                Filling::Images(b) => BatchOutput::Images(b.finish(&pool, batch)),
                Filling::Labels(l) => BatchOutput::Labels(l),
            })
            .collect();
        let samples = std::mem::take(&mut self.samples);
        let real = (samples.len() - padded) as u64;
        self.stats.images.fetch_add(real, Ordering::Relaxed);
        self.stats
            .padded
            .fetch_add(padded as u64, Ordering::Relaxed);
        self.stats.batches.fetch_add(1, Ordering::Relaxed);
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
            resume,
        };
        self.batch_in_epoch += 1;
        add_ns(&self.stats.assemble_ns, t0.elapsed());
        let sent = select! {
            send(self.out, Ok(batch)) -> r => r.is_ok(),
            recv(self.shutdown) -> _ => false,
        };
        self.placing.slots.delivered(epoch);
        sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::spec::OpSpec;
    use crate::value::ValueType;

    #[derive(Debug)]
    struct PanicsOn(usize);

    impl crate::ops::Operator for PanicsOn {
        fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
            Ok(inputs.to_vec())
        }

        fn run_cpu(
            &self,
            inputs: Vec<Value>,
            ctx: &mut SampleContext<'_>,
        ) -> Result<Vec<Value>, SampleErrorKind> {
            assert_ne!(ctx.index, self.0, "operator bug on purpose");
            Ok(inputs)
        }
    }

    #[test]
    fn a_panicking_operator_is_an_error_for_the_caller_not_a_hang() {
        let d = tempfile::tempdir().unwrap();
        let data = crate::samples::ensure(&d.path().join("s")).unwrap();
        let spec = PipelineSpec::builder()
            .batch(4)
            .threads(2)
            .op(OpSpec::new("file_reader")
                .output("jpegs")
                .arg("root", data.to_string_lossy().as_ref())
                .arg("shuffle", false))
            .op(OpSpec::new("decode").input("jpegs").output("decoded"))
            .op(OpSpec::new("flip").input("decoded").output("images"))
            .outputs(&["images"]);
        for on_error in [OnError::Skip, OnError::Replace] {
            let mut graph = Graph::build(&spec.clone().on_error(on_error)).unwrap();
            graph.nodes[1].op = Box::new(PanicsOn(6));
            let p = Pipeline::from_graph(graph).unwrap();
            let results: Vec<Result<Batch, Error>> = p.collect();
            assert!(results[0].is_ok());
            match results.last().unwrap() {
                Err(Error::WorkerPanic { path, message }) => {
                    assert!(message.contains("operator bug on purpose"), "{message}");
                    assert!(
                        path.to_string_lossy().contains("checks_06"),
                        "{}",
                        path.display()
                    );
                }
                other => panic!("expected a worker panic, got {other:?}"),
            }
        }
    }

    #[test]
    fn positions_print_and_parse() {
        let p = Position {
            seed: 3,
            epoch: 2,
            sample: 17,
            batch: 4,
        };
        assert_eq!(p.to_string(), "3:2:17:4");
        assert_eq!("3:2:17:4".parse::<Position>().unwrap(), p);
        assert!("3:2:17".parse::<Position>().is_err());
        assert!("a:b:c:d".parse::<Position>().is_err());
    }
}
