//! nvJPEG calls that return `Result`: opening the library at run time, naming status codes,
//! and one thin `unsafe fn` per C function, grouped by topic (as cudarc's `result` layer).
//!
//! Nothing here panics. A library that can't be opened is
//! [`NvjpegError::LibraryNotFound`] (with every name tried), a symbol an older library lacks
//! is [`NvjpegError::MissingSymbol`] at the call that needs it, and a failed call is
//! [`NvjpegError::Status`] naming the function and the `NVJPEG_STATUS_*` code.
//!
//! The functions are `unsafe` because they take raw handles and pointers: each states what
//! the caller must guarantee. [`super::safe`] wraps them in owned types.

use std::ffi::{c_int, c_uint, c_void};
use std::mem::ManuallyDrop;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::fallback::FallbackReason;
use super::sys;

/// Everything that can go wrong in the nvJPEG layer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NvjpegError {
    /// No candidate library could be opened.
    #[error("{name} not found (tried: {})", tried.join(", "))]
    LibraryNotFound {
        /// The library looked for.
        name: String,
        /// Every candidate, with the loader's message for explicit paths.
        tried: Vec<String>,
    },
    /// The library was opened but lacks a function (an older nvJPEG).
    #[error("the loaded nvJPEG has no symbol {symbol}")]
    MissingSymbol {
        /// The C function.
        symbol: &'static str,
    },
    /// A call returned a status other than `NVJPEG_STATUS_SUCCESS`.
    #[error("{call} failed: {} ({code})", status_name(*.code))]
    Status {
        /// The C function.
        call: &'static str,
        /// The raw `nvjpegStatus_t`.
        code: u32,
    },
    /// An argument was rejected before calling nvJPEG (buffer too small, batch too large, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The image is not for nvJPEG; decode it on the CPU.
    #[error("not decoded on the GPU: {0}")]
    CpuFallback(FallbackReason),
    /// A CUDA call around the decode failed (an event, an allocation, the wait for a batch).
    /// `fatal` when the CUDA context is lost (a sticky error: every later call on it fails
    /// too), which ends the pipeline rather than costing a sample.
    #[error("{what}: CUDA error {code}{}", if *.fatal { " (the CUDA context is lost)" } else { "" })]
    Cuda {
        /// What was being done.
        what: String,
        /// The raw `CUresult`.
        code: u32,
        /// Whether the context is lost for good.
        fatal: bool,
    },
}

impl NvjpegError {
    /// The status code, when this is a failed call.
    pub fn status(&self) -> Option<u32> {
        match self {
            NvjpegError::Status { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether the error ends the pipeline (a lost CUDA context) rather than one sample.
    pub fn is_fatal(&self) -> bool {
        matches!(self, NvjpegError::Cuda { fatal: true, .. })
    }

    /// A CUDA error code from `what`, fatal when the code is one the CUDA documentation calls
    /// sticky (the context is unusable afterwards) or says the device is gone.
    pub fn cuda(what: impl Into<String>, code: u32) -> NvjpegError {
        NvjpegError::Cuda {
            what: what.into(),
            code,
            fatal: cuda_error_is_fatal(code),
        }
    }
}

/// Whether CUDA error `code` (a `CUresult`) leaves the context unusable: the sticky kernel
/// faults (illegal address or instruction, misaligned or invalid address space, invalid PC,
/// hardware stack error, assert, launch failure or timeout), an uncorrectable ECC error, a
/// destroyed or deinitialised context, a missing device, or an unknown error.
pub fn cuda_error_is_fatal(code: u32) -> bool {
    matches!(
        code,
        3 | 4 | 100 | 101 | 214 | 700 | 702 | 709 | 710 | 714 | 715 | 716 | 717 | 718 | 719 | 999
    )
}

/// The name of an `nvjpegStatus_t` value (`"NVJPEG_STATUS_BAD_JPEG"`), or
/// `"NVJPEG_STATUS_UNKNOWN"` for a value this header version doesn't know.
pub fn status_name(code: u32) -> &'static str {
    match code {
        sys::NVJPEG_STATUS_SUCCESS => "NVJPEG_STATUS_SUCCESS",
        sys::NVJPEG_STATUS_NOT_INITIALIZED => "NVJPEG_STATUS_NOT_INITIALIZED",
        sys::NVJPEG_STATUS_INVALID_PARAMETER => "NVJPEG_STATUS_INVALID_PARAMETER",
        sys::NVJPEG_STATUS_BAD_JPEG => "NVJPEG_STATUS_BAD_JPEG",
        sys::NVJPEG_STATUS_JPEG_NOT_SUPPORTED => "NVJPEG_STATUS_JPEG_NOT_SUPPORTED",
        sys::NVJPEG_STATUS_ALLOCATOR_FAILURE => "NVJPEG_STATUS_ALLOCATOR_FAILURE",
        sys::NVJPEG_STATUS_EXECUTION_FAILED => "NVJPEG_STATUS_EXECUTION_FAILED",
        sys::NVJPEG_STATUS_ARCH_MISMATCH => "NVJPEG_STATUS_ARCH_MISMATCH",
        sys::NVJPEG_STATUS_INTERNAL_ERROR => "NVJPEG_STATUS_INTERNAL_ERROR",
        sys::NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED => {
            "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED"
        }
        sys::NVJPEG_STATUS_INCOMPLETE_BITSTREAM => "NVJPEG_STATUS_INCOMPLETE_BITSTREAM",
        _ => "NVJPEG_STATUS_UNKNOWN",
    }
}

/// `Ok(())` for `NVJPEG_STATUS_SUCCESS`, else [`NvjpegError::Status`].
pub fn check(call: &'static str, status: sys::nvjpegStatus_t) -> Result<(), NvjpegError> {
    if status == sys::NVJPEG_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(NvjpegError::Status { call, code: status })
    }
}

/// An opened libnvjpeg: the bindgen function table, where it came from, and its version.
///
/// A library once opened is never closed (the table is kept in a `ManuallyDrop`): CUDA
/// libraries register exit handlers, and unloading one while the process still runs (the last
/// decoder of a pipeline dropped) is known to crash at exit. [`Nvjpeg::shared`] opens it once
/// per process.
pub struct Nvjpeg {
    lib: ManuallyDrop<sys::NvjpegLib>,
    path: String,
    version: Option<(i32, i32, i32)>,
}

/// The library [`Nvjpeg::shared`] opened (kept for the whole process).
static SHARED: Mutex<Option<Arc<Nvjpeg>>> = Mutex::new(None);

impl std::fmt::Debug for Nvjpeg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nvjpeg").field("path", &self.path).finish()
    }
}

/// Calls one function of the table: a missing symbol and a non-success status are errors.
macro_rules! call {
    ($lib:expr, $name:ident ( $($arg:expr),* $(,)? )) => {{
        let f = $lib
            .lib
            .$name
            .as_ref()
            .map_err(|_| NvjpegError::MissingSymbol { symbol: stringify!($name) })?;
        check(stringify!($name), (*f)($($arg),*))
    }};
}

impl Nvjpeg {
    /// The process's nvJPEG: opened from the default candidates ([`candidates`]) on the first
    /// call that finds one, then the same library for every later call and every decoder, and
    /// never closed. A failure is not remembered (a later call tries again).
    pub fn shared() -> Result<Arc<Nvjpeg>, NvjpegError> {
        let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(lib) = shared.as_ref() {
            return Ok(lib.clone());
        }
        let lib = Arc::new(Self::load()?);
        *shared = Some(lib.clone());
        Ok(lib)
    }

    /// Opens nvJPEG from the default candidates ([`candidates`]); the first that opens wins.
    /// Prefer [`Nvjpeg::shared`], which opens it once per process.
    pub fn load() -> Result<Nvjpeg, NvjpegError> {
        Self::load_from(&candidates())
    }

    /// A library from a function table made elsewhere (the tests' fake nvJPEG).
    #[cfg(test)]
    pub(crate) fn from_table(
        lib: sys::NvjpegLib,
        path: &str,
        version: Option<(i32, i32, i32)>,
    ) -> Nvjpeg {
        Nvjpeg {
            lib: ManuallyDrop::new(lib),
            path: path.to_string(),
            version,
        }
    }

    /// Opens the first of `candidates` (file names searched by the dynamic loader, or
    /// paths) that loads.
    pub fn load_from(candidates: &[PathBuf]) -> Result<Nvjpeg, NvjpegError> {
        let mut tried = Vec::with_capacity(candidates.len());
        for c in candidates {
            // SAFETY: opening libnvjpeg runs its initialisers, which only set up internal
            // state (it is a plain CUDA library with cudart linked statically); the symbols
            // are looked up by name into `Result` fields, and typed by the generated header.
            match unsafe { sys::NvjpegLib::new(c.as_os_str()) } {
                Ok(lib) => {
                    let mut lib = Nvjpeg {
                        lib: ManuallyDrop::new(lib),
                        path: c.display().to_string(),
                        version: None,
                    };
                    lib.version = lib.query_version().ok();
                    return Ok(lib);
                }
                Err(e) => tried.push(if c.components().count() > 1 {
                    format!("{} ({e})", c.display())
                } else {
                    c.display().to_string()
                }),
            }
        }
        Err(NvjpegError::LibraryNotFound {
            name: "nvJPEG (libnvjpeg)".into(),
            tried,
        })
    }

    /// Where the library was opened from (a file name or a path).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The library version, (major, minor, patch), from `nvjpegGetProperty` (asked once, when
    /// the library is opened); needs no GPU.
    pub fn version(&self) -> Result<(i32, i32, i32), NvjpegError> {
        match self.version {
            Some(v) => Ok(v),
            None => self.query_version(),
        }
    }

    /// Whether ROI decodes must be padded (see [`super::safe::decode_region`]): nvJPEG before
    /// 13.3 decodes the border of a region of interest wrongly when chroma is upsampled by
    /// interpolation (fixed in 13.3). An unknown version is treated as affected.
    pub fn roi_boundary_bug(&self) -> bool {
        self.version
            .is_none_or(|(major, minor, _)| (major, minor) < (13, 3))
    }

    fn query_version(&self) -> Result<(i32, i32, i32), NvjpegError> {
        let mut v = [0 as c_int; 3];
        for (prop, out) in [sys::MAJOR_VERSION, sys::MINOR_VERSION, sys::PATCH_LEVEL]
            .into_iter()
            .zip(v.iter_mut())
        {
            // SAFETY: `out` is a valid `int*` for the duration of the call.
            unsafe { call!(self, nvjpegGetProperty(prop, out))? };
        }
        Ok((v[0], v[1], v[2]))
    }

    /// Whether every function the decoders use is present.
    pub fn missing_symbols(&self) -> Vec<&'static str> {
        // Each name once: `stringify!` spells the symbol the field was loaded from.
        macro_rules! missing {
            ($($symbol:ident),* $(,)?) => {
                [$((stringify!($symbol), self.lib.$symbol.is_ok())),*]
                    .into_iter()
                    .filter(|(_, ok)| !ok)
                    .map(|(name, _)| name)
                    .collect()
            };
        }
        missing!(
            nvjpegCreateExV2,
            nvjpegSetDeviceMemoryPadding,
            nvjpegSetPinnedMemoryPadding,
            nvjpegDecodeBatchedPreAllocate,
            nvjpegDestroy,
            nvjpegGetImageInfo,
            nvjpegJpegStateCreate,
            nvjpegJpegStateDestroy,
            nvjpegDecodeBatchedInitialize,
            nvjpegDecodeBatchedEx,
            nvjpegDecodeBatchedSupportedEx,
            nvjpegDecodeParamsCreate,
            nvjpegDecodeParamsDestroy,
            nvjpegDecodeParamsSetOutputFormat,
            nvjpegDecodeParamsSetROI,
            nvjpegJpegStreamCreate,
            nvjpegJpegStreamDestroy,
            nvjpegJpegStreamParse,
            nvjpegJpegStreamParseHeader,
            nvjpegDecoderCreate,
            nvjpegDecoderDestroy,
            nvjpegDecoderJpegSupported,
            nvjpegDecoderStateCreate,
            nvjpegBufferPinnedCreateV2,
            nvjpegBufferPinnedDestroy,
            nvjpegBufferDeviceCreateV2,
            nvjpegBufferDeviceDestroy,
            nvjpegStateAttachPinnedBuffer,
            nvjpegStateAttachDeviceBuffer,
            nvjpegDecodeJpegHost,
            nvjpegDecodeJpegTransferToDevice,
            nvjpegDecodeJpegDevice,
        )
    }
}

mod library_search;

pub use library_search::{candidates, LIBRARY_NAMES};

// One file per topic, as cudarc groups its `result` functions.
pub mod batched;
pub mod buffer;
pub mod decoder;
pub mod handle;
pub mod jpeg_stream;
pub mod params;
pub mod state;
