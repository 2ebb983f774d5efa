//! How the fused chain is launched over a batch: blocks by output tile (`tiles`), and —
//! when some sample has color jitter — three stages (resample and flip, jitter,
//! then normalize, cast and lay out), because contrast needs each image's mean luma after
//! the steps before it, which one launch cannot compute. The GPU stage
//! (`pipeline/run/gpu_chain.rs`) launches them through the device seam, and so do the
//! parity tests (`on_device.rs`), over the same `chain_grid`.

use crate::cuda::desc::JitterDesc;
use crate::cuda::gpu_device::{DevicePtr, GpuDevice, KernelArg, StreamId};
use crate::cuda::kernel::{Grid, Kernel};
use crate::error::Error;
use crate::image::{DType, Layout};

use super::sample::{FusedSample, JitterSample};

/// Rows and columns of the output tile one block of the resampling kernels produces
/// (`TILE_H`, `TILE_W` of `kernels/common/resample.cuh`; a test checks they match).
pub(crate) const TILE: (usize, usize) = (16, 32);

/// Tiles of an `h` × `w` output: the blocks that keep every tile of it busy at once.
pub(crate) fn tiles(h: usize, w: usize) -> u64 {
    (h.div_ceil(TILE.0) * w.div_ceil(TILE.1)) as u64
}

/// Grid of a chain launch over `samples`, and of the jitter launches between two: a block
/// per output tile of the largest sample ([`Kernel::Chain`]'s rule).
pub(crate) fn chain_grid(samples: &[FusedSample]) -> Grid {
    let largest = samples
        .iter()
        .map(|s| {
            let (h, w) = s.output_size();
            tiles(h, w)
        })
        .max()
        .unwrap_or(1);
    Kernel::Chain.grid(largest, samples.len())
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

/// Queues the jitter between the chain's two launches on `stream`, over the u8 images of
/// `rest` (the chain's second part): for each of the four steps, the mean luma where some
/// sample applies contrast at that step, then the step (in place).
///
/// # Safety
/// `descs_at` holds `descs` on the device (each covering its u8 RGB image), `sums_at` one
/// zeroed u64 per sample; all stay allocated until the queued work has run.
pub(crate) unsafe fn launch_jitter(
    dev: &dyn GpuDevice,
    stream: StreamId,
    descs: &[JitterDesc],
    (descs_at, sums_at): (DevicePtr, DevicePtr),
    rest: &[FusedSample],
) -> Result<(), Error> {
    let g = chain_grid(rest);
    for step in 0..4u32 {
        let args = [
            KernelArg::Ptr(descs_at),
            KernelArg::U32(descs.len() as u32),
            KernelArg::U32(step),
            KernelArg::Ptr(sums_at),
        ];
        let contrast = descs
            .iter()
            .any(|d| d.enabled & 2 != 0 && (d.order >> (8 * step)) & 255 == 1);
        if contrast {
            // SAFETY: the caller's promise: descriptors, images and sums live until the
            // work has run.
            unsafe { dev.launch(stream, Kernel::JitterLumaSum, g, &args)? };
        }
        // SAFETY: as above.
        unsafe { dev.launch(stream, Kernel::JitterStep, g, &args)? };
    }
    Ok(())
}
