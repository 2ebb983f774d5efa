//! Choosing the device a pipeline runs on from its settings, and saying why ([`DeviceReport`]).

use crate::error::Error;
use crate::pipeline::spec::{DeviceChoice, Settings};

/// Which path a pipeline runs on, and why.
///
/// It prints as the device and the reason:
/// ```
/// use stokehold::pipeline::DeviceReport;
/// let r = DeviceReport { device: "cpu", reason: "--device cpu".into() };
/// assert_eq!(r.to_string(), "cpu (--device cpu)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceReport {
    /// "cpu" or "gpu".
    pub device: &'static str,
    /// Why this path was taken, for `--device auto`.
    pub reason: String,
}

impl std::fmt::Display for DeviceReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.device, self.reason)
    }
}

/// Which path pipelines with `settings` run on, and why; [`Error::GpuUnavailable`] when
/// `device = "gpu"` can't be honoured. What `stokehold run` does and `stokehold check` says.
pub fn choose_device(settings: &Settings) -> Result<DeviceReport, Error> {
    match settings.device {
        DeviceChoice::Cpu => Ok(DeviceReport {
            device: "cpu",
            reason: "device = \"cpu\"".into(),
        }),
        DeviceChoice::Auto => Ok(DeviceReport {
            device: "cpu",
            reason: gpu_unavailable_reason(settings.device_id),
        }),
        DeviceChoice::Gpu => Err(Error::GpuUnavailable(gpu_unavailable_reason(
            settings.device_id,
        ))),
    }
}

/// Why the GPU path isn't taken: what stops it in every case today (the pipeline's GPU
/// stage is not wired; the kernels and the nvJPEG layer exist), then what the probe found
/// on this machine, so neither reason is mistaken for the other.
fn gpu_unavailable_reason(device_id: usize) -> String {
    let stage = "this build has no GPU stage yet";
    match crate::cuda::probe(device_id) {
        Ok(gpu) => format!(
            "{stage}, though this machine has {} (device {}, sm_{}{})",
            gpu.name, gpu.device_id, gpu.compute_capability.0, gpu.compute_capability.1
        ),
        Err(Error::GpuUnavailable(m)) => format!("{stage}; nor has this machine a usable GPU: {m}"),
        Err(e) => format!("{stage}; nor has this machine a usable GPU: {e}"),
    }
}
