//! The decoupled path: nvJPEG's CUDA decoders (`NVJPEG_BACKEND_GPU_HYBRID` for large images,
//! `NVJPEG_BACKEND_HYBRID` for the rest), one image at a time through the three phases (host,
//! transfer, device).
//!
//! The phases of one image are queued asynchronously, so what they use must not be touched
//! again until the GPU has run them: the parsed stream (the transfer reads it), the decoder
//! state, the pinned buffer (the transfer copies from it) and the device buffer (the device
//! phase reads it). Each image therefore takes a *slot* holding its own parsed stream,
//! states, parameters and buffers, the slots are used in turn, and a slot is reused only once
//! the fence recorded after its last image is done. With `n` slots the host phase (Huffman
//! decoding on the CPU) of the next images overlaps the GPU work of the `n - 1` before.

use std::ffi::c_void;
use std::sync::Arc;

use super::super::fallback::FallbackReason;
use super::super::result::{self, NvjpegError};
use super::super::sys;
use super::context::{Fence, GpuContext};
use super::handle::{
    DecodeParams, Decoder, DeviceBuffer, Handle, JpegState, JpegStream, PinnedBuffer, Roi,
};

/// Images with at least this many pixels go to the GPU-assisted Huffman decoder
/// (`NVJPEG_BACKEND_GPU_HYBRID`); smaller ones to the CPU-Huffman one (DALI's default
/// `hybrid_huffman_threshold`).
pub const GPU_HYBRID_MIN_PIXELS: usize = 1_000_000;

/// One image's worth of everything the three phases use. Field order is drop order: states
/// before the buffers attached to them.
struct Slot {
    /// A state per decoder: [hybrid, GPU hybrid].
    states: [Option<JpegState>; 2],
    params: DecodeParams,
    stream: JpegStream,
    pinned: PinnedBuffer,
    device: DeviceBuffer,
    /// Done once the GPU has run the last image decoded in this slot.
    fence: Option<Arc<dyn Fence>>,
    /// The encoded bytes of that image where the caller handed them over
    /// ([`Decoupled::decode_kept`]): kept until the slot is reused, after its fence.
    bytes: Option<Arc<Vec<u8>>>,
}

/// The decoupled decoders and their slots.
pub(crate) struct Decoupled {
    slots: Vec<Slot>,
    next: usize,
    /// [hybrid, GPU hybrid (when the library has it)].
    decoders: [Option<Decoder>; 2],
    handle: Arc<Handle>,
    /// Only the GPU-assisted Huffman decoder (a worker's, whose purpose it is): an image it
    /// refuses goes to the CPU rather than to the CPU-Huffman decoder.
    gpu_huffman_only: bool,
}

impl std::fmt::Debug for Decoupled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoupled")
            .field("slots", &self.slots.len())
            .field("gpu_hybrid", &self.decoders[1].is_some())
            .finish()
    }
}

/// Which decoupled decoder decoded an image.
const HYBRID: usize = 0;
const GPU_HYBRID: usize = 1;

impl Decoupled {
    /// Decoders on `handle` (context current) and `slots` (≥ 1) slots.
    pub(crate) fn new(handle: &Arc<Handle>, slots: usize) -> Result<Decoupled, NvjpegError> {
        let hybrid = Decoder::new(handle, sys::NVJPEG_BACKEND_HYBRID)?;
        let gpu_hybrid = Decoder::new(handle, sys::NVJPEG_BACKEND_GPU_HYBRID).ok();
        let decoders = [Some(hybrid), gpu_hybrid];
        let slots = (0..slots.max(1))
            .map(|_| {
                let mut states = [None, None];
                for (state, decoder) in states.iter_mut().zip(&decoders) {
                    if let Some(d) = decoder {
                        *state = Some(JpegState::for_decoder(d)?);
                    }
                }
                Ok(Slot {
                    states,
                    params: DecodeParams::new(handle)?,
                    stream: JpegStream::new(handle)?,
                    pinned: PinnedBuffer::new(handle)?,
                    device: DeviceBuffer::new(handle)?,
                    fence: None,
                    bytes: None,
                })
            })
            .collect::<Result<Vec<_>, NvjpegError>>()?;
        Ok(Decoupled {
            slots,
            next: 0,
            decoders,
            handle: handle.clone(),
            gpu_huffman_only: false,
        })
    }

    /// From now on, only the GPU-assisted Huffman decoder decodes (see the field).
    pub(crate) fn gpu_huffman_only(&mut self) {
        self.gpu_huffman_only = true;
    }

    /// Queues the decode of the encoded image at `data` (`len` bytes, which stay valid until
    /// the GPU has run it: the staging ring) into `dest` on `stream`, region `roi` (stored
    /// coordinates) or all of it; `pixels` picks the decoder. Per-image failures are
    /// [`NvjpegError::CpuFallback`]; a lost context is a fatal [`NvjpegError::Cuda`].
    ///
    /// # Safety
    /// The context of `ctx` is current; `stream` is a stream of it (or null); `dest`
    /// describes device memory of it large enough for the output and untouched by others
    /// until the work completes; `data`..`data + len` is readable until then.
    #[allow(clippy::too_many_arguments)] // one image's whole description
    pub(crate) unsafe fn decode(
        &mut self,
        ctx: &dyn GpuContext,
        data: *const u8,
        len: usize,
        pixels: usize,
        roi: Option<Roi>,
        dest: &mut sys::nvjpegImage_t,
        stream: *mut c_void,
    ) -> Result<(), NvjpegError> {
        let k = self.next;
        self.next = (self.next + 1) % self.slots.len();
        let slot = &mut self.slots[k];
        if let Some(f) = slot.fence.take() {
            // The last image of this slot failed on the GPU: its batch reports that; only a
            // lost context concerns this image.
            if let Err(e) = f.wait() {
                if e.is_fatal() {
                    return Err(e);
                }
            }
        }
        let failed = |e: NvjpegError| match e {
            NvjpegError::Status { .. } => {
                NvjpegError::CpuFallback(FallbackReason::NvjpegFailed(e.to_string()))
            }
            other => other,
        };
        slot.params.set_output_rgbi().map_err(failed)?;
        slot.params.set_roi(roi).map_err(failed)?;
        let lib = &self.handle.lib;
        let h = self.handle.raw;
        // SAFETY: handle and stream object are live; `data` is readable for `len` bytes until
        // the work completes (contract), longer than nvJPEG may keep pointers into it.
        let bytes = unsafe { std::slice::from_raw_parts(data, len) };
        // SAFETY: as above; the slot's stream object has no pending work (fence waited).
        unsafe { result::jpeg_stream::parse(lib, h, bytes, slot.stream.raw) }.map_err(failed)?;
        let mut chosen = None;
        for which in [GPU_HYBRID, HYBRID] {
            if which == GPU_HYBRID && pixels < GPU_HYBRID_MIN_PIXELS
                || which == HYBRID && self.gpu_huffman_only
            {
                continue;
            }
            if let Some(d) = &self.decoders[which] {
                // SAFETY: all live.
                let ok = unsafe {
                    result::decoder::supports(lib, d.raw, slot.stream.raw, slot.params.raw)
                }
                .map_err(failed)?;
                if ok {
                    chosen = Some(which);
                    break;
                }
            }
        }
        let Some(which) = chosen else {
            let why = match self.gpu_huffman_only {
                true if pixels < GPU_HYBRID_MIN_PIXELS => format!(
                    "under {GPU_HYBRID_MIN_PIXELS} pixels, for nvJPEG's GPU Huffman decoder"
                ),
                true => "nvJPEG's GPU Huffman decoder does not take this image (or region)".into(),
                false => "no nvJPEG decoder accepts this image with these parameters".into(),
            };
            return Err(NvjpegError::CpuFallback(FallbackReason::NvjpegUnsupported(
                why,
            )));
        };
        let (Some(decoder), Some(state)) = (&self.decoders[which], &slot.states[which]) else {
            return Err(NvjpegError::InvalidArgument(
                "a decoupled slot lacks the state of its decoder".into(),
            ));
        };
        let (d, st) = (decoder.raw, state.raw);
        // SAFETY: everything is live and this slot's alone; the slot's previous work is done
        // (fence waited), so the host phase may write its pinned buffer and state; `dest` and
        // `stream` per the contract.
        unsafe {
            result::state::attach_pinned(lib, st, slot.pinned.raw).map_err(failed)?;
            result::state::attach_device(lib, st, slot.device.raw).map_err(failed)?;
            result::decoder::host(lib, h, d, st, slot.params.raw, slot.stream.raw)
                .map_err(failed)?;
        }
        // SAFETY: as above. From here work may be queued: the slot's fence is recorded
        // whatever happens, so that its buffers are reused only after it.
        let queued = unsafe {
            result::decoder::transfer(lib, h, d, st, slot.stream.raw, stream)
                .and_then(|()| result::decoder::device(lib, h, d, st, dest, stream))
        };
        slot.fence = Some(ctx.record(stream)?);
        queued.map_err(failed)
    }

    /// Whether the library has the GPU-assisted Huffman decoder.
    pub(crate) fn has_gpu_huffman(&self) -> bool {
        self.decoders[GPU_HYBRID].is_some()
    }

    /// [`Decoupled::decode`] of `bytes`, which the slot keeps until it is used again (after
    /// its fence): the caller may drop its own reference at once.
    ///
    /// # Safety
    /// As [`Decoupled::decode`] (the bytes' lifetime aside).
    #[allow(clippy::too_many_arguments)] // one image's whole description
    pub(crate) unsafe fn decode_kept(
        &mut self,
        ctx: &dyn GpuContext,
        bytes: &Arc<Vec<u8>>,
        pixels: usize,
        roi: Option<Roi>,
        dest: &mut sys::nvjpegImage_t,
        stream: *mut c_void,
    ) -> Result<(), NvjpegError> {
        let k = self.next;
        // SAFETY: the bytes live in the slot until its next use, which waits for this
        // image's fence first; the rest per the contract.
        let r = unsafe { self.decode(ctx, bytes.as_ptr(), bytes.len(), pixels, roi, dest, stream) };
        self.slots[k].bytes = Some(bytes.clone());
        r
    }

    /// Waits for every slot's last image (before the buffers go).
    pub(crate) fn wait_all(&mut self) {
        for s in &mut self.slots {
            if let Some(f) = s.fence.take() {
                if let Err(e) = f.wait() {
                    tracing::debug!("nvJPEG image ended with an error: {e}");
                }
            }
            s.bytes = None;
        }
    }
}
