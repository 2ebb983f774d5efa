//! Whether a pipeline can run on the GPU path, and each sample's plan for it.
//!
//! The GPU path runs one shape of pipeline: the reader's bytes → `decode` → a chain of
//! operators the fused kernel composes ([`SampleChain`]) → one image output (and the
//! reader's labels). [`GpuPlan::new`] checks that once, when the pipeline starts, and says
//! which operator stands in the way otherwise.
//!
//! Per sample, [`GpuPlan::prepare`] works on the host only: it parses the header, draws the
//! operators' random parameters with the very setups the CPU path runs (so both paths pick
//! the same crops and flips), and decides where the pixels come from:
//! - **on the device**: nvJPEG (or the emulated device) decodes the crop window's region of
//!   interest of the image as stored (padded when the decoder pads ROIs), and the chain reads
//!   the window's part of it through the EXIF orientation; the header read here goes with the
//!   sample, so the device's decoder reads no header again;
//! - **on the CPU** ([`Source::Host`]), decoded on the worker threads and uploaded:
//!   what the device's decoder routes to the CPU (not a JPEG, CMYK/YCCK, arithmetic coding,
//!   12-bit, unusual sampling, anything the CPU decoder rejects), what the JPEG engines
//!   don't take (nvJPEG's CUDA decoders would decode it with as much host time as ours
//!   and SM time besides), progressive JPEGs (our progressive decoder on several threads
//!   beats nvJPEG's single-threaded Huffman stage), RGB-stored JPEGs (nvJPEG documents
//!   YCbCr only), gray output;
//! - **all of it on the CPU** ([`Prepared::Finished`]): a sample the chain can't take (a
//!   crop reaching outside its image needs a filled border) runs the CPU operators and its
//!   result is copied into its place in the batch.

use std::sync::Arc;

use crate::cuda::chain::FusedSample;
use crate::cuda::gpu_device::GpuDevice;
use crate::cuda::kernel::Kernel;
use crate::cuda::staging::StagedBytes;
use crate::decode::exif::displayed_rect;
use crate::decode::{ColorMode, DecodeOptions, ImageInfo, JpegHeader, ParsedImage, Upsampling};
use crate::error::SampleErrorKind;
use crate::fusion::chain::{ChainOp, SampleChain};
use crate::image::{DType, Image, Layout};
use crate::nvjpeg::fallback::JpegFacts;
use crate::nvjpeg::safe::WorkerDecoder;
use crate::nvjpeg::{roi_for_display_window, FallbackReason, GpuRoute, Roi, Route};
use crate::ops::decode::Decode;
use crate::ops::{SampleKey, SetupInput};
use crate::pipeline::graph::Graph;
use crate::value::ValueType;

use super::gpu_decoded::Rebuild;
use super::gpu_huffman::GpuHuffman;
use super::gpu_split::DecoderSplit;
use super::gpu_staging::WorkerStaging;

/// Byte alignment of each image in a decode area and each sample in an output.
pub(super) const ALIGN: usize = 256;

/// The [`Source::Host`] cause of a sample the decoders' split gave the CPU (the engines
/// would have taken it).
pub(super) const SPLIT_CAUSE: &str = "share";

/// Where a sample's decoded pixels come from (the header in place: the sample is boxed in
/// transit, and a box of its own would allocate a sample).
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Source {
    /// The device decodes region `roi` (all of the image for `None`) of the image as stored,
    /// as its [`GpuDevice::region_to_decode`] for `roi` says: `stored` = (rows, columns) of what
    /// it writes, which may be more than the region (nvJPEG before 13.3 pads ROIs); the chain reads
    /// the window's part of it through the EXIF orientation (the sample's [`FusedSample`]
    /// holds both). `window` is the crop window as displayed, in the whole image (what a
    /// CPU decode takes if the device fails).
    Device {
        /// The header read for the sample, which the device's decoder takes (in place: a
        /// header's lists are short and held in place, and the sample is boxed in transit).
        header: JpegHeader,
        roi: Option<Roi>,
        window: crate::cuda::chain::Rect,
        stored: (usize, usize),
        route: GpuRoute,
        /// The device's JPEG engines were asked on the prep worker and take it
        /// ([`GpuDevice::engines_accept`]).
        engines_checked: bool,
        /// The file's bytes copied into pinned memory by the worker, which the decoder reads
        /// in place (`None`: the feeding thread copies them).
        staged: Option<StagedBytes>,
        /// Where the device decoded it, once the feeding thread has submitted it ahead of
        /// the assembler (`assembler::ahead`); the batch's fill takes it over.
        decoded: Option<super::gpu_decoded::DeviceDecoded>,
    },
    /// Decoded on the CPU (u8 HWC, as displayed), uploaded; `cause` says why.
    Host {
        image: Image,
        cause: &'static str,
        /// The pixels copied into pinned memory by the worker, uploaded from there
        /// (`None`: the assembling thread copies them).
        staged: Option<StagedBytes>,
    },
}

/// A sample ready for the device (boxed where it travels, so the variants' sizes don't
/// matter).
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Prepared {
    /// Through the chain kernels: its encoded bytes, where its pixels come from, and what
    /// the chain does with them (the window relative to the source as decoded).
    Chain {
        bytes: Arc<Vec<u8>>,
        source: Source,
        fused: FusedSample,
    },
    /// Computed by the CPU operators (the chain can't take it), to be copied into its place.
    Finished { image: Image },
}

/// What [`GpuPlan::prepare`] gives: the prepared sample and the parameters drawn; or
/// `Err(Ok(kind))`, a bad sample (its CPU decode failed, as on the CPU path); or
/// `Err(Err(why))`, a sample for the CPU operators.
pub(crate) type Prepare =
    Result<(Prepared, crate::ops::SampleParams), Result<SampleErrorKind, NeedsCpu>>;

/// Why a sample goes through the CPU operators whole (the CPU path then decides whether it
/// is good, with its own error).
#[derive(Debug)]
pub(crate) struct NeedsCpu(pub(crate) String);

/// The GPU path's view of a pipeline.
pub(crate) struct GpuPlan {
    /// The pipeline planned with every operator on its own (the chain is composed from
    /// them, not from the CPU's fused operators).
    unfused: Graph,
    decode_node: usize,
    chain_nodes: Vec<usize>,
    decode: DecodeOptions,
    /// Which of the pipeline's outputs is the image output.
    pub(crate) image_output: usize,
    /// The output's element type and layout.
    pub(crate) dtype: DType,
    pub(crate) layout: Layout,
    /// Decode whole images on the device, never a region of interest
    /// (`STOKEHOLD_DECODE_WHOLE=1`, to tell a decoder's ROI handling apart on a GPU).
    decode_whole: bool,
}

impl std::fmt::Debug for GpuPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuPlan")
            .field("chain", &self.chain_nodes.len())
            .finish()
    }
}

/// The most samples a batched launch takes (grid.y).
pub(crate) const MAX_BATCH: usize = 65535;

impl GpuPlan {
    /// The plan for `graph` in batches of `batch`, or why the GPU path can't run it
    /// (naming the operator).
    pub(crate) fn new(graph: &Graph, batch: usize) -> Result<GpuPlan, String> {
        let spec = &graph.spec;
        if batch > MAX_BATCH {
            return Err(format!(
                "batch {batch} is over the {MAX_BATCH} samples one launch takes"
            ));
        }
        let unfused = Graph::build_unfused(spec).map_err(|e| e.message)?;
        let nodes = &unfused.nodes;
        let decode_node = nodes
            .iter()
            .position(|n| n.inputs == [unfused.reader_encoded])
            .ok_or("no operator reads the reader's files")?;
        if nodes[decode_node].kind != "decode" {
            return Err(format!(
                "operator '{}' ({}) reads the files; the GPU path starts with 'decode'",
                nodes[decode_node].name, nodes[decode_node].kind
            ));
        }
        // The chain: each operator reads the one before it, nothing else reads between.
        let mut chain_nodes = Vec::new();
        let mut edge = nodes[decode_node].outputs[0];
        let mut consumed = vec![decode_node];
        loop {
            if unfused.outputs.contains(&edge) {
                break;
            }
            let readers: Vec<usize> = (0..nodes.len())
                .filter(|&k| nodes[k].inputs.contains(&edge))
                .collect();
            match readers.as_slice() {
                [k] if nodes[*k].inputs.len() == 1 && nodes[*k].outputs.len() == 1 => {
                    chain_nodes.push(*k);
                    consumed.push(*k);
                    edge = nodes[*k].outputs[0];
                }
                _ => {
                    return Err(format!(
                        "edge '{}' feeds several operators or is read with other inputs; \
                         the GPU path runs one chain from 'decode' to one image output",
                        unfused.edge_names[edge]
                    ))
                }
            }
        }
        if let Some(n) = nodes
            .iter()
            .enumerate()
            .find(|(k, _)| !consumed.contains(k))
        {
            return Err(format!(
                "operator '{}' is not on the chain from 'decode' to the image output",
                n.1.name
            ));
        }
        let image_output = unfused
            .outputs
            .iter()
            .position(|&o| o == edge)
            .expect("the chain ends at an output");
        for (k, &o) in unfused.outputs.iter().enumerate() {
            if k != image_output && Some(o) != unfused.reader_labels {
                return Err(format!(
                    "output '{}' is neither the chain's images nor the reader's labels",
                    unfused.edge_names[o]
                ));
            }
        }
        let ValueType::Image(t) = unfused.edge_types[edge] else {
            return Err("the chain's output is not an image".into());
        };
        let decode = *Decode::from_args(&nodes[decode_node].args).options();
        let plan = GpuPlan {
            decode_node,
            chain_nodes,
            decode,
            image_output,
            dtype: t.dtype,
            layout: t.layout,
            unfused,
            decode_whole: std::env::var("STOKEHOLD_DECODE_WHOLE").is_ok_and(|v| v == "1"),
        };
        if plan.decode_whole {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                tracing::warn!(
                    "STOKEHOLD_DECODE_WHOLE=1: the GPU path decodes whole images and crops in \
                     its kernels (no region of interest asked of the decoder)"
                )
            });
        }
        plan.chain().map_err(|e| {
            format!(
                "operator '{}' can't run in the fused GPU chain: {}",
                e.op, e.reason
            )
        })?;
        Ok(plan)
    }

    /// The chain of operators after the decoder, composed.
    pub(crate) fn chain(&self) -> Result<SampleChain<'_>, crate::cuda::chain::ChainError> {
        let nodes = &self.unfused.nodes;
        SampleChain::new(
            self.chain_nodes
                .iter()
                .map(|&k| ChainOp {
                    name: &nodes[k].name,
                    key: nodes[k].key,
                    op: &*nodes[k].op,
                })
                .collect(),
        )
    }

    /// The kernels the fused chain launches ([`crate::cuda::chain::ChainSteps::kernels`]: the chain's, and
    /// color jitter's where a step jitters); a device loads them when it opens (the chroma
    /// rebuild's are the device's own choice: [`crate::cuda::RealDevice::with_upsampling`]).
    pub(crate) fn chain_kernels(&self) -> Vec<Kernel> {
        // `new` composed this chain already; the chain's kernel alone is the fallback that
        // can't be reached.
        self.chain()
            .map_or_else(|_| vec![Kernel::Chain], |c| c.steps().kernels())
    }

    /// Whether the stage rebuilds libjpeg's interpolated chroma from what `dev` decodes: the
    /// pipeline asks for it (`upsampling = "fancy"`) and the device repeats chroma.
    pub(crate) fn rebuilds_chroma(&self, dev: &dyn GpuDevice) -> bool {
        self.decode.upsampling == Upsampling::Fancy && !dev.decodes_fancy_chroma()
    }

    /// The decoder's options.
    pub(crate) fn decode_options(&self) -> &DecodeOptions {
        &self.decode
    }

    /// Sample `index` of `epoch` with file `bytes`, on the host: the parameters drawn and
    /// where its pixels come from, or the reason it runs through the CPU operators whole
    /// (see [`Prepare`]). The header is read once, here, and goes with the sample to the
    /// device's decoder (or decodes it on the CPU).
    pub(crate) fn prepare(
        &self,
        chain: &SampleChain<'_>,
        dev: &dyn GpuDevice,
        (split, staging, huffman): (&DecoderSplit, &WorkerStaging, Option<&mut GpuHuffman>),
        bytes: Arc<Vec<u8>>,
        (seed, epoch, index, pos): (u64, u64, usize, usize),
    ) -> Prepare {
        let needs_cpu = |why: String| Err(Err(NeedsCpu(why)));
        let opts = &self.decode;
        let parsed = match ParsedImage::parse(&bytes, opts) {
            Ok(p) => p,
            Err(e) => return needs_cpu(format!("header: {e}")),
        };
        let info: ImageInfo = parsed.info();
        let node = &self.unfused.nodes[self.decode_node];
        let key = SampleKey {
            seed,
            epoch,
            index,
            op_key: node.key,
        };
        let shape = match node.op.setup(SetupInput::Encoded(&info), &key) {
            Ok(s) => s.output,
            Err(e) => return needs_cpu(e),
        };
        let plan = match chain.sample(shape, seed, epoch, index) {
            Ok(p) => p,
            Err(e) => return needs_cpu(e.to_string()),
        };
        let mut fused = plan.fused;
        let whole = fused.window == (0, 0, info.height, info.width);
        // The split sends some of what the engines take to this thread's decoder: its GPU
        // decoder for a large photo where it has one, else the CPU's.
        let pixels = info.width * info.height;
        let on_gpu_here = huffman.is_some() && WorkerDecoder::takes(pixels);
        // Pixels this thread decodes on the GPU are not uploaded: no share of the batch's
        // budget for CPU-decoded pixels.
        let upload = match on_gpu_here {
            true => 0,
            false => host_bytes(fused.window),
        };
        let mut here = None;
        let route = match self.route(dev, &parsed) {
            Ok(r) if split.to_cpu(seed, (epoch, index, pos), upload) => {
                match huffman {
                    Some(h) if on_gpu_here => {
                        here = Some(h);
                        // Counted as nvJPEG's CUDA decoder's (`device-decoder:hybrid`).
                        Ok((GpuRoute::Hybrid, r.1))
                    }
                    _ => Err(SPLIT_CAUSE),
                }
            }
            r => r,
        };
        // The CPU decodes the sample (its crop window) on this thread, for `cause`.
        let on_host = |parsed: ParsedImage<'_>,
                       window: &mut crate::cuda::chain::Rect,
                       cause: &'static str| {
            let t0 = std::time::Instant::now();
            let decoded = if whole {
                parsed.decode()
            } else {
                parsed.decode_window(*window)
            };
            let image = decoded.map_err(|e| Ok(SampleErrorKind::Decode(e)))?;
            if !whole {
                *window = (0, 0, image.height, image.width);
            }
            // The pinned copy the upload reads in place, made here rather than on the
            // assembling thread (a 1.8 MP photo's crop is megabytes).
            let staged = staging
                .pixels
                .stage(image.pixels.as_bytes())
                .unwrap_or_else(|e| {
                    tracing::debug!("no pinned slab for a decoded image ({e}): copied later");
                    None
                });
            if cause == SPLIT_CAUSE {
                split.decoded_on_cpu(t0.elapsed());
            }
            Ok(Source::Host {
                image,
                cause,
                staged,
            })
        };
        let source = match route {
            Err(cause) => on_host(parsed, &mut fused.window, cause)?,
            Ok((route, facts)) => {
                let orientation = if opts.apply_exif { info.orientation } else { 1 };
                let window = fused.window;
                // The crop window in the image as stored.
                let region = if whole {
                    None
                } else {
                    let (t, l, h, w) = window;
                    let win = Roi {
                        x: l,
                        y: t,
                        width: w,
                        height: h,
                    };
                    let r = roi_for_display_window(win, orientation, facts.width, facts.height)
                        .ok_or_else(|| {
                            Err(NeedsCpu(format!("window {window:?} outside the image")))
                        })?;
                    Some(r)
                };
                let roi = region.filter(|_| !self.decode_whole);
                // What the device writes (the region, or more: padded ROIs) and where the
                // region lies in it, read through the orientation.
                let decoded = dev
                    .region_to_decode(
                        parsed.jpeg_header().expect("routed to the device"),
                        roi,
                        self.rebuilds_chroma(dev),
                    )
                    .map_err(|e| Err(NeedsCpu(format!("the device's decode plan: {e}"))))?;
                // nvJPEG's own support check, here rather than on the thread that feeds the
                // engines; what they refuse this thread decodes now.
                let engines_check = match here {
                    Some(_) => None,
                    None => dev.engines_accept(&bytes, decoded.decode),
                };
                let engines_checked = match engines_check {
                    Some(false) => {
                        let source = on_host(parsed, &mut fused.window, "refused-by-jpeg-engines")?;
                        return Ok((
                            Prepared::Chain {
                                bytes,
                                source,
                                fused,
                            },
                            plan.params,
                        ));
                    }
                    Some(true) => true,
                    None => false,
                };
                // The copy the engines read, made here rather than on the feeding thread.
                let staged = match here {
                    Some(_) => None,
                    None => staging.files.stage(&bytes).unwrap_or_else(|e| {
                        tracing::debug!("no pinned slab for an encoded file ({e}): copied later");
                        None
                    }),
                };
                let header = parsed.into_jpeg_header().expect("routed to the device");
                // Decoding the whole image for a region, the chain reads the region in it.
                let w = match (roi, region) {
                    (None, Some(r)) => r,
                    _ => decoded.window,
                };
                fused.window = displayed_rect(
                    (w.y, w.x, w.height, w.width),
                    decoded.height,
                    decoded.width,
                    orientation,
                );
                fused.orientation = orientation;
                let stored = (decoded.height, decoded.width);
                // Decoded here by this thread's GPU decoder, or by the feeding thread's call.
                let on_worker = match here {
                    None => None,
                    Some(h) => {
                        let t0 = std::time::Instant::now();
                        let rebuild = match self.rebuilds_chroma(dev) {
                            true => Rebuild::of(&header, decoded.decode, stored.1, stored.0),
                            false => None,
                        };
                        let r = h.decode(dev, &bytes, pixels, decoded.decode, stored, rebuild);
                        split.decoded_on_cpu(t0.elapsed());
                        match r {
                            Ok(d) => Some(d),
                            // Refused: the CPU path decides, as for any sample it can't take.
                            Err(e) => {
                                return Err(Err(NeedsCpu(format!("the worker's GPU decoder: {e}"))))
                            }
                        }
                    }
                };
                Source::Device {
                    header,
                    roi,
                    window,
                    stored,
                    route,
                    engines_checked,
                    staged,
                    decoded: on_worker,
                }
            }
        };
        Ok((
            Prepared::Chain {
                bytes,
                source,
                fused,
            },
            plan.params,
        ))
    }

    /// Which of the device decoder's backends takes the image `parsed`, or why it is
    /// decoded on the CPU (a short, stable cause).
    fn route(
        &self,
        dev: &dyn GpuDevice,
        parsed: &ParsedImage<'_>,
    ) -> Result<(GpuRoute, JpegFacts), &'static str> {
        if self.decode.color == ColorMode::Gray {
            return Err("gray-output");
        }
        let Some(header) = parsed.jpeg_header() else {
            return Err("not-jpeg");
        };
        match dev.route(header) {
            Route::Cpu(reason) => Err(match reason {
                FallbackReason::NotJpeg => "not-jpeg",
                FallbackReason::Rejected(_) => "rejected-by-header-checks",
                FallbackReason::FourComponents { ycck: true } => "ycck",
                FallbackReason::FourComponents { ycck: false } => "cmyk",
                FallbackReason::Arithmetic => "arithmetic",
                FallbackReason::RgbStored => "rgb-stored",
                FallbackReason::Sampling(_) => "sampling",
                FallbackReason::Irregular(_) => "irregular-segment",
                FallbackReason::NvjpegUnsupported(_) => "nvjpeg-unsupported",
                FallbackReason::NvjpegFailed(_) => "nvjpeg-failed",
            }),
            Route::Gpu(_, f) if f.progressive => Err("progressive"),
            // nvJPEG's CUDA decoders do their Huffman decoding on the host as slowly as our
            // decoder does all of it (docs/performance.md) and put their
            // IDCT on the SMs the training needs: ours decodes what the engines don't take.
            Route::Gpu(GpuRoute::Hybrid, _) => Err("not-for-jpeg-engines"),
            // libjpeg repeats such an image's chroma: neither nvJPEG's interpolation nor our
            // rebuild would give its pixels.
            Route::Gpu(_, f)
                if self.decode.upsampling == Upsampling::Fancy
                    && f.chroma_repeated_when_fancy() =>
            {
                Err("narrow-chroma")
            }
            Route::Gpu(r, f) => Ok((r, f)),
        }
    }
}

/// Bytes of the pixels the CPU decoder gives for `window` (three channels at most), aligned
/// as the upload places them.
fn host_bytes((_, _, height, width): (usize, usize, usize, usize)) -> usize {
    (height * width * 3).next_multiple_of(ALIGN)
}
