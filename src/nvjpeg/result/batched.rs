//! The batched API (used with the hardware backend).

use super::*;

/// (Re)initialises `st` for batches of `batch` images in format `fmt`.
///
/// # Safety
/// `h`, `st` live; no batch using `st` is pending.
pub unsafe fn initialize(
    lib: &Nvjpeg,
    h: sys::nvjpegHandle_t,
    st: sys::nvjpegJpegState_t,
    batch: i32,
    max_cpu_threads: i32,
    fmt: sys::nvjpegOutputFormat_t,
) -> Result<(), NvjpegError> {
    call!(
        lib,
        nvjpegDecodeBatchedInitialize(h, st, batch, max_cpu_threads, fmt)
    )
}

/// Allocates the state's internal buffers for batches of `batch` images of up to
/// `width` × `height` (`nvjpegDecodeBatchedPreAllocate`), so the first batches allocate
/// nothing and the hardware decoder uses its memory pool.
///
/// # Safety
/// `h`, `st` live; no batch using `st` is pending.
#[allow(clippy::too_many_arguments)] // mirrors the C signature one to one
pub unsafe fn preallocate(
    lib: &Nvjpeg,
    h: sys::nvjpegHandle_t,
    st: sys::nvjpegJpegState_t,
    batch: i32,
    width: i32,
    height: i32,
    css: sys::nvjpegChromaSubsampling_t,
    fmt: sys::nvjpegOutputFormat_t,
) -> Result<(), NvjpegError> {
    call!(
        lib,
        nvjpegDecodeBatchedPreAllocate(h, st, batch, width, height, css, fmt)
    )
}

/// Whether the batched decoder of `h` takes the parsed stream `s` with `p`
/// (converted: `true` = supported).
///
/// # Safety
/// All live.
pub unsafe fn supports(
    lib: &Nvjpeg,
    h: sys::nvjpegHandle_t,
    s: sys::nvjpegJpegStream_t,
    p: sys::nvjpegDecodeParams_t,
) -> Result<bool, NvjpegError> {
    let mut not_supported: c_int = 1;
    call!(
        lib,
        nvjpegDecodeBatchedSupportedEx(h, s, p, &mut not_supported)
    )?;
    Ok(not_supported == 0)
}

/// Decodes a batch with per-image parameters (ROI) on `stream`.
///
/// # Safety
/// `h`, `st` live and initialised for `data.len()` images; `data`, `lengths`, `dest`,
/// `params` have the same length; every `dest` describes device memory large enough for
/// its output, valid until the work on `stream` completes; `stream` is a valid CUDA
/// stream of the current context (or null).
#[allow(clippy::too_many_arguments)] // mirrors the C signature one to one
pub unsafe fn decode_ex(
    lib: &Nvjpeg,
    h: sys::nvjpegHandle_t,
    st: sys::nvjpegJpegState_t,
    data: &[*const u8],
    lengths: &[usize],
    dest: &mut [sys::nvjpegImage_t],
    params: &mut [sys::nvjpegDecodeParams_t],
    stream: *mut c_void,
) -> Result<(), NvjpegError> {
    if lengths.len() != data.len() || dest.len() != data.len() || params.len() != data.len() {
        return Err(NvjpegError::InvalidArgument(
            "batched decode: data, lengths, destinations and params differ in length".into(),
        ));
    }
    call!(
        lib,
        nvjpegDecodeBatchedEx(
            h,
            st,
            data.as_ptr(),
            lengths.as_ptr(),
            dest.as_mut_ptr(),
            params.as_mut_ptr(),
            stream as sys::cudaStream_t
        )
    )
}
