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
use std::path::{Path, PathBuf};

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

/// The candidates [`Nvjpeg::load`] tries, in order: `$STOKEHOLD_NVJPEG` (a path) when set;
/// the file names in [`LIBRARY_NAMES`] (searched by the dynamic loader: `LD_LIBRARY_PATH`,
/// the ld cache); the CUDA toolkit (`$CUDA_HOME`, `$CUDA_PATH`, `/usr/local/cuda`:
/// `lib64/libnvjpeg.so.13`, `.so.12`); then the pip wheel layouts (`nvidia/cu13/lib/libnvjpeg.so.13`,
/// `nvidia/nvjpeg/lib/libnvjpeg.so.12`) under every Python `site-packages` found from
/// `$VIRTUAL_ENV`, `$CONDA_PREFIX`, `$PYTHONPATH`, `~/.local` and `/usr/local`, `/usr`.
pub fn candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os("STOKEHOLD_NVJPEG") {
        if !p.is_empty() {
            out.push(PathBuf::from(p));
        }
    }
    out.extend(LIBRARY_NAMES.iter().map(PathBuf::from));
    let mut toolkits: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .collect();
    toolkits.push(PathBuf::from("/usr/local/cuda"));
    for t in toolkits {
        for name in &LIBRARY_NAMES[..2] {
            let p = t.join("lib64").join(name);
            if p.is_file() && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    for sp in site_packages() {
        for rel in [
            "nvidia/cu13/lib/libnvjpeg.so.13",
            "nvidia/nvjpeg/lib/libnvjpeg.so.12",
        ] {
            let p = sp.join(rel);
            if p.is_file() && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// Python `site-packages` / `dist-packages` folders that exist.
fn site_packages() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = Vec::new();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(v) = std::env::var_os(var) {
            roots.push(PathBuf::from(v));
        }
    }
    if let Some(h) = std::env::var_os("HOME") {
        roots.push(Path::new(&h).join(".local"));
    }
    roots.push(PathBuf::from("/usr/local"));
    roots.push(PathBuf::from("/usr"));
    let mut out = Vec::new();
    if let Some(pp) = std::env::var_os("PYTHONPATH") {
        out.extend(std::env::split_paths(&pp).filter(|p| p.is_dir()));
    }
    for r in roots {
        let Ok(rd) = std::fs::read_dir(r.join("lib")) else {
            continue;
        };
        let mut pys: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("python3"))
            })
            .collect();
        pys.sort();
        for py in pys {
            for sub in ["site-packages", "dist-packages"] {
                let d = py.join(sub);
                if d.is_dir() {
                    out.push(d);
                }
            }
        }
    }
    out
}

/// Library handles: `nvjpegCreateEx`, `nvjpegDestroy`, hardware engine info.
pub mod handle {
    use super::*;

    /// Creates a handle for `backend` (`NVJPEG_BACKEND_*`) with the default allocators
    /// and `flags` (`NVJPEG_FLAGS_*`). Fails (typically `NVJPEG_STATUS_ARCH_MISMATCH` or
    /// `NVJPEG_STATUS_JPEG_NOT_SUPPORTED`) when the backend is not available on this GPU.
    ///
    /// # Safety
    /// A CUDA context must be current on the calling thread (nvJPEG uses the runtime API,
    /// which picks up the current or primary context).
    pub unsafe fn create(
        lib: &Nvjpeg,
        backend: sys::nvjpegBackend_t,
        flags: c_uint,
    ) -> Result<sys::nvjpegHandle_t, NvjpegError> {
        let mut h: sys::nvjpegHandle_t = std::ptr::null_mut();
        call!(
            lib,
            nvjpegCreateEx(
                backend,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                flags,
                &mut h
            )
        )?;
        Ok(h)
    }

    /// Destroys a handle.
    ///
    /// # Safety
    /// `h` came from [`create`], is destroyed once, and nothing created from it is used after.
    pub unsafe fn destroy(lib: &Nvjpeg, h: sys::nvjpegHandle_t) -> Result<(), NvjpegError> {
        call!(lib, nvjpegDestroy(h))
    }

    /// (engines, cores per engine) of the hardware decoder.
    ///
    /// # Safety
    /// `h` is a live handle.
    pub unsafe fn hardware_info(
        lib: &Nvjpeg,
        h: sys::nvjpegHandle_t,
    ) -> Result<(u32, u32), NvjpegError> {
        let (mut e, mut c) = (0 as c_uint, 0 as c_uint);
        call!(lib, nvjpegGetHardwareDecoderInfo(h, &mut e, &mut c))?;
        Ok((e, c))
    }

    /// Reads components, subsampling and per-component sizes from a JPEG header
    /// (`nvjpegGetImageInfo`; host only, thread safe).
    ///
    /// # Safety
    /// `h` is a live handle.
    pub unsafe fn image_info(
        lib: &Nvjpeg,
        h: sys::nvjpegHandle_t,
        data: &[u8],
    ) -> Result<(i32, sys::nvjpegChromaSubsampling_t, [i32; 4], [i32; 4]), NvjpegError> {
        let mut n: c_int = 0;
        let mut css: sys::nvjpegChromaSubsampling_t = sys::NVJPEG_CSS_UNKNOWN;
        let mut w = [0 as c_int; sys::NVJPEG_MAX_COMPONENT as usize];
        let mut hh = [0 as c_int; sys::NVJPEG_MAX_COMPONENT as usize];
        call!(
            lib,
            nvjpegGetImageInfo(
                h,
                data.as_ptr(),
                data.len(),
                &mut n,
                &mut css,
                w.as_mut_ptr(),
                hh.as_mut_ptr()
            )
        )?;
        Ok((n, css, w, hh))
    }
}

/// Decoding states (`nvjpegJpegState_t`), for the batched API and for a decoupled decoder.
pub mod state {
    use super::*;

    /// A state for the batched API (`nvjpegJpegStateCreate`).
    ///
    /// # Safety
    /// `h` is a live handle that outlives the state.
    pub unsafe fn create(
        lib: &Nvjpeg,
        h: sys::nvjpegHandle_t,
    ) -> Result<sys::nvjpegJpegState_t, NvjpegError> {
        let mut s: sys::nvjpegJpegState_t = std::ptr::null_mut();
        call!(lib, nvjpegJpegStateCreate(h, &mut s))?;
        Ok(s)
    }

    /// A state for one decoupled decoder (`nvjpegDecoderStateCreate`).
    ///
    /// # Safety
    /// `h` and `dec` are live and outlive the state.
    pub unsafe fn create_for_decoder(
        lib: &Nvjpeg,
        h: sys::nvjpegHandle_t,
        dec: sys::nvjpegJpegDecoder_t,
    ) -> Result<sys::nvjpegJpegState_t, NvjpegError> {
        let mut s: sys::nvjpegJpegState_t = std::ptr::null_mut();
        call!(lib, nvjpegDecoderStateCreate(h, dec, &mut s))?;
        Ok(s)
    }

    /// Destroys a state.
    ///
    /// # Safety
    /// `s` is live, destroyed once, and no work using it is pending on a stream.
    pub unsafe fn destroy(lib: &Nvjpeg, s: sys::nvjpegJpegState_t) -> Result<(), NvjpegError> {
        call!(lib, nvjpegJpegStateDestroy(s))
    }

    /// Attaches a pinned buffer (decoupled API).
    ///
    /// # Safety
    /// Both are live; the buffer outlives its use by the state.
    pub unsafe fn attach_pinned(
        lib: &Nvjpeg,
        s: sys::nvjpegJpegState_t,
        b: sys::nvjpegBufferPinned_t,
    ) -> Result<(), NvjpegError> {
        call!(lib, nvjpegStateAttachPinnedBuffer(s, b))
    }

    /// Attaches a device buffer (decoupled API).
    ///
    /// # Safety
    /// Both are live; the buffer outlives its use by the state.
    pub unsafe fn attach_device(
        lib: &Nvjpeg,
        s: sys::nvjpegJpegState_t,
        b: sys::nvjpegBufferDevice_t,
    ) -> Result<(), NvjpegError> {
        call!(lib, nvjpegStateAttachDeviceBuffer(s, b))
    }
}

/// Pinned and device work buffers (decoupled API).
pub mod buffer {
    use super::*;

    /// A pinned host buffer with the default allocator.
    ///
    /// # Safety
    /// `h` is live and outlives the buffer.
    pub unsafe fn create_pinned(
        lib: &Nvjpeg,
        h: sys::nvjpegHandle_t,
    ) -> Result<sys::nvjpegBufferPinned_t, NvjpegError> {
        let mut b: sys::nvjpegBufferPinned_t = std::ptr::null_mut();
        call!(
            lib,
            nvjpegBufferPinnedCreate(h, std::ptr::null_mut(), &mut b)
        )?;
        Ok(b)
    }

    /// Destroys a pinned buffer.
    ///
    /// # Safety
    /// Live, destroyed once, no pending copy from it.
    pub unsafe fn destroy_pinned(
        lib: &Nvjpeg,
        b: sys::nvjpegBufferPinned_t,
    ) -> Result<(), NvjpegError> {
        call!(lib, nvjpegBufferPinnedDestroy(b))
    }

    /// A device buffer with the default allocator.
    ///
    /// # Safety
    /// `h` is live and outlives the buffer.
    pub unsafe fn create_device(
        lib: &Nvjpeg,
        h: sys::nvjpegHandle_t,
    ) -> Result<sys::nvjpegBufferDevice_t, NvjpegError> {
        let mut b: sys::nvjpegBufferDevice_t = std::ptr::null_mut();
        call!(
            lib,
            nvjpegBufferDeviceCreate(h, std::ptr::null_mut(), &mut b)
        )?;
        Ok(b)
    }

    /// Destroys a device buffer.
    ///
    /// # Safety
    /// Live, destroyed once, no pending work using it.
    pub unsafe fn destroy_device(
        lib: &Nvjpeg,
        b: sys::nvjpegBufferDevice_t,
    ) -> Result<(), NvjpegError> {
        call!(lib, nvjpegBufferDeviceDestroy(b))
    }
}

/// Decode parameters: output format, region of interest.
pub mod params {
    use super::*;

    /// Creates decode parameters.
    ///
    /// # Safety
    /// `h` is live and outlives the parameters.
    pub unsafe fn create(
        lib: &Nvjpeg,
        h: sys::nvjpegHandle_t,
    ) -> Result<sys::nvjpegDecodeParams_t, NvjpegError> {
        let mut p: sys::nvjpegDecodeParams_t = std::ptr::null_mut();
        call!(lib, nvjpegDecodeParamsCreate(h, &mut p))?;
        Ok(p)
    }

    /// Destroys decode parameters.
    ///
    /// # Safety
    /// Live and destroyed once.
    pub unsafe fn destroy(lib: &Nvjpeg, p: sys::nvjpegDecodeParams_t) -> Result<(), NvjpegError> {
        call!(lib, nvjpegDecodeParamsDestroy(p))
    }

    /// Sets the output format (`NVJPEG_OUTPUT_*`).
    ///
    /// # Safety
    /// `p` is live.
    pub unsafe fn set_output_format(
        lib: &Nvjpeg,
        p: sys::nvjpegDecodeParams_t,
        fmt: sys::nvjpegOutputFormat_t,
    ) -> Result<(), NvjpegError> {
        call!(lib, nvjpegDecodeParamsSetOutputFormat(p, fmt))
    }

    /// Sets the region of interest; `(0, 0, -1, -1)` decodes the whole image.
    ///
    /// # Safety
    /// `p` is live.
    pub unsafe fn set_roi(
        lib: &Nvjpeg,
        p: sys::nvjpegDecodeParams_t,
        x: i32,
        y: i32,
        w: i32,
        h: i32,
    ) -> Result<(), NvjpegError> {
        call!(lib, nvjpegDecodeParamsSetROI(p, x, y, w, h))
    }
}

/// Parsed JPEG streams (`nvjpegJpegStream_t`), host side.
pub mod jpeg_stream {
    use super::*;

    /// Creates a stream object.
    ///
    /// # Safety
    /// `h` is live and outlives it.
    pub unsafe fn create(
        lib: &Nvjpeg,
        h: sys::nvjpegHandle_t,
    ) -> Result<sys::nvjpegJpegStream_t, NvjpegError> {
        let mut s: sys::nvjpegJpegStream_t = std::ptr::null_mut();
        call!(lib, nvjpegJpegStreamCreate(h, &mut s))?;
        Ok(s)
    }

    /// Destroys a stream object.
    ///
    /// # Safety
    /// Live and destroyed once.
    pub unsafe fn destroy(lib: &Nvjpeg, s: sys::nvjpegJpegStream_t) -> Result<(), NvjpegError> {
        call!(lib, nvjpegJpegStreamDestroy(s))
    }

    /// Parses a whole JPEG (headers and scans) into `s`.
    ///
    /// # Safety
    /// `h`, `s` live. nvJPEG may keep pointers into `data` until the decode of this stream
    /// has been submitted (the three decoupled phases), so `data` must outlive them.
    pub unsafe fn parse(
        lib: &Nvjpeg,
        h: sys::nvjpegHandle_t,
        data: &[u8],
        s: sys::nvjpegJpegStream_t,
    ) -> Result<(), NvjpegError> {
        call!(
            lib,
            nvjpegJpegStreamParse(h, data.as_ptr(), data.len(), 0, 0, s)
        )
    }

    /// Parses only the headers (enough for the support checks).
    ///
    /// # Safety
    /// `h`, `s` live.
    pub unsafe fn parse_header(
        lib: &Nvjpeg,
        h: sys::nvjpegHandle_t,
        data: &[u8],
        s: sys::nvjpegJpegStream_t,
    ) -> Result<(), NvjpegError> {
        call!(
            lib,
            nvjpegJpegStreamParseHeader(h, data.as_ptr(), data.len(), s)
        )
    }
}

/// Decoupled decoders (`nvjpegJpegDecoder_t`) and their three phases.
pub mod decoder {
    use super::*;

    /// Creates a decoder for `backend` on handle `h`.
    ///
    /// # Safety
    /// `h` is live and outlives the decoder.
    pub unsafe fn create(
        lib: &Nvjpeg,
        h: sys::nvjpegHandle_t,
        backend: sys::nvjpegBackend_t,
    ) -> Result<sys::nvjpegJpegDecoder_t, NvjpegError> {
        let mut d: sys::nvjpegJpegDecoder_t = std::ptr::null_mut();
        call!(lib, nvjpegDecoderCreate(h, backend, &mut d))?;
        Ok(d)
    }

    /// Destroys a decoder.
    ///
    /// # Safety
    /// Live, destroyed once, its states destroyed first.
    pub unsafe fn destroy(lib: &Nvjpeg, d: sys::nvjpegJpegDecoder_t) -> Result<(), NvjpegError> {
        call!(lib, nvjpegDecoderDestroy(d))
    }

    /// Whether decoder `d` can decode the parsed stream `s` with `p`. Note nvJPEG's
    /// convention, converted here: the C function sets 0 when supported.
    ///
    /// # Safety
    /// All live.
    pub unsafe fn supports(
        lib: &Nvjpeg,
        d: sys::nvjpegJpegDecoder_t,
        s: sys::nvjpegJpegStream_t,
        p: sys::nvjpegDecodeParams_t,
    ) -> Result<bool, NvjpegError> {
        let mut not_supported: c_int = 1;
        call!(lib, nvjpegDecoderJpegSupported(d, s, p, &mut not_supported))?;
        Ok(not_supported == 0)
    }

    /// Host phase (Huffman decode on the CPU for the hybrid backend).
    ///
    /// # Safety
    /// All live; a pinned buffer is attached to `st`, and no copy from it is pending.
    pub unsafe fn host(
        lib: &Nvjpeg,
        h: sys::nvjpegHandle_t,
        d: sys::nvjpegJpegDecoder_t,
        st: sys::nvjpegJpegState_t,
        p: sys::nvjpegDecodeParams_t,
        s: sys::nvjpegJpegStream_t,
    ) -> Result<(), NvjpegError> {
        call!(lib, nvjpegDecodeJpegHost(h, d, st, p, s))
    }

    /// Transfer phase: host-to-device copies on `stream`.
    ///
    /// # Safety
    /// All live; `stream` is a valid CUDA stream of the current context (or null).
    pub unsafe fn transfer(
        lib: &Nvjpeg,
        h: sys::nvjpegHandle_t,
        d: sys::nvjpegJpegDecoder_t,
        st: sys::nvjpegJpegState_t,
        s: sys::nvjpegJpegStream_t,
        stream: *mut c_void,
    ) -> Result<(), NvjpegError> {
        call!(
            lib,
            nvjpegDecodeJpegTransferToDevice(h, d, st, s, stream as sys::cudaStream_t)
        )
    }

    /// Device phase: kernels on `stream` write `dest`.
    ///
    /// # Safety
    /// All live; `dest` describes device memory large enough for the output, valid until
    /// the work on `stream` completes.
    pub unsafe fn device(
        lib: &Nvjpeg,
        h: sys::nvjpegHandle_t,
        d: sys::nvjpegJpegDecoder_t,
        st: sys::nvjpegJpegState_t,
        dest: &mut sys::nvjpegImage_t,
        stream: *mut c_void,
    ) -> Result<(), NvjpegError> {
        call!(
            lib,
            nvjpegDecodeJpegDevice(h, d, st, dest, stream as sys::cudaStream_t)
        )
    }
}

/// The batched API (used with the hardware backend).
pub mod batched {
    use super::*;

    /// (Re)initialises `st` for batches of `batch` images in format `fmt`.
    ///
    /// # Safety
    /// `h`, `st` live; no batch using `st` is pending.
    pub unsafe fn initialize(
        lib: &Nvjpeg,
        h: sys::nvjpegHandle_t,
        st: sys::nvjpegJpegState_t,
        batch: i32,
        max_cpu_threads: i32,
        fmt: sys::nvjpegOutputFormat_t,
    ) -> Result<(), NvjpegError> {
        call!(
            lib,
            nvjpegDecodeBatchedInitialize(h, st, batch, max_cpu_threads, fmt)
        )
    }

    /// Whether the batched decoder of `h` takes the parsed stream `s` with `p`
    /// (converted: `true` = supported).
    ///
    /// # Safety
    /// All live.
    pub unsafe fn supports(
        lib: &Nvjpeg,
        h: sys::nvjpegHandle_t,
        s: sys::nvjpegJpegStream_t,
        p: sys::nvjpegDecodeParams_t,
    ) -> Result<bool, NvjpegError> {
        let mut not_supported: c_int = 1;
        call!(
            lib,
            nvjpegDecodeBatchedSupportedEx(h, s, p, &mut not_supported)
        )?;
        Ok(not_supported == 0)
    }

    /// Decodes a batch with per-image parameters (ROI) on `stream`.
    ///
    /// # Safety
    /// `h`, `st` live and initialised for `data.len()` images; `data`, `lengths`, `dest`,
    /// `params` have the same length; every `dest` describes device memory large enough for
    /// its output, valid until the work on `stream` completes; `stream` is a valid CUDA
    /// stream of the current context (or null).
    #[allow(clippy::too_many_arguments)] // mirrors the C signature one to one
    pub unsafe fn decode_ex(
        lib: &Nvjpeg,
        h: sys::nvjpegHandle_t,
        st: sys::nvjpegJpegState_t,
        data: &[*const u8],
        lengths: &[usize],
        dest: &mut [sys::nvjpegImage_t],
        params: &mut [sys::nvjpegDecodeParams_t],
        stream: *mut c_void,
    ) -> Result<(), NvjpegError> {
        if lengths.len() != data.len() || dest.len() != data.len() || params.len() != data.len() {
            return Err(NvjpegError::InvalidArgument(
                "batched decode: data, lengths, destinations and params differ in length".into(),
            ));
        }
        call!(
            lib,
            nvjpegDecodeBatchedEx(
                h,
                st,
                data.as_ptr(),
                lengths.as_ptr(),
                dest.as_mut_ptr(),
                params.as_mut_ptr(),
                stream as sys::cudaStream_t
            )
        )
    }
}
