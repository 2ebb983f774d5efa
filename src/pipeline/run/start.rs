//! Starting a pipeline: the checks before anything runs (device, dataset, memory), then the
//! threads and the channels between them.
//!
//! ```text
//! readers --loaded--> workers --processed--> assembler --batches(prefetch)--> consumer
//!    ^                                          |
//!    +---------------- credits -----------------+
//! ```
//! The readers walk the source's epochs (one shared
//! [`Steps`](crate::reader::source::Steps)) and may only take the next step while they hold
//! a credit; the assembler returns credits, a few at a time, once it has taken those samples
//! in order. So at most `credits` samples are in flight, and with the
//! bounded batch queue memory stays bounded whatever the consumer does. Results are reordered
//! by sequence number, so batches are the same whatever the thread count. Every thread works
//! with the pipeline's own scratch pools.
//!
//! On the GPU path the workers prepare samples for the device instead (`gpu_prep`), and the
//! assembler hands each full batch to the GPU stage (`gpu_stage`) to decode and transform;
//! the rest is the same threads and channels.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crossbeam_channel::bounded;

use crate::cuda::gpu_device::{DeviceDescription, GpuDevice};
use crate::cuda::pinned_pool::PinnedPool;
use crate::error::Error;
use crate::pipeline::batch::{Batch, BatchBufferPool};
use crate::pipeline::graph::Graph;
use crate::reader::schedule::{LastBatch, Position};
use crate::reader::source::{Source, Walk};
use crate::scratch::ScratchPools;

use super::assembler::{credit_chunk, Assembler, Links};
use super::cpu_stage::{CpuStage, Processed};
use super::gather::Gather;
use super::gpu_prep::GpuPrep;
use super::gpu_stage::GpuStage;
use super::pin::Pin;
use super::placement::{BatchBuffers, Placing};
use super::read_stage::{Hold, LoadedGroup, ReadStage, HOLD_FOR};
use super::run_settings::RunSettings;
use super::stage_loop::StageInput;
use super::stats::{DeviceRole, Stats};
use super::upload::Upload;
use super::{device, memory, Pipeline};

impl Pipeline {
    /// Checks `graph`'s settings against the dataset and the machine, then starts the
    /// threads at `start`.
    pub(super) fn start(graph: Graph, start: Position) -> Result<Pipeline, Error> {
        Self::start_on(graph, start, None)
    }

    /// As [`Pipeline::start`], on `device` instead of the one the settings open (tests).
    pub(crate) fn start_on(
        mut graph: Graph,
        start: Position,
        device: Option<Arc<dyn GpuDevice>>,
    ) -> Result<Pipeline, Error> {
        // Resolved once: the stages read these, never the spec.
        let settings = RunSettings::of(&graph);
        let chosen = device::open_device(&graph, &settings, device)?;
        let device = chosen.report;
        // Relative reader paths resolve against the pipeline file's folder.
        if let Some(dir) = graph.spec.file.as_ref().and_then(|f| f.parent()) {
            let dir = dir.to_path_buf();
            graph.reader.resolve_relative_to(&dir);
        }
        let source = Source::open(&graph.reader)?;
        let warnings = super::warnings::at_start(&graph, &source);
        let per_epoch = source.samples_per_epoch(&graph.reader);
        // Padding included: what the walk takes each epoch.
        let scheduled = source.scheduled_per_epoch(&graph.reader, settings.batch);
        let batches_per_epoch = source.batches_per_epoch(&graph.reader, settings.batch);
        let last_batch = settings.last_batch;
        if last_batch == LastBatch::Drop && scheduled < settings.batch {
            return Err(Error::Dataset(format!(
                "this rank has {per_epoch} samples per epoch, fewer than one batch of {} with last_batch = \"drop\"",
                settings.batch
            )));
        }
        resumable(&start, &settings, scheduled)?;
        // A batch holds no more samples than an epoch has, unless padded to the batch size.
        let capacity = if last_batch == LastBatch::Pad {
            settings.batch
        } else {
            settings.batch.min(scheduled.max(1))
        };
        match &chosen.gpu {
            None => memory::check(&graph, &settings, capacity, memory::available())?,
            Some((dev, plan)) => {
                let total = dev.describe().total_memory;
                memory::check_device(&graph, &settings, plan, capacity, total)?
            }
        }
        let cores = cores();
        let described = chosen.gpu.as_ref().map(|(dev, _)| dev.describe());
        let worker_threads = settings
            .threads
            .unwrap_or_else(|| default_workers(cores, described.as_ref()));
        // Beside JPEG engines, the rest of the cores' workers wait at the worker gate for
        // photos the engines don't take (`worker_gate`).
        let parked_workers = match settings.threads {
            Some(_) => 0,
            None if chosen.gpu.is_some() => cores.saturating_sub(worker_threads),
            None => 0,
        };
        let graph = Arc::new(graph);
        let stats = Arc::new(Stats::new(graph.nodes.len()));
        let (shutdown_tx, shutdown_rx) = bounded::<()>(0);
        // Enough samples in flight for every worker to stay busy while a batch is assembled.
        // The GPU path's assembler takes samples in bursts (it submits a sub-batch to the
        // decoder, then takes the next ones): its workers run a whole batch further ahead, or
        // they wait out each submission (the timing model's 2-core runs: 84% of the host's
        // limit with one batch of credits, 89–91% with two).
        let ahead = if chosen.gpu.is_some() {
            2 * capacity
        } else {
            capacity
        };
        // (The workers running at the start: parked ones change nothing until they run,
        // and the batches' samples ahead are most of the credits.)
        let all_workers = worker_threads + parked_workers;
        let credits = ahead + 4 * worker_threads + 8 + credit_chunk(capacity);
        let scratch = ScratchPools::new(credits);
        // A message holds a handful of credits (the readers share them out), and the channel
        // has room for every credit alone: giving them back never blocks.
        let (credit_tx, credit_rx) = bounded::<usize>(credits);
        let chunk = credit_chunk(capacity);
        for first in (0..credits).step_by(chunk) {
            credit_tx
                .send(chunk.min(credits - first))
                .expect("capacity");
        }
        // Each message spends a credit at least: room for them all, made here once (a
        // channel without a bound allocates as messages come).
        let (loaded_tx, loaded_rx) = bounded::<LoadedGroup>(credits);
        // Workers write final images straight into the batch buffers the assembler hands out.
        let batch_pool = Arc::new(BatchBufferPool::default());
        let buffers = BatchBuffers::new(
            settings.batch,
            capacity,
            (start.epoch, start.sample),
            batch_pool.clone(),
        );
        let placing = Arc::new(match &chosen.gpu {
            None => Placing::new(&graph, buffers),
            Some(_) => Placing::without_places(&graph, buffers),
        });
        let gpu = chosen.gpu.map(|(dev, plan)| {
            stats.set_device(&device.reason, DeviceRole::GpuPath);
            (
                Arc::new(GpuStage::new(
                    dev.clone(),
                    plan.clone(),
                    stats.clone(),
                    (settings.batch, settings.prefetch),
                    (worker_threads, parked_workers),
                )),
                dev,
                plan,
            )
        });
        let upload_device = chosen.upload;
        let upload = upload_device.clone().map(|dev| {
            let sizes = (settings.batch, settings.prefetch);
            Upload::new(dev, sizes, stats.clone(), &device.reason)
        });
        let pinned_pool = match chosen.pin {
            Some(dev) => Some(PinnedPool::new(dev)?),
            None => None,
        };
        let pin = pinned_pool.clone().map(|pool| {
            let sizes = (settings.batch, settings.prefetch);
            Pin::new(pool, sizes, stats.clone(), &device.reason)
        });
        let gathered = Arc::new(Gather::<Processed>::new(all_workers));
        let (batch_tx, batch_rx) = bounded::<Result<Batch, Error>>(settings.prefetch);
        let mut threads = Vec::new();
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| -> Result<JoinHandle<()>, Error> {
            let scratch = scratch.clone();
            std::thread::Builder::new()
                .name(name.clone())
                .spawn(move || {
                    let _pools = scratch.bind();
                    f()
                })
                .map_err(|source| Error::ThreadStart { name, source })
        };

        // Readers: file reading runs ahead of decoding.
        let max_bytes = graph
            .nodes
            .iter()
            .filter_map(|n| n.op.max_input_bytes())
            .max()
            .unwrap_or(crate::decode::Limits::default().max_file_bytes);
        let io_threads = (worker_threads / 4).clamp(1, 4);
        // Disconnects once every reader is done: parked workers then leave.
        let (readers_alive, readers_done) = bounded::<()>(0);
        let reader = ReadStage {
            steps: Arc::new(Mutex::new(source.steps(
                &graph.reader,
                Walk {
                    batch: settings.batch,
                    max_bytes,
                    labels: graph.reader_labels.is_some(),
                    epochs: settings.epochs,
                    start,
                    stop: shutdown_rx.clone(),
                },
            ))),
            credits: StageInput {
                items: credit_rx,
                shutdown: shutdown_rx.clone(),
            },
            out: loaded_tx,
            stats: stats.clone(),
            max_bytes,
            // A few samples at once only from files (a shard's next sample may wait).
            hold: match &gpu {
                Some((stage, ..)) if source.dataset().is_some() => stage.hold.clone(),
                _ => Hold::new(1),
            },
            hold_for: HOLD_FOR,
        };
        for t in 0..io_threads {
            let r = reader.clone();
            let alive = readers_alive.clone();
            threads.push(spawn(
                format!("stokehold-read-{t}"),
                Box::new(move || {
                    r.run();
                    drop(alive);
                }),
            )?);
        }
        // The workers see the end of the input once every reader is gone.
        drop((reader, readers_alive));
        // Workers: decode and transform one sample at a time (CPU path), or prepare samples
        // for the device (GPU path).
        let worker_input = StageInput {
            items: loaded_rx,
            shutdown: shutdown_rx.clone(),
        };
        match &gpu {
            None => {
                let worker = CpuStage {
                    input: worker_input.clone(),
                    out: gathered.clone(),
                    source: source.clone(),
                    graph: graph.clone(),
                    settings,
                    stats: stats.clone(),
                    placing: placing.clone(),
                    max_bytes,
                };
                for t in 0..worker_threads {
                    let w = worker.clone();
                    threads.push(spawn(
                        format!("stokehold-worker-{t}"),
                        Box::new(move || w.run()),
                    )?);
                }
            }
            Some((stage, dev, plan)) => {
                let worker = GpuPrep {
                    input: worker_input.clone(),
                    out: gathered.clone(),
                    source: source.clone(),
                    graph: graph.clone(),
                    settings,
                    stats: stats.clone(),
                    placing: placing.clone(),
                    max_bytes,
                    plan: plan.clone(),
                    dev: dev.clone(),
                    split: stage.split.clone(),
                    staging: stage.staging.clone(),
                    worker_areas: stage.pools.worker_decoded.clone(),
                    parked: None,
                };
                for t in 0..all_workers {
                    let mut w = worker.clone();
                    if t >= worker_threads {
                        w.parked = Some((stage.gate.clone(), readers_done.clone()));
                    }
                    threads.push(spawn(
                        format!("stokehold-gpu-prep-{t}"),
                        Box::new(move || w.run()),
                    )?);
                }
            }
        }
        // Assembler.
        let links = Links {
            graph: graph.clone(),
            settings,
            stats: stats.clone(),
            placing,
            out: batch_tx,
            credits: credit_tx,
            credits_total: credits,
            shutdown: shutdown_rx,
            capacity,
            real_per_epoch: per_epoch,
            scheduled_per_epoch: scheduled,
            batches_per_epoch,
            gpu: gpu.as_ref().map(|g| g.0.clone()),
            upload,
            pin,
        };
        let done = gathered.clone();
        threads.push(spawn(
            "stokehold-assembler".into(),
            Box::new(move || {
                Assembler::new(links, start).run(&done);
                // Workers stop once nobody takes their results.
                done.close();
            }),
        )?);
        Ok(Pipeline {
            gathered,
            batches: batch_rx,
            shutdown: Some(shutdown_tx),
            threads,
            stats,
            graph,
            source,
            per_epoch,
            batches_per_epoch,
            batch_pool,
            device,
            worker_threads,
            scratch,
            gpu: gpu.map(|g| g.0),
            upload_device,
            pinned_pool,
            warnings,
            finished: false,
            epochs_logged: 0,
        })
    }
}

#[cfg(test)]
thread_local! {
    /// The cores a pipeline started on this thread counts (tests of the worker counts, on a
    /// machine of any size).
    pub(super) static TEST_CORES: std::cell::Cell<Option<usize>> =
        const { std::cell::Cell::new(None) };
}

/// The machine's cores.
fn cores() -> usize {
    #[cfg(test)]
    if let Some(n) = TEST_CORES.with(|c| c.get()) {
        return n;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Worker threads where `threads` is unset, on `cores` cores, for the CPU path (`gpu`:
/// `None`) or the GPU path on the device `gpu` describes.
///
/// The CPU path decodes and transforms on every core. The GPU path's workers prepare samples
/// (a header, the random parameters: ~30 µs each) and decode the CPU's share of the split:
/// half the cores, leaving the other half to the feeding thread, the assembler and the
/// training loop (on an H200's 16 cores 4, 8 and 16 workers made 16.6–17.0k, 18.1–18.5k and
/// 17.0k img/s with chroma repeated; with nvJPEG interpolating, 284 µs an image on the
/// feeding thread, the engines made 3.5k img/s and 4 workers decoded only 2.5k of the
/// rest). Without JPEG engines (most GPUs, or no nvJPEG) the workers decode every JPEG — the
/// GPU path leaves nvJPEG's CUDA decoders, whose Huffman stage is one host thread's, to our
/// decoder — so they get every core, as on the CPU path.
fn default_workers(cores: usize, gpu: Option<&DeviceDescription>) -> usize {
    match gpu {
        Some(d) if d.hardware_decoder => (cores / 2).max(2).min(cores),
        _ => cores,
    }
}

/// Refuses to start at `start` where its batches could not be the ones the run that recorded
/// it would have given: mid-epoch, another batch size or other ranks (where the position
/// records them); anywhere, a sample past the epoch's `scheduled` samples (the data set
/// changed). At an epoch's start the batches to come depend on neither.
fn resumable(start: &Position, run: &RunSettings, scheduled: usize) -> Result<(), Error> {
    let mid_epoch = !start.at_epoch_start();
    let why = "resume with the settings the run had, or from an epoch's start";
    if mid_epoch && start.batch_size != 0 && start.batch_size != run.batch {
        return Err(Error::Invalid {
            at: "setting 'batch'".into(),
            message: format!(
                "the position, mid-epoch, was recorded with batches of {}, the pipeline has \
                 batches of {}",
                start.batch_size, run.batch
            ),
            help: Some(format!(
                "resume with the batch size the run started with (batch = {}); {why}",
                start.batch_size
            )),
        });
    }
    let ranks = (start.rank, start.world_size);
    if mid_epoch && start.world_size != 0 && ranks != (run.rank, run.world_size) {
        return Err(Error::Invalid {
            at: "reader 'rank'/'world_size'".into(),
            message: format!(
                "the position, mid-epoch, was recorded by rank {} of {}, the pipeline is rank {} \
                 of {}",
                start.rank, start.world_size, run.rank, run.world_size
            ),
            help: Some(format!(
                "each rank resumes from the position it recorded, with as many ranks \
                 (--rank {} --world-size {}); {why}",
                start.rank, start.world_size
            )),
        });
    }
    if start.sample > scheduled {
        return Err(Error::Invalid {
            at: "resume position".into(),
            message: format!(
                "it is at sample {} of its epoch, which has {scheduled} samples here",
                start.sample
            ),
            help: Some("resume on the data set the run read (it has fewer samples now)".into()),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(engines: bool) -> DeviceDescription {
        DeviceDescription {
            name: "a GPU".into(),
            emulated: false,
            device_id: 0,
            total_memory: 80 << 30,
            decoder: "nvJPEG".into(),
            hardware_decoder: engines,
        }
    }

    #[test]
    fn the_gpu_path_takes_half_the_cores_beside_jpeg_engines_and_every_core_without() {
        assert_eq!(default_workers(16, None), 16);
        assert_eq!(default_workers(16, Some(&device(true))), 8);
        assert_eq!(default_workers(16, Some(&device(false))), 16);
        // At least 2 where there are 2 cores.
        assert_eq!(default_workers(2, Some(&device(true))), 2);
        assert_eq!(default_workers(3, Some(&device(true))), 2);
        assert_eq!(default_workers(1, Some(&device(true))), 1);
    }
}
