//! Decoding states (`nvjpegJpegState_t`), for the batched API and for a decoupled decoder.

use super::*;

/// A state for the batched API (`nvjpegJpegStateCreate`).
///
/// # Safety
/// `h` is a live handle that outlives the state.
pub unsafe fn create(
    lib: &Nvjpeg,
    h: sys::nvjpegHandle_t,
) -> Result<sys::nvjpegJpegState_t, NvjpegError> {
    let mut s: sys::nvjpegJpegState_t = std::ptr::null_mut();
    call!(lib, nvjpegJpegStateCreate(h, &mut s))?;
    Ok(s)
}

/// A state for one decoupled decoder (`nvjpegDecoderStateCreate`).
///
/// # Safety
/// `h` and `dec` are live and outlive the state.
pub unsafe fn create_for_decoder(
    lib: &Nvjpeg,
    h: sys::nvjpegHandle_t,
    dec: sys::nvjpegJpegDecoder_t,
) -> Result<sys::nvjpegJpegState_t, NvjpegError> {
    let mut s: sys::nvjpegJpegState_t = std::ptr::null_mut();
    call!(lib, nvjpegDecoderStateCreate(h, dec, &mut s))?;
    Ok(s)
}

/// Destroys a state.
///
/// # Safety
/// `s` is live, destroyed once, and no work using it is pending on a stream.
pub unsafe fn destroy(lib: &Nvjpeg, s: sys::nvjpegJpegState_t) -> Result<(), NvjpegError> {
    call!(lib, nvjpegJpegStateDestroy(s))
}

/// Attaches a pinned buffer (decoupled API).
///
/// # Safety
/// Both are live; the buffer outlives its use by the state.
pub unsafe fn attach_pinned(
    lib: &Nvjpeg,
    s: sys::nvjpegJpegState_t,
    b: sys::nvjpegBufferPinned_t,
) -> Result<(), NvjpegError> {
    call!(lib, nvjpegStateAttachPinnedBuffer(s, b))
}

/// Attaches a device buffer (decoupled API).
///
/// # Safety
/// Both are live; the buffer outlives its use by the state.
pub unsafe fn attach_device(
    lib: &Nvjpeg,
    s: sys::nvjpegJpegState_t,
    b: sys::nvjpegBufferDevice_t,
) -> Result<(), NvjpegError> {
    call!(lib, nvjpegStateAttachDeviceBuffer(s, b))
}
