//! Launching the fused chain over a batch: one launch of the chain kernel, or — when some
//! sample has color jitter — resample and flip, jitter, then normalize, cast and lay out.

use crate::cuda::batch::{DeviceBatch, DeviceImage};
use crate::cuda::launch::{batch_grid, launch, Arg, BLOCK};
use crate::cuda::module::KernelModule;
use crate::cuda::run::run_jitter;
use crate::cuda::Device;
use crate::error::Error;
use crate::image::{DType, Layout};
use crate::resample::Interp;

use super::sample::{build_desc, FusedSample, JitterSample, SourceDims};

/// The chain kernel's entry point.
const CHAIN_ENTRY: &str = "fused_crop_resize_normalize";

/// Rows and columns of the output tile one block of the resampling kernels produces
/// (`TILE_H`, `TILE_W` of `kernels/common/resample.cuh`; a test checks they match).
pub(crate) const TILE: (usize, usize) = (16, 32);

/// Tiles of an `h` × `w` output: the blocks that keep every tile of it busy at once.
pub(crate) fn tiles(h: usize, w: usize) -> u64 {
    (h.div_ceil(TILE.0) * w.div_ceil(TILE.1)) as u64
}

/// Runs the resampling kernel `entry` of `module` over a batch (shared by the fused chain
/// and the standalone resize).
pub(crate) fn run_resample(
    dev: &Device,
    module: KernelModule,
    entry: &'static str,
    inputs: &[DeviceImage],
    samples: &[FusedSample],
    out_dtype: DType,
    out_layout: Layout,
) -> Result<DeviceBatch, Error> {
    if inputs.len() != samples.len() || inputs.is_empty() {
        return Err(Error::Cuda(format!(
            "{} images for {} sample descriptions",
            inputs.len(),
            samples.len()
        )));
    }
    if samples
        .iter()
        .any(|s| s.dtype != out_dtype || s.layout != out_layout)
    {
        return Err(Error::Cuda(
            "every sample of a batch must have the same output dtype and layout".into(),
        ));
    }
    let mut table = Vec::new();
    let mut descs = Vec::with_capacity(samples.len());
    for (im, s) in inputs.iter().zip(samples) {
        im.check()?;
        descs.push(build_desc(SourceDims::of(im)?, s, &mut table)?);
    }
    let shapes: Vec<_> = inputs
        .iter()
        .zip(samples)
        .map(|(im, s)| {
            let (h, w) = s.output_size();
            (h, w, im.channels)
        })
        .collect();
    let (out, placed) = DeviceBatch::allocate(dev, &shapes, out_dtype)?;
    let stream = dev.stream();
    for ((d, im), p) in descs.iter_mut().zip(inputs).zip(&placed) {
        d.src = im.address(stream);
        d.dst = out.address(stream, p.offset);
    }
    if table.is_empty() {
        table.push(0);
    }
    let descs_dev = dev.upload_pod(&descs)?;
    let table_dev = dev.upload_pod(&table)?;
    let func = dev.modules().function(module, entry)?;
    // One block per output tile of the largest sample (the kernel strides over the rest).
    let max_tiles = shapes
        .iter()
        .map(|&(h, w, _)| tiles(h, w))
        .max()
        .unwrap_or(1);
    let cfg = batch_grid(max_tiles * u64::from(BLOCK), samples.len())?;
    let args = [
        Arg::Buf(descs_dev.slice()),
        Arg::Buf(table_dev.slice()),
        Arg::U32(samples.len() as u32),
    ];
    // SAFETY: the kernel takes (const FusedDesc*, const i32*, u32). Every descriptor's `src`
    // covers the image checked above (window inside, pitch ≥ row), `dst` the packed output
    // placed for it in `out` (out_h · out_w · channels elements of `out_dtype`), and its
    // table offsets index entries pushed into `table` for it. The uploads, inputs and output
    // stay alive until the kernel is done: they are pooled buffers reused only by later work
    // on this same stream, and `out` moves into the returned batch.
    unsafe { launch(stream, &func, cfg, &args)? };
    DeviceBatch::finish(dev, out, placed, out_dtype, out_layout)
}

/// Runs the fused chain over a batch: sample `i` of the output is `samples[i]` applied to
/// `inputs[i]` (u8 HWC, 1 to 4 channels). Every sample must ask for the same dtype and
/// layout. Without color jitter this is one kernel launch for the whole batch; with it,
/// three batched steps, because contrast needs each image's mean luma after the steps
/// before it, which one launch cannot compute: resample and flip into u8 HWC, jitter in
/// place, then one more chain launch (no resampling) normalizes, casts and lays out. All on
/// `dev`'s stream; the returned batch's event completes when it is written.
pub fn run_fused_batch(
    dev: &Device,
    inputs: &[DeviceImage],
    samples: &[FusedSample],
) -> Result<DeviceBatch, Error> {
    let first = samples
        .first()
        .ok_or_else(|| Error::Cuda("empty batch".into()))?;
    let chain = |inputs: &[DeviceImage], samples: &[FusedSample], dtype, layout| {
        run_resample(
            dev,
            KernelModule::Chain,
            CHAIN_ENTRY,
            inputs,
            samples,
            dtype,
            layout,
        )
    };
    let Some(stages) = JitterStages::of(samples) else {
        return chain(inputs, samples, first.dtype, first.layout);
    };
    let resampled = chain(inputs, &stages.geometry, DType::U8, Layout::Hwc)?;
    let resampled = resampled.images();
    let descs = resampled
        .iter()
        .zip(&stages.jitter)
        .map(|(im, j)| j.desc(im.height * im.width))
        .collect::<Result<Vec<_>, Error>>()?;
    let jittered = run_jitter(dev, &resampled, descs)?;
    chain(&jittered.images(), &stages.rest, first.dtype, first.layout)
}

/// A batch with color jitter, as three batched steps: `geometry` (resample and flip into
/// u8 HWC), `jitter` (in place; no adjustment for samples without one), then `rest` (a chain
/// launch without resampling that normalizes, casts and lays out).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JitterStages {
    pub geometry: Vec<FusedSample>,
    pub jitter: Vec<JitterSample>,
    pub rest: Vec<FusedSample>,
}

impl JitterStages {
    /// The stages for `samples`, or `None` when no sample has color jitter (one launch).
    pub(crate) fn of(samples: &[FusedSample]) -> Option<JitterStages> {
        if samples.iter().all(|s| s.jitter.is_none()) {
            return None;
        }
        let geometry = samples
            .iter()
            .map(|s| FusedSample {
                jitter: None,
                normalize: None,
                dtype: DType::U8,
                layout: Layout::Hwc,
                ..*s
            })
            .collect();
        let jitter = samples
            .iter()
            .map(|s| s.jitter.unwrap_or(JitterSample::NONE))
            .collect();
        let rest = samples
            .iter()
            .map(|s| {
                let (h, w) = s.output_size();
                FusedSample {
                    normalize: s.normalize,
                    dtype: s.dtype,
                    layout: s.layout,
                    ..FusedSample::resize((0, 0, h, w), h, w, s.interp, s.antialias)
                }
            })
            .collect();
        Some(JitterStages {
            geometry,
            jitter,
            rest,
        })
    }
}

/// Resizes window `windows[i]` = (top, left, height, width) of image `i` to `sizes[i]` =
/// (out_h, out_w) with the `resize_u8` kernel (the chain's resampler alone), bit-exact with
/// the CPU's `crate::resample::resize_u8`. u8 HWC images, 1 to 4 channels.
pub fn resize_batch(
    dev: &Device,
    inputs: &[DeviceImage],
    windows: &[(usize, usize, usize, usize)],
    sizes: &[(usize, usize)],
    interp: Interp,
    antialias: bool,
) -> Result<DeviceBatch, Error> {
    if windows.len() != inputs.len() || sizes.len() != inputs.len() {
        return Err(Error::Cuda("one window and one size per image".into()));
    }
    let samples: Vec<_> = windows
        .iter()
        .zip(sizes)
        .map(|(&w, &(oh, ow))| FusedSample::resize(w, oh, ow, interp, antialias))
        .collect();
    run_resample(
        dev,
        KernelModule::Resize,
        "resize_u8",
        inputs,
        &samples,
        DType::U8,
        Layout::Hwc,
    )
}
