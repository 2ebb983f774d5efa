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
}

impl SampleErrorKind {
    /// A short, stable label for statistics ("read", "decode:unsupported", ...).
    pub fn category(&self) -> &'static str {
        match self {
            SampleErrorKind::Read(_) => "read",
            SampleErrorKind::Decode(d) => match d {
                DecodeError::Unsupported(_) => "decode:unsupported",
                DecodeError::Limits(_) => "decode:limits",
                DecodeError::UnknownFormat => "decode:unknown-format",
                DecodeError::Corrupt(_) => "decode:corrupt",
                DecodeError::Window(_) => "decode:window",
            },
            SampleErrorKind::Op { .. } => "operator",
        }
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
