//! The definition of a pipeline, as written in a pipeline file or built from Rust:
//! settings, operators joined by named edges, and the named outputs.
//!
//! A [`PipelineSpec`] is only a description; [`crate::pipeline::graph::Graph::build`]
//! validates it and [`crate::Pipeline`] runs it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::error::Error;
use crate::schema::ArgValue;

/// What to do with a sample that can't be read, decoded or transformed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// Drop the sample, report it, and fill the batch from the next samples.
    #[default]
    Skip,
    /// Stop the run with the first error.
    Fail,
    /// Substitute another sample, chosen deterministically from (seed, epoch, position).
    Replace,
}

impl OnError {
    /// The pipeline-file name.
    pub fn name(self) -> &'static str {
        match self {
            OnError::Skip => "skip",
            OnError::Fail => "fail",
            OnError::Replace => "replace",
        }
    }

    /// Pipeline-file names.
    pub const NAMES: &'static [&'static str] = &["skip", "fail", "replace"];

    /// Parses a pipeline-file name.
    pub fn from_name(s: &str) -> Option<OnError> {
        match s {
            "skip" => Some(OnError::Skip),
            "fail" => Some(OnError::Fail),
            "replace" => Some(OnError::Replace),
            _ => None,
        }
    }
}

/// Which hardware runs the per-sample operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceChoice {
    /// The GPU when one is usable, else the CPU (with a notice saying why).
    #[default]
    Auto,
    /// The CPU path only.
    Cpu,
    /// The GPU path, or an error if it can't be used.
    Gpu,
    /// The GPU path on the emulated device: the kernels compiled for the host, our CPU
    /// decoder in place of nvJPEG. A test device (slow): it runs everything the GPU path
    /// does without a GPU, to check a pipeline or stokehold itself.
    Emu,
}

impl DeviceChoice {
    /// The pipeline-file and command-line name.
    pub fn name(self) -> &'static str {
        match self {
            DeviceChoice::Auto => "auto",
            DeviceChoice::Cpu => "cpu",
            DeviceChoice::Gpu => "gpu",
            DeviceChoice::Emu => "emu",
        }
    }

    /// Pipeline-file and command-line names (`"cuda"` is another name of `"gpu"`, as in
    /// PyTorch).
    pub const NAMES: &'static [&'static str] = &["auto", "cpu", "gpu", "cuda", "emu"];

    /// Parses a name.
    pub fn from_name(s: &str) -> Option<DeviceChoice> {
        match s {
            "auto" => Some(DeviceChoice::Auto),
            "cpu" => Some(DeviceChoice::Cpu),
            "gpu" | "cuda" => Some(DeviceChoice::Gpu),
            "emu" => Some(DeviceChoice::Emu),
            _ => None,
        }
    }
}

/// Where finished batches are handed out (the `batch_memory` setting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BatchMemory {
    /// Where the path makes them: host memory on the CPU path, device memory on the GPU
    /// path.
    #[default]
    Auto,
    /// Device memory on either path: the CPU path uploads each finished batch to the GPU
    /// (`device_id`) itself, asynchronously, and hands it out with its ready event, as the GPU
    /// path does. An error at the start when there is no usable GPU.
    Gpu,
    /// As `Gpu`, on the emulated device (a test device: the upload without a GPU).
    Emu,
    /// Host memory, page-locked (pinned) by the GPU `device_id`, for a consumer that copies
    /// batches to the GPU itself: the CPU path copies each finished batch into a buffer of a
    /// reused pinned pool, so that the consumer's copy (`.cuda(non_blocking=True)`) is a
    /// true asynchronous DMA. `device = "auto"` then takes the CPU path. An error at the
    /// start when there is no usable GPU to pin with.
    Pinned,
    /// As `Pinned`, with the emulated device's pinned memory (a test device).
    EmuPinned,
}

impl BatchMemory {
    /// The pipeline-file and command-line name.
    pub fn name(self) -> &'static str {
        match self {
            BatchMemory::Auto => "auto",
            BatchMemory::Gpu => "gpu",
            BatchMemory::Emu => "emu",
            BatchMemory::Pinned => "pinned",
            BatchMemory::EmuPinned => "emu-pinned",
        }
    }

    /// Pipeline-file and command-line names (`"cuda"` is another name of `"gpu"`).
    pub const NAMES: &'static [&'static str] =
        &["auto", "gpu", "cuda", "emu", "pinned", "emu-pinned"];

    /// True for host batches in pinned memory (`Pinned`, `EmuPinned`).
    pub fn is_pinned(self) -> bool {
        matches!(self, BatchMemory::Pinned | BatchMemory::EmuPinned)
    }

    /// Parses a name.
    pub fn from_name(s: &str) -> Option<BatchMemory> {
        match s {
            "auto" => Some(BatchMemory::Auto),
            "gpu" | "cuda" => Some(BatchMemory::Gpu),
            "emu" => Some(BatchMemory::Emu),
            "pinned" => Some(BatchMemory::Pinned),
            "emu-pinned" => Some(BatchMemory::EmuPinned),
            _ => None,
        }
    }
}

/// What to do with the last, incomplete batch of an epoch (the reader's setting; it lives
/// with the sample schedule).
pub use crate::reader::schedule::LastBatch;

/// Pipeline-wide settings (`[pipeline]` in a file).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Samples per batch.
    pub batch: usize,
    /// Worker threads; `None` means one per core (on the GPU path with JPEG engines half of
    /// them, at least 2 where the cores allow).
    pub threads: Option<usize>,
    /// Batches prepared ahead of the consumer.
    pub prefetch: usize,
    /// Seed of every random choice.
    pub seed: u64,
    /// Epochs to run: 1 unless set (`None`: until stopped).
    pub epochs: Option<u64>,
    /// Bad-sample policy.
    pub on_error: OnError,
    /// Where to run.
    pub device: DeviceChoice,
    /// GPU ordinal for the GPU path (and for the CPU path's uploads).
    pub device_id: usize,
    /// Where finished batches are handed out.
    pub batch_memory: BatchMemory,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            batch: 32,
            threads: None,
            prefetch: 2,
            seed: 0,
            epochs: Some(1),
            on_error: OnError::Skip,
            device: DeviceChoice::Auto,
            device_id: 0,
            batch_memory: BatchMemory::Auto,
        }
    }
}

/// One operator node in a pipeline definition.
#[derive(Debug, Clone, PartialEq)]
pub struct OpSpec {
    /// Operator kind (`decode`, `resize`, ...).
    pub kind: String,
    /// Unique name; defaults to the first output edge's name. Keys the operator's randomness.
    pub name: Option<String>,
    /// Input edge names, in port order.
    pub inputs: Vec<String>,
    /// Output edge names, in port order.
    pub outputs: Vec<String>,
    /// Arguments as given (validated against the schema later).
    pub args: BTreeMap<String, ArgValue>,
}

impl OpSpec {
    /// A new node of `kind` with no edges or arguments.
    pub fn new(kind: &str) -> OpSpec {
        OpSpec {
            kind: kind.to_string(),
            name: None,
            inputs: Vec::new(),
            outputs: Vec::new(),
            args: BTreeMap::new(),
        }
    }

    /// Adds an input edge.
    pub fn input(mut self, edge: &str) -> OpSpec {
        self.inputs.push(edge.to_string());
        self
    }

    /// Adds an output edge.
    pub fn output(mut self, edge: &str) -> OpSpec {
        self.outputs.push(edge.to_string());
        self
    }

    /// Sets an argument.
    pub fn arg(mut self, name: &str, value: impl Into<ArgValue>) -> OpSpec {
        self.args.insert(name.to_string(), value.into());
        self
    }

    /// Names the operator.
    pub fn named(mut self, name: &str) -> OpSpec {
        self.name = Some(name.to_string());
        self
    }

    /// The operator's effective name.
    pub fn effective_name(&self, index: usize) -> String {
        match (&self.name, self.outputs.first()) {
            (Some(n), _) => n.clone(),
            (None, Some(o)) => o.clone(),
            (None, None) => format!("{}#{index}", self.kind),
        }
    }
}

/// A part of a pipeline definition that an error can point at. The pipeline-file loader
/// maps these to line and column; for pipelines built in Rust they are described in words.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SpecPointer {
    /// A setting of `[pipeline]`, by name (`outputs` included).
    Setting(String),
    /// The `i`-th name in `outputs`.
    Output(usize),
    /// An operator as a whole.
    Op(usize),
    /// An operator's `kind`.
    OpKind(usize),
    /// An operator's `name` (where it has none written: the operator).
    OpName(usize),
    /// An argument of an operator (its value).
    OpArg(usize, String),
    /// An argument's name, for what is wrong with the name itself (unknown, given twice).
    OpArgName(usize, String),
    /// The `j`-th input edge of operator `i`.
    OpInput(usize, usize),
    /// The `j`-th output edge of operator `i`.
    OpOutput(usize, usize),
    /// The whole pipeline.
    Whole,
}

impl SpecPointer {
    /// Where an argument error of operator `i` points: the argument's value, or its name
    /// when the name is what is wrong, or the operator when no argument is named.
    pub fn of_arg_error(i: usize, e: &crate::schema::ArgError) -> SpecPointer {
        match &e.arg {
            Some(a) if !a.is_empty() && e.about_name => SpecPointer::OpArgName(i, a.clone()),
            Some(a) if !a.is_empty() => SpecPointer::OpArg(i, a.clone()),
            _ => SpecPointer::Op(i),
        }
    }
}

/// A validation problem, before it is given a location.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecError {
    /// What it is about.
    pub at: SpecPointer,
    /// What is wrong.
    pub message: String,
    /// What to change.
    pub help: Option<String>,
}

impl SpecError {
    /// A problem at `at`.
    pub fn new(at: SpecPointer, message: impl Into<String>) -> SpecError {
        SpecError {
            at,
            message: message.into(),
            help: None,
        }
    }

    /// Adds a suggestion.
    pub fn help(mut self, help: impl Into<String>) -> SpecError {
        self.help = Some(help.into());
        self
    }

    /// The error for a pipeline that doesn't come from a file: which part, in words, and
    /// what is wrong, each said once (an argument named by the message isn't named again).
    pub fn into_invalid(self, spec: &PipelineSpec) -> Error {
        let at = match &self.at {
            SpecPointer::OpArg(i, arg) | SpecPointer::OpArgName(i, arg)
                if self.message.contains(&format!("'{arg}'")) =>
            {
                spec.describe(&SpecPointer::Op(*i))
            }
            at => spec.describe(at),
        };
        Error::Invalid {
            at,
            message: self.message,
            help: self.help,
        }
    }
}

/// A whole pipeline definition.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PipelineSpec {
    /// Settings.
    pub settings: Settings,
    /// Operators, in the order written.
    pub ops: Vec<OpSpec>,
    /// Edge names handed to the consumer, in order.
    pub outputs: Vec<String>,
    /// The file it was read from, if any; relative paths in arguments resolve against its folder.
    pub file: Option<PathBuf>,
}

impl PipelineSpec {
    /// An empty pipeline with the default [`Settings`]: batch 32, 1 epoch, prefetch 2, seed 0,
    /// one worker thread per core, bad samples skipped, device auto.
    pub fn builder() -> PipelineSpec {
        PipelineSpec::default()
    }

    /// Adds an operator.
    pub fn op(mut self, op: OpSpec) -> PipelineSpec {
        self.ops.push(op);
        self
    }

    /// Sets the outputs.
    pub fn outputs<S: AsRef<str>>(mut self, names: &[S]) -> PipelineSpec {
        self.outputs = names.iter().map(|s| s.as_ref().to_string()).collect();
        self
    }

    /// Sets the batch size.
    pub fn batch(mut self, n: usize) -> PipelineSpec {
        self.settings.batch = n;
        self
    }

    /// Sets the seed.
    pub fn seed(mut self, seed: u64) -> PipelineSpec {
        self.settings.seed = seed;
        self
    }

    /// Sets the worker thread count.
    pub fn threads(mut self, n: usize) -> PipelineSpec {
        self.settings.threads = Some(n);
        self
    }

    /// Sets the number of epochs (1 unless set).
    pub fn epochs(mut self, n: u64) -> PipelineSpec {
        self.settings.epochs = Some(n);
        self
    }

    /// Runs epoch after epoch until the pipeline is dropped.
    pub fn forever(mut self) -> PipelineSpec {
        self.settings.epochs = None;
        self
    }

    /// Sets the prefetch depth in batches.
    pub fn prefetch(mut self, n: usize) -> PipelineSpec {
        self.settings.prefetch = n;
        self
    }

    /// Sets the bad-sample policy.
    pub fn on_error(mut self, p: OnError) -> PipelineSpec {
        self.settings.on_error = p;
        self
    }

    /// Sets the device choice.
    pub fn device(mut self, d: DeviceChoice) -> PipelineSpec {
        self.settings.device = d;
        self
    }

    /// Sets where finished batches are handed out.
    pub fn batch_memory(mut self, m: BatchMemory) -> PipelineSpec {
        self.settings.batch_memory = m;
        self
    }

    /// Describes a pointer in words, for pipelines that don't come from a file.
    pub fn describe(&self, at: &SpecPointer) -> String {
        let op = |i: usize| {
            self.ops
                .get(i)
                .map(|o| format!("operator #{} '{}' ({})", i + 1, o.effective_name(i), o.kind))
                .unwrap_or_else(|| format!("operator #{}", i + 1))
        };
        match at {
            SpecPointer::Setting(s) => format!("setting '{s}'"),
            SpecPointer::Output(i) => format!("output #{}", i + 1),
            SpecPointer::Op(i) | SpecPointer::OpKind(i) => op(*i),
            SpecPointer::OpName(i) => format!("{}, its name", op(*i)),
            SpecPointer::OpArg(i, a) | SpecPointer::OpArgName(i, a) => {
                format!("{}, argument '{a}'", op(*i))
            }
            SpecPointer::OpInput(i, j) => format!("{}, input #{}", op(*i), j + 1),
            SpecPointer::OpOutput(i, j) => format!("{}, output #{}", op(*i), j + 1),
            SpecPointer::Whole => "pipeline".to_string(),
        }
    }
}
