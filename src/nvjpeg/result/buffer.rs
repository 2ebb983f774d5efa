//! Pinned and device work buffers (decoupled API).

use super::*;

/// A pinned host buffer with the default allocator.
///
/// # Safety
/// `h` is live and outlives the buffer.
pub unsafe fn create_pinned(
    lib: &Nvjpeg,
    h: sys::nvjpegHandle_t,
) -> Result<sys::nvjpegBufferPinned_t, NvjpegError> {
    let mut b: sys::nvjpegBufferPinned_t = std::ptr::null_mut();
    call!(
        lib,
        nvjpegBufferPinnedCreate(h, std::ptr::null_mut(), &mut b)
    )?;
    Ok(b)
}

/// A pinned host buffer whose memory comes from `alloc` (`nvjpegBufferPinnedCreateV2`).
///
/// # Safety
/// `h` is live and outlives the buffer; `alloc` points at an allocator that stays valid,
/// where it is, until the buffer is destroyed (nvJPEG may keep the pointer; it never writes
/// through it).
pub unsafe fn create_pinned_v2(
    lib: &Nvjpeg,
    h: sys::nvjpegHandle_t,
    alloc: *mut sys::nvjpegPinnedAllocatorV2_t,
) -> Result<sys::nvjpegBufferPinned_t, NvjpegError> {
    let mut b: sys::nvjpegBufferPinned_t = std::ptr::null_mut();
    call!(lib, nvjpegBufferPinnedCreateV2(h, alloc, &mut b))?;
    Ok(b)
}

/// Destroys a pinned buffer.
///
/// # Safety
/// Live, destroyed once, no pending copy from it.
pub unsafe fn destroy_pinned(
    lib: &Nvjpeg,
    b: sys::nvjpegBufferPinned_t,
) -> Result<(), NvjpegError> {
    call!(lib, nvjpegBufferPinnedDestroy(b))
}

/// A device buffer with the default allocator.
///
/// # Safety
/// `h` is live and outlives the buffer.
pub unsafe fn create_device(
    lib: &Nvjpeg,
    h: sys::nvjpegHandle_t,
) -> Result<sys::nvjpegBufferDevice_t, NvjpegError> {
    let mut b: sys::nvjpegBufferDevice_t = std::ptr::null_mut();
    call!(
        lib,
        nvjpegBufferDeviceCreate(h, std::ptr::null_mut(), &mut b)
    )?;
    Ok(b)
}

/// A device buffer whose memory comes from `alloc` (`nvjpegBufferDeviceCreateV2`).
///
/// # Safety
/// `h` is live and outlives the buffer; `alloc` points at an allocator that stays valid,
/// where it is, until the buffer is destroyed (nvJPEG may keep the pointer; it never writes
/// through it).
pub unsafe fn create_device_v2(
    lib: &Nvjpeg,
    h: sys::nvjpegHandle_t,
    alloc: *mut sys::nvjpegDevAllocatorV2_t,
) -> Result<sys::nvjpegBufferDevice_t, NvjpegError> {
    let mut b: sys::nvjpegBufferDevice_t = std::ptr::null_mut();
    call!(lib, nvjpegBufferDeviceCreateV2(h, alloc, &mut b))?;
    Ok(b)
}

/// Destroys a device buffer.
///
/// # Safety
/// Live, destroyed once, no pending work using it.
pub unsafe fn destroy_device(
    lib: &Nvjpeg,
    b: sys::nvjpegBufferDevice_t,
) -> Result<(), NvjpegError> {
    call!(lib, nvjpegBufferDeviceDestroy(b))
}
