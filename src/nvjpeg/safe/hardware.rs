//! The engines' path: `NVJPEG_BACKEND_HARDWARE` (the JPEG engines of A100/H100/H200), one
//! `nvjpegDecodeBatchedEx` call per batch with per-image parameters (output format, ROI).
//!
//! A batch's state and parameters may be read by the queued work, so each staging-ring slot
//! carries its own ([`HwSlot`]), reused once the slot's fence is done; the state's internal
//! buffers are allocated up front (`nvjpegDecodeBatchedPreAllocate`), which also puts the
//! engines on their memory pool. The support checks are host-only ([`SupportChecks`]): any
//! thread may ask, each caller with a parsed stream of its own, so the prep workers ask while
//! the batch fills and the thread feeding the engines only makes the batched call.

use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use super::super::result::{self, Nvjpeg, NvjpegError};
use super::super::sys;
use super::alloc::Allocators;
use super::context::GpuContext;
use super::handle::{DecodeParams, Handle, JpegState, JpegStream, Roi};

/// The engines' handle and its support checks.
pub(crate) struct Hardware {
    checks: Arc<SupportChecks>,
    handle: Arc<Handle>,
}

/// nvJPEG's answer to "do the JPEG engines take these bytes, decoding this region?"
/// (`nvjpegJpegStreamParseHeader`, then `nvjpegDecodeBatchedSupportedEx`), on any thread:
/// each concurrent caller gets a parsed stream and parameters of its own, made the first time
/// and kept for the next (as many as callers at once: the prep workers).
pub struct SupportChecks {
    handle: Arc<Handle>,
    ctx: Arc<dyn GpuContext>,
    idle: Mutex<Vec<(DecodeParams, JpegStream)>>,
}

impl std::fmt::Debug for SupportChecks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SupportChecks")
    }
}

impl SupportChecks {
    /// Whether the engines take `bytes` decoding region `roi` (stored coordinates, as the
    /// decode will ask for it; `None` for the whole image). Host only; makes the decoder's
    /// context current on the calling thread.
    pub fn accepts(&self, bytes: &[u8], roi: Option<Roi>) -> Result<bool, NvjpegError> {
        self.ctx.bind()?;
        let taken = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let (mut params, stream) = match taken {
            Some(pair) => pair,
            None => (
                DecodeParams::new(&self.handle)?,
                JpegStream::new(&self.handle)?,
            ),
        };
        let answer = (|| {
            params.set_output_rgbi()?;
            params.set_roi(roi)?;
            let lib = &self.handle.lib;
            // SAFETY: handle, stream and parameters are live and this caller's alone; `bytes`
            // is only read during the calls.
            unsafe {
                result::jpeg_stream::parse_header(lib, self.handle.raw, bytes, stream.raw)?;
                result::batched::supports(lib, self.handle.raw, stream.raw, params.raw)
            }
        })();
        self.idle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((params, stream));
        answer
    }
}

impl std::fmt::Debug for Hardware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hardware")
    }
}

/// The state and per-image parameters of one batch in flight.
pub(crate) struct HwSlot {
    state: JpegState,
    params: Vec<DecodeParams>,
}

impl std::fmt::Debug for HwSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HwSlot")
            .field("params", &self.params.len())
            .finish()
    }
}

/// One image of a batched call: where its staged bytes are, where it goes, its region.
pub(crate) struct HwImage {
    pub(crate) data: *const u8,
    pub(crate) len: usize,
    pub(crate) dest: sys::nvjpegImage_t,
    pub(crate) roi: Option<Roi>,
}

impl Hardware {
    /// The engines' handle (context current), or the error `nvjpegCreateExV2` gave.
    pub(crate) fn new(
        lib: &Arc<Nvjpeg>,
        ctx: &Arc<dyn GpuContext>,
        memory: &Arc<Allocators>,
        interpolate: bool,
    ) -> Result<Self, NvjpegError> {
        let handle = Handle::new(
            lib.clone(),
            sys::NVJPEG_BACKEND_HARDWARE,
            memory.clone(),
            interpolate,
        )?;
        let checks = Arc::new(SupportChecks {
            handle: handle.clone(),
            ctx: ctx.clone(),
            idle: Mutex::default(),
        });
        // One checker made now, for the thread that submits.
        let first = (DecodeParams::new(&handle)?, JpegStream::new(&handle)?);
        checks
            .idle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(first);
        Ok(Hardware { checks, handle })
    }

    /// The support checks, for any thread.
    pub(crate) fn checks(&self) -> &Arc<SupportChecks> {
        &self.checks
    }

    /// The handle.
    pub(crate) fn handle(&self) -> &Arc<Handle> {
        &self.handle
    }

    /// A slot for batches of up to `max_batch` images, its buffers allocated for images of
    /// `hint` = (width, height).
    pub(crate) fn slot(
        &self,
        max_batch: usize,
        hint: (usize, usize),
    ) -> Result<HwSlot, NvjpegError> {
        let state = JpegState::new(&self.handle)?;
        let int = |v: usize| {
            i32::try_from(v.max(1))
                .map_err(|_| NvjpegError::InvalidArgument(format!("{v} does not fit an int")))
        };
        // SAFETY: handle and state are live; no batch uses the new state.
        unsafe {
            result::batched::preallocate(
                &self.handle.lib,
                self.handle.raw,
                state.raw,
                int(max_batch)?,
                int(hint.0)?,
                int(hint.1)?,
                sys::NVJPEG_CSS_444,
                sys::NVJPEG_OUTPUT_RGBI,
            )?
        };
        let params = (0..max_batch)
            .map(|_| DecodeParams::new(&self.handle))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(HwSlot { state, params })
    }

    /// Whether the batched decoder takes `bytes` with region `roi` (host only).
    pub(crate) fn supports(&self, bytes: &[u8], roi: Option<Roi>) -> Result<bool, NvjpegError> {
        self.checks.accepts(bytes, roi)
    }

    /// Queues one `nvjpegDecodeBatchedEx` over `images` with `slot`'s state and parameters.
    ///
    /// # Safety
    /// The handle's context is current; `slot` has no batch in flight; every image's bytes
    /// stay readable and its `dest` device memory valid and untouched by others until the
    /// work on `stream` (of that context, or null) completes.
    pub(crate) unsafe fn decode(
        &self,
        slot: &mut HwSlot,
        images: &[HwImage],
        stream: *mut c_void,
    ) -> Result<(), NvjpegError> {
        let n = images.len();
        if n == 0 || n > slot.params.len() {
            return Err(NvjpegError::InvalidArgument(format!(
                "a hardware batch of {n} images (slot of {})",
                slot.params.len()
            )));
        }
        for (p, im) in slot.params.iter_mut().zip(images) {
            p.set_output_rgbi()?;
            p.set_roi(im.roi)?;
        }
        let data: Vec<*const u8> = images.iter().map(|im| im.data).collect();
        let lengths: Vec<usize> = images.iter().map(|im| im.len).collect();
        let mut dest: Vec<sys::nvjpegImage_t> = images.iter().map(|im| im.dest).collect();
        let mut params: Vec<sys::nvjpegDecodeParams_t> =
            slot.params[..n].iter().map(|p| p.raw).collect();
        let lib = &self.handle.lib;
        // SAFETY: per the contract; `n` ≤ max_batch fits an i32 (checked by the decoder).
        unsafe {
            result::batched::initialize(
                lib,
                self.handle.raw,
                slot.state.raw,
                n as i32,
                1,
                sys::NVJPEG_OUTPUT_RGBI,
            )?;
            result::batched::decode_ex(
                lib,
                self.handle.raw,
                slot.state.raw,
                &data,
                &lengths,
                &mut dest,
                &mut params,
                stream,
            )
        }
    }
}
