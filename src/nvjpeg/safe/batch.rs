//! The batched decoder: nvJPEG's hardware and CUDA decoders behind one call per batch,
//! with every image routed on the host first.
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

use std::ffi::c_void;
use std::sync::Arc;

use super::super::fallback::{classify, FallbackReason, GpuRoute, JpegFacts, Route, Subsampling};
use super::super::result::{self, Nvjpeg, NvjpegError};
use super::super::sys;
use super::{
    DecodeParams, DecodedInfo, Decoder, DeviceBuffer, DeviceOutput, Handle, JpegState, JpegStream,
    NvjpegImageInfo, PinnedBuffer, Roi,
};
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

    /// Where `bytes` would be decoded by this decoder (from its header, read on the host).
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
