//! The CUDA layer of the GPU path: device and streams, the kernel module cache (NVRTC →
//! cubin, cached on disk), device buffer pools and pinned staging rings ([`pool`] for the
//! device seam the GPU stage uses, [`memory`] for the one-stream [`Device`]), batch
//! descriptors and the one place kernels are launched.
//!
//! All `unsafe` of the GPU path except nvJPEG lives in this folder; every block says why it
//! is sound. Nothing here needs CUDA at build time: the driver and NVRTC are loaded at run
//! time, and [`probe`] reports their absence as an error instead of panicking.
//!
//! Kernel sources are in `kernels/` (see `build.rs`); operator launchers are the `gpu.rs`
//! files of the operator folders (each implementing `crate::ops::GpuOperator`), and
//! [`chain::run_fused_batch`] runs the fused crop → resize → flip → color jitter → normalize
//! → cast → layout chain over a batch, as composed by [`chain::ChainPlan`]. This folder knows
//! no operator: operators use it, never the reverse.

pub mod batch;
pub mod chain;
pub mod desc;
pub mod emu;
pub mod gpu_device;
pub(crate) mod launch;
pub mod memory;
pub mod module;
pub mod pool;
pub mod real;
pub mod run;

#[cfg(test)]
mod chroma_tests;
#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};

pub use batch::{DeviceBatch, DeviceImage};
pub use chain::{run_fused_batch, FusedSample};
pub use emu::{EmuDevice, EmuOptions};
pub use gpu_device::{GpuDevice, StreamId};
pub use module::KernelModule;
pub use real::RealDevice;

use crate::error::Error;

/// What [`probe`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuInfo {
    /// Device ordinal.
    pub device_id: usize,
    /// Device name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Total device memory in bytes.
    pub total_memory: usize,
    /// Number of CUDA devices visible.
    pub device_count: usize,
}

/// A driver error as a stokehold error, saying what was being done.
pub(crate) fn cuda_err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Cuda(format!("{what}: {e}"))
}

/// Records on `stream` an event the host waits on by sleeping (`CU_EVENT_BLOCKING_SYNC`)
/// rather than spinning: a core spinning on an upload or a batch is a core the CPU workers
/// don't get. `what` names it in errors.
pub(crate) fn record_blocking_event(
    stream: &CudaStream,
    what: &str,
) -> Result<cudarc::driver::CudaEvent, Error> {
    stream
        .record_event(Some(
            cudarc::driver::sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC,
        ))
        .map_err(|e| cuda_err(&format!("record {what} event"), e))
}

/// Whether the CUDA driver library can be loaded (never panics).
pub fn driver_present() -> bool {
    // SAFETY: `is_culib_present` only tries to dlopen the driver library by its known names
    // and reports whether that worked; it calls no CUDA function.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Whether the NVRTC library can be loaded (never panics).
pub fn nvrtc_present() -> bool {
    // SAFETY: as for `driver_present`: a dlopen attempt, no NVRTC call.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Checks that a CUDA driver and device `device_id` are usable and describes the device.
/// Returns [`Error::GpuUnavailable`] (never panics) when the driver library is missing,
/// the driver does not initialise or there is no such device.
///
/// Only driver queries on the device handle (`cuDeviceGetName`, `cuDeviceGetAttribute`,
/// `cuDeviceTotalMem`): no context is created, so probing costs no device memory and no
/// context start-up (hundreds of milliseconds), and leaves the device as it was.
pub fn probe(device_id: usize) -> Result<GpuInfo, Error> {
    use cudarc::driver::result::{self as drv, device};
    use cudarc::driver::sys::CUdevice_attribute as Attr;
    if !driver_present() {
        return Err(Error::GpuUnavailable(
            "no CUDA driver library (libcuda.so) found".into(),
        ));
    }
    drv::init().map_err(|e| Error::GpuUnavailable(format!("cuInit: {e}")))?;
    let count =
        device::get_count().map_err(|e| Error::GpuUnavailable(format!("device count: {e}")))?;
    if count <= 0 || device_id >= count as usize {
        return Err(Error::GpuUnavailable(format!(
            "device {device_id} requested, {count} CUDA device(s) present"
        )));
    }
    let unavailable =
        |what: &str, e| Error::GpuUnavailable(format!("device {device_id}: {what}: {e}"));
    let dev = device::get(device_id as i32).map_err(|e| unavailable("cuDeviceGet", e))?;
    // SAFETY: `dev` was just returned by cuDeviceGet; these queries only read its properties.
    let (major, minor, total_memory) = unsafe {
        (
            device::get_attribute(dev, Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
                .map_err(|e| unavailable("compute capability", e))?,
            device::get_attribute(dev, Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
                .map_err(|e| unavailable("compute capability", e))?,
            device::total_mem(dev).map_err(|e| unavailable("total memory", e))?,
        )
    };
    Ok(GpuInfo {
        device_id,
        name: device::get_name(dev).map_err(|e| unavailable("name", e))?,
        compute_capability: (major, minor),
        total_memory,
        device_count: count as usize,
    })
}

/// One GPU as the GPU path uses it: the context, the stream every stokehold kernel runs on,
/// the kernel modules (all loaded when it opens), the device buffer pool and the pinned
/// staging ring.
///
/// cudarc's per-buffer event tracking is switched off for this context: all kernels of a
/// `Device` run on its one [`Device::stream`], in order, and batches carry an explicit
/// completion event ([`DeviceBatch::event`]). Work from another stream (nvJPEG) must be
/// ordered before use with [`Device::wait_for`].
pub struct Device {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    info: GpuInfo,
    modules: module::ModuleCache,
    pool: Arc<memory::OneStreamPool>,
    staging: memory::OneStreamStaging,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device").field("info", &self.info).finish()
    }
}

impl Device {
    /// Opens device `device_id` (see [`probe`] for the errors) with a new stream.
    pub fn new(device_id: usize) -> Result<Device, Error> {
        let info = probe(device_id)?;
        let ctx = CudaContext::new(device_id)
            .map_err(|e| Error::GpuUnavailable(format!("context for device {device_id}: {e}")))?;
        // SAFETY: event tracking is only a convenience of cudarc for multi-stream use; with it
        // off, ordering is ours to keep, which the Device does by running everything on one
        // stream (documented on the type) and recording an event per batch.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(|e| cuda_err("create stream", e))?;
        let arch = module::Arch::from_cc(info.compute_capability);
        let modules = module::ModuleCache::new(ctx.clone(), arch);
        // Every kernel compiled (or read from the disk cache) and loaded now, not when a
        // batch first needs it.
        modules.load_all()?;
        Ok(Device {
            modules,
            pool: Arc::new(memory::OneStreamPool::new(stream.clone())),
            staging: memory::OneStreamStaging::new(ctx.clone(), 4),
            ctx,
            stream,
            info,
        })
    }

    /// What the device is.
    pub fn info(&self) -> &GpuInfo {
        &self.info
    }

    /// The context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream all of this device's kernels run on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The kernel module cache.
    pub fn modules(&self) -> &module::ModuleCache {
        &self.modules
    }

    /// The device buffer pool.
    pub fn pool(&self) -> &Arc<memory::OneStreamPool> {
        &self.pool
    }

    /// The pinned host staging ring (descriptor and table uploads).
    pub fn staging(&self) -> &memory::OneStreamStaging {
        &self.staging
    }

    /// Makes this device's stream wait for all work queued so far on `other` (for inputs
    /// produced on another stream, e.g. by nvJPEG).
    pub fn wait_for(&self, other: &CudaStream) -> Result<(), Error> {
        self.stream
            .join(other)
            .map_err(|e| cuda_err("stream wait", e))
    }

    /// Uploads `bytes` through the pinned staging ring into a pooled device buffer.
    pub(crate) fn upload(&self, bytes: &[u8]) -> Result<memory::OneStreamBuffer, Error> {
        let mut buf = self.pool.take(bytes.len().max(1))?;
        self.staging.upload(&self.stream, bytes, buf.slice_mut())?;
        Ok(buf)
    }

    /// Uploads a slice of `#[repr(C)]` descriptors or table entries.
    pub(crate) fn upload_pod<T: desc::Pod>(
        &self,
        items: &[T],
    ) -> Result<memory::OneStreamBuffer, Error> {
        self.upload(desc::as_bytes(items))
    }

    /// Blocks until all work queued on the stream is done.
    pub fn synchronize(&self) -> Result<(), Error> {
        self.stream
            .synchronize()
            .map_err(|e| cuda_err("stream synchronize", e))
    }
}

impl Drop for Device {
    /// Waits for the device's work before the fields go: modules must not be unloaded, nor
    /// pooled buffers and pinned staging freed, under kernels and copies still running.
    fn drop(&mut self) {
        if let Err(e) = self.ctx.synchronize() {
            tracing::warn!(
                "synchronising device {} before dropping it: {e}",
                self.info.device_id
            );
        }
    }
}
