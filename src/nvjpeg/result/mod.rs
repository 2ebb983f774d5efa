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
use std::path::PathBuf;

use super::fallback::FallbackReason;
use super::sys;

/// Library file names tried, in order, after `$STOKEHOLD_NVJPEG`.
pub const LIBRARY_NAMES: [&str; 3] = ["libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so"];

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
}

impl NvjpegError {
    /// The status code, when this is a failed call.
    pub fn status(&self) -> Option<u32> {
        match self {
            NvjpegError::Status { code, .. } => Some(*code),
            _ => None,
        }
    }
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

/// An opened libnvjpeg: the bindgen function table and where it came from.
pub struct Nvjpeg {
    lib: sys::NvjpegLib,
    path: String,
}

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
    /// Opens nvJPEG from the default candidates ([`candidates`]); the first that opens wins.
    pub fn load() -> Result<Nvjpeg, NvjpegError> {
        Self::load_from(&candidates())
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
                    return Ok(Nvjpeg {
                        lib,
                        path: c.display().to_string(),
                    })
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

    /// The library version, (major, minor, patch), from `nvjpegGetProperty`; needs no GPU.
    pub fn version(&self) -> Result<(i32, i32, i32), NvjpegError> {
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
        let l = &self.lib;
        let present = [
            ("nvjpegCreateEx", l.nvjpegCreateEx.is_ok()),
            ("nvjpegDestroy", l.nvjpegDestroy.is_ok()),
            ("nvjpegGetImageInfo", l.nvjpegGetImageInfo.is_ok()),
            ("nvjpegJpegStateCreate", l.nvjpegJpegStateCreate.is_ok()),
            ("nvjpegJpegStateDestroy", l.nvjpegJpegStateDestroy.is_ok()),
            (
                "nvjpegDecodeBatchedInitialize",
                l.nvjpegDecodeBatchedInitialize.is_ok(),
            ),
            ("nvjpegDecodeBatchedEx", l.nvjpegDecodeBatchedEx.is_ok()),
            (
                "nvjpegDecodeBatchedSupportedEx",
                l.nvjpegDecodeBatchedSupportedEx.is_ok(),
            ),
            (
                "nvjpegDecodeParamsCreate",
                l.nvjpegDecodeParamsCreate.is_ok(),
            ),
            (
                "nvjpegDecodeParamsDestroy",
                l.nvjpegDecodeParamsDestroy.is_ok(),
            ),
            (
                "nvjpegDecodeParamsSetOutputFormat",
                l.nvjpegDecodeParamsSetOutputFormat.is_ok(),
            ),
            (
                "nvjpegDecodeParamsSetROI",
                l.nvjpegDecodeParamsSetROI.is_ok(),
            ),
            ("nvjpegJpegStreamCreate", l.nvjpegJpegStreamCreate.is_ok()),
            ("nvjpegJpegStreamDestroy", l.nvjpegJpegStreamDestroy.is_ok()),
            ("nvjpegJpegStreamParse", l.nvjpegJpegStreamParse.is_ok()),
            (
                "nvjpegJpegStreamParseHeader",
                l.nvjpegJpegStreamParseHeader.is_ok(),
            ),
            ("nvjpegDecoderCreate", l.nvjpegDecoderCreate.is_ok()),
            ("nvjpegDecoderDestroy", l.nvjpegDecoderDestroy.is_ok()),
            (
                "nvjpegDecoderJpegSupported",
                l.nvjpegDecoderJpegSupported.is_ok(),
            ),
            (
                "nvjpegDecoderStateCreate",
                l.nvjpegDecoderStateCreate.is_ok(),
            ),
            (
                "nvjpegBufferPinnedCreate",
                l.nvjpegBufferPinnedCreate.is_ok(),
            ),
            (
                "nvjpegBufferPinnedDestroy",
                l.nvjpegBufferPinnedDestroy.is_ok(),
            ),
            (
                "nvjpegBufferDeviceCreate",
                l.nvjpegBufferDeviceCreate.is_ok(),
            ),
            (
                "nvjpegBufferDeviceDestroy",
                l.nvjpegBufferDeviceDestroy.is_ok(),
            ),
            (
                "nvjpegStateAttachPinnedBuffer",
                l.nvjpegStateAttachPinnedBuffer.is_ok(),
            ),
            (
                "nvjpegStateAttachDeviceBuffer",
                l.nvjpegStateAttachDeviceBuffer.is_ok(),
            ),
            ("nvjpegDecodeJpegHost", l.nvjpegDecodeJpegHost.is_ok()),
            (
                "nvjpegDecodeJpegTransferToDevice",
                l.nvjpegDecodeJpegTransferToDevice.is_ok(),
            ),
            ("nvjpegDecodeJpegDevice", l.nvjpegDecodeJpegDevice.is_ok()),
        ];
        present
            .into_iter()
            .filter(|(_, ok)| !ok)
            .map(|(n, _)| n)
            .collect()
    }
}

mod library_search;

pub use library_search::candidates;

// One file per topic, as cudarc groups its `result` functions.
pub mod batched;
pub mod buffer;
pub mod decoder;
pub mod handle;
pub mod jpeg_stream;
pub mod params;
pub mod state;
