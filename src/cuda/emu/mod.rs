//! The emulated device (`--device emu`): a [`GpuDevice`] that runs the real kernels,
//! compiled for the host, so the whole GPU stage is tested without a GPU.
//!
//! - **Kernels**: `kernels/*.cu` built for the host by `build.rs` ([`kernels`]); a launch
//!   runs every sample, spread over a few host threads.
//! - **Memory**: "device memory" is host memory addressed by its host address, as the
//!   kernels read addresses from descriptors; every use is checked, freed memory is
//!   poisoned and quarantined ([`memory`]), and a cap simulates a smaller device.
//! - **Streams**: each stream is a thread running its queue in order, asynchronously to the
//!   host; events are flags the stream sets ([`stream`]). Every access to device memory is
//!   checked to be ordered after those it conflicts with, as a GPU needs, whatever order the
//!   threads happened to run them in (`order.rs`): an unordered pair is a fault.
//! - **JPEG decoding**: nvJPEG's shape (submit, then finish at the batch's fence), the same
//!   routing nvJPEG gets on a device with JPEG engines, ROIs padded as nvJPEG before 13.3
//!   pads them, then our CPU decoder on the stream's thread ([`decode`]).
//! - **Faults**: a bad address, a simulated lost device ([`EmuDevice::lose`]) or running
//!   out of memory behave as on a device: a sticky error for every later call, never a hang.
//!
//! What it cannot show: the CUDA intrinsics and PTX conversions (mapped to IEEE host
//! operations), multi-thread reductions inside a block, real concurrency inside a kernel,
//! and nvJPEG itself. `docs/gpu.md` lists what only a GPU machine runs.

pub mod decode;
pub mod kernels;
pub mod memory;
mod order;
pub mod stream;

use super::timing_model::TimingModel;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::decode::JpegHeader;
use crate::error::Error;
use crate::nvjpeg::{
    decode_region, needs_margin, route_header, DecodeRegion, DecodedInfo, FeedTimes, GpuRoute,
    NvjpegError, Roi, Route,
};

use super::gpu_device::{
    DecodeJob, DeviceCounters, DeviceDescription, DevicePtr, Event, GpuDevice, KernelArg,
    MemoryUse, PinnedHost, StreamId, WorkerJpeg,
};
use super::kernel::{Grid, Kernel};
use crate::nvjpeg::safe::Counters;
use memory::{Kind, Memory};
use order::{Order, Use};
use stream::{EmuEvent, EmuStream, Health};

/// Settings of an emulated device.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EmuOptions {
    /// Device memory in bytes (`None`: as much as the host gives).
    pub memory: Option<usize>,
    /// Lose the device after this many kernel launches (`None`: never).
    pub lose_after_launches: Option<u64>,
    /// Each kernel launch waits this long on its stream before it runs (`None`: no wait): a
    /// slow device, which shows a consumer that reads a batch before its ready event.
    pub launch_delay: Option<Duration>,
    /// Decode regions of interest exactly, as nvJPEG 13.3 and later do; by default they are
    /// padded by an MCU and the region read from inside the padded output, as with the
    /// nvJPEG before 13.3 of the GPU machines (CUDA 13.0).
    pub exact_roi: bool,
    /// Take a real device's time instead of computing pixels ([`TimingModel`]).
    pub model: Option<TimingModel>,
    /// The decoder interpolates chroma as libjpeg does, for a pipeline with `upsampling =
    /// "fancy"` (as a real device's nvJPEG is asked to by default), instead of repeating it
    /// as the engines write it for our kernels to rebuild (a real device with
    /// `STOKEHOLD_CHROMA_REBUILD=1`): the GPU path's default on a real device, without the
    /// rebuild.
    pub interpolate: bool,
    /// A device without JPEG engines (most GPUs: only the A100, A30, H100, H200 and their
    /// kind have them): every JPEG is routed as nvJPEG routes it there, to its CUDA decoders,
    /// which the GPU path leaves to the CPU decoder on the workers.
    pub no_engines: bool,
}

impl EmuOptions {
    /// From the environment: `STOKEHOLD_EMU_MEMORY` (bytes; `k`, `M`, `G` suffixes),
    /// `STOKEHOLD_EMU_LOSE_AFTER` (kernel launches), for trying faults from the command line,
    /// `STOKEHOLD_EMU_LAUNCH_DELAY_MS` ([`EmuOptions::launch_delay`]),
    /// `STOKEHOLD_EMU_EXACT_ROI=1` ([`EmuOptions::exact_roi`]), `STOKEHOLD_EMU_INTERPOLATE=1`
    /// ([`EmuOptions::interpolate`]), `STOKEHOLD_EMU_NO_ENGINES=1`
    /// ([`EmuOptions::no_engines`]) and `STOKEHOLD_EMU_MODEL` (`h100`, `h100-interp`,
    /// `h100-training`: [`EmuOptions::model`]).
    pub fn from_env() -> Result<EmuOptions, Error> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// As [`EmuOptions::from_env`], reading the variables through `get`.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<EmuOptions, Error> {
        let read = |name: &str, allow_suffix: bool| -> Result<Option<u64>, Error> {
            let Some(v) = get(name) else {
                return Ok(None);
            };
            let t = v.trim();
            let (num, mul) = match t.char_indices().last() {
                Some((i, 'k' | 'K')) if allow_suffix => (&t[..i], 1u64 << 10),
                Some((i, 'm' | 'M')) if allow_suffix => (&t[..i], 1 << 20),
                Some((i, 'g' | 'G')) if allow_suffix => (&t[..i], 1 << 30),
                _ => (t, 1),
            };
            num.trim()
                .parse::<u64>()
                .map(|n| Some(n.saturating_mul(mul)))
                .map_err(|_| Error::GpuUnavailable(format!("{name}={v}: expected a whole number")))
        };
        Ok(EmuOptions {
            memory: read("STOKEHOLD_EMU_MEMORY", true)?.map(|b| b as usize),
            lose_after_launches: read("STOKEHOLD_EMU_LOSE_AFTER", false)?,
            launch_delay: read("STOKEHOLD_EMU_LAUNCH_DELAY_MS", false)?.map(Duration::from_millis),
            exact_roi: read("STOKEHOLD_EMU_EXACT_ROI", false)?.is_some_and(|v| v != 0),
            interpolate: read("STOKEHOLD_EMU_INTERPOLATE", false)?.is_some_and(|v| v != 0),
            no_engines: read("STOKEHOLD_EMU_NO_ENGINES", false)?.is_some_and(|v| v != 0),
            model: match get("STOKEHOLD_EMU_MODEL") {
                None => None,
                Some(name) => Some(TimingModel::named(name.trim()).ok_or_else(|| {
                    Error::GpuUnavailable(format!(
                        "STOKEHOLD_EMU_MODEL={name}: expected h100, h100-interp or h100-training"
                    ))
                })?),
            },
        })
    }
}

/// The emulated device. Dropping it waits for its queued work (as a real device is
/// synchronised before it is torn down), then stops its streams.
pub struct EmuDevice {
    health: Arc<Health>,
    counters: Arc<Counters>,
    /// Events recorded before, free once only the pool holds them.
    events: Mutex<Vec<Arc<EmuEvent>>>,
    memory: Arc<Memory>,
    /// The clocks of the check of stream order (`order.rs`).
    order: Arc<Order>,
    streams: Mutex<Vec<Arc<EmuStream>>>,
    launches: AtomicU64,
    /// Decodes still to fail at their fence (see [`EmuDevice::fail_decodes`]).
    failing_decodes: AtomicU64,
    /// Images the timing model has decoded (for its wait after a number of them).
    modelled_images: AtomicU64,
    /// Support checks still to answer no (see [`EmuDevice::refuse_engine_checks`]).
    refused_checks: AtomicU64,
    /// The time of the threads calling `submit_decode` (all of it counted as the engines'
    /// call: the emulation has no staging or checks of its own).
    feed: Mutex<FeedTimes>,
    /// Held for a whole submission, as the real device holds its nvJPEG decoder's lock: one
    /// call at a time, and whatever else took it would wait out a call.
    decoder: Mutex<()>,
    options: EmuOptions,
    threads: usize,
}

impl std::fmt::Debug for EmuDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmuDevice")
            .field("options", &self.options)
            .finish()
    }
}

/// The emulation's error as a stokehold error.
fn emu_err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Cuda(format!("{what}: {e}"))
}

impl EmuDevice {
    /// The next `n` support checks ([`GpuDevice::engines_accept`]) answer that the engines
    /// don't take the image, as nvJPEG does for a bitstream its engines can't decode.
    pub fn refuse_engine_checks(&self, n: u64) {
        self.refused_checks.store(n, Ordering::Relaxed);
    }

    /// Kernels launched so far.
    pub fn launches(&self) -> u64 {
        self.launches.load(Ordering::Relaxed)
    }

    /// A new emulated device, or why there can be none in this build.
    pub fn new(options: EmuOptions) -> Result<Arc<EmuDevice>, Error> {
        if let Some(why) = kernels::unavailable() {
            return Err(Error::GpuUnavailable(format!(
                "the emulated device is not built in: {why}"
            )));
        }
        let health = Arc::new(Health::default());
        let memory = Arc::new(Memory::default());
        memory.set_cap(options.memory);
        let dev = EmuDevice {
            health,
            counters: Arc::default(),
            events: Mutex::new(Vec::new()),
            memory,
            order: Arc::default(),
            streams: Mutex::new(Vec::new()),
            launches: AtomicU64::new(0),
            failing_decodes: AtomicU64::new(0),
            modelled_images: AtomicU64::new(0),
            refused_checks: AtomicU64::new(0),
            feed: Mutex::default(),
            decoder: Mutex::new(()),
            options,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get().min(4)),
        };
        // The fixed streams (decode, kernels).
        dev.new_stream()?;
        dev.new_stream()?;
        Ok(Arc::new(dev))
    }

    /// Makes the device lost at once (a test hook: every later call fails, nothing hangs).
    pub fn lose(&self) {
        self.health.fail("the device was lost (simulated)".into());
    }

    /// Makes the decoder refuse the next `n` images it is given, as nvJPEG refuses one it
    /// can't take (a test hook: the stage decodes them on the CPU).
    pub fn fail_decodes(&self, n: u64) {
        self.failing_decodes.store(n, Ordering::Relaxed);
    }

    /// Queues a pause of `d` on `stream` (a test hook: a slow consumer, or slow kernels).
    pub fn delay(&self, stream: StreamId, d: Duration) -> Result<(), Error> {
        self.stream(stream)?.push(Box::new(move || {
            std::thread::sleep(d);
            Ok(())
        }));
        Ok(())
    }

    /// Whether `len` bytes at `ptr` are live pinned memory of this device (a test hook: where
    /// a batch handed out as pinned really is).
    pub fn is_pinned(&self, ptr: *const u8, len: usize) -> bool {
        self.memory.is_live(ptr as u64, len, Kind::Pinned)
    }

    fn stream(&self, s: StreamId) -> Result<Arc<EmuStream>, Error> {
        self.check()?;
        let v = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        v.get(s.0)
            .cloned()
            .ok_or_else(|| Error::Cuda(format!("no stream {}", s.0)))
    }

    /// The sticky fault, as an error.
    fn check(&self) -> Result<(), Error> {
        match self.health.fault() {
            Some(f) => Err(Error::Cuda(format!("emulated device: {f}"))),
            None => Ok(()),
        }
    }

    fn event(e: &Event) -> Result<&EmuEvent, Error> {
        e.0.downcast_ref::<EmuEvent>()
            .ok_or_else(|| Error::Cuda("an event of another device".into()))
    }

    /// Queues `work` that touches memory: it runs with the memory lock held (shared), its
    /// device ranges checked for stream order as one operation of `stream`.
    fn queue_with_memory(
        &self,
        stream: StreamId,
        work: impl FnOnce(&memory::Access<'_>) -> Result<(), String> + Send + 'static,
    ) -> Result<(), Error> {
        let op = self.order.op(stream.0);
        self.queue_as(stream, op, work)
    }

    /// Queues `work` on `stream` as the operation `op` of the check of stream order.
    fn queue_as(
        &self,
        stream: StreamId,
        op: order::Op,
        work: impl FnOnce(&memory::Access<'_>) -> Result<(), String> + Send + 'static,
    ) -> Result<(), Error> {
        let s = self.stream(stream)?;
        let mem = self.memory.clone();
        s.push(Box::new(move || work(&mem.access(Some(op)))));
        Ok(())
    }
}

impl Drop for EmuDevice {
    fn drop(&mut self) {
        if let Err(e) = self.synchronize_all() {
            tracing::debug!("emulated device dropped after a fault: {e}");
        }
        self.health.shut_down();
        let streams = std::mem::take(&mut *self.streams.lock().unwrap_or_else(|p| p.into_inner()));
        for s in streams {
            s.stop();
        }
    }
}

/// Keeps an emulated pinned allocation; frees (poisons) it when dropped.
struct PinnedOwner {
    memory: Arc<Memory>,
    ptr: u64,
    counters: Arc<Counters>,
}

impl Drop for PinnedOwner {
    fn drop(&mut self) {
        self.counters.pinned_frees.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = self.memory.free(self.ptr) {
            tracing::warn!("emulated pinned memory: {e}");
        }
    }
}

impl GpuDevice for EmuDevice {
    fn describe(&self) -> DeviceDescription {
        DeviceDescription {
            name: "emulated device (kernels built for the host, CPU decoder in place of nvJPEG)"
                .into(),
            emulated: true,
            device_id: 0,
            total_memory: self.memory.cap().unwrap_or(0),
            decoder: format!(
                "stokehold's CPU decoder, routed as nvJPEG {}; {}{}{}",
                if self.options.no_engines {
                    "without JPEG engines (STOKEHOLD_EMU_NO_ENGINES=1)"
                } else {
                    "with JPEG engines"
                },
                if self.options.no_engines {
                    "chroma as the pipeline asks (the workers' CPU decoder decodes every JPEG)"
                } else if self.options.interpolate {
                    "chroma interpolated by the decoder, as nvJPEG asked to interpolate \
                     (STOKEHOLD_EMU_INTERPOLATE=1)"
                } else {
                    "chroma repeated, as the engines write it (for upsampling = \"fancy\" our \
                     kernels interpolate it)"
                },
                if self.options.exact_roi {
                    ""
                } else {
                    "; ROIs padded by an MCU (as nvJPEG before 13.3)"
                },
                match &self.options.model {
                    Some(m) => format!(
                        "; timing model {} (no pixels: the time a real device takes)",
                        m.name
                    ),
                    None => String::new(),
                }
            ),
            hardware_decoder: !self.options.no_engines,
        }
    }

    fn counters(&self) -> DeviceCounters {
        self.counters.read()
    }

    fn timing_model(&self) -> Option<TimingModel> {
        self.options.model
    }

    fn memory(&self) -> MemoryUse {
        let (device, device_peak, pinned, pinned_peak) = self.memory.usage();
        MemoryUse {
            device,
            device_peak,
            pinned,
            pinned_peak,
        }
    }

    fn new_stream(&self) -> Result<StreamId, Error> {
        self.check()?;
        let mut v = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        let id = v.len();
        let s = EmuStream::start(format!("stokehold-emu-stream-{id}"), self.health.clone())
            .map_err(|e| emu_err("start an emulated stream", e))?;
        v.push(Arc::new(s));
        Ok(StreamId(id))
    }

    fn alloc(&self, bytes: usize) -> Result<DevicePtr, Error> {
        self.check()?;
        self.counters.device_allocs.fetch_add(1, Ordering::Relaxed);
        // Its only failure is running out (the cap, or the host refusing).
        self.memory
            .alloc(bytes, Kind::Device)
            .map_err(|detail| Error::DeviceOutOfMemory {
                what: "device memory".into(),
                bytes: bytes as u64,
                detail: format!("emulated device: {detail}"),
            })
    }

    unsafe fn free(&self, ptr: DevicePtr) {
        self.counters.device_frees.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = self.memory.free(ptr) {
            self.health.fail(e);
        }
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<PinnedHost, Error> {
        self.check()?;
        self.counters.pinned_allocs.fetch_add(1, Ordering::Relaxed);
        let ptr = self
            .memory
            .alloc(bytes, Kind::Pinned)
            .map_err(|e| Error::Cuda(format!("emulated pinned memory: {e}")))?;
        let owner = PinnedOwner {
            memory: self.memory.clone(),
            ptr,
            counters: self.counters.clone(),
        };
        // SAFETY: `ptr` is a fresh allocation of at least `bytes` bytes that only `owner`
        // releases (poisoned and quarantined, so queued work never sees it unmapped).
        Ok(unsafe { PinnedHost::new(ptr as *mut u8, bytes, Box::new(owner)) })
    }

    unsafe fn copy_to_device(
        &self,
        stream: StreamId,
        dst: DevicePtr,
        src: *const u8,
        len: usize,
    ) -> Result<(), Error> {
        let src = src as u64;
        self.queue_with_memory(stream, move |mem| {
            mem.check((src, len), Kind::Pinned, Use::Read, "a copy's source")?;
            mem.check((dst, len), Kind::Device, Use::Write, "a copy's destination")?;
            // SAFETY: both ranges lie in mapped allocations of the right kind (checked),
            // mapped while `mem` is held; distinct allocations never overlap.
            unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, len) };
            Ok(())
        })
    }

    unsafe fn copy_on_device(
        &self,
        stream: StreamId,
        dst: DevicePtr,
        src: DevicePtr,
        len: usize,
    ) -> Result<(), Error> {
        self.queue_with_memory(stream, move |mem| {
            mem.check((src, len), Kind::Device, Use::Read, "a copy's source")?;
            mem.check((dst, len), Kind::Device, Use::Write, "a copy's destination")?;
            // SAFETY: both ranges are mapped device memory (checked) while `mem` is held;
            // `copy` allows overlap.
            unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, len) };
            Ok(())
        })
    }

    unsafe fn zero(&self, stream: StreamId, dst: DevicePtr, len: usize) -> Result<(), Error> {
        self.queue_with_memory(stream, move |mem| {
            mem.check((dst, len), Kind::Device, Use::Write, "a memset")?;
            // SAFETY: mapped device memory (checked) while `mem` is held.
            unsafe { std::ptr::write_bytes(dst as *mut u8, 0, len) };
            Ok(())
        })
    }

    unsafe fn copy_to_host(
        &self,
        stream: StreamId,
        dst: &mut [u8],
        src: DevicePtr,
    ) -> Result<(), Error> {
        let done = self.record(stream, false)?;
        self.synchronize(&done)?;
        let mem = self.memory.access(Some(self.order.host_op()));
        mem.check(
            (src, dst.len()),
            Kind::Device,
            Use::Read,
            "a copy to the host",
        )
        .map_err(|e| {
            self.health.fail(e.clone());
            Error::Cuda(format!("emulated device: {e}"))
        })?;
        // SAFETY: mapped device memory (checked) while `mem` is held; the work queued before
        // has run (the event above), and `dst` is host memory of the same length.
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    unsafe fn launch(
        &self,
        stream: StreamId,
        kernel: Kernel,
        grid: Grid,
        args: &[KernelArg],
    ) -> Result<(), Error> {
        let n = self.launches.fetch_add(1, Ordering::Relaxed) + 1;
        if self.options.lose_after_launches.is_some_and(|k| n > k) {
            self.lose();
        }
        if let Some(d) = self.options.launch_delay {
            self.delay(stream, d)?;
        }
        if let Some(model) = &self.options.model {
            // The device's time for the launch; no pixels.
            return self.delay(stream, model.launch_time(grid.samples));
        }
        let args = args.to_vec();
        let threads = self.threads;
        self.queue_with_memory(stream, move |mem| {
            let checked = kernels::check(mem, kernel, grid.samples, &args)?;
            checked.run(mem, threads);
            Ok(())
        })
    }

    fn record(&self, stream: StreamId, _timing: bool) -> Result<Event, Error> {
        let s = self.stream(stream)?;
        let reused = {
            let mut pool = self.events.lock().unwrap_or_else(|p| p.into_inner());
            // Free: no handle but the pool's, and its stream got there (the stream's own
            // handle is gone once it has).
            let free = pool.iter().position(|e| Arc::strong_count(e) == 1);
            match free {
                Some(k) => Some(pool[k].clone()),
                None => {
                    let e = Arc::new(EmuEvent::default());
                    self.counters.events_created.fetch_add(1, Ordering::Relaxed);
                    pool.push(e.clone());
                    Some(e)
                }
            }
        };
        let ev = reused.expect("an event");
        ev.reset();
        ev.set_clock(self.order.record(stream.0));
        s.record_into(ev.clone());
        Ok(Event(ev))
    }

    fn wait(&self, stream: StreamId, event: &Event) -> Result<(), Error> {
        let ev = event
            .0
            .clone()
            .downcast::<EmuEvent>()
            .map_err(|_| Error::Cuda("an event of another device".into()))?;
        self.order.wait(stream.0, &ev.clock());
        let health = self.health.clone();
        self.stream(stream)?
            .push(Box::new(move || ev.wait(&health)));
        Ok(())
    }

    fn synchronize(&self, event: &Event) -> Result<(), Error> {
        let ev = Self::event(event)?;
        ev.wait(&self.health)
            .map_err(|f| Error::Cuda(format!("emulated device: {f}")))?;
        self.order.host_saw(&ev.clock());
        Ok(())
    }

    fn is_complete(&self, event: &Event) -> Result<bool, Error> {
        self.check()?;
        let ev = Self::event(event)?;
        let complete = ev.reached().is_some();
        if complete {
            self.order.host_saw(&ev.clock());
        }
        Ok(complete)
    }

    fn elapsed(&self, start: &Event, end: &Event) -> Result<Duration, Error> {
        let (a, b) = (Self::event(start)?.reached(), Self::event(end)?.reached());
        match (a, b) {
            (Some(a), Some(b)) => Ok(b.saturating_duration_since(a)),
            _ => Err(Error::Cuda("elapsed time of events not complete".into())),
        }
    }

    fn synchronize_all(&self) -> Result<(), Error> {
        let streams = self
            .streams
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for s in streams {
            let ev = s.record();
            ev.wait(&self.health)
                .map_err(|f| Error::Cuda(format!("emulated device: {f}")))?;
        }
        self.order.host_saw_all();
        Ok(())
    }

    fn decodes_fancy_chroma(&self) -> bool {
        self.options.interpolate
    }

    fn route(&self, header: &JpegHeader) -> Route {
        route_header(header, !self.options.no_engines)
    }

    fn region_to_decode(
        &self,
        header: &JpegHeader,
        roi: Option<Roi>,
        rebuilt: bool,
    ) -> Result<DecodeRegion, NvjpegError> {
        decode_region(
            header,
            roi,
            !self.options.exact_roi || (rebuilt && needs_margin(header)),
        )
    }

    unsafe fn submit_decode(
        &self,
        stream: StreamId,
        jobs: &[DecodeJob<'_>],
    ) -> Result<Vec<Result<DecodedInfo, NvjpegError>>, Error> {
        self.stream(stream)?;
        let call = self.decoder.lock().unwrap_or_else(|p| p.into_inner());
        let t0 = std::time::Instant::now();
        // SAFETY: forwarded contract (each job's output device memory of this emulation,
        // its bytes kept until an event after the decode).
        let out = unsafe { self.queue_decodes(stream, jobs) };
        drop(call);
        let mut feed = self.feed.lock().unwrap_or_else(|p| p.into_inner());
        feed.calls += 1;
        feed.pinned_images += jobs.iter().filter(|j| j.pinned).count() as u64;
        if let Ok(results) = &out {
            feed.engine_images += results
                .iter()
                .filter(|r| r.as_ref().is_ok_and(|i| i.route == GpuRoute::Hardware))
                .count() as u64;
        }
        feed.engines_call += t0.elapsed();
        out
    }

    fn engines_accept(&self, _bytes: &[u8], _roi: Option<Roi>) -> Option<bool> {
        // The emulated engines take what the header routes to them, but for the refusals
        // asked for.
        let refuse = self
            .refused_checks
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |k| k.checked_sub(1))
            .is_ok();
        Some(!refuse)
    }

    fn feed_times(&self) -> Option<FeedTimes> {
        Some(*self.feed.lock().unwrap_or_else(|p| p.into_inner()))
    }

    unsafe fn adopt_stream(&self, raw: u64) -> Result<StreamId, Error> {
        let id = StreamId(usize::try_from(raw).unwrap_or(usize::MAX));
        self.stream(id)?;
        Ok(id)
    }

    fn raw_stream(&self, stream: StreamId) -> u64 {
        stream.0 as u64
    }

    fn raw_event(&self, _event: &Event) -> u64 {
        0
    }

    fn worker_decoder(&self) -> Option<Box<dyn WorkerJpeg>> {
        if self.options.model.is_some() {
            return None;
        }
        let id = self.new_stream().ok()?;
        Some(Box::new(worker::EmuWorkerJpeg {
            id,
            stream: self.stream(id).ok()?,
            memory: self.memory.clone(),
            order: self.order.clone(),
            fancy: self.options.interpolate,
        }))
    }
}

mod submit;
mod worker;

#[cfg(test)]
mod order_tests;
#[cfg(test)]
mod tests;
