//! Library handles: `nvjpegCreateEx`, `nvjpegDestroy`, hardware engine info.

use super::*;

/// Creates a handle for `backend` (`NVJPEG_BACKEND_*`) with the default allocators
/// and `flags` (`NVJPEG_FLAGS_*`). Fails (typically `NVJPEG_STATUS_ARCH_MISMATCH` or
/// `NVJPEG_STATUS_JPEG_NOT_SUPPORTED`) when the backend is not available on this GPU.
///
/// # Safety
/// A CUDA context must be current on the calling thread (nvJPEG uses the runtime API,
/// which picks up the current or primary context).
pub unsafe fn create(
    lib: &Nvjpeg,
    backend: sys::nvjpegBackend_t,
    flags: c_uint,
) -> Result<sys::nvjpegHandle_t, NvjpegError> {
    let mut h: sys::nvjpegHandle_t = std::ptr::null_mut();
    call!(
        lib,
        nvjpegCreateEx(
            backend,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            flags,
            &mut h
        )
    )?;
    Ok(h)
}

/// Creates a handle for `backend` whose device and pinned host memory come from the given
/// stream-ordered allocators (`nvjpegCreateExV2`), so nvJPEG never calls `cudaMalloc` /
/// `cudaFree` (or their pinned counterparts) itself.
///
/// # Safety
/// As [`create`]; the allocators' functions and context pointers stay valid, and callable
/// from any thread that calls nvJPEG, until the handle and everything created from it are
/// destroyed.
pub unsafe fn create_v2(
    lib: &Nvjpeg,
    backend: sys::nvjpegBackend_t,
    dev: &mut sys::nvjpegDevAllocatorV2_t,
    pinned: &mut sys::nvjpegPinnedAllocatorV2_t,
    flags: c_uint,
) -> Result<sys::nvjpegHandle_t, NvjpegError> {
    let mut h: sys::nvjpegHandle_t = std::ptr::null_mut();
    call!(lib, nvjpegCreateExV2(backend, dev, pinned, flags, &mut h))?;
    Ok(h)
}

/// Pads every device allocation of the handle to a multiple of `padding` bytes, so buffers
/// grown for one image serve the next slightly larger ones without a new allocation.
///
/// # Safety
/// `h` is a live handle.
pub unsafe fn set_device_padding(
    lib: &Nvjpeg,
    h: sys::nvjpegHandle_t,
    padding: usize,
) -> Result<(), NvjpegError> {
    call!(lib, nvjpegSetDeviceMemoryPadding(padding, h))
}

/// As [`set_device_padding`], for pinned host allocations.
///
/// # Safety
/// `h` is a live handle.
pub unsafe fn set_pinned_padding(
    lib: &Nvjpeg,
    h: sys::nvjpegHandle_t,
    padding: usize,
) -> Result<(), NvjpegError> {
    call!(lib, nvjpegSetPinnedMemoryPadding(padding, h))
}

/// Destroys a handle.
///
/// # Safety
/// `h` came from [`create`], is destroyed once, and nothing created from it is used after.
pub unsafe fn destroy(lib: &Nvjpeg, h: sys::nvjpegHandle_t) -> Result<(), NvjpegError> {
    call!(lib, nvjpegDestroy(h))
}

/// (engines, cores per engine) of the hardware decoder.
///
/// # Safety
/// `h` is a live handle.
pub unsafe fn hardware_info(
    lib: &Nvjpeg,
    h: sys::nvjpegHandle_t,
) -> Result<(u32, u32), NvjpegError> {
    let (mut e, mut c) = (0 as c_uint, 0 as c_uint);
    call!(lib, nvjpegGetHardwareDecoderInfo(h, &mut e, &mut c))?;
    Ok((e, c))
}

/// Reads components, subsampling and per-component sizes from a JPEG header
/// (`nvjpegGetImageInfo`; host only, thread safe).
///
/// # Safety
/// `h` is a live handle.
pub unsafe fn image_info(
    lib: &Nvjpeg,
    h: sys::nvjpegHandle_t,
    data: &[u8],
) -> Result<(i32, sys::nvjpegChromaSubsampling_t, [i32; 4], [i32; 4]), NvjpegError> {
    let mut n: c_int = 0;
    let mut css: sys::nvjpegChromaSubsampling_t = sys::NVJPEG_CSS_UNKNOWN;
    let mut w = [0 as c_int; sys::NVJPEG_MAX_COMPONENT as usize];
    let mut hh = [0 as c_int; sys::NVJPEG_MAX_COMPONENT as usize];
    call!(
        lib,
        nvjpegGetImageInfo(
            h,
            data.as_ptr(),
            data.len(),
            &mut n,
            &mut css,
            w.as_mut_ptr(),
            hh.as_mut_ptr()
        )
    )?;
    Ok((n, css, w, hh))
}
