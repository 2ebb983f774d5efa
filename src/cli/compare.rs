//! `stokehold compare`: runs a pipeline on two devices and says whether they give the same
//! batches, within the documented tolerance (`crate::pipeline::compare`).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::pipeline::compare::{compare as run_compare, CompareOptions};
use crate::pipeline::DeviceChoice;
use anyhow::{bail, Result};
use clap::Args;

use super::options::{self, RunOpts};
use super::output::outln;

/// Exit status when the devices are further apart than the tolerance.
pub const EXIT_BEYOND_TOLERANCE: u8 = 3;

/// Arguments of `stokehold compare`.
#[derive(Args)]
pub struct CompareArgs {
    /// The pipeline file.
    pipeline: PathBuf,
    #[command(flatten)]
    opts: RunOpts,
    /// The two devices, the reference first (e.g. cpu,gpu).
    #[arg(long, value_name = "A,B", default_value = "cpu,gpu", value_parser = parse_devices)]
    devices: DevicePair,
    /// Compare only the first N batches (at least 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    batches: Option<u64>,
    /// Leave out the comparison of the decoded images (the pipeline up to its decoder).
    #[arg(long)]
    no_decode: bool,
}

/// Two devices.
#[derive(Clone, Copy, Debug)]
pub struct DevicePair([DeviceChoice; 2]);

fn parse_devices(text: &str) -> Result<DevicePair, String> {
    let names: Vec<&str> = text.split(',').map(str::trim).collect();
    let [a, b] = names[..] else {
        return Err(format!("two devices separated by a comma, got '{text}'"));
    };
    let one = |n: &str| {
        DeviceChoice::from_name(n).ok_or_else(|| {
            format!(
                "unknown device '{n}' (devices: {})",
                DeviceChoice::NAMES.join(", ")
            )
        })
    };
    Ok(DevicePair([one(a)?, one(b)?]))
}

/// Compares; exit status 0 within tolerance, [`EXIT_BEYOND_TOLERANCE`] beyond it, 1 when a
/// device can't run the pipeline.
pub fn compare(args: &CompareArgs) -> Result<ExitCode> {
    if args.opts.settings.get("device").is_some() {
        bail!("compare takes --devices A,B, not --device");
    }
    let checked = options::load(&args.pipeline, Some(&args.opts))?;
    let spec = checked.graph.spec.clone();
    // The file's `epochs` is for `run`; compare runs one epoch unless told.
    let epochs = match args.opts.settings.get("epochs") {
        Some(_) => spec.settings.epochs.unwrap_or(1),
        None => 1,
    };
    let options = CompareOptions {
        devices: args.devices.0,
        epochs,
        max_batches: args
            .batches
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        decode: !args.no_decode,
        ..CompareOptions::default()
    };
    let c = match run_compare(&spec, &options) {
        Ok(c) => c,
        // Without a GPU the emulated device runs the same GPU path (kernels, executor),
        // where that path can run the pipeline at all.
        Err(e @ crate::error::Error::GpuUnavailable(_))
            if options.devices.contains(&DeviceChoice::Gpu)
                && crate::cuda::probe(spec.settings.device_id).is_err() =>
        {
            let mut emu = spec.clone();
            emu.settings.device = DeviceChoice::Emu;
            let runs = crate::pipeline::graph::Graph::build(&emu)
                .map_err(|e| crate::error::Error::GpuUnavailable(e.message))
                .and_then(|g| crate::pipeline::run::choose_device_for(&g));
            match runs {
                Ok(_) => bail!(
                    "{e}; without a GPU, --devices cpu,emu compares the CPU path with the GPU \
                     path on the emulated device"
                ),
                // It says why the GPU path can't run the pipeline: nothing to suggest.
                Err(_) => bail!("{e}"),
            }
        }
        Err(e) => return Err(e.into()),
    };
    outln!("compare {}", args.pipeline.display())?;
    outln!("{c}")?;
    Ok(if c.within_tolerance() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_BEYOND_TOLERANCE)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_are_two_known_names() {
        let p = parse_devices("cpu, gpu").unwrap();
        assert_eq!(p.0, [DeviceChoice::Cpu, DeviceChoice::Gpu]);
        assert!(parse_devices("cpu").unwrap_err().contains("two devices"));
        assert!(parse_devices("cpu,gpu,auto").is_err());
        let e = parse_devices("cpu,tpu").unwrap_err();
        assert!(
            e.contains("unknown device 'tpu'") && e.contains("cpu"),
            "{e}"
        );
    }
}
