//! The emulated JPEG decoder, in nvJPEG's shape: each JPEG is routed as nvJPEG on a device
//! with JPEG engines would route it (the same host decisions, from the header the stage read:
//! [`route_header`]), its region of interest chosen as nvJPEG's is ([`decode_region`]: padded by
//! an MCU where the region asks for it), then decoded by our CPU decoder on the stream's thread
//! into the output in device memory, as interleaved RGB as stored (no EXIF orientation),
//! chroma repeated over each block as the JPEG engines write it (libjpeg-turbo without fancy
//! upsampling gives the engines' bytes exactly: checked on an H100, `docs/gpu.md`). The
//! encoded bytes are read where the caller keeps them, as nvJPEG reads them.

use crate::cuda::gpu_device::DecodeJob;
use crate::decode::{ColorMode, DecodeOptions, JpegHeader, ParsedImage, Upsampling};
use crate::nvjpeg::safe::output_size;
use crate::nvjpeg::{
    decode_region, route_header, DecodedInfo, DeviceOutput, NvjpegError, Roi, Route, Subsampling,
};

use super::memory::{Access, Kind};
use super::order::Use;

/// One queued decode: where the bytes are and where the pixels go.
#[derive(Debug)]
pub(crate) struct Queued {
    /// Address of the encoded bytes (the caller's, kept until the decode has run).
    pub(crate) bytes: u64,
    pub(crate) len: usize,
    pub(crate) header: JpegHeader,
    pub(crate) roi: Option<Roi>,
    pub(crate) out: DeviceOutput,
    pub(crate) width: usize,
    pub(crate) height: usize,
    /// Chroma interpolated as libjpeg does ([`super::EmuOptions::interpolate`]), else
    /// repeated as the engines write it.
    pub(crate) fancy: bool,
}

/// The host half, at submission: what nvJPEG would say at once for job `index` (its route,
/// the size it writes and the window asked for inside that), or why it goes to the CPU.
/// `pad`: ROIs are padded by an MCU (nvJPEG before 13.3); `fancy`: chroma interpolated, not
/// repeated.
pub(crate) fn prepare(
    job: &DecodeJob<'_>,
    pad: bool,
    fancy: bool,
) -> Result<(DecodedInfo, Queued), NvjpegError> {
    let (route, facts) = match route_header(job.header, true) {
        Route::Cpu(reason) => return Err(NvjpegError::CpuFallback(reason)),
        Route::Gpu(r, f) => (r, f),
    };
    let region = decode_region(job.header, job.roi, pad)?;
    let (width, height) = output_size(region.width, region.height, None, job.out)?;
    let info = DecodedInfo {
        width,
        height,
        window: region.window,
        stored_width: facts.width,
        stored_height: facts.height,
        components: facts.components,
        subsampling: facts.subsampling().unwrap_or(Subsampling::S444),
        orientation: facts.orientation,
        roi: region.decode,
        route,
    };
    let q = Queued {
        bytes: job.bytes.as_ptr() as u64,
        len: job.bytes.len(),
        header: job.header.clone(),
        roi: region.decode,
        out: job.out,
        width,
        height,
        fancy,
    };
    Ok((info, q))
}

/// The device half, on the stream's thread: checks the output, decodes, writes the rows.
/// A decode error leaves the output as it was, as the engines leave garbage on a stream they
/// cannot read (the host refused what it could see was bad); `Err` is a fault of the device
/// (an address outside its memory).
///
/// # Safety
/// `q.bytes..q.bytes + q.len` is readable host memory, unchanged while this runs.
pub(crate) unsafe fn run(mem: &Access<'_>, q: &Queued) -> Result<(), String> {
    let row = 3 * q.width;
    let need = q.out.pitch * (q.height - 1) + row;
    mem.check(
        (q.out.ptr, need),
        Kind::Device,
        Use::Write,
        "a decode output",
    )?;
    // SAFETY: per this function's contract.
    let bytes = unsafe { std::slice::from_raw_parts(q.bytes as *const u8, q.len) };
    if let Err(e) = decode_into(q, bytes, row) {
        tracing::debug!("emulated decoder: {e}");
    }
    Ok(())
}

fn decode_into(q: &Queued, bytes: &[u8], row: usize) -> Result<(), String> {
    let opts = DecodeOptions {
        color: ColorMode::Rgb,
        apply_exif: false,
        upsampling: if q.fancy {
            Upsampling::Fancy
        } else {
            Upsampling::Nearest
        },
        ..DecodeOptions::default()
    };
    // The header the stage read (with the pipeline's limits) for these very bytes.
    let parsed = ParsedImage::with_jpeg_header(bytes, &opts, q.header.clone());
    let im = match q.roi {
        Some(r) => parsed.decode_window((r.y, r.x, r.height, r.width)),
        None => parsed.decode(),
    }
    .map_err(|e| e.to_string())?;
    let px = im
        .as_u8_hwc()
        .filter(|_| (im.height, im.width, im.channels) == (q.height, q.width, 3))
        .ok_or_else(|| {
            format!(
                "decoded {}x{}x{}, expected {}x{}x3",
                im.height, im.width, im.channels, q.height, q.width
            )
        })?;
    for (y, src) in px.chunks_exact(row).enumerate() {
        let dst = q.out.ptr + (y * q.out.pitch) as u64;
        // SAFETY: row `y` of the output lies inside the range `run` checked (pitch × (height
        // − 1) + row bytes from `out.ptr`), mapped while its access is held; the caller
        // promised no other work uses the output meanwhile; `src` is `row` host bytes.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst as *mut u8, row) };
    }
    Ok(())
}
