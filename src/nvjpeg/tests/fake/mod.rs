//! A fake nvJPEG and a fake CUDA context, to check the decoder's bookkeeping without a GPU.
//!
//! The fake library is a real function table ([`sys::NvjpegLib`]) whose entries are the
//! `extern "C"` functions of `calls.rs`, over host memory. It behaves as nvJPEG does where it
//! matters here: GPU work (the batched decode, the transfer and device phases) is *queued*
//! and runs only when a fence recorded after it is waited on, reading the encoded bytes,
//! pinned buffers and states then, and writing each output's first three bytes (the image's
//! checksum byte) then; buffers grow through the allocators the handle was created with.
//! So memory reused or freed too early shows up as wrong output bytes and as a recorded
//! violation. Every call also records which fake context was current on the calling thread.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard};

use super::super::result::{Nvjpeg, NvjpegError};
use super::super::safe::{Fence, GpuContext, MemoryKind};
use super::super::sys;

mod calls;

use calls::*;

thread_local! {
    /// The fake context current on this thread (0: none).
    static CURRENT: Cell<u32> = const { Cell::new(0) };
}

/// The fake context current on this thread.
pub fn current_context() -> u32 {
    CURRENT.with(|c| c.get())
}

/// A byte standing for an image's contents: what the fake "decodes" it to.
pub fn checksum(bytes: &[u8]) -> u8 {
    bytes
        .iter()
        .fold(0x5au8, |a, &b| a.rotate_left(1) ^ b)
        .max(1)
}

/// One call into the fake.
#[derive(Debug, Clone)]
pub struct Call {
    /// The C function.
    pub name: &'static str,
    /// The fake context current on the calling thread.
    pub context: u32,
}

/// Work queued on the (one) stream, run when a fence after it is waited on.
#[derive(Debug, Clone)]
enum Work {
    /// The engines' decode of one image: read `len` bytes at `data` (checksum `sum` when
    /// queued), write the checksum to `dest`; `state` in use until then.
    Batched {
        data: usize,
        len: usize,
        sum: u8,
        dest: usize,
        state: usize,
    },
    /// Decoupled transfer: copy `state`'s pinned buffer (its first byte) to its device side.
    Transfer {
        state: usize,
        pinned: usize,
        stream: usize,
    },
    /// Decoupled device phase: write `state`'s device-side byte to `dest`.
    Device { state: usize, dest: usize },
}

impl Work {
    fn uses(&self, obj: usize) -> bool {
        match *self {
            Work::Batched { state, .. } | Work::Device { state, .. } => state == obj,
            Work::Transfer {
                state,
                pinned,
                stream,
            } => state == obj || pinned == obj || stream == obj,
        }
    }
}

/// An allocator given to the fake (its context pointer is only passed back to it).
#[derive(Debug, Clone, Copy)]
struct Given<T>(T);

// SAFETY: the allocators given are thread safe (the decoder's caches lock), and the fake
// only calls them back with their own context pointer.
unsafe impl<T> Send for Given<T> {}

/// What a fake object holds.
#[derive(Debug, Default, Clone)]
struct Obj {
    kind: &'static str,
    pinned_alloc: Option<Given<sys::nvjpegPinnedAllocatorV2_t>>,
    dev_alloc: Option<Given<sys::nvjpegDevAllocatorV2_t>>,
    /// Buffers: their memory (address, size).
    mem: Option<(usize, usize)>,
    /// Parsed streams: (data, len).
    parsed: Option<(usize, usize)>,
    /// States: attached buffers and the host phase's result.
    pinned: usize,
    device: usize,
    device_value: u8,
    /// Parameters: the ROI set.
    roi: (i32, i32, i32, i32),
}

/// Everything the fake saw and the knobs of its behaviour.
#[derive(Debug, Default)]
pub struct State {
    /// Every call, in order.
    pub calls: Vec<Call>,
    /// Hazards seen (memory used again while queued work still needed it, ...).
    pub violations: Vec<String>,
    /// Whether `NVJPEG_BACKEND_HARDWARE` handles can be made.
    pub hardware: bool,
    /// Whether `nvjpegDecodeBatchedEx` fails.
    pub fail_batched: bool,
    /// GPU work queued from this queue position on fails with this CUDA error: every fence
    /// recorded after such work reports it (see [`State::fail_from_now`]).
    pub failing_work: Option<(usize, u32)>,
    /// Paddings set: (which, bytes).
    pub paddings: Vec<(&'static str, usize)>,
    /// `nvjpegDecodeBatchedPreAllocate` calls: (batch, width, height).
    pub preallocated: Vec<(i32, i32, i32)>,
    /// Handles created with both V2 allocators.
    pub handles_with_allocators: usize,
    /// Encoded-data pointers of every `nvjpegDecodeBatchedEx` image.
    pub batched_data: Vec<usize>,
    /// ROIs of the images queued, as set on their parameters.
    pub rois: Vec<(i32, i32, i32, i32)>,
    /// Fences waited on.
    pub waits: usize,
    /// Waits return at once without running the queued work (a GPU far behind, or a
    /// decoder that does not really wait): what reuse without waiting would meet.
    pub ignore_waits: bool,
    queue: Vec<Work>,
    executed: usize,
    objects: HashMap<usize, Obj>,
}

/// The shared record of one fake library and its fake contexts.
#[derive(Debug, Default)]
pub struct Log(Mutex<State>);

impl Log {
    /// The record, locked.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl State {
    /// Makes the GPU work queued from now on fail with CUDA error `code`.
    pub fn fail_from_now(&mut self, code: u32) {
        self.failing_work = Some((self.queue.len(), code));
    }

    /// Runs the queued work up to `upto`.
    fn run(&mut self, upto: usize) {
        while self.executed < upto.min(self.queue.len()) {
            let w = self.queue[self.executed].clone();
            self.executed += 1;
            match w {
                Work::Batched {
                    data,
                    len,
                    sum,
                    dest,
                    ..
                } => {
                    // SAFETY: the decoder promised these bytes stay readable until now.
                    let now =
                        checksum(unsafe { std::slice::from_raw_parts(data as *const u8, len) });
                    if now != sum {
                        self.violations.push(format!(
                            "encoded bytes at {data:#x} changed before the GPU read them"
                        ));
                    }
                    write_pixel(dest, now);
                }
                Work::Transfer { state, pinned, .. } => {
                    let mem = self.objects.get(&pinned).and_then(|o| o.mem);
                    let v = match mem {
                        // SAFETY: the pinned buffer's memory, from the decoder's allocator.
                        Some((addr, _)) => unsafe { *(addr as *const u8) },
                        None => 0,
                    };
                    if let Some(o) = self.objects.get_mut(&state) {
                        o.device_value = v;
                    }
                }
                Work::Device { state, dest } => {
                    let v = self.objects.get(&state).map_or(0, |o| o.device_value);
                    write_pixel(dest, v);
                }
            }
        }
    }

    /// Queued work not yet run that uses `obj`.
    fn pending_use(&self, obj: usize) -> bool {
        self.queue[self.executed..].iter().any(|w| w.uses(obj))
    }

    fn check_idle(&mut self, obj: usize, what: &str) {
        if self.pending_use(obj) {
            let kind = self.objects.get(&obj).map_or("?", |o| o.kind);
            self.violations.push(format!(
                "{what}: {kind} {obj:#x} is still used by queued work"
            ));
        }
    }
}

/// A fake nvJPEG of version `version` recording into `log` (new handles on this thread).
pub fn library(log: &Arc<Log>, version: (i32, i32, i32)) -> Arc<Nvjpeg> {
    CREATING.with(|c| *c.borrow_mut() = Some(log.clone()));
    // SAFETY: the test program itself: no library is loaded, no initialiser runs. Every
    // entry the decoder uses is replaced below by a fake with the C signature.
    let mut l = unsafe {
        sys::NvjpegLib::from_library(libloading::os::unix::Library::this()).expect("this program")
    };
    l.nvjpegCreateExV2 = Ok(create_ex_v2);
    l.nvjpegDestroy = Ok(destroy_handle);
    l.nvjpegSetDeviceMemoryPadding = Ok(set_device_padding);
    l.nvjpegSetPinnedMemoryPadding = Ok(set_pinned_padding);
    l.nvjpegDecodeBatchedPreAllocate = Ok(preallocate);
    l.nvjpegGetHardwareDecoderInfo = Ok(hardware_info);
    l.nvjpegGetImageInfo = Ok(image_info);
    l.nvjpegJpegStateCreate = Ok(state_create);
    l.nvjpegJpegStateDestroy = Ok(destroy_state);
    l.nvjpegDecodeBatchedInitialize = Ok(batched_initialize_counting);
    l.nvjpegDecodeBatchedEx = Ok(batched_ex);
    l.nvjpegDecodeBatchedSupportedEx = Ok(batched_supported);
    l.nvjpegDecodeParamsCreate = Ok(params_create);
    l.nvjpegDecodeParamsDestroy = Ok(destroy_params);
    l.nvjpegDecodeParamsSetOutputFormat = Ok(params_format);
    l.nvjpegDecodeParamsSetROI = Ok(params_roi);
    l.nvjpegJpegStreamCreate = Ok(stream_create);
    l.nvjpegJpegStreamDestroy = Ok(destroy_stream);
    l.nvjpegJpegStreamParse = Ok(stream_parse);
    l.nvjpegJpegStreamParseHeader = Ok(stream_parse_header);
    l.nvjpegDecoderCreate = Ok(decoder_create);
    l.nvjpegDecoderDestroy = Ok(destroy_decoder);
    l.nvjpegDecoderJpegSupported = Ok(decoder_supported);
    l.nvjpegDecoderStateCreate = Ok(decoder_state_create);
    l.nvjpegBufferPinnedCreateV2 = Ok(buffer_pinned_create);
    l.nvjpegBufferPinnedDestroy = Ok(destroy_pinned);
    l.nvjpegBufferDeviceCreateV2 = Ok(buffer_device_create);
    l.nvjpegBufferDeviceDestroy = Ok(destroy_device);
    l.nvjpegStateAttachPinnedBuffer = Ok(attach_pinned);
    l.nvjpegStateAttachDeviceBuffer = Ok(attach_device);
    l.nvjpegDecodeJpegHost = Ok(decode_host);
    l.nvjpegDecodeJpegTransferToDevice = Ok(decode_transfer);
    l.nvjpegDecodeJpegDevice = Ok(decode_device);
    Arc::new(Nvjpeg::from_table(l, "fake nvJPEG", Some(version)))
}

/// A fake CUDA context `id` recording into `log`: binding sets this thread's current
/// context; fences run the queued work when waited on; memory is host memory.
#[derive(Debug)]
pub struct FakeGpu {
    /// Its identity (never 0).
    pub id: u32,
    /// Refuse pinned allocations (out of memory).
    pub refuse_pinned: std::sync::atomic::AtomicBool,
    /// The shared record.
    pub log: Arc<Log>,
    memory: Mutex<FakeMemory>,
}

#[derive(Debug, Default)]
struct FakeMemory {
    live: HashMap<u64, (MemoryKind, usize)>,
    /// Every pinned allocation ever made: (address, size).
    pinned_ever: Vec<(u64, usize)>,
    allocs: usize,
    frees: usize,
    freed: HashSet<u64>,
}

impl FakeGpu {
    /// Context `id` on `log`.
    pub fn new(id: u32, log: &Arc<Log>) -> Arc<FakeGpu> {
        Arc::new(FakeGpu {
            id,
            refuse_pinned: false.into(),
            log: log.clone(),
            memory: Mutex::new(FakeMemory::default()),
        })
    }

    /// (allocations, frees) so far.
    pub fn alloc_counts(&self) -> (usize, usize) {
        let m = self.memory.lock().unwrap();
        (m.allocs, m.frees)
    }

    /// Whether `addr` lies in pinned memory this context handed out.
    pub fn is_pinned(&self, addr: usize) -> bool {
        let m = self.memory.lock().unwrap();
        let a = addr as u64;
        m.pinned_ever
            .iter()
            .any(|&(p, n)| a >= p && a < p + n as u64)
    }
}

#[derive(Debug)]
struct FakeFence {
    log: Arc<Log>,
    upto: usize,
    error: Option<u32>,
}

impl Fence for FakeFence {
    fn wait(&self) -> Result<(), NvjpegError> {
        let mut st = self.log.lock();
        st.waits += 1;
        if st.ignore_waits {
            return Ok(());
        }
        st.run(self.upto);
        match self.error {
            Some(code) => Err(NvjpegError::cuda("fake GPU work", code)),
            None => Ok(()),
        }
    }

    fn is_done(&self) -> Result<bool, NvjpegError> {
        Ok(self.log.lock().executed >= self.upto)
    }
}

impl GpuContext for FakeGpu {
    fn bind(&self) -> Result<(), NvjpegError> {
        CURRENT.with(|c| c.set(self.id));
        Ok(())
    }

    fn record(&self, _stream: *mut c_void) -> Result<Arc<dyn Fence>, NvjpegError> {
        let st = self.log.lock();
        let upto = st.queue.len();
        let error = st
            .failing_work
            .and_then(|(from, code)| (from < upto).then_some(code));
        Ok(Arc::new(FakeFence {
            log: self.log.clone(),
            upto,
            error,
        }))
    }

    fn alloc(&self, kind: MemoryKind, len: usize) -> Result<u64, NvjpegError> {
        if kind == MemoryKind::Pinned
            && self
                .refuse_pinned
                .load(std::sync::atomic::Ordering::Relaxed)
        {
            return Err(NvjpegError::cuda("allocating pinned memory", 2));
        }
        let block = vec![0u8; len].into_boxed_slice();
        let addr = Box::into_raw(block) as *mut u8 as u64;
        let mut m = self.memory.lock().unwrap();
        m.allocs += 1;
        m.live.insert(addr, (kind, len));
        m.freed.remove(&addr);
        if kind == MemoryKind::Pinned {
            m.pinned_ever.push((addr, len));
        }
        Ok(addr)
    }

    unsafe fn free(&self, kind: MemoryKind, addr: u64, len: usize) {
        let mut m = self.memory.lock().unwrap();
        assert_eq!(
            m.live.remove(&addr),
            Some((kind, len)),
            "free of what alloc gave"
        );
        m.frees += 1;
        m.freed.insert(addr);
        // SAFETY: made by `alloc` as a boxed slice of `len` bytes; poisoned, then dropped.
        unsafe {
            std::ptr::write_bytes(addr as *mut u8, 0xdd, len);
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                addr as *mut u8,
                len,
            )));
        }
    }
}
