//! Kernel launches on the one-stream [`Device`](super::Device): the operators' own launchers,
//! [`run_fused_batch`](super::chain::run_fused_batch) and the kernel tests. The pipeline's GPU
//! stage launches through the device seam instead ([`RealDevice`](super::RealDevice) on a
//! GPU, [`EmuDevice`](super::EmuDevice) on the host): two launch sites until that seam is the
//! only way to the GPU.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};

use super::cuda_err;
use crate::error::Error;

/// Threads per block of every stokehold kernel (`jitter_luma_sum` relies on 256).
pub(crate) const BLOCK: u32 = 256;

/// Most blocks along x; kernels loop (grid-stride) over the rest.
const MAX_GRID_X: u64 = 1 << 16;

/// One kernel argument.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg<'a> {
    /// A device buffer, passed as its address.
    Buf(&'a CudaSlice<u8>),
    /// A 32-bit integer.
    U32(u32),
}

/// A launch over `samples` samples (grid.y) of at most `items` work items each (grid.x),
/// with [`BLOCK`] threads per block.
pub(crate) fn batch_grid(items: u64, samples: usize) -> Result<LaunchConfig, Error> {
    if samples == 0 || samples > 65535 {
        return Err(Error::Cuda(format!(
            "a batch of {samples} samples cannot be launched (1..=65535)"
        )));
    }
    let blocks = items.div_ceil(u64::from(BLOCK)).clamp(1, MAX_GRID_X);
    Ok(LaunchConfig {
        grid_dim: (blocks as u32, samples as u32, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    })
}

/// Launches `func` on `stream` with `args`.
///
/// # Safety
/// * `args` must match the kernel's C parameter list in number, order and type (`Buf` for a
///   pointer parameter, `U32` for `u32`).
/// * Every device address inside the descriptors a `Buf` points to must be a live allocation
///   of this context, large enough for every element the kernel reads or writes for that
///   descriptor (the launchers compute them from the same sizes), and must stay alive until
///   the kernel has finished (buffers are pooled and only reused by later work on the same
///   stream; outputs are owned by the returned batch).
/// * No other stream may write those buffers while the kernel runs.
pub(crate) unsafe fn launch(
    stream: &Arc<CudaStream>,
    func: &CudaFunction,
    cfg: LaunchConfig,
    args: &[Arg<'_>],
) -> Result<(), Error> {
    let mut b = stream.launch_builder(func);
    for a in args {
        match a {
            Arg::Buf(s) => b.arg(*s),
            Arg::U32(v) => b.arg(v),
        };
    }
    // SAFETY: forwarded to the caller (see `# Safety`).
    unsafe { b.launch(cfg) }
        .map(|_| ())
        .map_err(|e| cuda_err("kernel launch", e))
}
