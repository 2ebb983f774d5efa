//! Decode parameters: output format, region of interest.

use super::*;

/// Creates decode parameters.
///
/// # Safety
/// `h` is live and outlives the parameters.
pub unsafe fn create(
    lib: &Nvjpeg,
    h: sys::nvjpegHandle_t,
) -> Result<sys::nvjpegDecodeParams_t, NvjpegError> {
    let mut p: sys::nvjpegDecodeParams_t = std::ptr::null_mut();
    call!(lib, nvjpegDecodeParamsCreate(h, &mut p))?;
    Ok(p)
}

/// Destroys decode parameters.
///
/// # Safety
/// Live and destroyed once.
pub unsafe fn destroy(lib: &Nvjpeg, p: sys::nvjpegDecodeParams_t) -> Result<(), NvjpegError> {
    call!(lib, nvjpegDecodeParamsDestroy(p))
}

/// Sets the output format (`NVJPEG_OUTPUT_*`).
///
/// # Safety
/// `p` is live.
pub unsafe fn set_output_format(
    lib: &Nvjpeg,
    p: sys::nvjpegDecodeParams_t,
    fmt: sys::nvjpegOutputFormat_t,
) -> Result<(), NvjpegError> {
    call!(lib, nvjpegDecodeParamsSetOutputFormat(p, fmt))
}

/// Sets the region of interest; `(0, 0, -1, -1)` decodes the whole image.
///
/// # Safety
/// `p` is live.
pub unsafe fn set_roi(
    lib: &Nvjpeg,
    p: sys::nvjpegDecodeParams_t,
    x: i32,
    y: i32,
    w: i32,
    h: i32,
) -> Result<(), NvjpegError> {
    call!(lib, nvjpegDecodeParamsSetROI(p, x, y, w, h))
}
