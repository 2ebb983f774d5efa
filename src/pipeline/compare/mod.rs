//! Running one pipeline on two devices and saying how far apart they are: per output, the
//! largest and mean absolute difference; per sample, the PSNR of the decoded images; whether
//! every sample got the same random parameters (`stokehold compare`).
//!
//! # Tolerance
//!
//! Two devices that decode alike must agree to rounding: decoded images within ±1 per u8
//! value, u8 outputs within ±1, float outputs within 1e-3 (after normalize), labels equal.
//! The CPU path and the emulated GPU device do not quite decode alike: the emulation decodes
//! as the JPEG engines do (chroma repeated over each block) and the GPU stage rebuilds
//! libjpeg's interpolated chroma, exactly except in blocks where every pixel has a channel
//! clamped to 0 or 255; there each sample's decoded image and image outputs must be within
//! 48 dB PSNR of the other's (the worst seen: 61 dB on imagenet-400, 50 dB on the built-in
//! sample set's saturated synthetic images). When exactly one of them
//! decodes with nvJPEG (a real GPU: its IDCT is not the CPU's), 40 dB (the peak being 255
//! for u8 and the first device's range of values for floats); labels still equal. Always:
//! the same samples in the same order, the same samples skipped, and the same random
//! parameters for every sample. With `upsampling = "nearest"` there is nothing to rebuild:
//! the emulated device and the CPU path decode alike.
//!
//! ```
//! use stokehold::pipeline::compare::{compare, CompareOptions};
//! use stokehold::pipeline::{file, DeviceChoice};
//!
//! let data = stokehold::builtin_data::ensure(&stokehold::builtin_data::default_dir())?;
//! let mut spec = file::load("pipelines/resnet50-eval.toml".as_ref())?.spec;
//! spec.set_data(&data);
//! let options = CompareOptions {
//!     devices: [DeviceChoice::Cpu, DeviceChoice::Cpu],
//!     max_batches: Some(1),
//!     ..CompareOptions::default()
//! };
//! let c = compare(&spec, &options)?;
//! assert!(c.within_tolerance(), "{c}");
//! # Ok::<(), stokehold::Error>(())
//! ```

mod diff;

use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;

pub use diff::{median, psnr, OutputDiff};

use super::batch::{Batch, BatchOutput};
use super::graph::Graph;
use super::run::{DeviceReport, Pipeline};
use super::spec::{DeviceChoice, PipelineSpec};
use crate::decode::Upsampling;
use crate::error::Error;
use crate::image::DType;
use crate::ops::decode::Decode;

/// The documented tolerance (module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    /// Largest difference of u8 values (decoded images and u8 outputs) between devices
    /// that decode alike.
    pub u8_max_abs: f64,
    /// Largest difference of float outputs between devices that decode alike.
    pub float_max_abs: f64,
    /// Smallest per-sample PSNR (dB) when one device decodes with nvJPEG.
    pub min_psnr: f64,
    /// Smallest per-sample PSNR (dB) between the CPU path and the emulated device (chroma
    /// rebuilt from repeated samples).
    pub rebuilt_min_psnr: f64,
}

impl Default for Tolerance {
    fn default() -> Self {
        Tolerance {
            u8_max_abs: 1.0,
            float_max_abs: 1e-3,
            min_psnr: 40.0,
            rebuilt_min_psnr: 48.0,
        }
    }
}

/// How a device decodes JPEGs, for the tolerance (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoder {
    /// libjpeg-turbo on the CPU (the reference).
    Cpu,
    /// libjpeg-turbo as the JPEG engines decode (chroma repeated), the interpolation
    /// rebuilt by the GPU stage: the emulated device.
    Rebuilt,
    /// nvJPEG on a real GPU.
    Nvjpeg,
}

/// What to compare.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompareOptions {
    /// The two devices (the first is the reference).
    pub devices: [DeviceChoice; 2],
    /// Epochs run on both devices (1: the GPU path's pools settle after the first, so two
    /// compare the settled path too).
    pub epochs: u64,
    /// Compare at most this many batches (of the epochs run); `None`: all.
    pub max_batches: Option<usize>,
    /// Also run the pipeline up to its decoder on both devices and compare the decoded
    /// images sample by sample.
    pub decode: bool,
    /// The tolerance.
    pub tolerance: Tolerance,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            devices: [DeviceChoice::Cpu, DeviceChoice::Gpu],
            epochs: 1,
            max_batches: None,
            decode: true,
            tolerance: Tolerance::default(),
        }
    }
}

/// What a comparison found.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// Which path each device ran, and why.
    pub devices: [DeviceReport; 2],
    /// Batches compared.
    pub batches: usize,
    /// Samples compared.
    pub samples: usize,
    /// One per pipeline output, in order.
    pub outputs: Vec<OutputDiff>,
    /// The decoded images (the pipeline up to its decoder), when compared.
    pub decode: Option<OutputDiff>,
    /// Samples whose random parameters differ (their files).
    pub params_differ: Vec<PathBuf>,
    /// Batch places holding different samples (or missing on one side).
    pub order_differs: usize,
    /// Files skipped as bad on each device.
    pub skipped: [BTreeSet<PathBuf>; 2],
    /// One device delivered more batches than the other.
    pub batch_count_differs: bool,
    /// How each device decodes.
    pub decoders: [Decoder; 2],
    /// The tolerance applied.
    pub tolerance: Tolerance,
    /// Why some outputs differ between the devices on purpose, where they do: an opt-in
    /// approximation on one path only (the CPU path's `dct_downscale`).
    pub notes: Vec<String>,
}

impl Comparison {
    /// An empty comparison of `devices` for outputs `names`.
    pub fn new(devices: [DeviceReport; 2], names: &[String], tolerance: Tolerance) -> Comparison {
        let decoder = |d: &DeviceReport| match d.device {
            "gpu" => Decoder::Nvjpeg,
            "emu" => Decoder::Rebuilt,
            _ => Decoder::Cpu,
        };
        Comparison {
            decoders: [decoder(&devices[0]), decoder(&devices[1])],
            devices,
            batches: 0,
            samples: 0,
            outputs: names.iter().map(|n| OutputDiff::new(n)).collect(),
            decode: None,
            params_differ: Vec::new(),
            order_differs: 0,
            skipped: [BTreeSet::new(), BTreeSet::new()],
            batch_count_differs: false,
            tolerance,
            notes: Vec::new(),
        }
    }

    /// Adds a batch of each device (the same batch of the run).
    pub fn add_batch(&mut self, a: &Batch, b: &Batch) {
        self.batches += 1;
        self.samples += a.samples.len().min(b.samples.len());
        self.order_differs += a.samples.len().abs_diff(b.samples.len());
        for (x, y) in a.samples.iter().zip(&b.samples) {
            if x.index != y.index {
                self.order_differs += 1;
            } else if x.params != y.params {
                self.params_differ.push(x.path.to_path_buf());
            }
        }
        for (set, batch) in self.skipped.iter_mut().zip([a, b]) {
            let bad = batch.skipped.iter().chain(&batch.replaced);
            set.extend(bad.map(|e| e.path.clone()));
        }
        for (k, out) in self.outputs.iter_mut().enumerate() {
            match (a.outputs.get(k), b.outputs.get(k)) {
                (Some(x), Some(y)) => out.add(x, y),
                _ => out.shape_mismatches += a.len().max(b.len()),
            }
        }
    }

    /// Adds a batch of decoded images of each device.
    pub fn add_decoded(&mut self, a: &Batch, b: &Batch) {
        let d = self
            .decode
            .get_or_insert_with(|| OutputDiff::new("decoded"));
        match (a.outputs.first(), b.outputs.first()) {
            (Some(x), Some(y)) => d.add(x, y),
            _ => d.shape_mismatches += a.len().max(b.len()),
        }
    }

    /// The tolerance an output is held to, in words, and whether it is met.
    pub fn verdict(&self, d: &OutputDiff) -> (String, bool) {
        let t = &self.tolerance;
        let shapes = d.shape_mismatches == 0;
        match d.dtype {
            None => ("equal".into(), shapes && d.max_abs == 0.0),
            Some(_)
                if self.decoders.contains(&Decoder::Nvjpeg)
                    && self.decoders[0] != self.decoders[1] =>
            {
                (
                    format!("PSNR >= {} dB", t.min_psnr),
                    shapes && d.min_psnr() >= t.min_psnr,
                )
            }
            Some(_) if self.decoders[0] != self.decoders[1] => (
                format!("PSNR >= {} dB", t.rebuilt_min_psnr),
                shapes && d.min_psnr() >= t.rebuilt_min_psnr,
            ),
            Some(DType::U8) => (
                format!("max abs <= {}", t.u8_max_abs),
                shapes && d.max_abs <= t.u8_max_abs,
            ),
            Some(_) => (
                format!("max abs <= {}", t.float_max_abs),
                shapes && d.max_abs <= t.float_max_abs,
            ),
        }
    }

    /// Every way the two devices are further apart than the tolerance, in words.
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        for d in self.outputs.iter().chain(&self.decode) {
            let (rule, ok) = self.verdict(d);
            if !ok {
                p.push(format!(
                    "'{}': max abs {}, min PSNR {} (tolerance: {rule}){}",
                    d.name,
                    number(d.max_abs),
                    db(d.min_psnr()),
                    if d.shape_mismatches > 0 {
                        format!("; {} samples differ in shape", d.shape_mismatches)
                    } else {
                        String::new()
                    }
                ));
            }
        }
        if !self.params_differ.is_empty() {
            p.push(format!(
                "random parameters differ for {} samples (first: {})",
                self.params_differ.len(),
                self.params_differ[0].display()
            ));
        }
        if self.order_differs > 0 {
            p.push(format!(
                "{} batch places hold different samples",
                self.order_differs
            ));
        }
        if self.skipped[0] != self.skipped[1] {
            let only: Vec<_> = self.skipped[0]
                .symmetric_difference(&self.skipped[1])
                .collect();
            p.push(format!(
                "different samples skipped ({} on one device only, first: {})",
                only.len(),
                only[0].display()
            ));
        }
        if self.batch_count_differs {
            p.push("the devices delivered different numbers of batches".into());
        }
        if self.samples == 0 {
            p.push("no sample was compared".into());
        }
        p
    }

    /// Whether the devices agree within the tolerance.
    pub fn within_tolerance(&self) -> bool {
        self.problems().is_empty()
    }
}

fn number(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v >= 0.01 {
        format!("{v:.3}")
    } else {
        format!("{v:.2e}")
    }
}

fn db(v: f64) -> String {
    if v.is_infinite() {
        "inf".into()
    } else {
        format!("{v:.2}")
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b] = &self.devices;
        writeln!(f, "devices: {a} | {b}")?;
        writeln!(
            f,
            "compared {} samples in {} batch{}; skipped {} | {}",
            self.samples,
            self.batches,
            if self.batches == 1 { "" } else { "es" },
            self.skipped[0].len(),
            self.skipped[1].len()
        )?;
        writeln!(
            f,
            "{:<12} {:<5} {:>10} {:>10} {:>9} {:>9}  {:<16} result",
            "output", "type", "max abs", "mean abs", "min dB", "median dB", "tolerance"
        )?;
        for d in self.outputs.iter().chain(&self.decode) {
            let (rule, ok) = self.verdict(d);
            let (kind, min, med) = match d.dtype {
                Some(t) => (t.name(), db(d.min_psnr()), db(d.median_psnr())),
                None => ("label", "-".into(), "-".into()),
            };
            writeln!(
                f,
                "{:<12} {:<5} {:>10} {:>10} {:>9} {:>9}  {:<16} {}",
                d.name,
                kind,
                number(d.max_abs),
                number(d.mean_abs()),
                min,
                med,
                rule,
                if ok { "ok" } else { "FAIL" }
            )?;
        }
        writeln!(
            f,
            "random parameters: {} of {} samples identical  {}",
            self.samples - self.params_differ.len(),
            self.samples,
            if self.params_differ.is_empty() {
                "ok"
            } else {
                "FAIL"
            }
        )?;
        for note in &self.notes {
            writeln!(f, "note: {note}")?;
        }
        let problems = self.problems();
        if problems.is_empty() {
            write!(f, "within tolerance")
        } else {
            for p in &problems {
                writeln!(f, "FAIL: {p}")?;
            }
            write!(f, "beyond tolerance: {} problem(s)", problems.len())
        }
    }
}

/// Whether `spec`'s decoder repeats chroma (`upsampling = "nearest"`), as the `decode`
/// operator reads its arguments.
fn repeats_chroma(spec: &PipelineSpec) -> bool {
    Graph::build_unfused(spec).is_ok_and(|g| {
        g.nodes
            .iter()
            .filter(|n| n.kind == "decode")
            .any(|n| Decode::from_args(&n.args).options().upsampling == Upsampling::Nearest)
    })
}

/// What differs on purpose between the devices' outputs: where exactly one of them runs the
/// CPU path, each approximation its fused operators opt into ([`crate::fusion`]), which the
/// GPU path (running the operators one by one) does not make.
fn on_purpose(spec: &PipelineSpec, devices: &[DeviceReport; 2]) -> Vec<String> {
    if (devices[0].device == "cpu") == (devices[1].device == "cpu") {
        return Vec::new();
    }
    let Ok(graph) = Graph::build(spec) else {
        return Vec::new();
    };
    graph
        .nodes
        .iter()
        .filter_map(|n| {
            let what = n.fusion_differs()?;
            let parts: Vec<String> = n
                .parts()
                .iter()
                .map(|p| format!("{} '{}'", p.kind, p.name))
                .collect();
            Some(format!(
                "on the CPU path, {} fused: {what}; the GPU path decodes at full size, so the \
                 outputs after them differ from the other device's on purpose (set it off to \
                 compare the paths' exact pixels)",
                parts.join(" and ")
            ))
        })
        .collect()
}

/// The part of `spec` up to its (first) decoder: that operator and those it depends on,
/// every edge they produce and don't consume as an output, the decoder's first; `None`
/// when the pipeline has no `decode` operator.
pub fn decode_only(spec: &PipelineSpec) -> Option<PipelineSpec> {
    let d = spec.ops.iter().position(|op| op.kind == "decode")?;
    let mut keep = vec![false; spec.ops.len()];
    let mut todo = vec![d];
    while let Some(i) = todo.pop() {
        if std::mem::replace(&mut keep[i], true) {
            continue;
        }
        for input in &spec.ops[i].inputs {
            if let Some(p) = spec.ops.iter().position(|op| op.outputs.contains(input)) {
                todo.push(p);
            }
        }
    }
    let ops: Vec<_> = spec
        .ops
        .iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|(op, _)| op.clone())
        .collect();
    let consumed: BTreeSet<&String> = ops.iter().flat_map(|op| &op.inputs).collect();
    let first = spec.ops[d].outputs.first()?.clone();
    let mut outputs = vec![first.clone()];
    outputs.extend(
        ops.iter()
            .flat_map(|op| &op.outputs)
            .filter(|e| **e != first && !consumed.contains(e))
            .cloned(),
    );
    Some(PipelineSpec {
        ops,
        outputs,
        ..spec.clone()
    })
}

/// Runs `spec` (`options.epochs` epochs) on both devices of `options` and compares them
/// batch by batch; with `options.decode`, also the pipeline up to its decoder
/// ([`decode_only`]).
pub fn compare(spec: &PipelineSpec, options: &CompareOptions) -> Result<Comparison, Error> {
    let start = |spec: &PipelineSpec, device: DeviceChoice| {
        let mut s = spec.clone();
        s.settings.device = device;
        s.settings.epochs = Some(options.epochs.max(1));
        Pipeline::new(s)
    };
    let [da, db] = options.devices;
    let (mut a, mut b) = (start(spec, da)?, start(spec, db)?);
    let mut c = Comparison::new(
        [a.device().clone(), b.device().clone()],
        &spec.outputs,
        options.tolerance,
    );
    c.notes = on_purpose(spec, &c.devices);
    if repeats_chroma(spec) {
        // The emulated device's repeated chroma is then the pipeline's output, as the CPU's.
        c.decoders = c.decoders.map(|d| match d {
            Decoder::Rebuilt => Decoder::Cpu,
            other => other,
        });
    }
    c.batch_count_differs = lockstep(&mut a, &mut b, options.max_batches, |x, y| {
        c.add_batch(x, y)
    })?;
    drop((a, b));
    if options.decode {
        if let Some(ds) = decode_only(spec) {
            let (mut a, mut b) = (start(&ds, da)?, start(&ds, db)?);
            let uneven = lockstep(&mut a, &mut b, options.max_batches, |x, y| {
                c.add_decoded(x, y)
            })?;
            c.batch_count_differs |= uneven;
        }
    }
    Ok(c)
}

/// Takes batches from both pipelines together (at most `max`) and hands each pair to `f`;
/// returns whether one ended before the other. The first error of either ends it.
fn lockstep(
    a: &mut Pipeline,
    b: &mut Pipeline,
    max: Option<usize>,
    mut f: impl FnMut(&Batch, &Batch),
) -> Result<bool, Error> {
    let mut n = 0;
    while max.is_none_or(|m| n < m) {
        match (a.next_batch(), b.next_batch()) {
            (None, None) => return Ok(false),
            (Some(Err(e)), _) | (_, Some(Err(e))) => return Err(e),
            (Some(Ok(x)), Some(Ok(y))) => f(&on_host(x)?, &on_host(y)?),
            _ => return Ok(true),
        }
        n += 1;
    }
    Ok(false)
}

/// `b` with its device-resident (and pinned) outputs copied to ordinary host memory, where
/// they are compared.
fn on_host(mut b: Batch) -> Result<Batch, Error> {
    for o in &mut b.outputs {
        match o {
            BatchOutput::Device(t) => *o = BatchOutput::Images(t.to_host()?),
            BatchOutput::Pinned(t) => *o = BatchOutput::Images(t.to_host()),
            BatchOutput::Images(_) | BatchOutput::Labels(_) => {}
        }
    }
    Ok(b)
}

#[cfg(test)]
mod tests;
