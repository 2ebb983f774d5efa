//! A JPEG decoder for a thread of its own (a prep worker): nvJPEG's decoder with the Huffman
//! stage on the GPU (`NVJPEG_BACKEND_GPU_HYBRID`), for images of at least
//! [`GPU_HYBRID_MIN_PIXELS`]. Its host work is the stream's parse and little else, so a
//! worker gives the device a large photo in a fraction of the time our CPU decoder takes
//! for it — the decoder DALI gives the 1.8 MP photos its JPEG engines do not take. An image
//! (or region) that decoder refuses goes to our CPU decoder, not to nvJPEG's CPU-Huffman one:
//! the stats then say so (`cpu-decoder:` with the refusal), where the CPU-Huffman decoder
//! would have passed for the GPU one.
//!
//! It shares the [`BatchDecoder`](super::BatchDecoder)'s default handle (nvJPEG handles are
//! thread-safe; states are not) and has states, buffers and slots of its own
//! ([`Decoupled`]); the caller gives it a stream of its own.

use std::ffi::c_void;
use std::sync::Arc;

use super::super::result::NvjpegError;
use super::context::GpuContext;
use super::decoupled::{Decoupled, GPU_HYBRID_MIN_PIXELS};
use super::handle::{DeviceOutput, Handle, Roi};

/// Slots: images whose GPU work may be queued at once before the worker waits for the
/// oldest (the host phase of the next overlaps the GPU work of the one before).
const SLOTS: usize = 2;

/// A prep worker's own nvJPEG decoder (see the module docs).
pub struct WorkerDecoder {
    decoupled: Decoupled,
    ctx: Arc<dyn GpuContext>,
}

impl std::fmt::Debug for WorkerDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerDecoder").finish()
    }
}

impl WorkerDecoder {
    /// Decoders on `handle`, in `ctx` (made current here). `Err` where the library has no
    /// GPU-assisted Huffman decoder.
    pub(crate) fn new(handle: &Arc<Handle>, ctx: Arc<dyn GpuContext>) -> Result<Self, NvjpegError> {
        ctx.bind()?;
        let mut decoupled = Decoupled::new(handle, SLOTS)?;
        decoupled.gpu_huffman_only();
        if !decoupled.has_gpu_huffman() {
            return Err(NvjpegError::InvalidArgument(
                "this nvJPEG has no GPU-assisted Huffman decoder".into(),
            ));
        }
        Ok(WorkerDecoder { decoupled, ctx })
    }

    /// Whether an image of `pixels` pixels is one this decoder is for.
    pub fn takes(pixels: usize) -> bool {
        pixels >= GPU_HYBRID_MIN_PIXELS
    }

    /// Queues the decode of `bytes` (an image of `pixels` pixels), region `roi` (stored
    /// coordinates) or all of it, as interleaved RGB into `out`, on `stream`. The host phase
    /// runs now; the rest is the stream's. Per-image failures are
    /// [`NvjpegError::CpuFallback`] (decode it on the CPU); a lost context is fatal.
    ///
    /// # Safety
    /// `stream` is a stream of this decoder's context; `out` is device memory of it, large
    /// enough for the region as RGB, untouched by others until the stream's work so far has
    /// run.
    pub unsafe fn decode(
        &mut self,
        bytes: &Arc<Vec<u8>>,
        pixels: usize,
        roi: Option<Roi>,
        out: DeviceOutput,
        stream: *mut c_void,
    ) -> Result<(), NvjpegError> {
        self.ctx.bind()?;
        let mut dest = out.as_image();
        // SAFETY: per the contract; the bytes stay in the decoder's slot until its work is
        // done.
        unsafe {
            self.decoupled
                .decode_kept(&*self.ctx, bytes, pixels, roi, &mut dest, stream)
        }
    }
}

impl Drop for WorkerDecoder {
    fn drop(&mut self) {
        // The slots' buffers and bytes go only once their GPU work is done.
        if self.ctx.bind().is_ok() {
            self.decoupled.wait_all();
        }
    }
}
