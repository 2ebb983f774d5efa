//! The one narrow interface the GPU stage talks to a device through ([`GpuDevice`]), with two
//! implementations: the real one ([`super::real::RealDevice`]: cudarc + nvJPEG) and the
//! emulated one ([`super::emu::EmuDevice`]: the kernels compiled for the host, our CPU
//! decoder in place of nvJPEG, streams as threads).
//!
//! Everything is in device terms: device memory is addressed by raw [`DevicePtr`]s (the
//! kernels read such addresses from their descriptors), work is queued on streams and runs
//! in stream order, asynchronously to the host, and [`Event`]s order streams and the host.
//! The contract of every `unsafe` method is the CUDA one: a buffer handed to queued work must
//! stay allocated (and unwritten by anyone else) until that work has run, which the caller
//! shows with an event.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::kernel::{Grid, Kernel};
use crate::decode::JpegHeader;
use crate::error::Error;
pub use crate::nvjpeg::safe::CountersSnapshot as DeviceCounters;
use crate::nvjpeg::{DecodeRegion, DecodedInfo, DeviceOutput, FeedTimes, NvjpegError, Roi, Route};

/// A device address (`CUdeviceptr`; in the emulation, a host address).
pub type DevicePtr = u64;

/// One of a device's streams ([`streams`], or one from [`GpuDevice::new_stream`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamId(pub(crate) usize);

/// The streams every device has; consumers may ask for more with
/// [`GpuDevice::new_stream`].
pub mod streams {
    use super::StreamId;
    /// Where JPEGs are decoded and host-decoded images uploaded.
    pub const DECODE: StreamId = StreamId(0);
    /// Where the chain kernels run and batches are written.
    pub const KERNELS: StreamId = StreamId(1);
}

/// A point in a stream's work: complete once everything queued on that stream before it
/// was recorded has run. Cheap to clone (shared).
#[derive(Clone)]
pub struct Event(pub(crate) Arc<dyn Any + Send + Sync>);

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Event")
    }
}

/// One kernel argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelArg {
    /// A device address (a pointer parameter).
    Ptr(DevicePtr),
    /// A `u32` parameter.
    U32(u32),
}

/// What a device is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceDescription {
    /// "NVIDIA H100 80GB HBM3", or "emulated device (host kernels, CPU decoder)".
    pub name: String,
    /// True for the emulated device.
    pub emulated: bool,
    /// Device ordinal.
    pub device_id: usize,
    /// Device memory in bytes (the emulation's cap, when set).
    pub total_memory: usize,
    /// The JPEG decoder, e.g. "nvJPEG 13.0.1 from …; hardware decoder: 1 engines x 7 cores".
    pub decoder: String,
    /// Whether JPEG engines decode baseline images (decides [`Route`]s).
    pub hardware_decoder: bool,
}

/// Memory in use, as the device counts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryUse {
    /// Device bytes allocated now.
    pub device: usize,
    /// The most device bytes allocated at once.
    pub device_peak: usize,
    /// Pinned host bytes allocated now.
    pub pinned: usize,
    /// The most pinned host bytes allocated at once.
    pub pinned_peak: usize,
}

/// Page-locked host memory from [`GpuDevice::alloc_pinned`], freed when dropped.
pub struct PinnedHost {
    ptr: *mut u8,
    len: usize,
    /// Frees the memory when dropped (the device's own allocation type).
    _owner: Box<dyn Any + Send + Sync>,
}

// SAFETY: the memory is owned by this value alone (no other handle to it exists), so moving
// it to another thread or sharing `&PinnedHost` (which only reads) is as safe as for a Vec.
unsafe impl Send for PinnedHost {}
// SAFETY: as above. Through `&PinnedHost` the bytes are read (`as_slice`) or written only by
// raw pointer (`as_ptr`), and a writer that way (the staging slabs) writes a range handed to
// it alone, under a lock, that nobody reads or writes meanwhile: no data race on any byte.
unsafe impl Sync for PinnedHost {}

impl fmt::Debug for PinnedHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedHost")
            .field("len", &self.len)
            .finish()
    }
}

impl PinnedHost {
    /// Wraps `len` bytes at `ptr`, owned (and freed on drop) by `owner`.
    ///
    /// # Safety
    /// `ptr` points to `len` bytes of host memory, readable and writable, that stay valid
    /// and are used by nobody else until `owner` drops.
    pub(crate) unsafe fn new(ptr: *mut u8, len: usize, owner: Box<dyn Any + Send + Sync>) -> Self {
        PinnedHost {
            ptr,
            len,
            _owner: owner,
        }
    }

    /// Bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes (the caller makes sure no queued copy writes them meanwhile).
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` holds `len` bytes owned by `self` (see `new`).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The bytes, to fill (the caller makes sure no queued copy reads them meanwhile).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`; `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// The host address of byte 0. Writing through it (cast to `*mut`) is for bytes that no
    /// one reads or writes meanwhile, `as_slice` included.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }
}

/// One JPEG of a [`GpuDevice::submit_decode`] call.
#[derive(Debug, Clone, Copy)]
pub struct DecodeJob<'a> {
    /// The encoded bytes (host memory, left untouched until the decode has run: see
    /// [`GpuDevice::submit_decode`]).
    pub bytes: &'a [u8],
    /// Its header, read once for the sample (to EOI, with the pipeline's limits).
    pub header: &'a JpegHeader,
    /// The region to decode, in stored (not oriented) coordinates; `None` for all of it.
    pub roi: Option<Roi>,
    /// The stage rebuilds interpolated chroma from this decode: its region was planned by
    /// [`GpuDevice::region_to_decode`] with `rebuilt` (a margin for subsampled chroma).
    pub rebuilt: bool,
    /// Where to write interleaved RGB: [`GpuDevice::region_to_decode`]'s `height` rows of
    /// `width` pixels.
    pub out: DeviceOutput,
    /// [`GpuDevice::engines_accept`] said yes for these bytes and region: the decoder does
    /// not ask again.
    pub engines_checked: bool,
    /// `bytes` are pinned host memory (a worker's copy): the decoder reads them in place
    /// rather than copying them into its own.
    pub pinned: bool,
}

/// A GPU as the GPU stage uses it. Both implementations are `Send + Sync`: the stage's
/// thread queues work while consumers wait on events and drop batches from theirs.
///
/// Errors that leave the device unusable (a lost device, an illegal address, an error in
/// earlier asynchronous work) are sticky: every later call reports them.
pub trait GpuDevice: Send + Sync + fmt::Debug {
    /// What the device is.
    fn describe(&self) -> DeviceDescription;

    /// Memory in use.
    fn memory(&self) -> MemoryUse;

    /// Allocations, frees and event creations so far (all of the device's users counted:
    /// the stage, its JPEG decoder, consumers' release events).
    fn counters(&self) -> DeviceCounters;

    /// Whether `submit_decode` writes chroma interpolated as libjpeg does (nvJPEG asked to
    /// interpolate), so the GPU stage rebuilds none; otherwise chroma comes out repeated and
    /// `kernels/chroma.cu` rebuilds the interpolation.
    fn decodes_fancy_chroma(&self) -> bool {
        false
    }

    /// Whether the device's JPEG engines take `bytes`, decoding region `roi` (stored
    /// coordinates, [`GpuDevice::region_to_decode`]'s `decode`), asked on the calling thread
    /// (a prep worker's, so that the thread submitting the batch need not): `Some(answer)`,
    /// or `None` where it is only known at submission (no engines, or the check failed).
    fn engines_accept(&self, _bytes: &[u8], _roi: Option<Roi>) -> Option<bool> {
        None
    }

    /// A JPEG decoder for a prep worker's thread, with a stream of its own: nvJPEG's decoder
    /// with the Huffman stage on the GPU, for large photos ([`WorkerJpeg`]); `None` where
    /// the device has none (no nvJPEG, a library without it, the emulated device with a
    /// timing model).
    fn worker_decoder(&self) -> Option<Box<dyn WorkerJpeg>> {
        None
    }

    /// Where the thread calling [`GpuDevice::submit_decode`] spent its time, by phase, as of
    /// its last call; `None` for a device that decodes nothing. Returns at once, never
    /// waiting for a call in progress (the statistics read it on the assembling thread after
    /// every batch).
    fn feed_times(&self) -> Option<FeedTimes> {
        None
    }

    /// The timing model an emulated device takes a real device's time from, if any.
    fn timing_model(&self) -> Option<super::timing_model::TimingModel> {
        None
    }

    /// A new stream (for a consumer; [`streams`] always exist).
    fn new_stream(&self) -> Result<StreamId, Error>;

    /// `bytes` of device memory (contents unspecified). Running out is an error naming the
    /// bytes asked for, never an abort.
    fn alloc(&self, bytes: usize) -> Result<DevicePtr, Error>;

    /// Frees memory from [`GpuDevice::alloc`].
    ///
    /// # Safety
    /// `ptr` came from `alloc` on this device and is freed once; no queued work uses it any
    /// more (every event recorded after its last use has completed).
    unsafe fn free(&self, ptr: DevicePtr);

    /// `bytes` of page-locked host memory, for copies that overlap other work.
    fn alloc_pinned(&self, bytes: usize) -> Result<PinnedHost, Error>;

    /// Queues a copy of `len` bytes from pinned host memory at `src` to `dst`.
    ///
    /// # Safety
    /// `src` is `len` bytes of a [`PinnedHost`] of this device that nobody writes (and that
    /// is not dropped) before an event recorded after this call has completed; `dst..dst+len`
    /// lies in one live allocation that no other stream uses meanwhile.
    unsafe fn copy_to_device(
        &self,
        stream: StreamId,
        dst: DevicePtr,
        src: *const u8,
        len: usize,
    ) -> Result<(), Error>;

    /// Queues a copy of `len` bytes from `src` to `dst` on the device.
    ///
    /// # Safety
    /// Both ranges lie in live allocations until the copy has run; nothing else writes them
    /// meanwhile.
    unsafe fn copy_on_device(
        &self,
        stream: StreamId,
        dst: DevicePtr,
        src: DevicePtr,
        len: usize,
    ) -> Result<(), Error>;

    /// Queues setting `len` bytes at `dst` to zero.
    ///
    /// # Safety
    /// As [`GpuDevice::copy_on_device`] for `dst`.
    unsafe fn zero(&self, stream: StreamId, dst: DevicePtr, len: usize) -> Result<(), Error>;

    /// Copies `dst.len()` bytes from `src` to the host once the work queued on `stream` so
    /// far has run; returns when they are there.
    ///
    /// # Safety
    /// `src..src+dst.len()` lies in one live allocation.
    unsafe fn copy_to_host(
        &self,
        stream: StreamId,
        dst: &mut [u8],
        src: DevicePtr,
    ) -> Result<(), Error>;

    /// Queues `kernel` over `grid` with `args`.
    ///
    /// # Safety
    /// `args` match the kernel's C parameters; every address the kernel reads or writes,
    /// including those inside the descriptors it reads, lies in live allocations large
    /// enough for what the descriptors say, which stay allocated and untouched by other
    /// streams until the kernel has run.
    unsafe fn launch(
        &self,
        stream: StreamId,
        kernel: Kernel,
        grid: Grid,
        args: &[KernelArg],
    ) -> Result<(), Error>;

    /// Records an event on `stream` (after everything queued on it so far). `timing`: the
    /// event can be used with [`GpuDevice::elapsed`].
    fn record(&self, stream: StreamId, timing: bool) -> Result<Event, Error>;

    /// Makes `stream` wait (on the device, the host does not block) until `event` is
    /// complete.
    fn wait(&self, stream: StreamId, event: &Event) -> Result<(), Error>;

    /// Blocks the host until `event` is complete (or the device fails).
    fn synchronize(&self, event: &Event) -> Result<(), Error>;

    /// Whether `event` is complete, without waiting.
    fn is_complete(&self, event: &Event) -> Result<bool, Error>;

    /// Device time between two timing events (both complete).
    fn elapsed(&self, start: &Event, end: &Event) -> Result<Duration, Error>;

    /// Blocks until all work queued on every stream has run.
    fn synchronize_all(&self) -> Result<(), Error>;

    /// Where a JPEG with `header` (read once for the sample) is decoded (host only): by the
    /// device's JPEG decoder (and which of its backends), or on the CPU and why.
    fn route(&self, header: &JpegHeader) -> Route;

    /// How the device decodes region `roi` (stored coordinates; `None`: all) of a JPEG with
    /// `header` (host only): the output it writes (`width` × `height`, which may be larger
    /// than the region: nvJPEG before 13.3 decodes ROIs padded by an MCU) and the region's
    /// window inside it, which the kernels that read the output must read. With `rebuilt`
    /// (the stage rebuilds interpolated chroma from repeated chroma, which reads the
    /// neighbouring chroma blocks) a subsampled image's region is decoded an MCU wider on
    /// every side ([`crate::nvjpeg::needs_margin`]).
    fn region_to_decode(
        &self,
        header: &JpegHeader,
        roi: Option<Roi>,
        rebuilt: bool,
    ) -> Result<DecodeRegion, NvjpegError>;

    /// Queues decoding each job's JPEG into its output as interleaved RGB, as stored (the
    /// EXIF orientation is not applied), chroma repeated over each block as the JPEG
    /// engines write it (`kernels/chroma.cu` rebuilds libjpeg's interpolation), on
    /// `stream`, and returns at once, saying per job: queued (what will be written), or
    /// [`NvjpegError::CpuFallback`] for an image to decode on the CPU instead — the
    /// decoder refused it, now. Nothing reports on a decode later: a failure of queued work
    /// is a device fault, which every later call returns. `Err`: the device can't go on (a
    /// lost context), the pipeline fails.
    ///
    /// # Safety
    /// Every job's bytes stay readable and unchanged, and its output (in a live allocation
    /// large enough for its [`GpuDevice::region_to_decode`]) unused by others, until an event
    /// recorded on `stream` after this call has completed.
    unsafe fn submit_decode(
        &self,
        stream: StreamId,
        jobs: &[DecodeJob<'_>],
    ) -> Result<Vec<Result<DecodedInfo, NvjpegError>>, Error>;

    /// A consumer's stream, by its raw handle (a framework's `CUstream` on a real device; a
    /// number [`GpuDevice::raw_stream`] gave for a stream of [`GpuDevice::new_stream`] in the
    /// emulation), so that batches can be ordered before its work and released after it.
    ///
    /// # Safety
    /// On a real device, `raw` is a live `CUstream` of this device's context, kept alive by
    /// its owner while batches may still use it.
    unsafe fn adopt_stream(&self, raw: u64) -> Result<StreamId, Error>;

    /// The raw handle of `stream` (`CUstream` on a real device; the stream's number in the
    /// emulation), for a consumer that hands it to a framework.
    fn raw_stream(&self, stream: StreamId) -> u64;

    /// The raw handle of `event` (`CUevent` on a real device; 0 in the emulation).
    fn raw_event(&self, event: &Event) -> u64;
}

impl dyn GpuDevice {
    /// Creates `count` events now, all held at once and then dropped to the device's free
    /// list, so that a steady state keeping up to `count` alive records them again rather
    /// than creating any. One that fails now is created when first needed instead.
    pub(crate) fn create_events_ahead(&self, count: usize) {
        let held: Vec<Event> = (0..count)
            .filter_map(|_| self.record(streams::KERNELS, false).ok())
            .collect();
        drop(held);
    }
}

/// A prep worker's own JPEG decoder ([`GpuDevice::worker_decoder`]): it decodes one image
/// at a time on its stream, the host phase on the calling thread.
pub trait WorkerJpeg: Send {
    /// The stream its decodes are queued on (record an event there after a decode: the
    /// image is written once it completes).
    fn stream(&self) -> StreamId;

    /// Queues the decode of `bytes` (an image of `pixels` pixels), region `roi` (stored
    /// coordinates) or all of it, as interleaved RGB into `out`. A per-image failure is
    /// [`NvjpegError::CpuFallback`]: decode that image on the CPU.
    ///
    /// # Safety
    /// `out` is device memory of this device, large enough for the region as RGB, that
    /// nothing else uses until an event recorded on [`WorkerJpeg::stream`] after this call
    /// has completed.
    unsafe fn decode(
        &mut self,
        bytes: &Arc<Vec<u8>>,
        pixels: usize,
        roi: Option<Roi>,
        out: DeviceOutput,
    ) -> Result<(), NvjpegError>;
}
