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

/// The device `settings` ask for, or why it can't be had.
pub(super) fn choose(settings: &Settings) -> Result<DeviceReport, Error> {
    match settings.device {
        DeviceChoice::Cpu => Ok(DeviceReport {
            device: "cpu",
            reason: "--device cpu".into(),
        }),
        DeviceChoice::Auto => Ok(DeviceReport {
            device: "cpu",
            reason: format!(
                "{}; the CPU path runs everything",
                gpu_unavailable_reason(settings.device_id)
            ),
        }),
        DeviceChoice::Gpu => Err(Error::GpuUnavailable(gpu_unavailable_reason(
            settings.device_id,
        ))),
    }
}

/// Why the GPU path isn't taken, for `--device auto|gpu`: what the probe found, and that
/// the pipeline's GPU stage is not wired yet (the kernels and nvJPEG layer exist).
fn gpu_unavailable_reason(device_id: usize) -> String {
    match crate::cuda::probe(device_id) {
        Ok(gpu) => format!(
            "found {} (device {}, sm_{}{}), but this build's executor has no GPU stage yet",
            gpu.name, gpu.device_id, gpu.compute_capability.0, gpu.compute_capability.1
        ),
        Err(Error::GpuUnavailable(m)) => m,
        Err(e) => e.to_string(),
    }
}
