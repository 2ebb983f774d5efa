//! The GPU path's worker stage: for each loaded sample, on the host, the header parsed, the
//! random parameters drawn and the pixel source decided ([`GpuPlan::prepare`]); JPEGs the
//! device's decoder doesn't take are decoded here, on the worker threads. A sample the chain
//! can't take runs the CPU operators whole. Bad samples get the `on_error` policy exactly as
//! on the CPU path (the same replacement code).

use super::gpu_huffman::GpuHuffman;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use crate::cuda::gpu_device::GpuDevice;
use crate::error::SampleErrorKind;
use crate::pipeline::graph::Graph;
use crate::reader::source::Source as DataSource;
use crate::value::Value;

use super::cpu_stage::{
    process_with_replacements, run_sample, run_worker, Failure, Output, Processed, Sample,
    SampleOutput,
};
use super::gather::Gather;
use super::gpu_plan::{GpuPlan, Prepared, Source};
use super::gpu_split::DecoderSplit;
use super::placement::Placing;
use super::read_stage::LoadedGroup;
use super::run_settings::RunSettings;
use super::stage_loop::StageInput;
use super::stats::{add_ns, Stats};
use super::worker_gate::WorkerGate;

/// One worker thread's share of the stage (clone it for each thread).
#[derive(Clone)]
pub(super) struct GpuPrep {
    pub(super) input: StageInput<LoadedGroup>,
    pub(super) out: Arc<Gather<Processed>>,
    /// The data set, for replacements under `on_error = "replace"`.
    pub(super) source: DataSource,
    /// The pipeline as the CPU path runs it (for samples the chain can't take).
    pub(super) graph: Arc<Graph>,
    pub(super) settings: RunSettings,
    pub(super) stats: Arc<Stats>,
    /// Placement without places: samples run on the CPU come back as images.
    pub(super) placing: Arc<Placing>,
    pub(super) max_bytes: u64,
    pub(super) plan: Arc<GpuPlan>,
    pub(super) dev: Arc<dyn GpuDevice>,
    /// Which decoder takes what the engines could.
    pub(super) split: Arc<DecoderSplit>,
    /// Where the engines' encoded files and the pixels decoded here are copied (pinned
    /// memory).
    pub(super) staging: Arc<super::gpu_staging::WorkerStaging>,
    /// The pool of what a worker's own GPU decoder writes (`gpu_huffman`).
    pub(super) worker_areas: Arc<crate::cuda::pool::DevicePool>,
    /// For a worker beyond the default count: the gate it waits at, and the channel that
    /// disconnects once the readers are done (`worker_gate`).
    pub(super) parked: Option<(Arc<WorkerGate>, crossbeam_channel::Receiver<()>)>,
}

impl GpuPrep {
    /// Prepares samples until the readers are done, the assembler is gone or the pipeline
    /// shuts down.
    pub(super) fn run(self) {
        if let Some((gate, readers)) = &self.parked {
            if !gate.park(readers, &self.input.shutdown) {
                self.out.sender_done();
                return;
            }
        }
        let chain = match self.plan.chain() {
            Ok(c) => c,
            // Checked when the pipeline started; never expected.
            Err(e) => {
                tracing::error!("the GPU chain: {e}");
                self.out.sender_done();
                return;
            }
        };
        // This thread's own GPU decoder for large photos, where asked for and there is one.
        let huffman =
            std::cell::RefCell::new(GpuHuffman::for_worker(&*self.dev, &self.worker_areas));
        run_worker(&self.input, &self.out, |at, scheduled, bytes| {
            let run = |index: usize, path: &Path, label: i64, bytes: Arc<Vec<u8>>| {
                let mut huffman = huffman.borrow_mut();
                self.prepare(&chain, at, (index, path, label), bytes, huffman.as_mut())
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
        });
    }

    /// One sample's outputs: the prepared image and the labels.
    fn prepare(
        &self,
        chain: &crate::fusion::chain::SampleChain<'_>,
        at: Sample,
        (index, path, label): (usize, &Path, i64),
        bytes: Arc<Vec<u8>>,
        huffman: Option<&mut GpuHuffman>,
    ) -> Result<SampleOutput, Failure> {
        let g = &*self.graph;
        let t0 = Instant::now();
        let seed = self.settings.seed;
        let cpu_before = self.split.cpu_ns.load(std::sync::atomic::Ordering::Relaxed);
        let prepared = self.plan.prepare(
            chain,
            &*self.dev,
            (&self.split, &self.staging, huffman),
            bytes.clone(),
            (seed, at.epoch, index, at.pos),
        );
        let spent = t0.elapsed();
        add_ns(&self.stats.gpu_prep_ns, spent);
        // The split's decodes on other threads may land in between: close enough, and never
        // more than this sample's own time is taken off.
        let decoded = self.split.cpu_ns.load(std::sync::atomic::Ordering::Relaxed) - cpu_before;
        self.split
            .prepared(spent.saturating_sub(std::time::Duration::from_nanos(decoded)));
        let (prepared, params) = match prepared {
            Ok(p) => p,
            Err(Ok(kind)) => return Err(Failure::Sample(kind)),
            Err(Err(needs)) => {
                // The CPU path decides: its result, or its error, is this sample's.
                let (outs, params) = run_sample(
                    g,
                    seed,
                    &self.stats,
                    &self.placing,
                    (at.epoch, at.pos),
                    index,
                    path,
                    label,
                    bytes,
                )?;
                let mut outs = outs;
                let k = self.plan.image_output;
                let image = match std::mem::replace(&mut outs[k], Output::Value(Value::Label(0))) {
                    Output::Value(Value::Image(im)) => im,
                    Output::Placed(p) => p.to_image().ok_or_else(|| {
                        Failure::Sample(SampleErrorKind::Op {
                            op: "gpu".into(),
                            message: "a placed image could not be read back".into(),
                        })
                    })?,
                    _ => unreachable!("the image output is an image"),
                };
                self.stats.count_gpu_source("cpu-operators");
                tracing::debug!("{} runs on the CPU operators: {}", path.display(), needs.0);
                outs[k] = Output::Device(Box::new(Prepared::Finished { image }));
                return Ok((outs, params));
            }
        };
        match &prepared {
            Prepared::Chain {
                source: Source::Device { route, .. },
                ..
            } => self.stats.count_gpu_source(match route {
                crate::nvjpeg::GpuRoute::Hardware => "device-decoder:hardware",
                crate::nvjpeg::GpuRoute::Hybrid => "device-decoder:hybrid",
            }),
            Prepared::Chain {
                source: Source::Host { cause, .. },
                ..
            } => self.stats.count_gpu_source(&format!("cpu-decoder:{cause}")),
            Prepared::Finished { .. } => {}
        }
        let mut prepared = Some(prepared);
        let outs = g
            .outputs
            .iter()
            .enumerate()
            .map(|(k, _)| {
                if k == self.plan.image_output {
                    Output::Device(Box::new(prepared.take().expect("one image output")))
                } else {
                    Output::Value(Value::Label(label))
                }
            })
            .collect();
        Ok((outs, params))
    }
}
