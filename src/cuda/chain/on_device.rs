//! Test-only: the fused chain over host images on any [`GpuDevice`] (the emulated device in
//! CI, a real one on a GPU machine), launched as the GPU stage launches it
//! (`pipeline/run/gpu_chain.rs`): one descriptor per sample from [`build_desc`], one
//! [`Kernel::Chain`] launch over the stage's grid ([`chain_grid`]) — or, with color jitter,
//! the three stages of [`JitterStages`] with the jitter kernels in between under the same
//! grid and contrast rule. The parity tests run through this so that they test the runtime's
//! kernels and seam, not a launcher of their own. Unlike a pipeline's batch, samples may mix
//! dtypes and layouts (each descriptor carries its own).

use crate::cuda::desc::{as_bytes, JitterDesc};
use crate::cuda::gpu_device::{streams, DevicePtr, GpuDevice, KernelArg, PinnedHost};
use crate::cuda::kernel::Kernel;
use crate::error::Error;
use crate::image::{DType, Image, Pixels};

use super::launcher::{self, chain_grid, JitterStages};
use super::sample::{build_desc, FusedSample, SourceDims};

/// Device memory and pinned staging of one run, freed once the device's work is done.
struct Arena<'d> {
    dev: &'d dyn GpuDevice,
    device: Vec<DevicePtr>,
    pinned: Vec<PinnedHost>,
}

impl Arena<'_> {
    fn alloc(&mut self, len: usize) -> Result<DevicePtr, Error> {
        let p = self.dev.alloc(len.max(1))?;
        self.device.push(p);
        Ok(p)
    }

    /// `bytes` copied (on the kernel stream) into a new device buffer.
    fn upload(&mut self, bytes: &[u8]) -> Result<DevicePtr, Error> {
        let len = bytes.len().max(1);
        let mut host = self.dev.alloc_pinned(len)?;
        host.as_mut_slice()[..bytes.len()].copy_from_slice(bytes);
        let dst = self.alloc(len)?;
        // SAFETY: `host` holds `len` bytes and is kept (in `self.pinned`) until the arena
        // drops, after every stream's work has run; `dst` was just allocated for them.
        unsafe {
            self.dev
                .copy_to_device(streams::KERNELS, dst, host.as_ptr(), len)?
        };
        self.pinned.push(host);
        Ok(dst)
    }
}

impl Drop for Arena<'_> {
    fn drop(&mut self) {
        // Nothing is freed under queued work: wait for it (a failed device has none left).
        let _ = self.dev.synchronize_all();
        for &p in &self.device {
            // SAFETY: `p` came from `alloc` on this device, is freed once, and no work
            // using it is left (synchronised above).
            unsafe { self.dev.free(p) };
        }
    }
}

/// One chain launch: sample `i` of `samples` from `srcs[i]` into `dsts[i]` (each sized for
/// its sample's output).
fn launch_chain(
    arena: &mut Arena<'_>,
    srcs: &[(DevicePtr, SourceDims)],
    samples: &[FusedSample],
    dsts: &[DevicePtr],
) -> Result<(), Error> {
    let mut table = Vec::new();
    let mut descs = Vec::with_capacity(samples.len());
    for ((&(src, dims), s), &dst) in srcs.iter().zip(samples).zip(dsts) {
        let mut d = build_desc(dims, s, &mut table)?;
        d.src = src;
        d.dst = dst;
        descs.push(d);
    }
    table.push(0);
    let d = arena.upload(as_bytes(&descs))?;
    let t = arena.upload(as_bytes(&table))?;
    let args = [
        KernelArg::Ptr(d),
        KernelArg::Ptr(t),
        KernelArg::U32(descs.len() as u32),
    ];
    // SAFETY: each descriptor's source is a live upload of its image (window checked by
    // `build_desc`), its output a buffer allocated for its size, the table holds its taps;
    // the arena keeps all of them until the device's work has run.
    unsafe {
        arena
            .dev
            .launch(streams::KERNELS, Kernel::Chain, chain_grid(samples), &args)
    }
}

/// The jitter kernels over `descs` (data addresses set), as the GPU stage runs them.
fn launch_jitter(
    arena: &mut Arena<'_>,
    descs: &[JitterDesc],
    rest: &[FusedSample],
) -> Result<(), Error> {
    let n = descs.len();
    let jd = arena.upload(as_bytes(descs))?;
    let sums = arena.upload(&vec![0u8; 8 * n])?;
    // SAFETY: each descriptor covers its u8 RGB image in an arena buffer, `sums` one u64 per
    // sample; the arena keeps all of them until the device's work has run.
    unsafe { launcher::launch_jitter(arena.dev, streams::KERNELS, descs, (jd, sums), rest) }
}

/// Output buffers for `samples` over images of `channels`, with their sizes in bytes.
fn outputs(
    arena: &mut Arena<'_>,
    samples: &[FusedSample],
    channels: &[usize],
    dtype: Option<DType>,
) -> Result<Vec<(DevicePtr, usize)>, Error> {
    samples
        .iter()
        .zip(channels)
        .map(|(s, &c)| {
            let (h, w) = s.output_size();
            let len = h * w * c * dtype.unwrap_or(s.dtype).size();
            Ok((arena.alloc(len)?, len))
        })
        .collect()
}

/// Runs the fused chain over `ims` (u8 HWC, 1 to 4 channels; 3 where a sample has color
/// jitter) on `dev`: sample `i` of the result is `samples[i]` applied to `ims[i]`.
pub(crate) fn run_chain(
    dev: &dyn GpuDevice,
    ims: &[Image],
    samples: &[FusedSample],
) -> Result<Vec<Image>, Error> {
    if ims.len() != samples.len() || ims.is_empty() {
        return Err(Error::Cuda(format!(
            "{} images for {} samples",
            ims.len(),
            samples.len()
        )));
    }
    let mut arena = Arena {
        dev,
        device: Vec::new(),
        pinned: Vec::new(),
    };
    let mut srcs = Vec::with_capacity(ims.len());
    for im in ims {
        let dims = SourceDims::of(im)?;
        srcs.push((arena.upload(im.pixels.as_bytes())?, dims));
    }
    let channels: Vec<usize> = ims.iter().map(|im| im.channels).collect();
    let outs = outputs(&mut arena, samples, &channels, None)?;
    let dsts: Vec<DevicePtr> = outs.iter().map(|o| o.0).collect();
    match JitterStages::of(samples) {
        None => launch_chain(&mut arena, &srcs, samples, &dsts)?,
        Some(st) => {
            let mid = outputs(&mut arena, &st.geometry, &channels, Some(DType::U8))?;
            let mid_ptrs: Vec<DevicePtr> = mid.iter().map(|m| m.0).collect();
            launch_chain(&mut arena, &srcs, &st.geometry, &mid_ptrs)?;
            let mut jitter = Vec::with_capacity(mid.len());
            let mut mid_srcs = Vec::with_capacity(mid.len());
            for ((j, g), (&p, &c)) in st
                .jitter
                .iter()
                .zip(&st.geometry)
                .zip(mid_ptrs.iter().zip(&channels))
            {
                let (h, w) = g.output_size();
                let mut d = j.desc(h * w)?;
                d.data = p;
                jitter.push(d);
                let dims = SourceDims {
                    height: h,
                    width: w,
                    channels: c,
                    pitch: w * c,
                };
                mid_srcs.push((p, dims));
            }
            launch_jitter(&mut arena, &jitter, &st.rest)?;
            launch_chain(&mut arena, &mid_srcs, &st.rest, &dsts)?;
        }
    }
    let mut got = Vec::with_capacity(samples.len());
    for ((s, &c), &(ptr, len)) in samples.iter().zip(&channels).zip(&outs) {
        let mut bytes = vec![0u8; len.max(1)];
        // SAFETY: `ptr` is a live allocation of `len.max(1)` bytes (the arena's).
        unsafe { dev.copy_to_host(streams::KERNELS, &mut bytes, ptr)? };
        bytes.truncate(len);
        let (h, w) = s.output_size();
        got.push(Image {
            height: h,
            width: w,
            channels: c,
            layout: s.layout,
            pixels: Pixels::from_bytes(&bytes, s.dtype),
        });
    }
    Ok(got)
}
