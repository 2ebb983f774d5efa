//! The CUDA driver and NVRTC as loaded at run time: whether they are present, what a device
//! is ([`probe`], without creating a context), and driver errors as stokehold errors.

use crate::error::Error;

/// What [`probe`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuInfo {
    /// Device ordinal.
    pub device_id: usize,
    /// Device name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Total device memory in bytes.
    pub total_memory: usize,
    /// Number of CUDA devices visible.
    pub device_count: usize,
}

/// A driver error as a stokehold error, saying what was being done.
pub(crate) fn cuda_err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Cuda(format!("{what}: {e}"))
}

/// Whether the CUDA driver library can be loaded (never panics).
pub fn driver_present() -> bool {
    // SAFETY: `is_culib_present` only tries to dlopen the driver library by its known names
    // and reports whether that worked; it calls no CUDA function.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Whether the NVRTC library can be loaded (never panics).
pub fn nvrtc_present() -> bool {
    // SAFETY: as for `driver_present`: a dlopen attempt, no NVRTC call.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Checks that a CUDA driver and device `device_id` are usable and describes the device.
/// Returns [`Error::GpuUnavailable`] (never panics) when the driver library is missing,
/// the driver does not initialise or there is no such device.
///
/// Only driver queries on the device handle (`cuDeviceGetName`, `cuDeviceGetAttribute`,
/// `cuDeviceTotalMem`): no context is created, so probing costs no device memory and no
/// context start-up (hundreds of milliseconds), and leaves the device as it was.
pub fn probe(device_id: usize) -> Result<GpuInfo, Error> {
    use cudarc::driver::result::{self as drv, device};
    use cudarc::driver::sys::CUdevice_attribute as Attr;
    if !driver_present() {
        return Err(Error::GpuUnavailable(
            "no CUDA driver library (libcuda.so) found".into(),
        ));
    }
    drv::init().map_err(|e| Error::GpuUnavailable(format!("cuInit: {e}")))?;
    let count =
        device::get_count().map_err(|e| Error::GpuUnavailable(format!("device count: {e}")))?;
    if count <= 0 || device_id >= count as usize {
        return Err(Error::GpuUnavailable(format!(
            "device {device_id} requested, {count} CUDA device(s) present"
        )));
    }
    let unavailable =
        |what: &str, e| Error::GpuUnavailable(format!("device {device_id}: {what}: {e}"));
    let dev = device::get(device_id as i32).map_err(|e| unavailable("cuDeviceGet", e))?;
    // SAFETY: `dev` was just returned by cuDeviceGet; these queries only read its properties.
    let (major, minor, total_memory) = unsafe {
        (
            device::get_attribute(dev, Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
                .map_err(|e| unavailable("compute capability", e))?,
            device::get_attribute(dev, Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
                .map_err(|e| unavailable("compute capability", e))?,
            device::total_mem(dev).map_err(|e| unavailable("total memory", e))?,
        )
    };
    Ok(GpuInfo {
        device_id,
        name: device::get_name(dev).map_err(|e| unavailable("name", e))?,
        compute_capability: (major, minor),
        total_memory,
        device_count: count as usize,
    })
}

/// With `STOKEHOLD_CUDA_BLOCKING_SYNC=1` (a diagnostic), asks the driver to make host threads
/// that wait for device `device_id` sleep instead of spinning (`CU_CTX_SCHED_BLOCKING_SYNC`
/// on its primary context, before stokehold retains it). A thread's CPU time inside a
/// library call (`bench --stats`, per thread) is then the call's work alone: it tells
/// nvJPEG's host work from its waits for the device. Returns whether the flag was set; a
/// driver that refuses (a context a framework made active with other flags) is logged.
pub(crate) fn blocking_sync_if_asked(device_id: usize) -> bool {
    use cudarc::driver::result::device;
    use cudarc::driver::sys;
    if std::env::var("STOKEHOLD_CUDA_BLOCKING_SYNC").as_deref() != Ok("1") {
        return false;
    }
    let Ok(dev) = device::get(device_id as i32) else {
        return false;
    };
    let flags = sys::CUctx_flags::CU_CTX_SCHED_BLOCKING_SYNC as std::ffi::c_uint;
    // SAFETY: `dev` is a device handle the driver just returned (the caller initialised the
    // driver); setting its primary context's flags touches no memory of ours.
    let r = unsafe { sys::cuDevicePrimaryCtxSetFlags_v2(dev, flags) };
    if r == sys::CUresult::CUDA_SUCCESS {
        tracing::info!("STOKEHOLD_CUDA_BLOCKING_SYNC=1: threads waiting for the device sleep");
        true
    } else {
        tracing::warn!("STOKEHOLD_CUDA_BLOCKING_SYNC=1 not applied: the driver said {r:?}");
        false
    }
}
