//! The emulated JPEG decoder, in nvJPEG's shape: each JPEG is routed as nvJPEG on a device
//! with JPEG engines would route it (the same host decisions, from the header the stage read:
//! [`route_header`]), its region of interest planned as nvJPEG's is ([`plan_roi`]: padded by
//! an MCU, as before 13.3, unless the device decodes ROIs exactly), its bytes copied into
//! pinned memory before the call returns (as nvJPEG's staging ring), then decoded by our CPU
//! decoder on the stream's thread into the output in device memory, as interleaved RGB as
//! stored (no EXIF orientation). Errors found only while the work runs are reported when the
//! batch is finished, as nvJPEG reports some.

use std::sync::Mutex;

use crate::cuda::gpu_device::{DecodeJob, Event};
use crate::decode::{ColorMode, DecodeOptions, JpegHeader, ParsedImage};
use crate::nvjpeg::safe::output_size;
use crate::nvjpeg::{
    plan_roi, route_header, DecodedInfo, DeviceOutput, NvjpegError, Roi, Route, Subsampling,
};

use super::memory::{Access, Kind};

/// One queued decode: where the bytes are (once staged) and where the pixels go.
#[derive(Debug)]
pub(crate) struct Queued {
    pub(crate) index: usize,
    /// Address of the staged bytes in pinned memory (set when staged).
    pub(crate) bytes: u64,
    pub(crate) len: usize,
    pub(crate) header: JpegHeader,
    pub(crate) roi: Option<Roi>,
    pub(crate) out: DeviceOutput,
    pub(crate) width: usize,
    pub(crate) height: usize,
    /// Fails when run, as nvJPEG may at the fence (a test hook: [`super::EmuDevice::fail_decodes`]).
    pub(crate) fail: bool,
}

/// The host half, at submission: what nvJPEG would say at once for job `index` (its route,
/// the size it writes and the window asked for inside that), or why it goes to the CPU.
/// `pad`: ROIs are padded by an MCU (nvJPEG before 13.3).
pub(crate) fn prepare(
    index: usize,
    job: &DecodeJob<'_>,
    pad: bool,
) -> Result<(DecodedInfo, Queued), NvjpegError> {
    let (route, facts) = match route_header(job.header, true) {
        Route::Cpu(reason) => return Err(NvjpegError::CpuFallback(reason)),
        Route::Gpu(r, f) => (r, f),
    };
    let plan = plan_roi(job.header, job.roi, pad)?;
    let (width, height) = output_size(plan.width, plan.height, None, job.out)?;
    let info = DecodedInfo {
        width,
        height,
        window: plan.window,
        stored_width: facts.width,
        stored_height: facts.height,
        components: facts.components,
        subsampling: facts.subsampling().unwrap_or(Subsampling::S444),
        orientation: facts.orientation,
        roi: plan.decode,
        route,
    };
    let q = Queued {
        index,
        bytes: 0,
        len: job.bytes.len(),
        header: job.header.clone(),
        roi: plan.decode,
        out: job.out,
        width,
        height,
        fail: false,
    };
    Ok((info, q))
}

/// The device half, on the stream's thread: checks the ranges, decodes, writes the rows.
/// `Ok(Some(why))` is this image's decode error (reported late, as nvJPEG reports some);
/// `Err` a fault of the device (an address outside its memory).
pub(crate) fn run(mem: &Access<'_>, q: &Queued) -> Result<Option<String>, String> {
    mem.check(q.bytes, q.len, Kind::Pinned, "encoded bytes")?;
    let row = 3 * q.width;
    let need = q.out.pitch * (q.height - 1) + row;
    mem.check(q.out.ptr, need, Kind::Device, "a decode output")?;
    if q.fail {
        return Ok(Some("simulated decoder failure".into()));
    }
    Ok(decode_into(q, row).err())
}

fn decode_into(q: &Queued, row: usize) -> Result<(), String> {
    // SAFETY: the bytes lie in mapped pinned memory (checked by `run`) that stays mapped
    // while its access is held; the device staged them there and frees them only after this
    // work has run.
    let bytes = unsafe { std::slice::from_raw_parts(q.bytes as *const u8, q.len) };
    let opts = DecodeOptions {
        color: ColorMode::Rgb,
        apply_exif: false,
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

/// Errors a decode reports only once its work has run, by job.
#[derive(Debug, Default)]
pub(crate) struct LateErrors(Mutex<Vec<Option<String>>>);

impl LateErrors {
    /// Room for `n` jobs, none failed.
    pub(crate) fn new(n: usize) -> LateErrors {
        LateErrors(Mutex::new(vec![None; n]))
    }

    /// Records that job `i` failed.
    pub(crate) fn set(&self, i: usize, why: String) {
        let mut v = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(failure) = v.get_mut(i) {
            *failure = Some(why);
        }
    }

    /// Why job `i` failed, if it did (read after the batch's fence).
    pub(crate) fn get(&self, i: usize) -> Option<String> {
        let v = self.0.lock().unwrap_or_else(|p| p.into_inner());
        v.get(i).cloned().flatten()
    }
}

/// A submitted batch of the emulated device ([`crate::cuda::gpu_device::DecodeTicket`]).
pub(crate) struct Ticket {
    /// After the batch's work; `None` when nothing was queued.
    pub(crate) fence: Option<Event>,
    /// Per job, what the host half said.
    pub(crate) results: Vec<Result<DecodedInfo, NvjpegError>>,
    pub(crate) late: std::sync::Arc<LateErrors>,
}
