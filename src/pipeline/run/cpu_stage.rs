//! The CPU stage: worker threads run the per-sample operators on each loaded sample, write
//! final images straight into their places in the batch buffers where they may, apply the
//! `on_error = "replace"` policy, and turn a panicking operator into an error.

use std::any::Any;
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use crate::error::{SampleError, SampleErrorKind};
use crate::ops::SampleContext;
use crate::pipeline::graph::Graph;
use crate::pipeline::spec::OnError;
use crate::reader::source::Source;
use crate::rng::{domain, key};
use crate::value::{Value, Values};

use super::gather::{Gather, SenderGuard};
use super::gpu_plan::Prepared;
use super::placement::{Placed, Placing};
use super::read_stage::{read_sample, Loaded, LoadedGroup};
use super::run_settings::RunSettings;
use super::stage_loop::StageInput;
use super::stats::{add_ns, Stats};

/// How many replacements `on_error = "replace"` tries before giving up on a position.
const MAX_REPLACEMENTS: u64 = 16;

/// What a worker hands to the assembler, in schedule order (`seq`). (A sample in place: epoch
/// ends are few, and boxing samples would allocate each.)
#[allow(clippy::large_enum_variant)]
pub(super) enum Processed {
    /// A sample, good or failed.
    Sample(ProcessedSample),
    /// Every sample of `epoch` has been processed: an epoch end is a message of its own,
    /// never an error.
    EpochEnd { seq: u64, epoch: u64 },
}

impl Processed {
    /// The assembler needs epoch ends and failures at once; good samples it takes a batch at
    /// a time.
    pub(super) fn urgent(&self) -> bool {
        match self {
            Processed::Sample(s) => s.result.is_err(),
            Processed::EpochEnd { .. } => true,
        }
    }
}

/// One processed sample.
pub(super) struct ProcessedSample {
    pub(super) seq: u64,
    pub(super) epoch: u64,
    /// Position of the sample in its epoch's order.
    pub(super) pos: usize,
    /// The sample delivered (a replacement's index under `on_error = "replace"`).
    pub(super) index: usize,
    /// Its file (`shard:member` for a shard's sample).
    pub(super) path: Arc<Path>,
    /// Its label.
    pub(super) label: i64,
    /// Errors of samples this one replaced.
    pub(super) replaced: Vec<SampleError>,
    pub(super) result: Result<SampleOutput, Failure>,
}

/// Why a sample has no output.
#[derive(Debug)]
pub(super) enum Failure {
    /// The sample failed (its file, or the pipeline's settings: see
    /// [`SampleErrorKind::is_settings`]).
    Sample(SampleErrorKind),
    /// An operator panicked (a bug), with the panic's message.
    Panic(String),
}

/// A sample's pipeline outputs and the random parameters its operators chose.
pub(super) type SampleOutput = (Outputs, crate::ops::SampleParams);

/// A sample's pipeline outputs, in the graph's order (held in place: pipelines have one or
/// two outputs).
pub(super) type Outputs = smallvec::SmallVec<[Output; 2]>;

/// One pipeline output of a sample: a value, an image its operator wrote straight into
/// its place in a batch buffer, or (GPU path) a sample prepared for the device.
pub(super) enum Output {
    Value(Value),
    Placed(Placed),
    Device(Box<Prepared>),
}

/// One worker thread's share of the stage (clone it for each thread).
#[derive(Clone)]
pub(super) struct CpuStage {
    pub(super) input: StageInput<LoadedGroup>,
    pub(super) out: Arc<Gather<Processed>>,
    pub(super) source: Source,
    pub(super) graph: Arc<Graph>,
    pub(super) settings: RunSettings,
    pub(super) stats: Arc<Stats>,
    pub(super) placing: Arc<Placing>,
    /// Files over this many bytes are refused unread (for replacements).
    pub(super) max_bytes: u64,
}

impl CpuStage {
    /// Processes samples until the readers are done, the assembler is gone or the pipeline
    /// shuts down.
    pub(super) fn run(self) {
        run_worker(&self.input, &self.out, |at, scheduled, bytes| {
            self.process(at, scheduled, bytes)
        });
    }

    /// Runs one sample, catching panics; under `on_error = "replace"` substitutes other
    /// samples (see [`process_with_replacements`]).
    fn process(
        &self,
        at: Sample,
        scheduled: (usize, Arc<Path>, i64),
        bytes: Result<Arc<Vec<u8>>, SampleErrorKind>,
    ) -> ProcessedSample {
        let g = &*self.graph;
        let run = |index: usize,
                   path: &Path,
                   label: i64,
                   bytes: Arc<Vec<u8>>|
         -> Result<SampleOutput, Failure> {
            run_sample(
                g,
                self.settings.seed,
                &self.stats,
                &self.placing,
                (at.epoch, at.pos),
                index,
                path,
                label,
                bytes,
            )
        };
        process_with_replacements(
            &self.settings,
            &self.source,
            &self.stats,
            self.max_bytes,
            at,
            scheduled,
            bytes,
            run,
        )
    }
}

/// Runs one worker thread of a stage between the readers and the assembler (the CPU stage,
/// or the GPU path's preparation): each loaded sample goes through `process` (given where it
/// stands, its index, path and label, and its bytes), each epoch end is passed on as it is,
/// and everything goes to the assembler's gather, what it needs at once marked urgent. The
/// gather hears when the thread ends, however it ends.
pub(super) fn run_worker(
    input: &StageInput<LoadedGroup>,
    out: &Gather<Processed>,
    mut process: impl FnMut(
        Sample,
        (usize, Arc<Path>, i64),
        Result<Arc<Vec<u8>>, SampleErrorKind>,
    ) -> ProcessedSample,
) {
    let _leaving = SenderGuard(out);
    // Samples a reader handed on together: each goes to the assembler once processed.
    input.run(Some, |loaded: LoadedGroup| {
        loaded.into_iter().all(|item| {
            let processed = match item {
                Loaded::EpochEnd { seq, epoch } => Processed::EpochEnd { seq, epoch },
                Loaded::Sample {
                    seq,
                    epoch,
                    pos,
                    index,
                    path,
                    label,
                    bytes,
                } => {
                    if !input.running() {
                        return false;
                    }
                    let at = Sample { seq, epoch, pos };
                    Processed::Sample(process(at, (index, path, label), bytes))
                }
            };
            let urgent = processed.urgent();
            out.push(processed, urgent)
        })
    });
}

/// Which place of the walk a worker is processing.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sample {
    pub(super) seq: u64,
    pub(super) epoch: u64,
    pub(super) pos: usize,
}

/// Runs `run(index, path, label, bytes)` on the scheduled sample (`scheduled`: its index,
/// path and label), catching panics; under `on_error = "replace"` substitutes other samples
/// (chosen from the seed, epoch, position and attempt) until one succeeds. Replacements need
/// random access: a data set of files (the graph refuses `replace` with a shard reader). A
/// failure caused by the settings is never replaced: every sample would fail alike. Shared
/// by the CPU and GPU stages, so both replace alike.
#[allow(clippy::too_many_arguments)]
pub(super) fn process_with_replacements(
    settings: &RunSettings,
    source: &Source,
    stats: &Stats,
    max_bytes: u64,
    at: Sample,
    scheduled: (usize, Arc<Path>, i64),
    bytes: Result<Arc<Vec<u8>>, SampleErrorKind>,
    run: impl Fn(usize, &Path, i64, Arc<Vec<u8>>) -> Result<SampleOutput, Failure>,
) -> ProcessedSample {
    let attempt = |index: usize,
                   path: &Path,
                   label: i64,
                   bytes: Result<Arc<Vec<u8>>, SampleErrorKind>|
     -> Result<SampleOutput, Failure> {
        let bytes = bytes.map_err(Failure::Sample)?;
        catch_unwind(AssertUnwindSafe(|| run(index, path, label, bytes)))
            .unwrap_or_else(|p| Err(Failure::Panic(panic_message(p))))
    };
    let (mut index, mut path, mut label) = scheduled;
    let mut result = attempt(index, &path, label, bytes);
    let mut replaced = Vec::new();
    if let (OnError::Replace, Some(ds)) = (settings.on_error, source.dataset()) {
        let n = ds.entries.len() as u64;
        let mut tries = 0;
        while let Err(Failure::Sample(kind)) = &result {
            if tries == MAX_REPLACEMENTS || kind.is_settings() {
                break;
            }
            replaced.push(SampleError {
                path: path.to_path_buf(),
                index,
                kind: kind.clone(),
            });
            tries += 1;
            let k = key(&[
                domain::REPLACE,
                settings.seed,
                at.epoch,
                at.pos as u64,
                tries,
            ]);
            index = (k % n) as usize;
            path = ds.entries[index].path.clone();
            label = ds.entries[index].label;
            let bytes = read_sample(&path, max_bytes, stats);
            result = attempt(index, &path, label, bytes);
        }
    }
    ProcessedSample {
        seq: at.seq,
        epoch: at.epoch,
        pos: at.pos,
        index,
        path,
        label,
        replaced,
        result,
    }
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

/// A worker's slots for the values on the graph's edges and the places its outputs were
/// written to: kept from sample to sample (empty between them), not allocated for each.
#[derive(Default)]
struct Slots {
    edges: Vec<Option<Value>>,
    placed: Vec<Option<Placed>>,
}

thread_local! {
    static SLOTS: RefCell<Slots> = RefCell::default();
}

/// The thread's slots while a sample runs: emptied and given back however it ends (a
/// failure, or a panic in an operator).
struct Lent(Slots);

impl Lent {
    /// The thread's slots, sized for `graph` (a nested run would get new ones).
    fn for_graph(graph: &Graph) -> Lent {
        let mut s = SLOTS.take();
        s.edges.resize_with(graph.edge_names.len(), || None);
        s.placed.resize_with(graph.outputs.len(), || None);
        Lent(s)
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        let mut s = std::mem::take(&mut self.0);
        s.edges.clear();
        s.placed.clear();
        // Gone only when the thread is ending.
        let _ = SLOTS.try_with(|slot| *slot.borrow_mut() = s);
    }
}

/// Runs the per-sample operators of `graph` on one sample (`at`: its epoch and position
/// in the epoch's order) with the run's `seed`.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_sample(
    graph: &Graph,
    seed: u64,
    stats: &Stats,
    placing: &Placing,
    at: (u64, usize),
    index: usize,
    path: &Path,
    label: i64,
    bytes: Arc<Vec<u8>>,
) -> Result<SampleOutput, Failure> {
    let mut slots = Lent::for_graph(graph);
    let Slots { edges, placed } = &mut slots.0;
    edges[graph.reader_encoded] = Some(Value::Encoded(bytes));
    if let Some(l) = graph.reader_labels {
        edges[l] = Some(Value::Label(label));
    }
    let epoch = at.0;
    let mut params = crate::ops::SampleParams::new();
    for (k, node) in graph.nodes.iter().enumerate() {
        let inputs: Values = node
            .inputs
            .iter()
            .zip(&node.last_use)
            .map(|(&s, &last)| {
                if last {
                    edges[s].take()
                } else {
                    edges[s].clone()
                }
                .expect("inputs are produced before use")
            })
            .collect();
        let mut ctx = SampleContext {
            seed,
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
                let mut offer = placing.buffers.offer(at.0, at.1, i);
                let outs = node.op.run_cpu_into(inputs, &mut ctx, &mut offer);
                // The place's lease ends here, before the sample is handed on.
                placed[i] = offer.placed();
                outs
            }
            None => node.op.run_cpu(inputs, &mut ctx),
        }
        .map_err(Failure::Sample)?;
        add_ns(&stats.op_ns[k], t0.elapsed());
        for (&s, v) in node.outputs.iter().zip(outs) {
            edges[s] = Some(v);
        }
    }
    let outputs = graph
        .outputs
        .iter()
        .zip(placed.iter_mut())
        .map(|(&s, p)| match p.take() {
            Some(p) => Output::Placed(p),
            None => Output::Value(edges[s].take().expect("outputs are produced")),
        })
        .collect();
    Ok((outputs, params))
}
