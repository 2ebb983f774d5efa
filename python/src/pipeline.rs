//! `stokehold.Pipeline`: a running pipeline seen from Python. Each `for` loop over it is one
//! epoch (as with a PyTorch DataLoader) while the threads run on into the next; it can save
//! and restore where it stands (`state_dict`), and stops promptly on Ctrl-C.
//!
//! Locking rule: the runner's lock is only ever taken with the GIL released (inside
//! `Python::detach`), so a thread holding it never waits for the GIL and no two threads can
//! wait for each other.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use stokehold::pipeline::{Batch, Pipeline, PipelineSpec, Position, StatsSnapshot, Waited};
use stokehold::Error;

use crate::batch::PyBatch;
use crate::errors::{pipeline_err, to_py};
use crate::options::{self, Overrides};

/// How long one wait for a batch lasts before Python gets to check for Ctrl-C.
const WAIT_SLICE: Duration = Duration::from_millis(50);

/// Version of the `state_dict` layout.
const STATE_VERSION: u64 = 1;

/// What does not change while a pipeline lives.
struct Facts {
    batch: usize,
    batches_per_epoch: usize,
    samples_per_epoch: usize,
    seed: u64,
    rank: usize,
    world_size: usize,
    device: &'static str,
    device_reason: String,
    threads: usize,
    outputs: Vec<String>,
    classes: Vec<String>,
}

/// The pipeline's moving parts: the running threads (absent after Ctrl-C, `close()` or an
/// error, and started again from `position` when asked for a batch) and where the consumer
/// stands.
struct Runner {
    spec: PipelineSpec,
    running: Option<Pipeline>,
    /// A batch of a later epoch, taken while looking for the end of the current one.
    pending: Option<Batch>,
    /// Where to resume to get the batches after the last one handed out.
    position: Position,
    /// The epoch the current (or next) `for` loop yields.
    epoch: u64,
    /// The last batch of `epoch` has been handed out.
    epoch_done: bool,
    epochs: Option<u64>,
    batches_per_epoch: usize,
    /// Statistics of the last run, kept when its threads stop.
    last_stats: Option<(StatsSnapshot, IdleBuffers)>,
}

/// Buffers back in a pipeline's pools: batch buffers, device buffers (the GPU path), pinned
/// buffers (`batch_memory="pinned"`).
type IdleBuffers = (usize, Option<usize>, Option<usize>);

/// What one try at the next batch of an epoch gave.
enum Step {
    Batch(Batch),
    End,
    Failed(Error),
    Waiting,
}

impl Runner {
    fn start(&mut self) -> Result<(), Error> {
        if self.running.is_none() {
            self.running = Some(Pipeline::resume(self.spec.clone(), self.position)?);
        }
        Ok(())
    }

    /// Stops and joins every thread; the position is kept.
    fn stop(&mut self) {
        self.pending = None;
        if let Some(p) = self.running.take() {
            let idle = (
                p.batch_pool().idle(),
                p.idle_device_buffers(),
                p.idle_pinned_buffers(),
            );
            self.last_stats = Some((p.stats(), idle));
        }
    }

    /// The next batch of `epoch`, waiting at most `wait`.
    fn step(&mut self, epoch: u64, wait: Duration) -> Step {
        if epoch != self.epoch || self.epochs.is_some_and(|n| self.epoch >= n) {
            return Step::End;
        }
        if self.epoch_done {
            let last = self.epochs.is_some_and(|n| self.epoch + 1 >= n);
            if let (true, Some(p)) = (last, self.running.as_mut()) {
                // The run's last batch is handed out: its end comes in a moment, with the
                // last epoch's summary (which a pipeline dropped sooner would not log).
                match p.next_batch_timeout(wait) {
                    Waited::TimedOut => return Step::Waiting,
                    Waited::Ready(None) => {}
                    Waited::Ready(Some(Ok(b))) => self.pending = Some(b),
                    Waited::Ready(Some(Err(e))) => {
                        self.stop();
                        return Step::Failed(e);
                    }
                }
            }
            self.epoch_done = false;
            self.epoch += 1;
            // The epoch's summary now, as its loop ends, not when the next loop begins
            // (where the pipeline's threads have closed the epoch).
            if let Some(p) = self.running.as_mut() {
                p.log_epoch_summaries();
            }
            return Step::End;
        }
        if let Some(b) = self.pending.take() {
            return self.deliver(b);
        }
        if let Err(e) = self.start() {
            return Step::Failed(e);
        }
        let Some(running) = self.running.as_mut() else {
            return Step::End;
        };
        match running.next_batch_timeout(wait) {
            Waited::TimedOut => Step::Waiting,
            Waited::Ready(Some(Ok(b))) => self.deliver(b),
            Waited::Ready(Some(Err(e))) => {
                // The run stopped; a later loop starts again from the last batch handed out.
                self.stop();
                Step::Failed(e)
            }
            Waited::Ready(None) => {
                self.epoch += 1;
                // The run's end: as at an epoch's end above.
                if self.position.epoch < self.epoch {
                    self.position = self.position.at_start_of(self.epoch);
                }
                Step::End
            }
        }
    }

    /// Hands `b` out if it belongs to the epoch being iterated, else keeps it for the next
    /// loop (an epoch whose bad files were skipped may end a batch or more early).
    fn deliver(&mut self, b: Batch) -> Step {
        if b.epoch != self.epoch {
            // The epoch ended after its last batch (bad files after it): a state saved now
            // is at the next one's start, where other batch sizes and ranks may go on.
            if self.position.epoch < b.epoch {
                self.position = self.position.at_start_of(b.epoch);
            }
            self.epoch = b.epoch;
            self.pending = Some(b);
            return Step::End;
        }
        self.position = b.resume;
        if b.index + 1 >= self.batches_per_epoch {
            self.epoch_done = true;
            // Nothing of the epoch is left: resuming here starts the next one (a resume
            // position just past the epoch's last sample would too, but a loop over its
            // epoch would then end without a batch).
            self.position = b.resume.at_start_of(b.epoch + 1);
        }
        Step::Batch(b)
    }
}

/// An image input pipeline, running on its own threads.
///
/// ``pipeline`` is a pipeline file's path or a dict of the same structure; ``data`` a
/// folder (class sub-folders, or flat) or a list file, or WebDataset tar shards (a folder of
/// ``.tar`` files, a brace pattern, a shard's path or http(s) URL, or a list of them; see
/// docs/shards.md). Keyword arguments override the pipeline's settings. Iterate over it once per epoch, like a DataLoader::
///
///     pipeline = stokehold.Pipeline("pipelines/resnet50-train.toml", "/data/train")
///     for epoch in range(90):
///         for batch in pipeline:
///             images = torch.from_dlpack(batch["images"])  # no copy
///             labels = torch.from_dlpack(batch["labels"])
///
/// Under torchrun each rank reads its own disjoint part of every epoch, and every rank gets
/// ``len(pipeline)`` batches.
#[pyclass(module = "stokehold", name = "Pipeline", frozen)]
pub struct PyPipeline {
    runner: Mutex<Runner>,
    facts: Facts,
}

/// The threads stop (their last summaries logged) and the lines still queued reach
/// `logging`, where Python is not shutting down and no exception is on its way (a
/// temporary pipeline dropped as its method raises): then they wait for the next flush.
impl Drop for PyPipeline {
    fn drop(&mut self) {
        self.runner
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .stop();
        Python::try_attach(|py| {
            if PyErr::occurred(py) {
                return;
            }
            let finalizing = py
                .import("sys")
                .and_then(|s| s.call_method0("is_finalizing")?.extract::<bool>());
            match finalizing {
                Ok(false) => {}
                Ok(true) => return,
                Err(e) => return crate::log::raise_later(py, e),
            }
            if let Err(e) = crate::log::hand_on(py) {
                crate::log::raise_later(py, e);
            }
        });
    }
}

impl PyPipeline {
    fn lock(&self) -> MutexGuard<'_, Runner> {
        self.runner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next batch of `epoch`, or `None` at its end. Waits with the GIL released, in short
    /// slices, checking for Ctrl-C between them: on KeyboardInterrupt every thread is stopped
    /// and joined before the exception goes on.
    fn next_in(&self, py: Python<'_>, epoch: u64) -> PyResult<Option<PyBatch>> {
        // The lines logged with the batch before (its bad files), before a batch is taken:
        // Ctrl-C, raised by the first Python code after it (`logging`'s), loses no batch.
        self.flush_or_stop(py)?;
        loop {
            match py.detach(|| self.lock().step(epoch, WAIT_SLICE)) {
                Step::Batch(b) => return PyBatch::new(py, b).map(Some),
                Step::End => {
                    // The epoch's summary, as its loop ends.
                    self.flush_or_stop(py)?;
                    return Ok(None);
                }
                Step::Failed(e) => {
                    let e = to_py(py, e);
                    if let Err(interrupt) = self.flush_or_stop(py) {
                        // Ctrl-C meanwhile: raised, with the pipeline's error as its cause.
                        interrupt.set_cause(py, Some(e));
                        return Err(interrupt);
                    }
                    return Err(e);
                }
                Step::Waiting => {
                    if let Err(interrupt) = py.check_signals() {
                        py.detach(|| self.lock().stop());
                        return Err(interrupt);
                    }
                }
            }
        }
    }

    /// Hands the queued log lines to `logging`; where Python raised meanwhile (Ctrl-C), the
    /// threads stop and join before the exception goes on, as on an interrupted wait.
    fn flush_or_stop(&self, py: Python<'_>) -> PyResult<()> {
        crate::log::flush(py).inspect_err(|_| py.detach(|| self.lock().stop()))
    }
}

fn int(d: &Bound<'_, PyDict>, key: &str) -> PyResult<u64> {
    let py = d.py();
    let v = d.get_item(key)?.ok_or_else(|| {
        pipeline_err(
            py,
            format!("the state has no {key:?}"),
            Some("pass a dict that Pipeline.state_dict() returned"),
        )
    })?;
    v.extract::<u64>().map_err(|_| {
        pipeline_err(
            py,
            format!("the state's {key:?} is not a non-negative integer"),
            Some("pass a dict that Pipeline.state_dict() returned"),
        )
    })
}

#[pymethods]
impl PyPipeline {
    #[new]
    #[pyo3(signature = (pipeline, data=None, *, device=None, batch=None, threads=None, seed=None, epochs=None, prefetch=None, on_error=None, batch_memory=None, rank=None, world_size=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        pipeline: &Bound<'_, PyAny>,
        data: Option<PathBuf>,
        device: Option<String>,
        batch: Option<i64>,
        threads: Option<i64>,
        seed: Option<i64>,
        epochs: Option<i64>,
        prefetch: Option<i64>,
        on_error: Option<String>,
        batch_memory: Option<String>,
        rank: Option<i64>,
        world_size: Option<i64>,
    ) -> PyResult<PyPipeline> {
        let o = Overrides {
            data,
            device,
            batch,
            threads,
            seed,
            epochs,
            prefetch,
            on_error,
            batch_memory,
            rank,
            world_size,
        };
        crate::log::install(py)?;
        let (mut draft, source) = options::load(py, pipeline)?;
        let rank = options::rank(py, &o)?;
        options::apply(py, draft.spec_mut(), &o, &rank)?;
        let graph = options::check(py, draft, &source)?;
        let spec = graph.spec.clone();
        let settings = spec.settings.clone();
        let started = py.detach(|| Pipeline::from_graph(graph));
        let running = started.map_err(|e| to_py(py, e))?;
        crate::log::flush(py)?;
        for w in running.warnings() {
            crate::errors::warn(py, w)?;
        }
        let reader = &running.graph().reader;
        let facts = Facts {
            batch: settings.batch,
            batches_per_epoch: running.batches_per_epoch(),
            samples_per_epoch: running.samples_per_epoch(),
            seed: settings.seed,
            rank: reader.rank,
            world_size: reader.world_size,
            device: running.device().device,
            device_reason: running.device().reason.clone(),
            threads: running.worker_threads(),
            outputs: spec.outputs.clone(),
            classes: running.class_names(),
        };
        let runner = Runner {
            spec,
            running: Some(running),
            pending: None,
            position: Position::start(settings.seed, settings.batch),
            epoch: 0,
            epoch_done: false,
            epochs: settings.epochs,
            batches_per_epoch: facts.batches_per_epoch,
            last_stats: None,
        };
        Ok(PyPipeline {
            runner: Mutex::new(runner),
            facts,
        })
    }

    /// An iterator over the batches of the current epoch (see :attr:`epoch`). The pipeline
    /// keeps preparing the next epoch's batches meanwhile. Breaking out of a loop and
    /// iterating again continues the same epoch.
    fn __iter__(slf: &Bound<'_, Self>) -> EpochIterator {
        let py = slf.py();
        let me = slf.get();
        let epoch = py.detach(|| me.lock().epoch);
        EpochIterator {
            pipeline: slf.clone().unbind(),
            epoch,
        }
    }

    /// Batches per epoch on this rank, the same on every rank (before bad files are skipped).
    fn __len__(&self) -> usize {
        self.facts.batches_per_epoch
    }

    /// The epoch the current ``for`` loop yields (or the next one, between loops).
    #[getter]
    fn epoch(&self, py: Python<'_>) -> u64 {
        py.detach(|| self.lock().epoch)
    }

    /// Samples per batch.
    #[getter]
    fn batch_size(&self) -> usize {
        self.facts.batch
    }

    /// This rank's samples per epoch (its part of the data set, padding not counted).
    #[getter]
    fn samples_per_epoch(&self) -> usize {
        self.facts.samples_per_epoch
    }

    /// This process's rank (0 without data parallelism).
    #[getter]
    fn rank(&self) -> usize {
        self.facts.rank
    }

    /// The number of ranks reading this data set.
    #[getter]
    fn world_size(&self) -> usize {
        self.facts.world_size
    }

    /// Where the per-sample work runs: ``"cpu"``, ``"gpu"``, or ``"emu"`` (the emulated
    /// device, a test device); :attr:`device_reason` says why.
    #[getter]
    fn device(&self) -> &'static str {
        self.facts.device
    }

    /// Why :attr:`device` was chosen.
    #[getter]
    fn device_reason(&self) -> &str {
        &self.facts.device_reason
    }

    /// Worker threads.
    #[getter]
    fn threads(&self) -> usize {
        self.facts.threads
    }

    /// The output names, in order.
    #[getter]
    fn outputs(&self) -> Vec<String> {
        self.facts.outputs.clone()
    }

    /// Class names by label (label ``i`` is ``classes[i]``): the class folders' names, or
    /// those a shard set's ``index.json`` lists; empty where the data has none.
    #[getter]
    fn classes(&self) -> Vec<String> {
        self.facts.classes.clone()
    }

    /// Where the pipeline stands after the batches handed out so far, as a dict of plain
    /// ints. :meth:`load_state_dict` on a pipeline of the same definition (in this process or
    /// another) resumes there: the batches that follow are the ones this pipeline would have
    /// given next (torchdata's ``StatefulDataLoader`` contract). A state saved mid-epoch
    /// loads only with the same seed, batch size, rank and world size; one saved after an
    /// epoch's last batch with any batch size and ranks (the epochs such a run would give).
    fn state_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let p = py.detach(|| self.lock().position);
        let d = PyDict::new(py);
        d.set_item("version", STATE_VERSION)?;
        d.set_item("seed", p.seed)?;
        d.set_item("epoch", p.epoch)?;
        d.set_item("sample", p.sample)?;
        d.set_item("batch", p.batch)?;
        d.set_item("batch_size", p.batch_size)?;
        d.set_item("rank", self.facts.rank)?;
        d.set_item("world_size", self.facts.world_size)?;
        Ok(d)
    }

    /// Continues from a :meth:`state_dict`: stops the threads and starts them again at that
    /// position. The next ``for`` loop yields the rest of the saved epoch.
    fn load_state_dict(&self, py: Python<'_>, state: &Bound<'_, PyDict>) -> PyResult<()> {
        let version = int(state, "version")?;
        if version != STATE_VERSION {
            return Err(pipeline_err(
                py,
                format!("state version {version} is not {STATE_VERSION}"),
                Some("pass a state saved by this version of stokehold"),
            ));
        }
        let mut position = Position {
            seed: int(state, "seed")?,
            epoch: int(state, "epoch")?,
            sample: int(state, "sample")? as usize,
            batch: int(state, "batch")? as usize,
            // Absent from states saved before it was recorded: then not checked.
            batch_size: match state.get_item("batch_size")? {
                Some(_) => int(state, "batch_size")? as usize,
                None => 0,
            },
            rank: int(state, "rank")? as usize,
            world_size: int(state, "world_size")? as usize,
        };
        if position.seed != self.facts.seed {
            return Err(pipeline_err(
                py,
                format!(
                    "the state was saved with seed {}, this pipeline has seed {}",
                    position.seed, self.facts.seed
                ),
                Some("resume with the seed the run started with"),
            ));
        }
        // At an epoch's start the batches to come depend on neither the ranks nor the batch
        // size: a run may go on from there with others (more GPUs, say).
        let mid_epoch = !position.at_epoch_start();
        let or_else = "or load a state saved at an epoch's end";
        let ranks = (position.rank, position.world_size);
        if mid_epoch && ranks != (self.facts.rank, self.facts.world_size) {
            return Err(pipeline_err(
                py,
                format!(
                    "the state, saved mid-epoch, is rank {} of {}, this pipeline rank {} of {}",
                    ranks.0, ranks.1, self.facts.rank, self.facts.world_size
                ),
                Some(&format!(
                    "each rank loads the state it saved, with the same world size; {or_else}"
                )),
            ));
        }
        let n = position.batch_size;
        if mid_epoch && n != 0 && n != self.facts.batch {
            return Err(pipeline_err(
                py,
                format!(
                    "the state, saved mid-epoch, has batches of {n}, this pipeline has batches of {}",
                    self.facts.batch
                ),
                Some(&format!(
                    "resume with the batch size the run started with (batch={n}); {or_else}"
                )),
            ));
        }
        (position.batch_size, position.rank, position.world_size) =
            (self.facts.batch, self.facts.rank, self.facts.world_size);
        let started = py.detach(|| {
            let mut r = self.lock();
            let before = (r.position, r.epoch, r.epoch_done);
            r.stop();
            (r.position, r.epoch, r.epoch_done) = (position, position.epoch, false);
            let started = r.start();
            if started.is_err() {
                // Refused (the data set has fewer samples than the state's position): the
                // pipeline goes on from where it was.
                (r.position, r.epoch, r.epoch_done) = before;
                let _ = r.start();
            }
            started
        });
        started.map_err(|e| to_py(py, e))
    }

    /// Statistics of the run so far, as a dict: counts (``images``, ``batches``,
    /// ``skipped``, ...), seconds per stage, per-epoch summaries, and
    /// ``idle_batch_buffers`` (batch buffers given back and waiting for reuse).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        crate::log::flush(py)?;
        let taken = py.detach(|| {
            let r = self.lock();
            match &r.running {
                Some(p) => Some((
                    p.stats(),
                    (
                        p.batch_pool().idle(),
                        p.idle_device_buffers(),
                        p.idle_pinned_buffers(),
                    ),
                )),
                None => r.last_stats.clone(),
            }
        });
        let d = PyDict::new(py);
        let Some((st, (idle, idle_device, idle_pinned))) = taken else {
            return Ok(d);
        };
        d.set_item("images", st.images)?;
        d.set_item("batches", st.batches)?;
        d.set_item("skipped", st.skipped)?;
        d.set_item("replaced", st.replaced)?;
        d.set_item("dropped", st.dropped)?;
        d.set_item("padded", st.padded)?;
        d.set_item("mean_queue_depth", st.mean_queue_depth)?;
        d.set_item("read_seconds", st.read.as_secs_f64())?;
        d.set_item("read_bytes", st.read_bytes)?;
        let ops = PyDict::new(py);
        for (name, t) in &st.ops {
            ops.set_item(name, t.as_secs_f64())?;
        }
        d.set_item("op_seconds", ops)?;
        d.set_item("assemble_seconds", st.assemble.as_secs_f64())?;
        d.set_item("consumer_wait_seconds", st.consumer_wait.as_secs_f64())?;
        d.set_item("batch_images", st.batch_images)?;
        d.set_item("in_place", st.in_place)?;
        for (key, by_cause) in [
            ("skipped_by_cause", &st.skipped_by_cause),
            ("replaced_by_cause", &st.replaced_by_cause),
        ] {
            let causes = PyDict::new(py);
            for (cause, n) in by_cause {
                causes.set_item(*cause, n)?;
            }
            d.set_item(key, causes)?;
        }
        let epochs = PyList::empty(py);
        for e in &st.epochs {
            let ed = PyDict::new(py);
            ed.set_item("epoch", e.epoch)?;
            ed.set_item("images", e.images)?;
            ed.set_item("batches", e.batches)?;
            ed.set_item("skipped", e.skipped)?;
            ed.set_item("replaced", e.replaced)?;
            ed.set_item("dropped", e.dropped)?;
            epochs.append(ed)?;
        }
        d.set_item("epochs", epochs)?;
        d.set_item("idle_batch_buffers", idle)?;
        if let Some(g) = &st.gpu {
            let gd = PyDict::new(py);
            gd.set_item("device", g.device.as_str())?;
            // The device only pinned the CPU path's host batches (batch_memory="pinned").
            gd.set_item("pinned_only", g.pinned_only)?;
            gd.set_item("prepare_seconds", g.prepare.as_secs_f64())?;
            gd.set_item("decode_seconds", g.decode.as_secs_f64())?;
            gd.set_item("kernel_seconds", g.kernels.as_secs_f64())?;
            let sources = PyDict::new(py);
            for (k, n) in &g.sources {
                sources.set_item(k, n)?;
            }
            gd.set_item("sources", sources)?;
            gd.set_item("device_bytes", g.memory.device)?;
            gd.set_item("device_peak_bytes", g.memory.device_peak)?;
            gd.set_item("pinned_bytes", g.memory.pinned)?;
            gd.set_item("pinned_peak_bytes", g.memory.pinned_peak)?;
            gd.set_item("idle_device_buffers", idle_device)?;
            gd.set_item("idle_pinned_buffers", idle_pinned)?;
            // Device and pinned allocations, frees and events created after the first epoch
            // (None before it ends): 0 in a steady state.
            let after = g.after_warm_up.map(|w| w.total());
            gd.set_item("allocations_after_warm_up", after)?;
            // The same by kind: which a run should look at when it is not 0.
            if let Some(w) = g.after_warm_up {
                let kinds = PyDict::new(py);
                kinds.set_item("device_allocs", w.device_allocs)?;
                kinds.set_item("device_frees", w.device_frees)?;
                kinds.set_item("pinned_allocs", w.pinned_allocs)?;
                kinds.set_item("pinned_frees", w.pinned_frees)?;
                kinds.set_item("events_created", w.events_created)?;
                gd.set_item("allocations_after_warm_up_by_kind", kinds)?;
            }
            // The most batches launched and not yet done on the device at once, and the
            // host's waits for a decode area an earlier batch still used (few or none).
            gd.set_item("batches_in_flight", g.batches_in_flight)?;
            gd.set_item("decode_area_waits", g.decode_area_waits)?;
            gd.set_item("decode_groups_split", g.decode_groups_split)?;
            gd.set_item("workers_running", g.workers_running)?;
            gd.set_item("workers_parked", g.workers_parked)?;
            gd.set_item("reader_hold", g.reader_hold)?;
            gd.set_item("chroma_rebuilt_in_parts", g.chroma_rebuilt_in_parts)?;
            gd.set_item(
                "host_images_pinned_by_workers",
                g.host_images_pinned_by_workers,
            )?;
            // The split between the JPEG engines and the CPU decoder, and where the thread
            // feeding the engines spent its time (seconds, summed since the start).
            let dec = &g.decoders;
            let split = PyDict::new(py);
            split.set_item("engine_images", dec.engine_images)?;
            split.set_item("engine_busy_seconds", dec.engine_busy.as_secs_f64())?;
            split.set_item("cpu_images", dec.cpu_images)?;
            split.set_item("cpu_busy_seconds", dec.cpu_busy.as_secs_f64())?;
            split.set_item("cpu_share", dec.cpu_share)?;
            // The most the share may rise to since the warm-up (None before), and how many
            // estimates wanted more.
            split.set_item("cpu_share_ceiling", dec.cpu_share_ceiling)?;
            split.set_item("estimates_capped", dec.estimates_capped)?;
            // Samples the share picked that went to the engines, their batch's budget spent.
            split.set_item("over_budget", dec.over_budget)?;
            if let Some(f) = dec.engine_feed {
                let feed = PyDict::new(py);
                feed.set_item("calls", f.calls)?;
                feed.set_item("slot_wait_seconds", f.slot_wait.as_secs_f64())?;
                feed.set_item("staging_seconds", f.staging.as_secs_f64())?;
                feed.set_item("pinned_images", f.pinned_images)?;
                feed.set_item("check_seconds", f.checks.as_secs_f64())?;
                feed.set_item("engines_call_seconds", f.engines_call.as_secs_f64())?;
                feed.set_item("one_by_one_seconds", f.decoupled.as_secs_f64())?;
                // The feeding thread's whole time submitting (its own thread since
                // 2026-11-27), and the assembling thread's own time (launching kernels).
                feed.set_item("thread_busy_seconds", st.feeder_busy.as_secs_f64())?;
                feed.set_item("assembler_busy_seconds", st.assembler_busy.as_secs_f64())?;
                split.set_item("feed", feed)?;
            }
            gd.set_item("decoders", split)?;
            d.set_item("gpu", gd)?;
        }
        Ok(d)
    }

    /// Stops and joins the pipeline's threads now. Iterating again starts them again where
    /// the last batch handed out left off.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.lock().stop());
        crate::log::flush(py)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the pipeline (see :meth:`close`).
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "stokehold.Pipeline(batch={}, batches_per_epoch={}, rank={}/{}, device={}, threads={}, outputs={:?})",
            self.facts.batch,
            self.facts.batches_per_epoch,
            self.facts.rank,
            self.facts.world_size,
            self.facts.device,
            self.facts.threads,
            self.facts.outputs
        )
    }
}

/// The batches of one epoch of a :class:`Pipeline` (what ``iter(pipeline)`` returns).
#[pyclass(module = "stokehold", name = "EpochIterator", frozen)]
pub struct EpochIterator {
    pipeline: Py<PyPipeline>,
    epoch: u64,
}

#[pymethods]
impl EpochIterator {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyBatch>> {
        self.pipeline.get().next_in(py, self.epoch)
    }

    /// The epoch this iterator yields.
    #[getter]
    fn epoch(&self) -> u64 {
        self.epoch
    }
}
