//! The real [`GpuDevice`]: a CUDA device through cudarc (context, kernel stream, module
//! cache) and nvJPEG ([`GpuJpegDecoder`]).
//!
//! Memory is allocated with the driver's synchronous `cuMemAlloc`/`cuMemFree` (the stage's
//! pool keeps buffers, so this happens at start and rarely after); copies, kernels and
//! events are asynchronous on the device's streams. Events the host waits on are created
//! with `CU_EVENT_BLOCKING_SYNC`, so a waiting thread sleeps instead of spinning on a core
//! the CPU workers need. Without nvJPEG every JPEG is routed to the CPU decoder.
//!
//! JPEGs are decoded by nvJPEG's [`crate::nvjpeg::BatchDecoder`] (bound to this device's
//! context) on the stage's decode stream: `submit_decode` routes each image from the header
//! the stage read, copies the bytes into the decoder's pinned ring, queues the work and says
//! at once what nvJPEG refused (a fault of the queued work is sticky: every later call
//! reports it). ROIs are chosen by the decoder (an MCU wider for subsampled chroma, whose
//! interpolation the stage rebuilds): the stage reads the window the region names. Events
//! come from the context's pool and allocations are counted ([`GpuDevice::counters`]).
//!
//! Nothing here runs without a GPU: `docs/gpu.md` lists what `scripts/gpu-check.sh` runs.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cudarc::driver::sys::CUstream;
use cudarc::driver::{result as cu, CudaContext, CudaStream, LaunchConfig, PushKernelArg};

use super::cuda_err;
use super::driver::{probe, GpuInfo};
use super::gpu_device::{
    DecodeJob, DeviceCounters, DeviceDescription, DevicePtr, Event, GpuDevice, KernelArg,
    MemoryUse, PinnedHost, StreamId, WorkerJpeg,
};
use super::kernel::{Grid, Kernel, BLOCK};
use super::module::{Arch, ModuleCache};
use crate::decode::{JpegHeader, Upsampling};
use crate::error::Error;
use crate::nvjpeg::safe::PooledEvent;
use crate::nvjpeg::{
    decode_region, needs_margin, route_header, CudaGpuContext, DecodeRegion, DecodedInfo,
    DecoderConfig, DeviceOutput, EncodedImage, FallbackReason, FeedTimes, GpuJpegDecoder,
    NvjpegError, Roi, Route, SupportChecks,
};

/// The real device.
pub struct RealDevice {
    cu: Arc<CudaContext>,
    /// The kernel modules, compiled (or read from the disk cache) and loaded at open.
    modules: ModuleCache,
    /// The context as the decoder sees it: the event pool and the allocation counters every
    /// user of the device shares.
    ctx: Arc<CudaGpuContext>,
    /// By [`StreamId`]: decode, kernels, then consumers'.
    streams: Mutex<Vec<Arc<CudaStream>>>,
    /// Held by the feeding thread for each whole nvJPEG call (milliseconds: up to a training
    /// step's length beside a training loop): nothing on another thread's path takes it.
    decoder: Option<Mutex<GpuJpegDecoder>>,
    /// The decoder's feeding times as of its last call, read without the decoder's lock
    /// (the statistics read them after every batch, on the assembling thread).
    feed: Mutex<FeedTimes>,
    /// The engines' support checks, asked without the decoder's lock.
    checks: Option<Arc<SupportChecks>>,
    /// Whether the decoder pads ROIs by an MCU (nvJPEG before 13.3).
    pads_roi: bool,
    /// nvJPEG interpolates chroma (no rebuild: [`GpuDevice::decodes_fancy_chroma`]).
    fancy: bool,
    description: DeviceDescription,
    sizes: Mutex<HashMap<u64, usize>>,
    device_bytes: AtomicUsize,
    device_peak: AtomicUsize,
    pinned_bytes: Arc<AtomicUsize>,
    pinned_peak: Arc<AtomicUsize>,
    /// The thread's own context, made current again when the device is gone (set by `drop`;
    /// the last field, so dropped after the decoder's, modules' and streams' teardown, which
    /// bind ours: the last batch may drop on a framework's thread).
    put_back: PutBack,
}

/// A context to make current again when dropped (its address; `None`: leave the thread's):
/// the thread's own, after a [`RealDevice::bind`], the device's opening or its teardown.
#[derive(Default)]
#[must_use]
struct PutBack(Option<usize>);

impl Drop for PutBack {
    fn drop(&mut self) {
        if let Some(before) = self.0 {
            let before = before as cudarc::driver::sys::CUcontext;
            // SAFETY: `before` was current on this thread when the bind, opening or teardown
            // began, a context its owner (the framework that made it current) keeps alive
            // meanwhile.
            if let Err(e) = unsafe { cu::ctx::set_current(before) } {
                tracing::warn!("making the thread's context current again: {e}");
            }
        }
    }
}

impl std::fmt::Debug for RealDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealDevice")
            .field("description", &self.description)
            .finish()
    }
}

impl RealDevice {
    /// Opens device `device_id` (see [`probe`] for the errors), compiles the kernel modules
    /// the stage launches now (never in the middle of a run) and loads nvJPEG when it can,
    /// for batches of up to `decode_batch` images per part (else every JPEG goes to the CPU
    /// decoder, and the description says why).
    ///
    /// The JPEG decoder interpolates chroma as libjpeg does, unless `STOKEHOLD_CHROMA_REBUILD=1`
    /// (repeated, for the stage to rebuild); see [`RealDevice::with_upsampling`].
    /// Every kernel is loaded, whether the stage launches it or not.
    pub fn new(device_id: usize, decode_batch: usize) -> Result<Arc<RealDevice>, Error> {
        Self::open(
            device_id,
            Some((decode_batch, Upsampling::Fancy, &Kernel::ALL[..])),
        )
    }

    /// [`RealDevice::new`] for a pipeline that decodes with `upsampling` and whose chain
    /// launches `kernels` (only those are compiled and loaded, and the chroma rebuild's where
    /// the decoder is opened to repeat chroma for it): with [`Upsampling::Nearest`] the JPEG
    /// decoder repeats chroma over each block (its default, and a third of the host time per
    /// image of interpolating), which is then the pipeline's output as it is the CPU path's.
    pub fn with_upsampling(
        device_id: usize,
        decode_batch: usize,
        upsampling: Upsampling,
        kernels: &[Kernel],
    ) -> Result<Arc<RealDevice>, Error> {
        Self::open(device_id, Some((decode_batch, upsampling, kernels)))
    }

    /// Opens device `device_id` for memory, copies and events only (the CPU path's batches
    /// pinned, `batch_memory = "pinned"`, or uploaded, `"gpu"`): no kernels compiled (NVRTC is
    /// not needed), no JPEG decoder (none of nvJPEG's memory).
    pub fn for_copies(device_id: usize) -> Result<Arc<RealDevice>, Error> {
        Self::open(device_id, None)
    }

    /// [`RealDevice::new`], with the kernels and decoder only for `Some((decode_batch,
    /// upsampling))`.
    fn open(
        device_id: usize,
        decoding: Option<(usize, Upsampling, &[Kernel])>,
    ) -> Result<Arc<RealDevice>, Error> {
        let decode_batch = decoding.map(|(batch, ..)| batch);
        let wants_fancy = decoding.is_some_and(|(_, u, _)| u == Upsampling::Fancy);
        let interpolate = wants_fancy && !crate::nvjpeg::safe::chroma_rebuild_enabled();
        let info: GpuInfo = probe(device_id)?;
        // Opening binds our context: the opening thread's own is current again after it.
        let _put_back = PutBack(cu::ctx::get_current().ok().flatten().map(|c| c as usize));
        let sleeping_waits = super::driver::blocking_sync_if_asked(device_id);
        let cu = CudaContext::new(device_id)
            .map_err(|e| Error::GpuUnavailable(format!("context for device {device_id}: {e}")))?;
        // SAFETY: event tracking is only a convenience of cudarc for multi-stream use; with
        // it off, ordering is ours to keep, which the stage does with the events of the seam
        // (every buffer handed to queued work is released at an event recorded after it).
        unsafe { cu.disable_event_tracking() };
        let kernel_stream = cu
            .new_stream()
            .map_err(|e| cuda_err("create the kernel stream", e))?;
        let decode_stream = cu
            .new_stream()
            .map_err(|e| cuda_err("create the decode stream", e))?;
        cu.bind_to_thread()
            .map_err(|e| cuda_err("bind the context", e))?;
        let ctx = Arc::new(CudaGpuContext::from_context(cu.clone(), Arc::default()));
        let config = DecoderConfig {
            max_batch: decode_batch.unwrap_or(1).clamp(1, i32::MAX as usize),
            ring_depth: env_count("STOKEHOLD_ENGINE_SLOTS").unwrap_or(1),
            interpolate,
            ..DecoderConfig::default()
        };
        let (decoder, decoder_text, hardware, pads_roi, fancy) = match decode_batch {
            None => (
                None,
                "no JPEG decoder (opened for copies only: pinned or uploaded batches)".to_string(),
                false,
                false,
                true,
            ),
            Some(_) => match GpuJpegDecoder::probe_with(ctx.clone(), config) {
                Ok(mut d) => {
                    let hw = d.has_hardware();
                    let pads = d.batch_decoder().pads_roi();
                    let fancy = d.batch_decoder().interpolated();
                    let wanted = decoding.map(|(_, u, _)| u);
                    let chroma = match (fancy, wanted) {
                        (true, _) => "chroma interpolated by nvJPEG",
                        (false, Some(Upsampling::Nearest)) => {
                            "chroma repeated (upsampling = \"nearest\")"
                        }
                        (false, _) => "chroma repeated, interpolated by our kernels",
                    };
                    let waits = match sleeping_waits {
                        true => "; host waits sleep (STOKEHOLD_CUDA_BLOCKING_SYNC)",
                        false => "",
                    };
                    // The GPU path leaves what the engines don't take to the CPU decoder.
                    let workers = match hw {
                        true => "",
                        false => "; every JPEG decoded by the CPU decoder on the workers",
                    };
                    let text = format!("{}{workers}; {chroma}{waits}", d.describe());
                    (Some(Mutex::new(d)), text, hw, pads, fancy)
                }
                Err(e) => (
                    None,
                    format!("no nvJPEG ({e}): every JPEG is decoded on the CPU"),
                    false,
                    false,
                    true,
                ),
            },
        };
        // The chain's kernels, and the rebuild's where the decoder repeats chroma that the
        // pipeline wants interpolated (asked for, or nvJPEG refused to interpolate).
        let modules = ModuleCache::new(cu.clone(), Arch::from_cc(info.compute_capability));
        let rebuild = [
            Kernel::ChromaResolve,
            Kernel::ChromaGuess,
            Kernel::ChromaUpsample,
        ];
        let launched = decoding
            .map_or(&[][..], |(.., k)| k)
            .iter()
            .chain(rebuild.iter().filter(|_| wants_fancy && !fancy));
        for &kernel in launched {
            modules.function(kernel)?;
        }
        modules.seal();
        // The prep workers ask nvJPEG whether the engines take each image, beside the thread
        // that submits (`GpuDevice::engines_accept`).
        let checks = decoder.as_ref().and_then(|d| {
            d.lock()
                .unwrap_or_else(|p| p.into_inner())
                .batch_decoder()
                .support_checks()
        });
        let description = DeviceDescription {
            name: info.name.clone(),
            emulated: false,
            device_id: info.device_id,
            total_memory: info.total_memory,
            decoder: decoder_text,
            hardware_decoder: hardware,
        };
        Ok(Arc::new(RealDevice {
            streams: Mutex::new(vec![decode_stream, kernel_stream]),
            cu,
            modules,
            ctx,
            decoder,
            feed: Mutex::default(),
            checks,
            pads_roi,
            fancy,
            description,
            sizes: Mutex::new(HashMap::new()),
            device_bytes: AtomicUsize::new(0),
            device_peak: AtomicUsize::new(0),
            pinned_bytes: Arc::default(),
            pinned_peak: Arc::default(),
            put_back: PutBack::default(),
        }))
    }

    /// The kernel modules loaded (file stems, sorted): those of the kernels the device was
    /// opened for.
    pub fn loaded_modules(&self) -> Vec<&'static str> {
        self.modules.loaded()
    }

    fn stream(&self, s: StreamId) -> Result<Arc<CudaStream>, Error> {
        let v = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        v.get(s.0)
            .cloned()
            .ok_or_else(|| Error::Cuda(format!("no stream {}", s.0)))
    }

    fn event(e: &Event) -> Result<&PooledEvent, Error> {
        e.0.downcast_ref::<PooledEvent>()
            .ok_or_else(|| Error::Cuda("an event of another device".into()))
    }

    /// Makes the device's context current on this thread for the guard's life, then puts
    /// back the context that was current before, if another: a consumer's thread (a DLPack
    /// export, a batch dropped on PyTorch's thread) keeps the device its framework set.
    fn bind(&self) -> Result<PutBack, Error> {
        let before = cu::ctx::get_current().map_err(|e| cuda_err("read the current context", e))?;
        self.cu
            .bind_to_thread()
            .map_err(|e| cuda_err("bind the context", e))?;
        // Ours, or none, current before: it stays.
        Ok(PutBack(
            before
                .filter(|&c| c != self.cu.cu_ctx())
                .map(|c| c as usize),
        ))
    }
}

impl Drop for RealDevice {
    fn drop(&mut self) {
        if let Ok(Some(before)) = cu::ctx::get_current() {
            if before != self.cu.cu_ctx() {
                self.put_back = PutBack(Some(before as usize));
            }
        }
        // Nothing may be freed (decoder work buffers, modules, streams) under running work.
        if let Err(e) = self.cu.synchronize() {
            tracing::warn!("synchronising the device before dropping it: {e}");
        }
    }
}

/// A count from the environment (a tuning knob for runs on a GPU machine).
fn env_count(name: &str) -> Option<usize> {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
}

/// Pinned memory of the real device, freed when dropped.
struct PinnedOwner {
    _slice: cudarc::driver::PinnedHostSlice<u8>,
    len: usize,
    counter: Arc<AtomicUsize>,
    /// Counts the free (`cuMemFreeHost` waits for the whole device: a steady state has none).
    counters: Arc<crate::nvjpeg::safe::Counters>,
}

impl Drop for PinnedOwner {
    fn drop(&mut self) {
        self.counter.fetch_sub(self.len, Ordering::Relaxed);
        self.counters.pinned_frees.fetch_add(1, Ordering::Relaxed);
    }
}

impl GpuDevice for RealDevice {
    fn describe(&self) -> DeviceDescription {
        self.description.clone()
    }

    fn counters(&self) -> DeviceCounters {
        self.ctx.counters().read()
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
            .cu
            .new_stream()
            .map_err(|e| cuda_err("create a stream", e))?;
        let mut v = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        v.push(s);
        Ok(StreamId(v.len() - 1))
    }

    fn alloc(&self, bytes: usize) -> Result<DevicePtr, Error> {
        let _bound = self.bind()?;
        self.ctx
            .counters()
            .device_allocs
            .fetch_add(1, Ordering::Relaxed);
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
        let _bound = self.bind().inspect_err(|e| tracing::warn!("free: {e}"));
        self.ctx
            .counters()
            .device_frees
            .fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded contract (allocated here, freed once, no queued work uses it).
        if let Err(e) = unsafe { cu::free_sync(ptr) } {
            tracing::warn!("cuMemFree: {e}");
        }
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<PinnedHost, Error> {
        self.ctx
            .counters()
            .pinned_allocs
            .fetch_add(1, Ordering::Relaxed);
        // Portable: pinned for every context, so that a consumer's copies from it (pinned
        // batches, `batch_memory = "pinned"`) are asynchronous whichever context they run in.
        let flags = cudarc::driver::sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: the memory is uninitialised; `PinnedHost` hands it out only as bytes, which
        // the stage writes before any copy reads them.
        let mut slice = unsafe { self.cu.alloc_pinned_with_flags::<u8>(bytes.max(1), flags) }
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
            counters: self.ctx.counters().clone(),
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
        let _bound = self.bind()?;
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
        let _bound = self.bind()?;
        // SAFETY: forwarded contract.
        unsafe { cu::memcpy_dtod_async(dst, src, len, s.cu_stream()) }
            .map_err(|e| cuda_err("device to device copy", e))
    }

    unsafe fn zero(&self, stream: StreamId, dst: DevicePtr, len: usize) -> Result<(), Error> {
        let s = self.stream(stream)?;
        let _bound = self.bind()?;
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
        let _bound = self.bind()?;
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
        let func = self.modules.function(kernel)?;
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

    fn record(&self, stream: StreamId, _timing: bool) -> Result<Event, Error> {
        let s = self.stream(stream)?;
        let _bound = self.bind()?;
        // Pooled (recording creates no event in steady state), blocking sync (a host
        // waiting on one sleeps), timing kept for all.
        // SAFETY: `s` is a live stream of this context (held by `self.streams`).
        let ev = unsafe { self.ctx.events().record(s.cu_stream()) }
            .map_err(|e| cuda_err("record an event", e))?;
        Ok(Event(Arc::new(ev)))
    }

    fn wait(&self, stream: StreamId, event: &Event) -> Result<(), Error> {
        let s = self.stream(stream)?;
        let ev = Self::event(event)?;
        let _bound = self.bind()?;
        // SAFETY: both are live objects of this context; the wait captures the event's
        // recording at this point, so the event may be recorded again later.
        unsafe {
            cu::stream::wait_event(
                s.cu_stream(),
                ev.raw(),
                cudarc::driver::sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
        .map_err(|e| cuda_err("stream wait", e))
    }

    fn synchronize(&self, event: &Event) -> Result<(), Error> {
        Self::event(event)?
            .synchronize()
            .map_err(|e| cuda_err("event synchronize", e))
    }

    fn is_complete(&self, event: &Event) -> Result<bool, Error> {
        Self::event(event)?
            .is_complete()
            .map_err(|e| cuda_err("event query", e))
    }

    fn elapsed(&self, start: &Event, end: &Event) -> Result<Duration, Error> {
        let ms = Self::event(end)?
            .elapsed_ms_since(Self::event(start)?)
            .map_err(|e| cuda_err("event elapsed time", e))?;
        Ok(Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
    }

    fn synchronize_all(&self) -> Result<(), Error> {
        self.cu
            .synchronize()
            .map_err(|e| cuda_err("device synchronize", e))
    }

    fn route(&self, header: &JpegHeader) -> Route {
        match &self.decoder {
            Some(_) => route_header(header, self.description.hardware_decoder),
            None => Route::Cpu(FallbackReason::NvjpegUnsupported(
                "nvJPEG is not available".into(),
            )),
        }
    }

    fn decodes_fancy_chroma(&self) -> bool {
        self.fancy
    }

    fn engines_accept(&self, bytes: &[u8], roi: Option<Roi>) -> Option<bool> {
        let checks = self.checks.as_ref()?;
        match checks.accepts(bytes, roi) {
            Ok(answer) => Some(answer),
            Err(e) => {
                tracing::debug!("nvJPEG's support check failed ({e}); asked again at submission");
                None
            }
        }
    }

    fn worker_decoder(&self) -> Option<Box<dyn WorkerJpeg>> {
        let decoder = self.decoder.as_ref()?;
        let _bound = self.bind().ok()?;
        let made = decoder
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .batch_decoder()
            .worker_decoder();
        let decoder = match made {
            Ok(d) => d,
            Err(e) => {
                tracing::debug!("no GPU-assisted Huffman decoder for the workers: {e}");
                return None;
            }
        };
        let id = self.new_stream().ok()?;
        let stream = self.stream(id).ok()?;
        Some(Box::new(RealWorkerJpeg {
            decoder,
            stream,
            id,
        }))
    }

    fn feed_times(&self) -> Option<FeedTimes> {
        self.decoder.as_ref()?;
        Some(*self.feed.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn region_to_decode(
        &self,
        header: &JpegHeader,
        roi: Option<Roi>,
        rebuilt: bool,
    ) -> Result<DecodeRegion, NvjpegError> {
        // The decoder's own rule (`BatchDecoder::region_to_decode`), without taking its lock:
        // the prep workers region every sample while the stage's thread submits.
        decode_region(
            header,
            roi,
            self.pads_roi || (rebuilt && needs_margin(header)),
        )
    }

    unsafe fn submit_decode(
        &self,
        stream: StreamId,
        jobs: &[DecodeJob<'_>],
    ) -> Result<Vec<Result<DecodedInfo, NvjpegError>>, Error> {
        let Some(decoder) = &self.decoder else {
            let why = FallbackReason::NvjpegUnsupported("nvJPEG is not available".into());
            return Ok(jobs
                .iter()
                .map(|_| Err(NvjpegError::CpuFallback(why.clone())))
                .collect());
        };
        let s = self.stream(stream)?;
        let _bound = self.bind()?;
        let mut results = Vec::with_capacity(jobs.len());
        let mut dec = decoder.lock().unwrap_or_else(|p| p.into_inner());
        let max = dec.batch_decoder().max_batch().max(1);
        for (k, chunk) in jobs.chunks(max).enumerate() {
            let images: Vec<EncodedImage<'_>> = chunk
                .iter()
                .map(|j| EncodedImage {
                    bytes: j.bytes,
                    header: j.header,
                    roi: j.roi,
                    chroma_margin: j.rebuilt,
                    output: j.out,
                    engines_checked: j.engines_checked,
                    pinned: j.pinned,
                })
                .collect();
            // SAFETY: `s` is a stream of the decoder's context (the device's); every output
            // is device memory of it, large enough for its region and untouched by others
            // until an event after this call has completed (the caller's contract); the
            // bytes are copied into the decoder's staging ring before `submit` returns, but
            // for pinned ones (a worker's copy), which the caller keeps until that event
            // completes on the host (`submit_decode`'s contract).
            match unsafe { dec.submit(s.cu_stream() as *mut c_void, &images) } {
                // What nvJPEG refused is known now; its queued work is the stream's.
                Ok(submitted) => results.extend(submitted.into_results()),
                // A lost context: the pipeline fails (the submitted parts stay safe: the
                // decoder reuses their memory only after their fences).
                Err(e) if e.is_fatal() => return Err(e.into()),
                Err(e) => {
                    tracing::debug!("nvJPEG refused part {k} of a batch ({e}); CPU decodes");
                    let why = FallbackReason::NvjpegFailed(e.to_string());
                    results.extend(
                        chunk
                            .iter()
                            .map(|_| Err(NvjpegError::CpuFallback(why.clone()))),
                    );
                }
            }
        }
        *self.feed.lock().unwrap_or_else(|p| p.into_inner()) = dec.batch_decoder().feed_times();
        Ok(results)
    }

    unsafe fn adopt_stream(&self, raw: u64) -> Result<StreamId, Error> {
        // `CU_STREAM_PER_THREAD` (2) names the calling thread's own default stream, but the
        // stream is used from other threads too (a batch's release event is recorded where
        // its last reference drops): the legacy default stream (1), which every thread's
        // per-thread default stream synchronises with, orders the same work from anywhere.
        let raw = if raw == 2 { 1 } else { raw };
        // SAFETY: forwarded contract (a live `CUstream` of this context, kept alive by its
        // owner while batches may use it).
        let s = unsafe { self.cu.wrap_borrowed_stream(raw as usize as CUstream) };
        let mut v = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        v.push(s);
        Ok(StreamId(v.len() - 1))
    }

    fn raw_stream(&self, stream: StreamId) -> u64 {
        self.stream(stream)
            .map_or(0, |s| s.cu_stream() as usize as u64)
    }

    fn raw_event(&self, event: &Event) -> u64 {
        Self::event(event).map_or(0, |e| e.raw() as usize as u64)
    }
}

/// A prep worker's nvJPEG decoder on a stream of its own ([`GpuDevice::worker_decoder`]).
struct RealWorkerJpeg {
    /// Dropped first: it waits for its queued work.
    decoder: crate::nvjpeg::safe::WorkerDecoder,
    stream: Arc<CudaStream>,
    id: StreamId,
}

impl WorkerJpeg for RealWorkerJpeg {
    fn stream(&self) -> StreamId {
        self.id
    }

    unsafe fn decode(
        &mut self,
        bytes: &Arc<Vec<u8>>,
        pixels: usize,
        roi: Option<Roi>,
        out: DeviceOutput,
    ) -> Result<(), NvjpegError> {
        // SAFETY: the stream is of the decoder's context (the device's); `out` per this
        // method's contract.
        unsafe {
            self.decoder.decode(
                bytes,
                pixels,
                roi,
                out,
                self.stream.cu_stream() as *mut c_void,
            )
        }
    }
}
