//! Choosing the device a pipeline runs on from its settings, and saying why ([`DeviceReport`]).
//!
//! - `cpu`: the CPU path.
//! - `gpu`: the GPU path on device `device_id`, or an error with the real reason: no driver,
//!   no such device, kernels that don't compile, or a pipeline the GPU path can't run (the
//!   operator and why). Without nvJPEG the GPU path still runs, every JPEG decoded on the
//!   CPU (the report says so).
//! - `auto`: the GPU path when all of that holds, else the CPU path, saying which reason
//!   applied.
//! - `emu`: the GPU path on the emulated device (a test device: the same stage, kernels
//!   compiled for the host, our CPU decoder in place of nvJPEG).
//!
//! Then, for the CPU path with `batch_memory = "gpu"` (or `"emu"`), the device its finished
//! batches are uploaded to (`Chosen::upload`), and with `batch_memory = "pinned"` (or
//! `"emu-pinned"`) the device that pins its host batches (`Chosen::pin`; the setting asks for
//! the CPU path's host batches, so `device = "auto"` takes the CPU path and `"gpu"` is
//! refused): opened here, so that a missing GPU is an error at the start naming the setting,
//! not a surprise at the first batch.

use std::sync::Arc;

use crate::cuda::gpu_device::GpuDevice;
use crate::cuda::{EmuDevice, EmuOptions, Kernel, RealDevice};
use crate::decode::Upsampling;
use crate::error::Error;
use crate::pipeline::graph::Graph;
use crate::pipeline::spec::{BatchMemory, DeviceChoice, Settings};

use super::run_settings::RunSettings;

use super::gpu_plan::GpuPlan;
use super::gpu_stage::engine_chunk;

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
    /// "cpu", "gpu" or "emu".
    pub device: &'static str,
    /// Why this path was taken, and on what.
    pub reason: String,
}

impl std::fmt::Display for DeviceReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.device, self.reason)
    }
}

/// The device a pipeline runs on: the report, and for the GPU path the opened device and the
/// pipeline's plan for it.
pub(crate) struct Chosen {
    pub(crate) report: DeviceReport,
    pub(crate) gpu: Option<(Arc<dyn GpuDevice>, Arc<GpuPlan>)>,
    /// On the CPU path with `batch_memory = "gpu"` or `"emu"`: the device finished batches
    /// are uploaded to.
    pub(crate) upload: Option<Arc<dyn GpuDevice>>,
    /// With `batch_memory = "pinned"` or `"emu-pinned"`: the device that pins the CPU path's
    /// host batches.
    pub(crate) pin: Option<Arc<dyn GpuDevice>>,
}

/// Which path pipelines with `settings` run on, and why, judging the device alone (see
/// [`choose_device_for`] to judge a pipeline too); [`Error::GpuUnavailable`] when
/// `device = "gpu"` (or `"emu"`) can't be honoured.
pub fn choose_device(settings: &Settings) -> Result<DeviceReport, Error> {
    let settings = RunSettings::from(settings);
    // Every GPU pipeline launches the chain: compiling it proves the kernels can run.
    let device = || -> Result<Arc<dyn GpuDevice>, Error> {
        open(&settings, Upsampling::Fancy, &[Kernel::Chain])
    };
    choose(&settings, Ok(()), device).map(|c| c.0)
}

/// Which path `graph` runs on, and why: what `stokehold run` does and `stokehold check`
/// says. [`Error::GpuUnavailable`] with the reason when `device = "gpu"` or `"emu"` can't be
/// honoured.
pub fn choose_device_for(graph: &Graph) -> Result<DeviceReport, Error> {
    open_device(graph, &RunSettings::of(graph), None).map(|c| c.report)
}

/// Opens the device `graph` runs on with `settings` (`device`: one to use instead of
/// opening one, for tests: the GPU path's, or with pinned batches the one that pins them),
/// and the device the CPU path uploads its batches to, or pins them with (`batch_memory`).
pub(crate) fn open_device(
    graph: &Graph,
    settings: &RunSettings,
    device: Option<Arc<dyn GpuDevice>>,
) -> Result<Chosen, Error> {
    let memory = settings.batch_memory;
    if memory.is_pinned() {
        let mut chosen = open_path(graph, settings, None)?;
        let dev = open_pin(settings, device)?;
        chosen.report.reason = format!(
            "{}; host batches pinned by {} (batch_memory = \"{}\")",
            chosen.report.reason,
            dev.describe().name,
            memory.name()
        );
        chosen.pin = Some(dev);
        return Ok(chosen);
    }
    let mut chosen = open_path(graph, settings, device)?;
    chosen.upload = open_upload(settings, &chosen)?;
    if let Some(dev) = &chosen.upload {
        chosen.report.reason = format!(
            "{}; batches uploaded to {} (batch_memory = \"{}\")",
            chosen.report.reason,
            dev.describe().name,
            memory.name()
        );
    }
    Ok(chosen)
}

/// The device that pins the CPU path's host batches (`batch_memory = "pinned"`: the GPU
/// `device_id`, opened for host memory only; `"emu-pinned"`: the emulated device; `device`:
/// one given instead, for tests). An error naming the setting, and what to do instead, when
/// there is none.
fn open_pin(
    settings: &RunSettings,
    device: Option<Arc<dyn GpuDevice>>,
) -> Result<Arc<dyn GpuDevice>, Error> {
    let name = settings.batch_memory.name();
    let opened: Result<Arc<dyn GpuDevice>, Error> = match (device, settings.batch_memory) {
        (Some(d), _) => Ok(d),
        (None, BatchMemory::EmuPinned) => match EmuOptions::from_env().and_then(EmuDevice::new) {
            Ok(d) => Ok(d),
            Err(e) => Err(e),
        },
        (None, _) => match RealDevice::for_copies(settings.device_id) {
            Ok(d) => Ok(d),
            Err(e) => Err(e),
        },
    };
    opened.map_err(|e| {
        Error::GpuUnavailable(format!(
            "batch_memory = \"{name}\": the CPU path's batches can't be pinned: no GPU to pin \
             host memory with ({}); leave batch_memory = \"auto\" for batches in ordinary host \
             memory",
            why(&e)
        ))
    })
}

/// The device the CPU path's finished batches are uploaded to: `None` for host batches, and
/// on the GPU path, whose batches are on its device already. An error naming the setting when
/// the device can't be had.
fn open_upload(
    settings: &RunSettings,
    chosen: &Chosen,
) -> Result<Option<Arc<dyn GpuDevice>>, Error> {
    let memory = settings.batch_memory;
    if memory == BatchMemory::Auto || memory.is_pinned() {
        return Ok(None);
    }
    let name = memory.name();
    if let Some((dev, _)) = &chosen.gpu {
        let emulated = dev.describe().emulated;
        if memory == BatchMemory::Emu && !emulated {
            return Err(Error::GpuUnavailable(format!(
                "batch_memory = \"emu\" uploads the CPU path's batches to the emulated device, \
                 but this pipeline runs on the GPU path ({}), whose batches are on the GPU: \
                 use batch_memory = \"gpu\", or device = \"cpu\"",
                chosen.report
            )));
        }
        return Ok(None);
    }
    let dev: Result<Arc<dyn GpuDevice>, Error> = match memory {
        BatchMemory::Emu => match EmuOptions::from_env().and_then(EmuDevice::new) {
            Ok(d) => Ok(d),
            Err(e) => Err(e),
        },
        // The uploads only copy: no kernels, no JPEG decoder.
        _ => match RealDevice::for_copies(settings.device_id) {
            Ok(d) => Ok(d),
            Err(e) => Err(e),
        },
    };
    match dev {
        Ok(d) => Ok(Some(d)),
        Err(e) => Err(Error::GpuUnavailable(format!(
            "batch_memory = \"{name}\": the CPU path's batches can't be uploaded: {}; leave \
             batch_memory = \"auto\" for batches in host memory",
            why(&e)
        ))),
    }
}

/// The path `graph` runs on: [`open_device`] before the uploads.
fn open_path(
    graph: &Graph,
    settings: &RunSettings,
    device: Option<Arc<dyn GpuDevice>>,
) -> Result<Chosen, Error> {
    // Pinned host batches are the CPU path's (`choose` says so, or refuses the GPU path).
    if settings.device == DeviceChoice::Cpu || settings.batch_memory.is_pinned() {
        let (report, _) = choose(settings, Ok(()), || {
            unreachable!("the CPU path opens no device")
        })?;
        return Ok(Chosen {
            report,
            gpu: None,
            upload: None,
            pin: None,
        });
    }
    let plan = GpuPlan::new(graph, settings.batch).map(Arc::new);
    let composes = plan.as_ref().map(|_| ()).map_err(Clone::clone);
    // Without a GPU, that is the reason to give first, then what the GPU path couldn't do.
    if let (Err(reason), None) = (&composes, &device) {
        let name = settings.device.name();
        let real = matches!(settings.device, DeviceChoice::Auto | DeviceChoice::Gpu);
        if let Some(absent) = crate::cuda::probe(settings.device_id)
            .err()
            .filter(|_| real)
        {
            let why = format!(
                "device = \"{name}\": no usable GPU: {}; and the GPU path can't run this \
                 pipeline: {reason}",
                self::why(&absent)
            );
            if settings.device == DeviceChoice::Gpu {
                return Err(Error::GpuUnavailable(why));
            }
            let report = DeviceReport {
                device: "cpu",
                reason: why,
            };
            return Ok(Chosen {
                report,
                gpu: None,
                upload: None,
                pin: None,
            });
        }
    }
    // The device's JPEG decoder repeats chroma or interpolates it as the pipeline asks.
    let upsampling = plan
        .as_ref()
        .map_or(Upsampling::Fancy, |p| p.decode_options().upsampling);
    let kernels = plan.as_ref().map_or(vec![], |p| p.chain_kernels());
    let (report, dev) = choose(settings, composes, || match device {
        Some(d) => Ok(d),
        None => open(settings, upsampling, &kernels),
    })?;
    let gpu = match (dev, plan) {
        (Some(d), Ok(p)) => Some((d, p)),
        _ => None,
    };
    if let Some((d, _)) = gpu.as_ref().filter(|_| upsampling == Upsampling::Nearest) {
        if d.decodes_fancy_chroma() {
            return Err(Error::GpuUnavailable(format!(
                "upsampling = \"nearest\": the device's JPEG decoder ({}) was opened to \
                 interpolate chroma; open it for this pipeline (RealDevice::with_upsampling)",
                d.describe().decoder
            )));
        }
    }
    Ok(Chosen {
        report,
        gpu,
        upload: None,
        pin: None,
    })
}

/// Opens the device `settings` ask for (real or emulated), its JPEG decoder for a pipeline
/// that decodes with `upsampling` (the emulated one repeats chroma unless told to
/// interpolate it, and then only for `"fancy"`) and its kernel modules for a chain that
/// launches `kernels`.
fn open(
    settings: &RunSettings,
    upsampling: Upsampling,
    kernels: &[Kernel],
) -> Result<Arc<dyn GpuDevice>, Error> {
    match settings.device {
        DeviceChoice::Emu => {
            let mut options = EmuOptions::from_env()?;
            options.interpolate &= upsampling == Upsampling::Fancy;
            Ok(EmuDevice::new(options)?)
        }
        // nvJPEG's largest call: a submission larger than it would be split in calls that
        // wait for each other (the staging ring's one slot).
        _ => Ok(RealDevice::with_upsampling(
            settings.device_id,
            settings.batch.max(engine_chunk(settings.batch)),
            upsampling,
            kernels,
        )?),
    }
}

/// The reason of an error opening a device, without the "GPU unavailable" prefix.
fn why(e: &Error) -> String {
    match e {
        Error::GpuUnavailable(m) => m.clone(),
        other => other.to_string(),
    }
}

/// The report, and the opened device for the GPU path.
type Choice = (DeviceReport, Option<Arc<dyn GpuDevice>>);

fn choose(
    settings: &RunSettings,
    composes: Result<(), String>,
    device: impl FnOnce() -> Result<Arc<dyn GpuDevice>, Error>,
) -> Result<Choice, Error> {
    let cpu = |reason: String| {
        (
            DeviceReport {
                device: "cpu",
                reason,
            },
            None,
        )
    };
    let on = |dev: Arc<dyn GpuDevice>, name: &'static str, asked: &str| {
        let d = dev.describe();
        let reason = format!("{asked}: {}; {}", d.name, d.decoder);
        (
            DeviceReport {
                device: name,
                reason,
            },
            Some(dev),
        )
    };
    let memory = settings.batch_memory;
    if memory.is_pinned() {
        // Host batches in pinned memory are the CPU path's.
        let name = memory.name();
        return match settings.device {
            DeviceChoice::Cpu => Ok(cpu("device = \"cpu\"".into())),
            DeviceChoice::Auto => Ok(cpu(format!(
                "device = \"auto\": the CPU path, as batch_memory = \"{name}\" asks for its host \
                 batches"
            ))),
            DeviceChoice::Gpu | DeviceChoice::Emu => Err(Error::GpuUnavailable(format!(
                "batch_memory = \"{name}\" hands out the CPU path's host batches in pinned memory, \
                 but device = \"{}\" runs the GPU path, whose batches are on the GPU: use \
                 device = \"cpu\" with batch_memory = \"{name}\", or leave batch_memory = \"auto\" \
                 for the GPU path's batches",
                settings.device.name()
            ))),
        };
    }
    match settings.device {
        DeviceChoice::Cpu => Ok(cpu("device = \"cpu\"".into())),
        DeviceChoice::Auto => {
            if let Err(reason) = composes {
                return Ok(cpu(format!(
                    "device = \"auto\": the GPU path can't run this pipeline: {reason}"
                )));
            }
            match device() {
                Ok(dev) => Ok(on(dev, "gpu", "device = \"auto\" found a usable GPU")),
                Err(e) => Ok(cpu(format!(
                    "device = \"auto\": no usable GPU: {}",
                    why(&e)
                ))),
            }
        }
        DeviceChoice::Gpu | DeviceChoice::Emu => {
            let name = settings.device.name();
            if let Err(reason) = composes {
                return Err(Error::GpuUnavailable(format!(
                    "device = \"{name}\": the GPU path can't run this pipeline: {reason}"
                )));
            }
            let dev = device().map_err(|e| {
                Error::GpuUnavailable(format!(
                    "device = \"{name}\": {}; use device = \"cpu\", or \"auto\" for the GPU \
                     path only where a GPU is usable",
                    why(&e)
                ))
            })?;
            let label = if settings.device == DeviceChoice::Emu {
                "emu"
            } else {
                "gpu"
            };
            Ok(on(dev, label, &format!("device = \"{name}\"")))
        }
    }
}
