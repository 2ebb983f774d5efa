//! The real [`GpuDevice`]: a CUDA device through cudarc (the existing [`Device`]: context,
//! kernel stream, module cache) and nvJPEG ([`GpuJpegDecoder`]).
//!
//! Memory is allocated with the driver's synchronous `cuMemAlloc`/`cuMemFree` (the stage's
//! pool keeps buffers, so this happens at start and rarely after); copies, kernels and
//! events are asynchronous on the device's streams. Events the host waits on are created
//! with `CU_EVENT_BLOCKING_SYNC`, so a waiting thread sleeps instead of spinning on a core
//! the CPU workers need. Without nvJPEG every JPEG is routed to the CPU decoder.
//!
//! Nothing here runs without a GPU: `docs/gpu.md` lists what `scripts/gpu-check.sh` runs.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cudarc::driver::sys::{CUevent_flags, CUstream};
use cudarc::driver::{result as cu, CudaEvent, CudaStream, LaunchConfig, PushKernelArg};

use super::gpu_device::{
    DecodeJob, DecodeSubmission, DeviceDescription, DevicePtr, Event, GpuDevice, Grid, Kernel,
    KernelArg, LateErrors, MemoryUse, PinnedHost, StreamId,
};
use super::launch::BLOCK;
use super::module::KernelModule;
use super::{cuda_err, Device};
use crate::decode::JpegHeader;
use crate::decode::Limits;
use crate::error::Error;
use crate::nvjpeg::{
    CudaGpuContext, DecodedInfo, EncodedImage, FallbackReason, GpuJpegDecoder, NvjpegError, Route,
};

/// The real device.
pub struct RealDevice {
    dev: Device,
    /// By [`StreamId`]: decode, kernels (the [`Device`]'s own stream), then consumers'.
    streams: Mutex<Vec<Arc<CudaStream>>>,
    decoder: Option<Mutex<GpuJpegDecoder>>,
    /// The event after the last decode: nvJPEG reuses its work buffers on the next call.
    last_decode: Mutex<Option<CudaEvent>>,
    description: DeviceDescription,
    sizes: Mutex<HashMap<u64, usize>>,
    device_bytes: AtomicUsize,
    device_peak: AtomicUsize,
    pinned_bytes: Arc<AtomicUsize>,
    pinned_peak: Arc<AtomicUsize>,
}

impl std::fmt::Debug for RealDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealDevice")
            .field("description", &self.description)
            .finish()
    }
}

impl RealDevice {
    /// Opens device `device_id` ([`Device::new`]), compiles the chain's kernel modules now
    /// (never in the middle of a run) and loads nvJPEG when it can (else every JPEG goes to
    /// the CPU decoder, and the description says why).
    pub fn new(device_id: usize, limits: Limits) -> Result<Arc<RealDevice>, Error> {
        let dev = Device::new(device_id)?;
        for m in [KernelModule::Chain, KernelModule::Color] {
            dev.modules().function(m, module_entry(m))?;
        }
        let decode_stream = dev
            .context()
            .new_stream()
            .map_err(|e| cuda_err("create the decode stream", e))?;
        dev.context()
            .bind_to_thread()
            .map_err(|e| cuda_err("bind the context", e))?;
        let ctx = Arc::new(CudaGpuContext::from_context(dev.context().clone()));
        let (decoder, decoder_text, hardware) = match GpuJpegDecoder::probe(ctx) {
            Ok(d) => {
                let d = d.with_limits(limits);
                let text = d.describe();
                let hw = d.has_hardware();
                (Some(Mutex::new(d)), text, hw)
            }
            Err(e) => (
                None,
                format!("no nvJPEG ({e}): every JPEG is decoded on the CPU"),
                false,
            ),
        };
        let info = dev.info().clone();
        let description = DeviceDescription {
            name: info.name.clone(),
            emulated: false,
            device_id: info.device_id,
            total_memory: info.total_memory,
            decoder: decoder_text,
            hardware_decoder: hardware,
        };
        Ok(Arc::new(RealDevice {
            streams: Mutex::new(vec![decode_stream, dev.stream().clone()]),
            dev,
            decoder,
            last_decode: Mutex::new(None),
            description,
            sizes: Mutex::new(HashMap::new()),
            device_bytes: AtomicUsize::new(0),
            device_peak: AtomicUsize::new(0),
            pinned_bytes: Arc::default(),
            pinned_peak: Arc::default(),
        }))
    }

    fn stream(&self, s: StreamId) -> Result<Arc<CudaStream>, Error> {
        let v = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        v.get(s.0)
            .cloned()
            .ok_or_else(|| Error::Cuda(format!("no stream {}", s.0)))
    }

    fn event(e: &Event) -> Result<&CudaEvent, Error> {
        e.0.downcast_ref::<CudaEvent>()
            .ok_or_else(|| Error::Cuda("an event of another device".into()))
    }

    fn bind(&self) -> Result<(), Error> {
        self.dev
            .context()
            .bind_to_thread()
            .map_err(|e| cuda_err("bind the context", e))
    }
}

fn module_entry(m: KernelModule) -> &'static str {
    match m {
        KernelModule::Color => Kernel::JitterStep.entry(),
        _ => Kernel::Chain.entry(),
    }
}

impl Drop for RealDevice {
    fn drop(&mut self) {
        // Nothing may be freed (decoder work buffers, modules, streams) under running work.
        if let Err(e) = self.dev.context().synchronize() {
            tracing::warn!("synchronising the device before dropping it: {e}");
        }
    }
}

/// Pinned memory of the real device, freed when dropped.
struct PinnedOwner {
    _slice: cudarc::driver::PinnedHostSlice<u8>,
    len: usize,
    counter: Arc<AtomicUsize>,
}

impl Drop for PinnedOwner {
    fn drop(&mut self) {
        self.counter.fetch_sub(self.len, Ordering::Relaxed);
    }
}

impl GpuDevice for RealDevice {
    fn describe(&self) -> DeviceDescription {
        self.description.clone()
    }

    fn memory(&self) -> MemoryUse {
        MemoryUse {
            device: self.device_bytes.load(Ordering::Relaxed),
            device_peak: self.device_peak.load(Ordering::Relaxed),
            pinned: self.pinned_bytes.load(Ordering::Relaxed),
            pinned_peak: self.pinned_peak.load(Ordering::Relaxed),
        }
    }

    fn new_stream(&self) -> Result<StreamId, Error> {
        let s = self
            .dev
            .context()
            .new_stream()
            .map_err(|e| cuda_err("create a stream", e))?;
        let mut v = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        v.push(s);
        Ok(StreamId(v.len() - 1))
    }

    fn alloc(&self, bytes: usize) -> Result<DevicePtr, Error> {
        self.bind()?;
        // SAFETY: allocates device memory in the bound context; the contents are unspecified,
        // as this method promises.
        let ptr = unsafe { cu::malloc_sync(bytes.max(1)) }.map_err(|e| {
            if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                Error::DeviceOutOfMemory {
                    what: "device memory".into(),
                    bytes: bytes as u64,
                    detail: e.to_string(),
                }
            } else {
                cuda_err(&format!("allocate {bytes} device bytes"), e)
            }
        })?;
        self.sizes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(ptr, bytes);
        let now = self.device_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.device_peak.fetch_max(now, Ordering::Relaxed);
        Ok(ptr)
    }

    unsafe fn free(&self, ptr: DevicePtr) {
        let len = self
            .sizes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&ptr)
            .unwrap_or(0);
        self.device_bytes.fetch_sub(len, Ordering::Relaxed);
        if let Err(e) = self.bind() {
            tracing::warn!("free: {e}");
        }
        // SAFETY: forwarded contract (allocated here, freed once, no queued work uses it).
        if let Err(e) = unsafe { cu::free_sync(ptr) } {
            tracing::warn!("cuMemFree: {e}");
        }
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<PinnedHost, Error> {
        // SAFETY: the memory is uninitialised; `PinnedHost` hands it out only as bytes, which
        // the stage writes before any copy reads them.
        let mut slice = unsafe {
            self.dev
                .context()
                .alloc_pinned_with_flags::<u8>(bytes.max(1), 0)
        }
        .map_err(|e| cuda_err(&format!("allocate {bytes} pinned bytes"), e))?;
        let ptr = slice
            .as_mut_ptr()
            .map_err(|e| cuda_err("map pinned memory", e))?;
        let now = self.pinned_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.pinned_peak.fetch_max(now, Ordering::Relaxed);
        let owner = PinnedOwner {
            _slice: slice,
            len: bytes,
            counter: self.pinned_bytes.clone(),
        };
        // SAFETY: `ptr` is the start of `bytes` page-locked bytes owned by `owner` (freed by
        // cudarc when it drops), used by nobody else.
        Ok(unsafe { PinnedHost::new(ptr, bytes, Box::new(owner)) })
    }

    unsafe fn copy_to_device(
        &self,
        stream: StreamId,
        dst: DevicePtr,
        src: *const u8,
        len: usize,
    ) -> Result<(), Error> {
        let s = self.stream(stream)?;
        self.bind()?;
        // SAFETY: forwarded contract: `src` is `len` pinned bytes left untouched until the
        // copy has run, `dst..dst+len` a live allocation.
        let host = unsafe { std::slice::from_raw_parts(src, len) };
        // SAFETY: as above.
        unsafe { cu::memcpy_htod_async(dst, host, s.cu_stream()) }
            .map_err(|e| cuda_err("host to device copy", e))
    }

    unsafe fn copy_on_device(
        &self,
        stream: StreamId,
        dst: DevicePtr,
        src: DevicePtr,
        len: usize,
    ) -> Result<(), Error> {
        let s = self.stream(stream)?;
        self.bind()?;
        // SAFETY: forwarded contract.
        unsafe { cu::memcpy_dtod_async(dst, src, len, s.cu_stream()) }
            .map_err(|e| cuda_err("device to device copy", e))
    }

    unsafe fn zero(&self, stream: StreamId, dst: DevicePtr, len: usize) -> Result<(), Error> {
        let s = self.stream(stream)?;
        self.bind()?;
        // SAFETY: forwarded contract.
        unsafe { cu::memset_d8_async(dst, 0, len, s.cu_stream()) }
            .map_err(|e| cuda_err("memset", e))
    }

    unsafe fn copy_to_host(
        &self,
        stream: StreamId,
        dst: &mut [u8],
        src: DevicePtr,
    ) -> Result<(), Error> {
        let s = self.stream(stream)?;
        self.bind()?;
        // SAFETY: forwarded contract; `dst` is pageable host memory, so the copy completes
        // before the synchronisation below returns, and nothing else uses `dst` meanwhile.
        unsafe { cu::memcpy_dtoh_async(dst, src, s.cu_stream()) }
            .map_err(|e| cuda_err("device to host copy", e))?;
        s.synchronize()
            .map_err(|e| cuda_err("stream synchronize", e))
    }

    unsafe fn launch(
        &self,
        stream: StreamId,
        kernel: Kernel,
        grid: Grid,
        args: &[KernelArg],
    ) -> Result<(), Error> {
        let s = self.stream(stream)?;
        let module = match kernel {
            Kernel::Chain => KernelModule::Chain,
            Kernel::JitterLumaSum | Kernel::JitterStep => KernelModule::Color,
        };
        let func = self.dev.modules().function(module, kernel.entry())?;
        let cfg = LaunchConfig {
            grid_dim: (grid.blocks.max(1), grid.samples, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // The values the builder borrows, in order.
        let ptrs: Vec<u64> = args
            .iter()
            .map(|a| match a {
                KernelArg::Ptr(p) => *p,
                KernelArg::U32(v) => u64::from(*v),
            })
            .collect();
        let u32s: Vec<u32> = ptrs.iter().map(|&v| v as u32).collect();
        let mut b = s.launch_builder(&func);
        for (i, a) in args.iter().enumerate() {
            match a {
                KernelArg::Ptr(_) => b.arg(&ptrs[i]),
                KernelArg::U32(_) => b.arg(&u32s[i]),
            };
        }
        // SAFETY: forwarded contract: the arguments match the kernel's C parameters (a
        // pointer is passed as its 64-bit address) and every address they and the
        // descriptors hold is live and large enough until the kernel has run.
        unsafe { b.launch(cfg) }
            .map(|_| ())
            .map_err(|e| cuda_err(&format!("launch {}", kernel.entry()), e))
    }

    fn record(&self, stream: StreamId, timing: bool) -> Result<Event, Error> {
        let s = self.stream(stream)?;
        // Blocking sync for all (the flags are one enum value here, so timing stays on): a
        // host waiting on any of them sleeps.
        let _ = timing;
        let ev = s
            .record_event(Some(CUevent_flags::CU_EVENT_BLOCKING_SYNC))
            .map_err(|e| cuda_err("record an event", e))?;
        Ok(Event(Arc::new(ev)))
    }

    fn wait(&self, stream: StreamId, event: &Event) -> Result<(), Error> {
        self.stream(stream)?
            .wait(Self::event(event)?)
            .map_err(|e| cuda_err("stream wait", e))
    }

    fn synchronize(&self, event: &Event) -> Result<(), Error> {
        Self::event(event)?
            .synchronize()
            .map_err(|e| cuda_err("event synchronize", e))
    }

    fn is_complete(&self, event: &Event) -> Result<bool, Error> {
        Self::event(event)?
            .try_is_complete()
            .map_err(|e| cuda_err("event query", e))
    }

    fn elapsed(&self, start: &Event, end: &Event) -> Result<Duration, Error> {
        let ms = Self::event(start)?
            .elapsed_ms(Self::event(end)?)
            .map_err(|e| cuda_err("event elapsed time", e))?;
        Ok(Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
    }

    fn synchronize_all(&self) -> Result<(), Error> {
        self.dev
            .context()
            .synchronize()
            .map_err(|e| cuda_err("device synchronize", e))
    }

    fn route(&self, bytes: &[u8], limits: &Limits) -> Route {
        match &self.decoder {
            Some(_) => crate::nvjpeg::classify(bytes, limits, self.description.hardware_decoder),
            None => Route::Cpu(crate::nvjpeg::FallbackReason::NvjpegUnsupported(
                "nvJPEG is not available".into(),
            )),
        }
    }

    unsafe fn decode_jpegs(
        &self,
        stream: StreamId,
        jobs: &[DecodeJob<'_>],
        limits: &Limits,
    ) -> DecodeSubmission {
        let late = Arc::new(LateErrors::new(jobs.len()));
        let fail_all = |why: String| DecodeSubmission {
            results: jobs
                .iter()
                .map(|_| Err(NvjpegError::InvalidArgument(why.clone())))
                .collect(),
            late: late.clone(),
        };
        let Some(decoder) = &self.decoder else {
            return fail_all("nvJPEG is not available".into());
        };
        let s = match self.stream(stream) {
            Ok(s) => s,
            Err(e) => return fail_all(e.to_string()),
        };
        if let Err(e) = self.bind() {
            return fail_all(e.to_string());
        }
        // nvJPEG reuses its work buffers on every call: the previous decode must be done.
        let previous = self
            .last_decode
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(ev) = previous {
            if let Err(e) = ev.synchronize() {
                return fail_all(cuda_err("wait for the previous decode", e).to_string());
            }
        }
        // The device reads every header itself for now (the stage passes none through yet).
        let headers: Vec<Result<JpegHeader, NvjpegError>> = jobs
            .iter()
            .map(|j| {
                JpegHeader::read(j.bytes, limits)
                    .map_err(|e| NvjpegError::CpuFallback(FallbackReason::Rejected(e)))
            })
            .collect();
        let mut images = Vec::new();
        let mut place = Vec::new();
        for (i, (j, h)) in jobs.iter().zip(&headers).enumerate() {
            if let Ok(h) = h {
                place.push(i);
                images.push(EncodedImage {
                    bytes: j.bytes,
                    header: h,
                    roi: j.roi,
                    output: j.out,
                });
            }
        }
        let mut dec = decoder.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: `s` is a stream of the bound context; the outputs are live device memory of
        // it, untouched by others until an event recorded after this call (the caller's
        // contract); the decode is waited for before it returns.
        let decoded = unsafe { dec.decode_batch(s.cu_stream() as *mut c_void, &images) };
        let mut results: Vec<Result<DecodedInfo, NvjpegError>> = headers
            .iter()
            .map(|h| match h {
                Err(e) => Err(e.clone()),
                Ok(_) => Err(NvjpegError::InvalidArgument("not decoded".into())),
            })
            .collect();
        match decoded {
            Ok(per_image) => {
                for (k, r) in place.iter().zip(per_image) {
                    results[*k] = r;
                }
            }
            Err(e) => {
                for k in &place {
                    results[*k] = Err(e.clone());
                }
            }
        }
        match s.record_event(Some(CUevent_flags::CU_EVENT_BLOCKING_SYNC)) {
            Ok(ev) => *self.last_decode.lock().unwrap_or_else(|p| p.into_inner()) = Some(ev),
            Err(e) => return fail_all(cuda_err("record the decode's event", e).to_string()),
        }
        DecodeSubmission { results, late }
    }

    unsafe fn adopt_stream(&self, raw: u64) -> Result<StreamId, Error> {
        // SAFETY: forwarded contract (a live `CUstream` of this context, kept alive by its
        // owner while batches may use it).
        let s = unsafe {
            self.dev
                .context()
                .wrap_borrowed_stream(raw as usize as CUstream)
        };
        let mut v = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        v.push(s);
        Ok(StreamId(v.len() - 1))
    }

    fn raw_stream(&self, stream: StreamId) -> u64 {
        self.stream(stream)
            .map_or(0, |s| s.cu_stream() as usize as u64)
    }

    fn raw_event(&self, event: &Event) -> u64 {
        Self::event(event).map_or(0, |e| e.cu_event() as usize as u64)
    }
}
