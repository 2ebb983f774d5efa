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
