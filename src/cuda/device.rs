//! [`Device`]: one GPU driven on one stream, through cudarc directly: what the operators'
//! own launchers and the kernel tests run on (the pipeline's GPU stage works through the
//! device seam, [`GpuDevice`](super::GpuDevice), instead).

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};

use super::driver::{cuda_err, probe, GpuInfo};
use super::{desc, memory, module};
use crate::error::Error;

/// One GPU as the GPU path uses it: the context, the stream every stokehold kernel runs on,
/// the kernel modules (all loaded when it opens), the device buffer pool and the pinned
/// staging ring.
///
/// cudarc's per-buffer event tracking is switched off for this context: all kernels of a
/// `Device` run on its one [`Device::stream`], in order, and batches carry an explicit
/// completion event ([`DeviceBatch::event`](super::DeviceBatch::event)). Work from another stream (nvJPEG) must be
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
