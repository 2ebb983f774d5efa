//! One error type for the library, by cause. Every per-sample error carries the file path.

use std::path::PathBuf;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in stokehold.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An I/O error not tied to one sample (listing a folder, reading a list file, a pipeline file).
    #[error("{path}: {source}")]
    Io {
        /// The file or folder involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A pipeline file is invalid: where, what, and what to change.
    #[error("{file}:{line}:{column}: {message}{}", help_suffix(.help))]
    Config {
        /// The pipeline file.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
        /// What to change, when there is something to suggest.
        help: Option<String>,
    },
    /// A pipeline built from Rust is invalid.
    #[error("invalid pipeline: {at}: {message}{}", help_suffix(.help))]
    Invalid {
        /// Which part of the pipeline (operator, argument, setting).
        at: String,
        /// What is wrong.
        message: String,
        /// What to change.
        help: Option<String>,
    },
    /// A dataset could not be listed or is unusable (empty, too small for the batch).
    #[error("dataset: {0}")]
    Dataset(String),
    /// A run's position to resume from could not be read.
    #[error(transparent)]
    Position(#[from] crate::reader::schedule::PositionError),
    /// One sample failed (read, decode, or an operator); with `on_error = "fail"` this stops the run.
    #[error(transparent)]
    Sample(#[from] SampleError),
    /// A worker thread panicked; this is a bug in stokehold or an operator.
    #[error("worker panicked while processing {path}: {message}")]
    WorkerPanic {
        /// The sample being processed.
        path: PathBuf,
        /// The panic payload, when it was a string.
        message: String,
    },
    /// The operating system refused a pipeline thread (too many threads, or too little
    /// memory for their stacks).
    #[error("could not start the pipeline's thread {name}: {source}; ask for fewer threads (the setting `threads`)")]
    ThreadStart {
        /// The thread's name.
        name: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The GPU path was asked for and can't be used.
    #[error("GPU unavailable: {0}")]
    GpuUnavailable(String),
    /// A shared library loaded at run time (nvJPEG, CUDA) could not be found.
    #[error("{name} not found (tried: {})", tried.join(", "))]
    LibraryNotFound {
        /// The library looked for.
        name: String,
        /// Every file name or path tried.
        tried: Vec<String>,
    },
    /// nvJPEG failed (the message names the call and the `NVJPEG_STATUS_*` code).
    #[error("nvJPEG: {0}")]
    Nvjpeg(String),
    /// A CUDA driver, NVRTC or kernel error on the GPU path (what was being done, and why).
    #[error("CUDA: {0}")]
    Cuda(String),
    /// The batches the settings ask for need more memory than is available: the figures,
    /// checked before the pipeline starts, and what to lower.
    #[error(
        "batches need {} ({samples} samples per batch x {} per sample x {buffers} batch buffers in flight), but only {} is available\n  help: {help}",
        human_bytes(*needed),
        human_bytes(*per_sample),
        human_bytes(*available)
    )]
    BatchMemory {
        /// Bytes the batch buffers need at most.
        needed: u64,
        /// Bytes available to this process (Linux: `MemAvailable`, or the cgroup's limit
        /// when lower).
        available: u64,
        /// Samples a batch buffer holds.
        samples: usize,
        /// Bytes per sample over the pipeline's outputs.
        per_sample: u64,
        /// Batch buffers that can be in flight at once.
        buffers: usize,
        /// What to lower.
        help: String,
    },
    /// Device memory ran out (the process goes on; the run stops): what needed it, with the
    /// batch size, and the bytes asked for.
    #[error("device out of memory: could not allocate {} for {what} ({detail})", human_bytes(*bytes))]
    DeviceOutOfMemory {
        /// What was being allocated (e.g. "the decoded images of a batch of 64 samples").
        what: String,
        /// Bytes asked for.
        bytes: u64,
        /// What the device said.
        detail: String,
    },
    /// Memory for a batch could not be allocated (the process goes on; the run stops).
    #[error("out of memory: could not allocate {} for {what}", human_bytes(*bytes))]
    Allocation {
        /// What was being allocated.
        what: &'static str,
        /// How many bytes.
        bytes: u64,
    },
}

/// A byte count for people: `1.5 GB`, `602.1 kB`.
fn human_bytes(n: u64) -> String {
    let n = n as f64;
    match n {
        n if n >= 1e9 => format!("{:.1} GB", n / 1e9),
        n if n >= 1e6 => format!("{:.1} MB", n / 1e6),
        n if n >= 1e3 => format!("{:.1} kB", n / 1e3),
        n => format!("{n} bytes"),
    }
}

fn help_suffix(help: &Option<String>) -> String {
    match help {
        Some(h) => format!("\n  help: {h}"),
        None => String::new(),
    }
}

/// Why one sample could not be delivered.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}: {kind}", path.display())]
pub struct SampleError {
    /// The file the sample came from.
    pub path: PathBuf,
    /// Index of the sample in the dataset.
    pub index: usize,
    /// The cause.
    pub kind: SampleErrorKind,
}

/// The cause of a [`SampleError`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SampleErrorKind {
    /// The file could not be read.
    #[error("read failed: {0}")]
    Read(String),
    /// A sample a shard's count promised is not in it (the shard ends or is cut short
    /// before it, or could not be opened): every later sample of that shard is missing for
    /// the same reason. Counted as a read failure.
    #[error("read failed: sample missing: {why}")]
    Missing {
        /// The shard, as its samples' paths name it.
        shard: String,
        /// Why its samples are missing.
        why: String,
    },
    /// The bytes are not a decodable image.
    #[error("decode failed: {0}")]
    Decode(#[from] DecodeError),
    /// An operator rejected the sample.
    #[error("operator '{op}' failed: {message}")]
    Op {
        /// The operator's name in the pipeline.
        op: String,
        /// What went wrong.
        message: String,
    },
    /// An operator can't run with the pipeline's settings: every sample would fail the same
    /// way whatever its file, so this is no bad sample (a pipeline stops on it).
    #[error("operator '{op}' can't run with its settings: {message}")]
    Settings {
        /// The operator's name in the pipeline.
        op: String,
        /// What is wrong with its settings.
        message: String,
    },
}

impl SampleErrorKind {
    /// Every [`SampleErrorKind::category`], numbered by [`SampleErrorKind::category_index`].
    pub const CATEGORIES: [&'static str; 8] = [
        "read",
        "decode:unsupported",
        "decode:limits",
        "decode:unknown-format",
        "decode:corrupt",
        "decode:window",
        "operator",
        "settings",
    ];

    /// A short, stable label for statistics ("read", "decode:unsupported", ...).
    pub fn category(&self) -> &'static str {
        Self::CATEGORIES[self.category_index()]
    }

    /// The category's place in [`SampleErrorKind::CATEGORIES`] (counters keep an array).
    pub fn category_index(&self) -> usize {
        match self {
            SampleErrorKind::Read(_) | SampleErrorKind::Missing { .. } => 0,
            SampleErrorKind::Decode(d) => match d {
                DecodeError::Unsupported(_) => 1,
                DecodeError::Limits(_) => 2,
                DecodeError::UnknownFormat => 3,
                DecodeError::Corrupt(_) => 4,
                DecodeError::Window(_) => 5,
            },
            SampleErrorKind::Op { .. } => 6,
            SampleErrorKind::Settings { .. } => 7,
        }
    }

    /// True when the cause lies in the pipeline's settings, not in the sample's file.
    pub fn is_settings(&self) -> bool {
        matches!(self, SampleErrorKind::Settings { .. })
    }
}

/// Why bytes could not be decoded into an image.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Neither JPEG nor PNG (checked from the first bytes, not the file name).
    #[error("not a JPEG or PNG file")]
    UnknownFormat,
    /// A valid file using a feature we don't decode (arithmetic coding, 12-bit, ...).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A limit (pixels, file size) would be exceeded; checked before allocating.
    #[error("limit exceeded: {0}")]
    Limits(String),
    /// The data is damaged.
    #[error("corrupt data: {0}")]
    Corrupt(String),
    /// A window asked of [`crate::decode::decode_window`] is empty or outside the image.
    #[error("invalid window: {0}")]
    Window(String),
}
