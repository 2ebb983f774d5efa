//! Owned nvJPEG objects (each destroyed by `Drop`) and the batched decoder.
//!
//! # Which nvJPEG decoder decodes what
//!
//! [`BatchDecoder`] holds up to two handles:
//! - a **hardware** handle (`NVJPEG_BACKEND_HARDWARE`, the JPEG engines of A100/H100/H200),
//!   created when [`BackendPreference`] allows it and `nvjpegCreateEx` accepts it; it decodes
//!   the images [`classify`] routes to [`GpuRoute::Hardware`] *and* that
//!   `nvjpegDecodeBatchedSupportedEx` accepts, in one `nvjpegDecodeBatchedEx` call with
//!   per-image decode parameters (output format, ROI);
//! - a **default** handle with two decoupled decoders (`NVJPEG_BACKEND_GPU_HYBRID` for
//!   images of [`GPU_HYBRID_MIN_PIXELS`] or more, `NVJPEG_BACKEND_HYBRID` for smaller
//!   ones, as DALI does), which decode everything else one image at a time through the
//!   three decoupled phases (host, transfer, device), ROI included.
//!
//! If the batched call fails, every image of it is decoded again on the decoupled path, so
//! one bad image fails alone ([`BatchDecoder::decode_batch`] returns one `Result` per image).
//!
//! # CUDA context and stream
//!
//! nvJPEG uses the CUDA runtime API, which works in the context current on the calling
//! thread (the device's primary context: cudarc's `CudaContext` uses it too, so bind it to
//! the thread first). Streams cross this API as raw `CUstream` / `cudaStream_t` values
//! (`*mut c_void`; null is the legacy default stream) and output buffers as `CUdeviceptr`
//! values (`u64`), so that `src/cuda` can pass its own types' raw handles without this module
//! depending on it.

use std::ffi::c_void;
use std::sync::Arc;

use super::fallback::{classify, FallbackReason, GpuRoute, JpegFacts, Route, Subsampling};
use super::result::{self, Nvjpeg, NvjpegError};
use super::sys;
use crate::decode::Limits;

/// Images with at least this many pixels go to the GPU-assisted Huffman decoder
/// (`NVJPEG_BACKEND_GPU_HYBRID`); smaller ones to the CPU-Huffman one (DALI's default
/// `hybrid_huffman_threshold`).
pub const GPU_HYBRID_MIN_PIXELS: usize = 1_000_000;

/// Which nvJPEG backend to use for the batched path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BackendPreference {
    /// The JPEG engines when `nvjpegCreateEx` accepts `NVJPEG_BACKEND_HARDWARE`, else the
    /// CUDA decoders only.
    #[default]
    Auto,
    /// The JPEG engines, or an error.
    Hardware,
    /// The CUDA decoders only (no hardware handle).
    Hybrid,
}

/// A library handle (`nvjpegHandle_t`). nvJPEG handles are thread safe.
pub struct Handle {
    lib: Arc<Nvjpeg>,
    raw: sys::nvjpegHandle_t,
    backend: sys::nvjpegBackend_t,
    flags: u32,
}

// SAFETY: an nvjpegHandle_t may be used from any thread, also concurrently (nvJPEG's
// thread-safety rules: only streams, states and buffers are per thread).
unsafe impl Send for Handle {}
// SAFETY: as above.
unsafe impl Sync for Handle {}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("backend", &self.backend)
            .field("flags", &self.flags)
            .finish()
    }
}

impl Handle {
    /// Creates a handle for `backend` (`sys::NVJPEG_BACKEND_*`). Asks for chroma upsampling
    /// by interpolation (`NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION`, what libjpeg's and the
    /// CPU path's "fancy" upsampling do) and retries without it if the backend refuses.
    pub fn new(lib: Arc<Nvjpeg>, backend: sys::nvjpegBackend_t) -> Result<Arc<Self>, NvjpegError> {
        let interp = sys::NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION;
        let mut last = None;
        for flags in [interp, sys::NVJPEG_FLAGS_DEFAULT] {
            // SAFETY: default allocators; creating a handle only needs the CUDA runtime,
            // which initialises the primary context itself when none is current.
            match unsafe { result::handle::create(&lib, backend, flags) } {
                Ok(raw) => {
                    return Ok(Arc::new(Handle {
                        lib,
                        raw,
                        backend,
                        flags,
                    }))
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(NvjpegError::InvalidArgument("no flags tried".into())))
    }

    /// The backend it was created for.
    pub fn backend(&self) -> sys::nvjpegBackend_t {
        self.backend
    }

    /// Whether chroma is upsampled by interpolation (the flag was accepted).
    pub fn interpolated_upsampling(&self) -> bool {
        self.flags & sys::NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION != 0
    }

    /// The library it was created from.
    pub fn lib(&self) -> &Nvjpeg {
        &self.lib
    }

    /// (engines, cores per engine) of the hardware decoder.
    pub fn hardware_info(&self) -> Result<(u32, u32), NvjpegError> {
        // SAFETY: `self.raw` is live for `&self`.
        unsafe { result::handle::hardware_info(&self.lib, self.raw) }
    }

    /// Header facts as nvJPEG reads them (`nvjpegGetImageInfo`).
    pub fn image_info(&self, data: &[u8]) -> Result<NvjpegImageInfo, NvjpegError> {
        // SAFETY: `self.raw` is live; `data` is only read during the call.
        let (n, css, w, h) = unsafe { result::handle::image_info(&self.lib, self.raw, data)? };
        Ok(NvjpegImageInfo {
            components: n.max(0) as usize,
            subsampling: subsampling_from_sys(css),
            widths: w.map(|v| v.max(0) as usize),
            heights: h.map(|v| v.max(0) as usize),
        })
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: every object created from this handle holds an `Arc<Handle>`, so they are
        // all gone; the handle is destroyed once.
        if let Err(e) = unsafe { result::handle::destroy(&self.lib, self.raw) } {
            tracing::warn!("nvjpegDestroy: {e}");
        }
    }
}

/// What `nvjpegGetImageInfo` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NvjpegImageInfo {
    /// Components (1, 3 or 4).
    pub components: usize,
    /// Subsampling, `None` for `NVJPEG_CSS_UNKNOWN`.
    pub subsampling: Option<Subsampling>,
    /// Width of each component (0 for absent ones).
    pub widths: [usize; 4],
    /// Height of each component (0 for absent ones).
    pub heights: [usize; 4],
}

fn subsampling_from_sys(css: sys::nvjpegChromaSubsampling_t) -> Option<Subsampling> {
    Some(match css {
        sys::NVJPEG_CSS_444 => Subsampling::S444,
        sys::NVJPEG_CSS_422 => Subsampling::S422,
        sys::NVJPEG_CSS_420 => Subsampling::S420,
        sys::NVJPEG_CSS_440 => Subsampling::S440,
        sys::NVJPEG_CSS_411 => Subsampling::S411,
        sys::NVJPEG_CSS_410 => Subsampling::S410,
        sys::NVJPEG_CSS_410V => Subsampling::S410V,
        sys::NVJPEG_CSS_GRAY => Subsampling::Gray,
        _ => return None,
    })
}

/// Defines an owned wrapper: a raw pointer created from a handle, destroyed on drop.
macro_rules! owned {
    ($(#[$doc:meta])* $name:ident, $raw:ty, $destroy:path) => {
        $(#[$doc])*
        pub struct $name {
            handle: Arc<Handle>,
            raw: $raw,
        }

        // SAFETY: nvJPEG allows these objects to be used from any one thread at a time;
        // `&mut self` methods and the absence of `Sync` keep it to one.
        unsafe impl Send for $name {}

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(stringify!($name))
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                // SAFETY: created from `self.handle` (alive through the Arc), destroyed once;
                // owners destroy dependants first (field order).
                if let Err(e) = unsafe { $destroy(&self.handle.lib, self.raw) } {
                    tracing::warn!("{}: {e}", stringify!($destroy));
                }
            }
        }
    };
}

owned!(
    /// A decoding state (`nvjpegJpegState_t`).
    JpegState,
    sys::nvjpegJpegState_t,
    result::state::destroy
);
owned!(
    /// Decode parameters (`nvjpegDecodeParams_t`): output format, ROI.
    DecodeParams,
    sys::nvjpegDecodeParams_t,
    result::params::destroy
);
owned!(
    /// A pinned host work buffer (`nvjpegBufferPinned_t`).
    PinnedBuffer,
    sys::nvjpegBufferPinned_t,
    result::buffer::destroy_pinned
);
owned!(
    /// A device work buffer (`nvjpegBufferDevice_t`).
    DeviceBuffer,
    sys::nvjpegBufferDevice_t,
    result::buffer::destroy_device
);
owned!(
    /// A parsed JPEG (`nvjpegJpegStream_t`), host side.
    JpegStream,
    sys::nvjpegJpegStream_t,
    result::jpeg_stream::destroy
);
owned!(
    /// A decoupled decoder (`nvjpegJpegDecoder_t`).
    Decoder,
    sys::nvjpegJpegDecoder_t,
    result::decoder::destroy
);

impl JpegState {
    /// A state for the batched API.
    pub fn new(handle: &Arc<Handle>) -> Result<Self, NvjpegError> {
        // SAFETY: the handle is live and kept alive by the Arc.
        let raw = unsafe { result::state::create(&handle.lib, handle.raw)? };
        Ok(JpegState {
            handle: handle.clone(),
            raw,
        })
    }

    /// A state for a decoupled decoder.
    pub fn for_decoder(decoder: &Decoder) -> Result<Self, NvjpegError> {
        let handle = &decoder.handle;
        // SAFETY: handle and decoder are live; owners keep the decoder alive longer.
        let raw =
            unsafe { result::state::create_for_decoder(&handle.lib, handle.raw, decoder.raw)? };
        Ok(JpegState {
            handle: handle.clone(),
            raw,
        })
    }
}

impl DecodeParams {
    /// New parameters, output format interleaved RGB, whole image.
    pub fn new(handle: &Arc<Handle>) -> Result<Self, NvjpegError> {
        // SAFETY: the handle is live.
        let raw = unsafe { result::params::create(&handle.lib, handle.raw)? };
        let mut p = DecodeParams {
            handle: handle.clone(),
            raw,
        };
        p.set_output_rgbi()?;
        Ok(p)
    }

    /// Output interleaved RGB (`NVJPEG_OUTPUT_RGBI`).
    pub fn set_output_rgbi(&mut self) -> Result<(), NvjpegError> {
        // SAFETY: `self.raw` is live.
        unsafe {
            result::params::set_output_format(&self.handle.lib, self.raw, sys::NVJPEG_OUTPUT_RGBI)
        }
    }

    /// Decode only `roi` (stored-image coordinates), or the whole image for `None`.
    pub fn set_roi(&mut self, roi: Option<Roi>) -> Result<(), NvjpegError> {
        let (x, y, w, h) = match roi {
            Some(r) => (
                to_i32(r.x)?,
                to_i32(r.y)?,
                to_i32(r.width)?,
                to_i32(r.height)?,
            ),
            None => (0, 0, -1, -1),
        };
        // SAFETY: `self.raw` is live.
        unsafe { result::params::set_roi(&self.handle.lib, self.raw, x, y, w, h) }
    }
}

fn to_i32(v: usize) -> Result<i32, NvjpegError> {
    i32::try_from(v).map_err(|_| NvjpegError::InvalidArgument(format!("{v} does not fit an int")))
}

impl PinnedBuffer {
    /// A pinned buffer (grown by nvJPEG as needed).
    pub fn new(handle: &Arc<Handle>) -> Result<Self, NvjpegError> {
        // SAFETY: the handle is live.
        let raw = unsafe { result::buffer::create_pinned(&handle.lib, handle.raw)? };
        Ok(PinnedBuffer {
            handle: handle.clone(),
            raw,
        })
    }
}

impl DeviceBuffer {
    /// A device buffer (grown by nvJPEG as needed).
    pub fn new(handle: &Arc<Handle>) -> Result<Self, NvjpegError> {
        // SAFETY: the handle is live.
        let raw = unsafe { result::buffer::create_device(&handle.lib, handle.raw)? };
        Ok(DeviceBuffer {
            handle: handle.clone(),
            raw,
        })
    }
}

impl JpegStream {
    /// An empty parsed-stream object.
    pub fn new(handle: &Arc<Handle>) -> Result<Self, NvjpegError> {
        // SAFETY: the handle is live.
        let raw = unsafe { result::jpeg_stream::create(&handle.lib, handle.raw)? };
        Ok(JpegStream {
            handle: handle.clone(),
            raw,
        })
    }
}

impl Decoder {
    /// A decoupled decoder for `backend` on `handle`.
    pub fn new(handle: &Arc<Handle>, backend: sys::nvjpegBackend_t) -> Result<Self, NvjpegError> {
        // SAFETY: the handle is live.
        let raw = unsafe { result::decoder::create(&handle.lib, handle.raw, backend)? };
        Ok(Decoder {
            handle: handle.clone(),
            raw,
        })
    }
}

/// A region of interest in stored-image coordinates (before EXIF orientation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Roi {
    /// Left column.
    pub x: usize,
    /// Top row.
    pub y: usize,
    /// Width in pixels (> 0).
    pub width: usize,
    /// Height in pixels (> 0).
    pub height: usize,
}

/// A caller-provided device output: interleaved RGB, `pitch` bytes per row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceOutput {
    /// Device address (`CUdeviceptr`) of the first pixel.
    pub ptr: u64,
    /// Bytes between rows (≥ 3 × output width).
    pub pitch: usize,
    /// Bytes available from `ptr` (≥ pitch × (height − 1) + 3 × width).
    pub len: usize,
}

/// What was decoded into one output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedInfo {
    /// Width written (the ROI's, or the stored width).
    pub width: usize,
    /// Height written.
    pub height: usize,
    /// Frame width as stored in the file.
    pub stored_width: usize,
    /// Frame height as stored.
    pub stored_height: usize,
    /// Components in the file (1 or 3; the output always has 3).
    pub components: usize,
    /// Chroma subsampling.
    pub subsampling: Subsampling,
    /// EXIF orientation (1..=8), *not* applied: see [`super`]'s notes.
    pub orientation: u8,
    /// The ROI decoded, if any.
    pub roi: Option<Roi>,
    /// Which decoder ran.
    pub route: GpuRoute,
}

/// A decoupled decoder with its state and work buffers. Field order is drop order:
/// state, then buffers, then decoder.
struct Decoupled {
    state: JpegState,
    /// Attached to `state`; kept alive (and destroyed after it) here.
    _device: DeviceBuffer,
    pinned: Vec<PinnedBuffer>,
    decoder: Decoder,
    handle: Arc<Handle>,
}

impl Decoupled {
    fn new(handle: &Arc<Handle>, backend: sys::nvjpegBackend_t) -> Result<Self, NvjpegError> {
        let decoder = Decoder::new(handle, backend)?;
        let state = JpegState::for_decoder(&decoder)?;
        let device = DeviceBuffer::new(handle)?;
        // SAFETY: state and buffer are live and owned together (the buffer outlives uses).
        unsafe { result::state::attach_device(&handle.lib, state.raw, device.raw)? };
        Ok(Decoupled {
            state,
            _device: device,
            pinned: Vec::new(),
            decoder,
            handle: handle.clone(),
        })
    }

    fn supports(&self, stream: &JpegStream, params: &DecodeParams) -> Result<bool, NvjpegError> {
        // SAFETY: all live.
        unsafe {
            result::decoder::supports(&self.handle.lib, self.decoder.raw, stream.raw, params.raw)
        }
    }

    /// Runs the three phases for the stream parsed in `js`, using pinned buffer `slot` (one
    /// per image of a batch, so no host write races a pending copy).
    ///
    /// # Safety
    /// `dest` is valid device memory for the output until `stream`'s work completes;
    /// `stream` is a valid stream of the current context (or null); the bytes parsed into
    /// `js` are still alive.
    unsafe fn decode(
        &mut self,
        js: &JpegStream,
        params: &DecodeParams,
        slot: usize,
        dest: &mut sys::nvjpegImage_t,
        stream: *mut c_void,
    ) -> Result<(), NvjpegError> {
        while self.pinned.len() <= slot {
            self.pinned.push(PinnedBuffer::new(&self.handle)?);
        }
        let lib = &self.handle.lib;
        let h = self.handle.raw;
        let (d, st) = (self.decoder.raw, self.state.raw);
        // SAFETY: per the function contract; the pinned buffer `slot` has no pending copy
        // (it is used once per batch, and the caller synchronises between batches).
        unsafe {
            result::state::attach_pinned(lib, st, self.pinned[slot].raw)?;
            result::decoder::host(lib, h, d, st, params.raw, js.raw)?;
            result::decoder::transfer(lib, h, d, st, js.raw, stream)?;
            result::decoder::device(lib, h, d, st, dest, stream)
        }
    }
}

/// The engines' batched path: a state and per-slot parameters and parsed streams.
struct HardwareBatch {
    state: JpegState,
    params: Vec<DecodeParams>,
    streams: Vec<JpegStream>,
    handle: Arc<Handle>,
}

/// A batched JPEG decoder writing interleaved RGB into caller-provided device buffers.
/// One per thread (states and buffers are per thread in nvJPEG).
pub struct BatchDecoder {
    hardware: Option<HardwareBatch>,
    gpu_hybrid: Option<Decoupled>,
    hybrid: Decoupled,
    parse_stream: JpegStream,
    params: DecodeParams,
    default: Arc<Handle>,
    max_batch: usize,
    limits: Limits,
}

impl std::fmt::Debug for BatchDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchDecoder")
            .field("hardware", &self.hardware.is_some())
            .field("gpu_hybrid", &self.gpu_hybrid.is_some())
            .field("max_batch", &self.max_batch)
            .finish()
    }
}

/// One image on its way through [`BatchDecoder::decode_batch_roi`].
struct Job {
    index: usize,
    facts: JpegFacts,
    roi: Option<Roi>,
    dest: sys::nvjpegImage_t,
    width: usize,
    height: usize,
}

impl BatchDecoder {
    /// Creates the handles and decoders; `max_batch` (≥ 1) bounds the images per call.
    /// Checks that every function it needs is in the library first.
    pub fn new(
        lib: Arc<Nvjpeg>,
        pref: BackendPreference,
        max_batch: usize,
    ) -> Result<Self, NvjpegError> {
        if max_batch == 0 || i32::try_from(max_batch).is_err() {
            return Err(NvjpegError::InvalidArgument(format!(
                "max_batch must be 1..=2^31-1, got {max_batch}"
            )));
        }
        if let Some(symbol) = lib.missing_symbols().first() {
            return Err(NvjpegError::MissingSymbol { symbol });
        }
        let hardware = match pref {
            BackendPreference::Hybrid => None,
            _ => match Self::hardware_batch(&lib, max_batch) {
                Ok(hw) => Some(hw),
                Err(e) if pref == BackendPreference::Hardware => return Err(e),
                Err(e) => {
                    tracing::info!(
                        "nvJPEG hardware backend unavailable ({e}); using CUDA decoders"
                    );
                    None
                }
            },
        };
        let default = Handle::new(lib, sys::NVJPEG_BACKEND_DEFAULT)?;
        let hybrid = Decoupled::new(&default, sys::NVJPEG_BACKEND_HYBRID)?;
        let gpu_hybrid = Decoupled::new(&default, sys::NVJPEG_BACKEND_GPU_HYBRID).ok();
        Ok(BatchDecoder {
            hardware,
            gpu_hybrid,
            hybrid,
            parse_stream: JpegStream::new(&default)?,
            params: DecodeParams::new(&default)?,
            default,
            max_batch,
            limits: Limits::default(),
        })
    }

    fn hardware_batch(lib: &Arc<Nvjpeg>, max_batch: usize) -> Result<HardwareBatch, NvjpegError> {
        let handle = Handle::new(lib.clone(), sys::NVJPEG_BACKEND_HARDWARE)?;
        let state = JpegState::new(&handle)?;
        let mut params = Vec::with_capacity(max_batch);
        let mut streams = Vec::with_capacity(max_batch);
        for _ in 0..max_batch {
            params.push(DecodeParams::new(&handle)?);
            streams.push(JpegStream::new(&handle)?);
        }
        Ok(HardwareBatch {
            state,
            params,
            streams,
            handle,
        })
    }

    /// Uses `limits` (the pipeline's) in the per-image checks.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Whether the JPEG engines are in use.
    pub fn has_hardware(&self) -> bool {
        self.hardware.is_some()
    }

    /// (engines, cores per engine), when the engines are in use.
    pub fn hardware_info(&self) -> Option<(u32, u32)> {
        self.hardware
            .as_ref()
            .and_then(|h| h.handle.hardware_info().ok())
    }

    /// The largest batch [`Self::decode_batch`] takes.
    pub fn max_batch(&self) -> usize {
        self.max_batch
    }

    /// Where `bytes` would be decoded by this decoder (host-only marker walk).
    pub fn route(&self, bytes: &[u8]) -> Route {
        classify(bytes, &self.limits, self.has_hardware())
    }

    /// Header facts as nvJPEG reads them (`nvjpegGetImageInfo`), for per-image checks.
    pub fn get_image_info(&self, bytes: &[u8]) -> Result<NvjpegImageInfo, NvjpegError> {
        self.default.image_info(bytes)
    }

    /// [`Self::decode_batch_roi`] without regions of interest.
    ///
    /// # Safety
    /// As [`Self::decode_batch_roi`].
    pub unsafe fn decode_batch(
        &mut self,
        stream: *mut c_void,
        images: &[&[u8]],
        outputs: &[DeviceOutput],
    ) -> Vec<Result<DecodedInfo, NvjpegError>> {
        let rois = vec![None; images.len()];
        // SAFETY: forwarded contract.
        unsafe { self.decode_batch_roi(stream, images, outputs, &rois) }
    }

    /// Decodes `images[i]` (its region `rois[i]`, stored-image coordinates, when given) into
    /// `outputs[i]` as interleaved RGB, asynchronously on `stream`. Returns one result per
    /// image: [`NvjpegError::CpuFallback`] for images to decode on the CPU instead (checked
    /// on the host first), other errors for images nvJPEG failed on; the others are
    /// unaffected.
    ///
    /// # Safety
    /// - `stream` is null or a valid `CUstream`/`cudaStream_t` of the CUDA context current on
    ///   this thread, and every `outputs[i]` is device memory of that context, at least
    ///   `len` bytes, not used by anything else until the work on `stream` has completed.
    /// - The caller synchronises `stream` (or waits on an event recorded on it after this
    ///   call) before reading the outputs, before the next call on this decoder (the pinned
    ///   work buffers are reused) and before dropping the decoder (its work buffers are
    ///   freed).
    pub unsafe fn decode_batch_roi(
        &mut self,
        stream: *mut c_void,
        images: &[&[u8]],
        outputs: &[DeviceOutput],
        rois: &[Option<Roi>],
    ) -> Vec<Result<DecodedInfo, NvjpegError>> {
        let n = images.len();
        let all = |msg: String| -> Vec<Result<DecodedInfo, NvjpegError>> {
            (0..n)
                .map(|_| Err(NvjpegError::InvalidArgument(msg.clone())))
                .collect()
        };
        if n > self.max_batch {
            return all(format!("batch of {n} is over max_batch {}", self.max_batch));
        }
        if outputs.len() != n || rois.len() != n {
            return all(format!(
                "{n} images, {} outputs, {} ROIs: they must match",
                outputs.len(),
                rois.len()
            ));
        }
        let mut results: Vec<Option<Result<DecodedInfo, NvjpegError>>> = vec![None; n];
        let mut hw_jobs: Vec<Job> = Vec::new();
        let mut sw_jobs: Vec<Job> = Vec::new();
        for i in 0..n {
            match self.prepare(i, images[i], outputs[i], rois[i]) {
                Ok((GpuRoute::Hardware, job)) => hw_jobs.push(job),
                Ok((GpuRoute::Hybrid, job)) => sw_jobs.push(job),
                Err(e) => results[i] = Some(Err(e)),
            }
        }
        // Engines: keep only what the batched decoder accepts with these parameters.
        if let Some(hw) = self.hardware.as_mut() {
            let mut accepted = Vec::with_capacity(hw_jobs.len());
            for job in hw_jobs.drain(..) {
                let k = accepted.len();
                match hw_supports(hw, k, images[job.index], job.roi) {
                    Ok(true) => accepted.push(job),
                    _ => sw_jobs.push(job),
                }
            }
            if !accepted.is_empty() {
                // SAFETY: forwarded contract; `images` outlive the call.
                match unsafe { hw_decode(hw, &mut accepted, images, stream) } {
                    Ok(()) => {
                        for job in accepted {
                            results[job.index] = Some(Ok(info(&job, GpuRoute::Hardware)));
                        }
                    }
                    Err(e) => {
                        tracing::debug!(
                            "batched hardware decode failed ({e}); decoding one by one"
                        );
                        sw_jobs.extend(accepted);
                    }
                }
            }
        } else {
            sw_jobs.append(&mut hw_jobs);
        }
        // Pinned slots used so far in this call, per decoupled decoder [gpu_hybrid, hybrid].
        let mut slots = [0usize; 2];
        for mut job in sw_jobs {
            let bytes = images[job.index];
            // SAFETY: forwarded contract; each image gets its own pinned slot of its decoder.
            let r = unsafe { self.decode_one(&mut job, bytes, &mut slots, stream) };
            results[job.index] = Some(r.map(|()| info(&job, GpuRoute::Hybrid)));
        }
        results
            .into_iter()
            .map(|r| {
                r.unwrap_or(Err(NvjpegError::InvalidArgument(
                    "image not processed".into(),
                )))
            })
            .collect()
    }

    /// Host checks for one image: route, ROI bounds, output size.
    fn prepare(
        &self,
        index: usize,
        bytes: &[u8],
        out: DeviceOutput,
        roi: Option<Roi>,
    ) -> Result<(GpuRoute, Job), NvjpegError> {
        let (route, facts) = match classify(bytes, &self.limits, self.has_hardware()) {
            Route::Cpu(reason) => return Err(NvjpegError::CpuFallback(reason)),
            Route::Gpu(r, f) => (r, f),
        };
        let (width, height) = output_size(facts.width, facts.height, roi, out)?;
        let mut dest = sys::nvjpegImage_t {
            channel: [std::ptr::null_mut(); sys::NVJPEG_MAX_COMPONENT as usize],
            pitch: [0; sys::NVJPEG_MAX_COMPONENT as usize],
        };
        dest.channel[0] = out.ptr as usize as *mut u8;
        dest.pitch[0] = out.pitch;
        Ok((
            route,
            Job {
                index,
                facts,
                roi,
                dest,
                width,
                height,
            },
        ))
    }

    /// Decodes one image on the decoupled path.
    ///
    /// # Safety
    /// As [`Self::decode_batch_roi`].
    unsafe fn decode_one(
        &mut self,
        job: &mut Job,
        bytes: &[u8],
        slots: &mut [usize; 2],
        stream: *mut c_void,
    ) -> Result<(), NvjpegError> {
        let lib = &self.default.lib;
        // SAFETY: handle and stream object are live; `bytes` outlives the three phases,
        // which all run inside this function.
        unsafe { result::jpeg_stream::parse(lib, self.default.raw, bytes, self.parse_stream.raw)? };
        self.params.set_output_rgbi()?;
        self.params.set_roi(job.roi)?;
        let big = job.facts.width * job.facts.height >= GPU_HYBRID_MIN_PIXELS;
        let mut chosen = None;
        if big {
            if let Some(g) = self.gpu_hybrid.as_ref() {
                if g.supports(&self.parse_stream, &self.params)? {
                    chosen = Some(true);
                }
            }
        }
        if chosen.is_none() && self.hybrid.supports(&self.parse_stream, &self.params)? {
            chosen = Some(false);
        }
        let dec = match chosen {
            Some(true) => self.gpu_hybrid.as_mut(),
            Some(false) => Some(&mut self.hybrid),
            None => None,
        };
        let Some(dec) = dec else {
            return Err(NvjpegError::CpuFallback(FallbackReason::NvjpegUnsupported(
                "no nvJPEG decoder accepts this image with these parameters".into(),
            )));
        };
        let counter = &mut slots[usize::from(chosen == Some(false))];
        let slot = *counter;
        *counter += 1;
        // SAFETY: forwarded contract.
        unsafe {
            dec.decode(
                &self.parse_stream,
                &self.params,
                slot,
                &mut job.dest,
                stream,
            )
        }
    }
}

/// Parses the header into slot `k` and asks the batched decoder whether it takes it.
fn hw_supports(
    hw: &mut HardwareBatch,
    k: usize,
    bytes: &[u8],
    roi: Option<Roi>,
) -> Result<bool, NvjpegError> {
    let (Some(js), Some(p)) = (hw.streams.get(k), hw.params.get_mut(k)) else {
        return Ok(false);
    };
    p.set_output_rgbi()?;
    p.set_roi(roi)?;
    let lib = &hw.handle.lib;
    // SAFETY: all live; `bytes` is only read during the call.
    unsafe {
        result::jpeg_stream::parse_header(lib, hw.handle.raw, bytes, js.raw)?;
        result::batched::supports(lib, hw.handle.raw, js.raw, p.raw)
    }
}

/// One `nvjpegDecodeBatchedEx` over `jobs` (slot k = jobs[k]).
///
/// # Safety
/// As [`BatchDecoder::decode_batch_roi`].
unsafe fn hw_decode(
    hw: &mut HardwareBatch,
    jobs: &mut [Job],
    images: &[&[u8]],
    stream: *mut c_void,
) -> Result<(), NvjpegError> {
    let n = jobs.len();
    let data: Vec<*const u8> = jobs.iter().map(|j| images[j.index].as_ptr()).collect();
    let lengths: Vec<usize> = jobs.iter().map(|j| images[j.index].len()).collect();
    let mut dest: Vec<sys::nvjpegImage_t> = jobs.iter().map(|j| j.dest).collect();
    let mut params: Vec<sys::nvjpegDecodeParams_t> = hw.params[..n].iter().map(|p| p.raw).collect();
    let lib = &hw.handle.lib;
    // SAFETY: per the contract; `n` ≤ max_batch fits an i32 (checked in `new`).
    unsafe {
        result::batched::initialize(
            lib,
            hw.handle.raw,
            hw.state.raw,
            n as i32,
            1,
            sys::NVJPEG_OUTPUT_RGBI,
        )?;
        result::batched::decode_ex(
            lib,
            hw.handle.raw,
            hw.state.raw,
            &data,
            &lengths,
            &mut dest,
            &mut params,
            stream,
        )
    }
}

/// The size written for a `stored_w` × `stored_h` image and `roi`, after checking that the
/// ROI lies inside the image and that `out` can hold it as interleaved RGB.
pub fn output_size(
    stored_w: usize,
    stored_h: usize,
    roi: Option<Roi>,
    out: DeviceOutput,
) -> Result<(usize, usize), NvjpegError> {
    let (width, height) = match roi {
        None => (stored_w, stored_h),
        Some(r) => {
            if r.width == 0
                || r.height == 0
                || r.x.checked_add(r.width).is_none_or(|e| e > stored_w)
                || r.y.checked_add(r.height).is_none_or(|e| e > stored_h)
            {
                return Err(NvjpegError::InvalidArgument(format!(
                    "ROI {r:?} is not inside the {stored_w}x{stored_h} image"
                )));
            }
            (r.width, r.height)
        }
    };
    let row = width.checked_mul(3);
    let need = row.and_then(|row| {
        out.pitch
            .checked_mul(height.saturating_sub(1))
            .and_then(|v| v.checked_add(row))
    });
    let fits = match (row, need) {
        (Some(row), Some(need)) => out.pitch >= row && need <= out.len,
        _ => false,
    };
    if out.ptr == 0 || !fits || width == 0 || height == 0 {
        return Err(NvjpegError::InvalidArgument(format!(
            "output (address {:#x}, pitch {}, {} bytes) can't hold {width}x{height} RGB",
            out.ptr, out.pitch, out.len
        )));
    }
    Ok((width, height))
}

fn info(job: &Job, route: GpuRoute) -> DecodedInfo {
    DecodedInfo {
        width: job.width,
        height: job.height,
        stored_width: job.facts.width,
        stored_height: job.facts.height,
        components: job.facts.components,
        subsampling: job.facts.subsampling().unwrap_or(Subsampling::S444),
        orientation: job.facts.orientation,
        roi: job.roi,
        route,
    }
}
