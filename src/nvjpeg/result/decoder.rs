//! Decoupled decoders (`nvjpegJpegDecoder_t`) and their three phases.

use super::*;

/// Creates a decoder for `backend` on handle `h`.
///
/// # Safety
/// `h` is live and outlives the decoder.
pub unsafe fn create(
    lib: &Nvjpeg,
    h: sys::nvjpegHandle_t,
    backend: sys::nvjpegBackend_t,
) -> Result<sys::nvjpegJpegDecoder_t, NvjpegError> {
    let mut d: sys::nvjpegJpegDecoder_t = std::ptr::null_mut();
    call!(lib, nvjpegDecoderCreate(h, backend, &mut d))?;
    Ok(d)
}

/// Destroys a decoder.
///
/// # Safety
/// Live, destroyed once, its states destroyed first.
pub unsafe fn destroy(lib: &Nvjpeg, d: sys::nvjpegJpegDecoder_t) -> Result<(), NvjpegError> {
    call!(lib, nvjpegDecoderDestroy(d))
}

/// Whether decoder `d` can decode the parsed stream `s` with `p`. Note nvJPEG's
/// convention, converted here: the C function sets 0 when supported.
///
/// # Safety
/// All live.
pub unsafe fn supports(
    lib: &Nvjpeg,
    d: sys::nvjpegJpegDecoder_t,
    s: sys::nvjpegJpegStream_t,
    p: sys::nvjpegDecodeParams_t,
) -> Result<bool, NvjpegError> {
    let mut not_supported: c_int = 1;
    call!(lib, nvjpegDecoderJpegSupported(d, s, p, &mut not_supported))?;
    Ok(not_supported == 0)
}

/// Host phase (Huffman decode on the CPU for the hybrid backend).
///
/// # Safety
/// All live; a pinned buffer is attached to `st`, and no copy from it is pending.
pub unsafe fn host(
    lib: &Nvjpeg,
    h: sys::nvjpegHandle_t,
    d: sys::nvjpegJpegDecoder_t,
    st: sys::nvjpegJpegState_t,
    p: sys::nvjpegDecodeParams_t,
    s: sys::nvjpegJpegStream_t,
) -> Result<(), NvjpegError> {
    call!(lib, nvjpegDecodeJpegHost(h, d, st, p, s))
}

/// Transfer phase: host-to-device copies on `stream`.
///
/// # Safety
/// All live; `stream` is a valid CUDA stream of the current context (or null).
pub unsafe fn transfer(
    lib: &Nvjpeg,
    h: sys::nvjpegHandle_t,
    d: sys::nvjpegJpegDecoder_t,
    st: sys::nvjpegJpegState_t,
    s: sys::nvjpegJpegStream_t,
    stream: *mut c_void,
) -> Result<(), NvjpegError> {
    call!(
        lib,
        nvjpegDecodeJpegTransferToDevice(h, d, st, s, stream as sys::cudaStream_t)
    )
}

/// Device phase: kernels on `stream` write `dest`.
///
/// # Safety
/// All live; `dest` describes device memory large enough for the output, valid until
/// the work on `stream` completes.
pub unsafe fn device(
    lib: &Nvjpeg,
    h: sys::nvjpegHandle_t,
    d: sys::nvjpegJpegDecoder_t,
    st: sys::nvjpegJpegState_t,
    dest: &mut sys::nvjpegImage_t,
    stream: *mut c_void,
) -> Result<(), NvjpegError> {
    call!(
        lib,
        nvjpegDecodeJpegDevice(h, d, st, dest, stream as sys::cudaStream_t)
    )
}
