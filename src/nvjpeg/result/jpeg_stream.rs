//! Parsed JPEG streams (`nvjpegJpegStream_t`), host side.

use super::*;

/// Creates a stream object.
///
/// # Safety
/// `h` is live and outlives it.
pub unsafe fn create(
    lib: &Nvjpeg,
    h: sys::nvjpegHandle_t,
) -> Result<sys::nvjpegJpegStream_t, NvjpegError> {
    let mut s: sys::nvjpegJpegStream_t = std::ptr::null_mut();
    call!(lib, nvjpegJpegStreamCreate(h, &mut s))?;
    Ok(s)
}

/// Destroys a stream object.
///
/// # Safety
/// Live and destroyed once.
pub unsafe fn destroy(lib: &Nvjpeg, s: sys::nvjpegJpegStream_t) -> Result<(), NvjpegError> {
    call!(lib, nvjpegJpegStreamDestroy(s))
}

/// Parses a whole JPEG (headers and scans) into `s`.
///
/// # Safety
/// `h`, `s` live. nvJPEG may keep pointers into `data` until the decode of this stream
/// has been submitted (the three decoupled phases), so `data` must outlive them.
pub unsafe fn parse(
    lib: &Nvjpeg,
    h: sys::nvjpegHandle_t,
    data: &[u8],
    s: sys::nvjpegJpegStream_t,
) -> Result<(), NvjpegError> {
    call!(
        lib,
        nvjpegJpegStreamParse(h, data.as_ptr(), data.len(), 0, 0, s)
    )
}

/// Parses only the headers (enough for the support checks).
///
/// # Safety
/// `h`, `s` live.
pub unsafe fn parse_header(
    lib: &Nvjpeg,
    h: sys::nvjpegHandle_t,
    data: &[u8],
    s: sys::nvjpegJpegStream_t,
) -> Result<(), NvjpegError> {
    call!(
        lib,
        nvjpegJpegStreamParseHeader(h, data.as_ptr(), data.len(), s)
    )
}
