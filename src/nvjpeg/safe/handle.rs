//! The owned nvJPEG objects — the library handle ([`Handle`]), its states, streams, decode
//! parameters, buffers and decoders, each destroyed by `Drop` — and the plain types a decode
//! is described by ([`Roi`], [`DeviceOutput`], [`DecodedInfo`], [`NvjpegImageInfo`]).

use std::sync::Arc;

use super::super::fallback::{GpuRoute, Subsampling};
use super::super::result::{self, Nvjpeg, NvjpegError};
use super::super::sys;
use super::alloc::Allocators;

/// A library handle (`nvjpegHandle_t`) whose memory comes from our [`Allocators`]. nvJPEG
/// handles are thread safe.
pub struct Handle {
    pub(super) lib: Arc<Nvjpeg>,
    pub(super) raw: sys::nvjpegHandle_t,
    pub(super) backend: sys::nvjpegBackend_t,
    pub(super) flags: u32,
    /// The allocator structs given to nvJPEG (boxed: their address stays put).
    pub(super) allocators: Box<(sys::nvjpegDevAllocatorV2_t, sys::nvjpegPinnedAllocatorV2_t)>,
    /// What the allocator structs point at; dropped after `raw` is destroyed (Drop, then
    /// fields), since `nvjpegDestroy` frees through them.
    pub(super) memory: Arc<Allocators>,
}

// SAFETY: an nvjpegHandle_t may be used from any thread, also concurrently (nvJPEG's
// thread-safety rules: only streams, states and buffers are per thread); the allocators it
// calls are thread safe (a mutex per cache).
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

/// Pads nvJPEG's pinned allocations to a multiple of this (a buffer grown for one image then
/// serves the next slightly larger ones).
pub const PINNED_PADDING: usize = 256 << 10;

/// Pads nvJPEG's device allocations to a multiple of this.
pub const DEVICE_PADDING: usize = 1 << 20;

/// Whether the real device decodes with repeated chroma and rebuilds libjpeg's
/// interpolation in its own kernels (`STOKEHOLD_CHROMA_REBUILD=1`). Off by default: on a
/// real GPU the rebuild has not yet matched the CPU path on every photo, nor been fast
/// (`docs/gpu.md`, Chroma), while nvJPEG's own interpolation has.
pub fn chroma_rebuild_enabled() -> bool {
    std::env::var("STOKEHOLD_CHROMA_REBUILD").is_ok_and(|v| v == "1")
}

impl Handle {
    /// Creates a handle for `backend` (`sys::NVJPEG_BACKEND_*`) allocating from `memory` (the
    /// context current: the caller binds it), with the paddings above. With `interpolate`,
    /// chroma is upsampled as libjpeg does (`NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION`; a
    /// library that refuses the flag gets a handle without it); without, by repetition,
    /// nvJPEG's default, which takes a third of the host time per image on the JPEG engines
    /// (`docs/performance.md`) and whose chroma the GPU stage
    /// can rebuild (`kernels/chroma.cu`, [`chroma_rebuild_enabled`]).
    pub fn new(
        lib: Arc<Nvjpeg>,
        backend: sys::nvjpegBackend_t,
        memory: Arc<Allocators>,
        interpolate: bool,
    ) -> Result<Arc<Self>, NvjpegError> {
        let mut allocators = Box::new((memory.device_v2(), memory.pinned_v2()));
        let (dev, pinned) = &mut *allocators;
        let interp = sys::NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION;
        // SAFETY: the allocators point at `memory`, which the handle keeps alive until
        // after `nvjpegDestroy`; they are thread safe. The caller made the context current.
        let created = if interpolate {
            unsafe { result::handle::create_v2(&lib, backend, dev, pinned, interp) }
                .map(|raw| (raw, interp))
        } else {
            Err(NvjpegError::InvalidArgument("not asked".into()))
        };
        let (raw, flags) = match created {
            Ok(r) => r,
            // SAFETY: as above.
            Err(_) => (
                unsafe {
                    result::handle::create_v2(
                        &lib,
                        backend,
                        dev,
                        pinned,
                        sys::NVJPEG_FLAGS_DEFAULT,
                    )?
                },
                sys::NVJPEG_FLAGS_DEFAULT,
            ),
        };
        let handle = Handle {
            lib,
            raw,
            backend,
            flags,
            allocators,
            memory,
        };
        // SAFETY: the handle was just created.
        unsafe {
            result::handle::set_pinned_padding(&handle.lib, raw, PINNED_PADDING)?;
            result::handle::set_device_padding(&handle.lib, raw, DEVICE_PADDING)?;
        }
        Ok(Arc::new(handle))
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

    /// The memory its allocations come from.
    pub fn memory(&self) -> &Arc<Allocators> {
        &self.memory
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
        // all gone; the handle is destroyed once, with its context current (the owner binds
        // it before dropping).
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
            pub(super) handle: Arc<Handle>,
            pub(super) raw: $raw,
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
    /// A pinned buffer (grown by nvJPEG as needed), from the handle's allocator.
    pub fn new(handle: &Arc<Handle>) -> Result<Self, NvjpegError> {
        // nvJPEG reads the allocator through this pointer (it may keep it): the handle's own,
        // boxed, which the buffer keeps alive.
        let alloc = std::ptr::addr_of!(handle.allocators.1).cast_mut();
        // SAFETY: the handle is live; the allocator (and the memory it points at) lives in
        // the handle, which outlives the buffer (the buffer holds it); nvJPEG only reads it.
        let raw = unsafe { result::buffer::create_pinned_v2(&handle.lib, handle.raw, alloc)? };
        Ok(PinnedBuffer {
            handle: handle.clone(),
            raw,
        })
    }
}

impl DeviceBuffer {
    /// A device buffer (grown by nvJPEG as needed), from the handle's allocator.
    pub fn new(handle: &Arc<Handle>) -> Result<Self, NvjpegError> {
        let alloc = std::ptr::addr_of!(handle.allocators.0).cast_mut();
        // SAFETY: as for `PinnedBuffer::new`.
        let raw = unsafe { result::buffer::create_device_v2(&handle.lib, handle.raw, alloc)? };
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

impl DeviceOutput {
    /// nvJPEG's description of this output (interleaved RGB: one plane).
    pub(crate) fn as_image(&self) -> sys::nvjpegImage_t {
        let mut dest = sys::nvjpegImage_t {
            channel: [std::ptr::null_mut(); sys::NVJPEG_MAX_COMPONENT as usize],
            pitch: [0; sys::NVJPEG_MAX_COMPONENT as usize],
        };
        dest.channel[0] = self.ptr as usize as *mut u8;
        dest.pitch[0] = self.pitch;
        dest
    }
}

/// What was decoded into one output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedInfo {
    /// Width written: the decoded region's ([`DecodedInfo::roi`], which may be padded around
    /// the region asked for), or the stored width.
    pub width: usize,
    /// Height written.
    pub height: usize,
    /// The region asked for, inside what was written (`x`, `y` from the output's corner):
    /// the whole output, or a window of it when the ROI was padded (see [`super::decode_region`]). The
    /// kernel that reads the decoded image reads this window.
    pub window: Roi,
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
    /// The region decoded (stored-image coordinates), if not the whole image.
    pub roi: Option<Roi>,
    /// Which decoder ran.
    pub route: GpuRoute,
}
