//! The emulated JPEG decoder: routes each JPEG as nvJPEG on a device with JPEG engines would
//! (the same host decisions, [`crate::nvjpeg::classify`]), then decodes it with our CPU
//! decoder on the stream's thread into the output in device memory, as interleaved RGB as
//! stored (no EXIF orientation), the ROI only when one is given.

use crate::decode::{decode, decode_window, ColorMode, DecodeOptions, Limits};
use crate::nvjpeg::safe::output_size;
use crate::nvjpeg::{DecodedInfo, DeviceOutput, NvjpegError, Roi, Route, Subsampling};

use super::memory::{Access, Kind};

/// One queued decode: where the bytes are and where the pixels go.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Queued {
    pub(crate) index: usize,
    pub(crate) bytes: u64,
    pub(crate) len: usize,
    pub(crate) roi: Option<Roi>,
    pub(crate) out: DeviceOutput,
    pub(crate) width: usize,
    pub(crate) height: usize,
}

/// The host half: what nvJPEG would say at once for `bytes` (its route and the size it
/// writes), or why it goes to the CPU.
pub(crate) fn prepare(
    index: usize,
    bytes: &[u8],
    roi: Option<Roi>,
    out: DeviceOutput,
    limits: &Limits,
) -> Result<(DecodedInfo, Queued), NvjpegError> {
    let (route, facts) = match crate::nvjpeg::classify(bytes, limits, true) {
        Route::Cpu(reason) => return Err(NvjpegError::CpuFallback(reason)),
        Route::Gpu(r, f) => (r, f),
    };
    let (width, height) = output_size(facts.width, facts.height, roi, out)?;
    let info = DecodedInfo {
        width,
        height,
        window: Roi {
            x: 0,
            y: 0,
            width,
            height,
        },
        stored_width: facts.width,
        stored_height: facts.height,
        components: facts.components,
        subsampling: facts.subsampling().unwrap_or(Subsampling::S444),
        orientation: facts.orientation,
        roi,
        route,
    };
    let q = Queued {
        index,
        bytes: bytes.as_ptr() as u64,
        len: bytes.len(),
        roi,
        out,
        width,
        height,
    };
    Ok((info, q))
}

/// The device half, on the stream's thread: checks the ranges, decodes, writes the rows.
/// `Ok(Some(why))` is this image's decode error (reported late, as nvJPEG reports some);
/// `Err` a fault of the device (an address outside its memory).
pub(crate) fn run(mem: &Access<'_>, q: &Queued, limits: &Limits) -> Result<Option<String>, String> {
    mem.check(q.bytes, q.len, Kind::Pinned, "encoded bytes")?;
    let row = 3 * q.width;
    let need = q.out.pitch * (q.height - 1) + row;
    mem.check(q.out.ptr, need, Kind::Device, "a decode output")?;
    Ok(decode_into(q, row, limits).err())
}

fn decode_into(q: &Queued, row: usize, limits: &Limits) -> Result<(), String> {
    // SAFETY: the bytes lie in mapped pinned memory (checked by `run`) that stays mapped
    // while its access is held; the caller promised nobody writes them until the event.
    let bytes = unsafe { std::slice::from_raw_parts(q.bytes as *const u8, q.len) };
    let opts = DecodeOptions {
        color: ColorMode::Rgb,
        apply_exif: false,
        limits: *limits,
        ..DecodeOptions::default()
    };
    let im = match q.roi {
        Some(r) => decode_window(bytes, &opts, (r.y, r.x, r.height, r.width)),
        None => decode(bytes, &opts),
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
