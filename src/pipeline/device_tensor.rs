//! Batches that stay on the GPU: [`DeviceTensor`], one image output of a batch in device
//! memory, with the event that completes when it is written.
//!
//! # Handing a batch to a framework (DLPack)
//!
//! A device tensor is `shape()` samples packed one after another from
//! [`DeviceTensor::device_ptr`] (C-contiguous `[n, c, h, w]` or `[n, h, w, c]` when every
//! sample has the same shape), element type [`DeviceTensor::dtype`], on device
//! [`DeviceTensor::device_id`]. Its pixels are written asynchronously: before reading them,
//! either
//! - order the reader's stream after the write: [`DeviceTensor::use_on_stream`] with the
//!   framework's raw `CUstream` (what DLPack's `__dlpack__(stream=…)` hands over) makes that
//!   stream wait on the batch's ready event, on the device — the host does not block; or
//! - block the host: [`DeviceTensor::wait`].
//!
//! The memory belongs to the pipeline's pool. It goes back when the last clone of the
//! tensor drops (for DLPack: when the capsule's deleter runs), and is handed out again only
//! after the work of every stream registered with `use_on_stream` up to that moment — so a
//! framework may drop its tensor while its kernels still read it. The raw ready event and
//! stream ([`DeviceTensor::ready_event_raw`], [`DeviceTensor::stream_raw`]) are there for
//! frameworks that prefer to do the waiting themselves.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::cuda::gpu_device::{streams, DevicePtr, Event, GpuDevice, StreamId};
use crate::cuda::pool::DeviceBuffer;
use crate::error::Error;
use crate::image::{DType, Layout, Pixels};
use crate::pipeline::tensor_meta::{tensor_meta_accessors, TensorMeta};

/// The consumer streams a pipeline has seen, by raw handle (each adopted once).
#[derive(Debug)]
pub(crate) struct ConsumerStreams {
    dev: Arc<dyn GpuDevice>,
    adopted: Mutex<HashMap<u64, StreamId>>,
}

impl ConsumerStreams {
    pub(crate) fn new(dev: Arc<dyn GpuDevice>) -> Arc<ConsumerStreams> {
        Arc::new(ConsumerStreams {
            dev,
            adopted: Mutex::new(HashMap::new()),
        })
    }

    /// # Safety
    /// As [`GpuDevice::adopt_stream`].
    pub(crate) unsafe fn adopt(&self, raw: u64) -> Result<StreamId, Error> {
        let mut m = self.adopted.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = m.get(&raw) {
            return Ok(*s);
        }
        // SAFETY: forwarded contract.
        let s = unsafe { self.dev.adopt_stream(raw)? };
        m.insert(raw, s);
        Ok(s)
    }
}

/// The consumer streams that used one tensor: each records a release event when the tensor
/// drops, and the memory is written again only after those.
#[derive(Debug)]
pub(crate) struct StreamUsers {
    streams: Arc<ConsumerStreams>,
    used_on: Mutex<Vec<StreamId>>,
}

impl StreamUsers {
    /// No users yet, of `streams`.
    pub(crate) fn new(streams: Arc<ConsumerStreams>) -> StreamUsers {
        StreamUsers {
            streams,
            used_on: Mutex::new(Vec::new()),
        }
    }

    /// The device the streams are on.
    pub(crate) fn device(&self) -> &Arc<dyn GpuDevice> {
        &self.streams.dev
    }

    /// The pipeline's consumer streams, where a user's raw stream is adopted.
    pub(crate) fn streams(&self) -> &ConsumerStreams {
        &self.streams
    }

    /// Counts `s` among the users (once).
    pub(crate) fn add(&self, s: StreamId) {
        let mut users = self.used_on.lock().unwrap_or_else(|p| p.into_inner());
        if !users.contains(&s) {
            users.push(s);
        }
    }

    /// Records a release event on every user, handing each to `used_until`; stops at the
    /// first that can't be recorded, with its error. Recording enqueues only (events are
    /// pooled): the consumer's thread never waits.
    pub(crate) fn release(&self, mut used_until: impl FnMut(Event)) -> Result<(), Error> {
        let users = std::mem::take(&mut *self.used_on.lock().unwrap_or_else(|p| p.into_inner()));
        for s in users {
            used_until(self.device().record(s, false)?);
        }
        Ok(())
    }
}

#[derive(Debug)]
struct Inner {
    buffer: Option<DeviceBuffer>,
    meta: TensorMeta,
    ready: Event,
    /// Streams that read the tensor.
    users: StreamUsers,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let Some(mut buf) = self.buffer.take() else {
            return;
        };
        buf.used_until(self.ready.clone());
        if let Err(e) = self.users.release(|e| buf.used_until(e)) {
            // Without the event the buffer can't be reused safely: leak it.
            tracing::warn!("a batch's release event could not be recorded: {e}");
            std::mem::forget(buf);
        }
    }
}

/// One image output of a batch in device memory (see the module docs). Clones share the
/// memory, which goes back to the pipeline's pool when the last one drops.
#[derive(Debug, Clone)]
pub struct DeviceTensor {
    inner: Arc<Inner>,
}

impl PartialEq for DeviceTensor {
    /// The same memory.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl DeviceTensor {
    /// A tensor of samples written by work that ends at `ready`.
    pub(crate) fn new(
        buffer: DeviceBuffer,
        dtype: DType,
        layout: Layout,
        shapes: Vec<[usize; 3]>,
        ready: Event,
        streams: Arc<ConsumerStreams>,
    ) -> DeviceTensor {
        DeviceTensor {
            inner: Arc::new(Inner {
                buffer: Some(buffer),
                meta: TensorMeta::packed(dtype, layout, shapes),
                ready,
                users: StreamUsers::new(streams),
            }),
        }
    }

    /// The samples' element type, layout, shapes and offsets.
    pub(crate) fn meta(&self) -> &TensorMeta {
        &self.inner.meta
    }

    fn dev(&self) -> &Arc<dyn GpuDevice> {
        self.inner.users.device()
    }

    tensor_meta_accessors!("DeviceTensor::device_ptr");

    /// Bytes of all samples.
    pub fn nbytes(&self) -> usize {
        self.meta().nbytes()
    }

    /// The device address of the first element (a `CUdeviceptr`; a host address on the
    /// emulated device).
    pub fn device_ptr(&self) -> DevicePtr {
        self.inner.buffer.as_ref().map_or(0, DeviceBuffer::ptr)
    }

    /// The device's ordinal.
    pub fn device_id(&self) -> usize {
        self.dev().describe().device_id
    }

    /// True on the emulated device (`device = "emu"`): the memory is host memory.
    pub fn is_emulated(&self) -> bool {
        self.dev().describe().emulated
    }

    /// The raw `CUevent` that completes when the pixels are written (0 on the emulated
    /// device).
    pub fn ready_event_raw(&self) -> u64 {
        self.dev().raw_event(&self.inner.ready)
    }

    /// The raw `CUstream` the pixels are written on.
    pub fn stream_raw(&self) -> u64 {
        self.dev().raw_stream(streams::KERNELS)
    }

    /// Whether the pixels are written, without waiting.
    pub fn is_ready(&self) -> Result<bool, Error> {
        self.dev().is_complete(&self.inner.ready)
    }

    /// Blocks the host until the pixels are written.
    pub fn wait(&self) -> Result<(), Error> {
        self.dev().synchronize(&self.inner.ready)
    }

    /// Orders the work of the consumer's stream `raw` (a framework's `CUstream`; on the
    /// emulated device a number from [`GpuDevice::raw_stream`]) after the write, on the
    /// device, and keeps the memory from being reused until that stream's work queued before
    /// this tensor drops has run.
    ///
    /// # Safety
    /// On a real device, `raw` is a live `CUstream` of the pipeline's device, kept alive by
    /// its owner until this tensor and its clones have dropped.
    pub unsafe fn use_on_stream(&self, raw: u64) -> Result<(), Error> {
        // SAFETY: forwarded contract.
        let s = unsafe { self.inner.users.streams().adopt(raw)? };
        self.dev().wait(s, &self.inner.ready)?;
        self.inner.users.add(s);
        Ok(())
    }

    /// The pixels of every sample, copied to the host (waits for the write); the tensor
    /// as a whole: [`DeviceTensor::to_host`].
    pub fn download(&self) -> Result<Pixels, Error> {
        let mut bytes = vec![0u8; self.nbytes()];
        if let Some(b) = &self.inner.buffer {
            self.wait()?;
            // SAFETY: the buffer holds `nbytes` bytes of samples (allocated for them) and
            // stays allocated while `self` lives; the write has completed (waited above).
            unsafe {
                self.dev()
                    .copy_to_host(streams::KERNELS, &mut bytes, b.ptr())?
            };
        }
        Ok(Pixels::from_bytes(&bytes, self.dtype()))
    }
}
