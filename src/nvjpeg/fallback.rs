//! Which images go to nvJPEG, and to which of its decoders, decided on the host from the JPEG
//! markers before anything is submitted to the GPU.
//!
//! The CPU decoder ([`crate::decode`]) is the reference: every image it would reject (not a
//! JPEG, truncated, arithmetic-coded, 12-bit, over the limits, ...) is sent back to it, so
//! that the error a user sees is the same on both paths. Beyond that, images that nvJPEG
//! can't decode, or can't decode the way the CPU path does, are sent to the CPU too:
//!
//! | what | route | why |
//! | --- | --- | --- |
//! | baseline (SOF0/SOF1), one interleaved scan, 4:4:4, 4:2:2, 4:2:0, 4:4:0 or gray | [`GpuRoute::Hardware`] when a JPEG engine is present, else [`GpuRoute::Hybrid`] | what the A100/H100/H200 engines decode (`NVJPEG_BACKEND_HARDWARE`: "baseline JPEG bitstream with single scan; 410 and 411 not supported") |
//! | baseline with several scans (non-interleaved), 4:1:1, 4:1:0 | [`GpuRoute::Hybrid`] | not on the engines; the CUDA decoders take them |
//! | progressive Huffman (SOF2) | [`GpuRoute::Hybrid`] | same |
//! | 4 components (CMYK, YCCK) | CPU ([`FallbackReason::FourComponents`]) | nvJPEG converts CMYK only with `nvjpegDecodeParamsSetAllowCMYK`, by an unspecified "simple subtractive scheme", and not at all on the default/hybrid batched backend; the CPU path's conversion is the reference |
//! | chroma sampling nvJPEG has no name for (Cb ≠ Cr factors, chroma larger than luma, ...) | CPU ([`FallbackReason::Sampling`]) | `nvjpegGetImageInfo` reports `NVJPEG_CSS_UNKNOWN` |
//! | anything the CPU decoder rejects | CPU ([`FallbackReason::Rejected`]) | same error on both paths |
//! | restart intervals | GPU | supported by all backends |
//!
//! The walk is bounds-checked and never panics; it first runs the CPU path's own marker walk
//! ([`crate::decode::jpeg`], with the full scan to EOI, so truncated files are caught here),
//! then reads the few facts nvJPEG's support depends on.

use crate::decode::{self, exif, DecodeError, Format, Limits};

/// Which nvJPEG decoder an image goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GpuRoute {
    /// The JPEG engines (`NVJPEG_BACKEND_HARDWARE`, batched): baseline, one scan.
    Hardware,
    /// The CUDA decoders (`NVJPEG_BACKEND_GPU_HYBRID` / `NVJPEG_BACKEND_HYBRID`).
    Hybrid,
}

/// Why an image is decoded on the CPU instead of by nvJPEG.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FallbackReason {
    /// Not a JPEG (PNG, unknown bytes): nvJPEG only decodes JPEG.
    NotJpeg,
    /// The CPU decoder rejects it too (unsupported feature, truncated, corrupt, over the
    /// limits); decoding it on the CPU reports the reference error.
    Rejected(DecodeError),
    /// Four components (CMYK or YCCK): converted by the CPU path (see the module docs).
    FourComponents {
        /// `true` when an Adobe APP14 segment says YCCK (transform 2).
        ycck: bool,
    },
    /// Arithmetic-coded (SOF9/SOF10): nvJPEG decodes Huffman-coded JPEGs only; the CPU
    /// path's libjpeg-turbo decodes these.
    Arithmetic,
    /// Chroma sampling factors nvJPEG has no subsampling name for.
    Sampling(String),
    /// nvJPEG itself declined it (`nvjpegDecoderJpegSupported`), found at decode time.
    NvjpegUnsupported(String),
}

impl std::fmt::Display for FallbackReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FallbackReason::NotJpeg => write!(f, "not a JPEG"),
            FallbackReason::Rejected(e) => write!(f, "rejected by the JPEG checks: {e}"),
            FallbackReason::FourComponents { ycck: true } => write!(f, "YCCK JPEG"),
            FallbackReason::FourComponents { ycck: false } => write!(f, "CMYK JPEG"),
            FallbackReason::Arithmetic => write!(f, "arithmetic-coded JPEG"),
            FallbackReason::Sampling(s) => write!(f, "chroma sampling {s}"),
            FallbackReason::NvjpegUnsupported(s) => write!(f, "nvJPEG: {s}"),
        }
    }
}

/// Chroma subsampling, named as nvJPEG names it (`nvjpegChromaSubsampling_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Subsampling {
    /// 4:4:4.
    S444,
    /// 4:2:2 (half horizontal).
    S422,
    /// 4:2:0 (half both ways).
    S420,
    /// 4:4:0 (half vertical).
    S440,
    /// 4:1:1 (quarter horizontal).
    S411,
    /// 4:1:0 (quarter horizontal, half vertical).
    S410,
    /// 4:1:0 vertical (half horizontal, quarter vertical).
    S410V,
    /// One component.
    Gray,
}

/// What the host-side walk learned about a JPEG.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JpegFacts {
    /// Frame width, as stored (before orientation).
    pub width: usize,
    /// Frame height, as stored.
    pub height: usize,
    /// Components in the frame (1, 3 or 4).
    pub components: usize,
    /// Progressive (SOF2).
    pub progressive: bool,
    /// Number of scans (SOS segments) up to EOI.
    pub scans: usize,
    /// Sampling factors (h, v) of each component, in frame order.
    pub sampling: Vec<(u8, u8)>,
    /// Adobe APP14 colour transform, when present (0 none/CMYK, 1 YCbCr, 2 YCCK).
    pub adobe_transform: Option<u8>,
    /// EXIF orientation, 1..=8 (1 when absent or invalid).
    pub orientation: u8,
}

impl JpegFacts {
    /// The subsampling nvJPEG would report, or `None` for `NVJPEG_CSS_UNKNOWN`.
    pub fn subsampling(&self) -> Option<Subsampling> {
        match self.components {
            1 => Some(Subsampling::Gray),
            3 => {
                let (y, cb, cr) = (self.sampling[0], self.sampling[1], self.sampling[2]);
                if cb != cr || y.0 % cb.0 != 0 || y.1 % cb.1 != 0 {
                    return None;
                }
                match (y.0 / cb.0, y.1 / cb.1) {
                    (1, 1) => Some(Subsampling::S444),
                    (2, 1) => Some(Subsampling::S422),
                    (2, 2) => Some(Subsampling::S420),
                    (1, 2) => Some(Subsampling::S440),
                    (4, 1) => Some(Subsampling::S411),
                    (4, 2) => Some(Subsampling::S410),
                    (2, 4) => Some(Subsampling::S410V),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

/// Where an image is decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// By nvJPEG, with what the walk found.
    Gpu(GpuRoute, JpegFacts),
    /// By the CPU decoder, and why.
    Cpu(FallbackReason),
}

/// `Some(reason)` when `bytes` must be decoded on the CPU rather than by nvJPEG (see the
/// module docs for the rules). `hardware` does not change the answer: it only picks between
/// nvJPEG's decoders (use [`classify`] for that).
pub fn needs_cpu_fallback(bytes: &[u8], limits: &Limits) -> Option<FallbackReason> {
    match classify(bytes, limits, true) {
        Route::Gpu(..) => None,
        Route::Cpu(r) => Some(r),
    }
}

/// Decides where `bytes` are decoded. `hardware` says whether the decoder has JPEG engines
/// (a handle created with `NVJPEG_BACKEND_HARDWARE`).
pub fn classify(bytes: &[u8], limits: &Limits, hardware: bool) -> Route {
    if decode::sniff(bytes) != Some(Format::Jpeg) {
        return Route::Cpu(FallbackReason::NotJpeg);
    }
    if bytes.len() as u64 > limits.max_file_bytes {
        return Route::Cpu(FallbackReason::Rejected(DecodeError::Limits(format!(
            "file is {} bytes, over the limit of {} bytes (max_file_bytes)",
            bytes.len(),
            limits.max_file_bytes
        ))));
    }
    // The CPU path's own checks, with the full walk to EOI (truncation, unsupported
    // processes, precision, limits).
    match decode::jpeg::scan(bytes, true, limits) {
        Err(e) => return Route::Cpu(FallbackReason::Rejected(e)),
        Ok(h) if h.arithmetic => return Route::Cpu(FallbackReason::Arithmetic),
        Ok(_) => {}
    }
    let facts = match facts(bytes) {
        Some(f) => f,
        // Unreachable after a successful scan, but never trust that: the CPU decides.
        None => {
            return Route::Cpu(FallbackReason::Rejected(DecodeError::Corrupt(
                "JPEG markers could not be read".into(),
            )))
        }
    };
    if facts.components == 4 {
        return Route::Cpu(FallbackReason::FourComponents {
            ycck: facts.adobe_transform == Some(2),
        });
    }
    let Some(css) = facts.subsampling() else {
        let s: Vec<String> = facts
            .sampling
            .iter()
            .map(|(h, v)| format!("{h}x{v}"))
            .collect();
        return Route::Cpu(FallbackReason::Sampling(s.join(",")));
    };
    let engine_ok = !facts.progressive
        && facts.scans == 1
        && !matches!(
            css,
            Subsampling::S411 | Subsampling::S410 | Subsampling::S410V
        );
    let route = if hardware && engine_ok {
        GpuRoute::Hardware
    } else {
        GpuRoute::Hybrid
    };
    Route::Gpu(route, facts)
}

/// Reads the frame, scan count, Adobe transform and EXIF orientation. Assumes a file that
/// the CPU path's marker walk (`decode::jpeg::scan`) accepted, but stays bounds-checked (returns `None` on anything
/// unexpected).
pub fn facts(bytes: &[u8]) -> Option<JpegFacts> {
    let d = bytes;
    let mut i = decode::jpeg::find_soi(d)? + 2;
    let mut out: Option<JpegFacts> = None;
    let mut adobe = None;
    let mut orientation = None;
    let mut scans = 0usize;
    loop {
        while i < d.len() && d[i] != 0xFF {
            i += 1;
        }
        while i < d.len() && d[i] == 0xFF {
            i += 1;
        }
        let m = *d.get(i)?;
        i += 1;
        match m {
            0x00 | 0x01 | 0xD0..=0xD7 => continue,
            0xD9 => break,
            _ => {}
        }
        let b = d.get(i..i + 2)?;
        let len = usize::from(u16::from_be_bytes([b[0], b[1]]));
        let payload = d.get(i + 2..i.checked_add(len)?)?;
        i += len;
        match m {
            0xC0..=0xC2 => {
                let nc = usize::from(*payload.get(5)?);
                let comps = payload.get(6..6 + 3 * nc)?;
                out = Some(JpegFacts {
                    height: usize::from(u16::from_be_bytes([*payload.get(1)?, *payload.get(2)?])),
                    width: usize::from(u16::from_be_bytes([*payload.get(3)?, *payload.get(4)?])),
                    components: nc,
                    progressive: m == 0xC2,
                    scans: 0,
                    sampling: comps
                        .chunks_exact(3)
                        .map(|c| (c[1] >> 4, c[1] & 15))
                        .collect(),
                    adobe_transform: None,
                    orientation: 1,
                });
            }
            0xEE if payload.starts_with(b"Adobe") => adobe = payload.get(11).copied(),
            0xE1 if orientation.is_none() && payload.starts_with(b"Exif\0\0") => {
                orientation = Some(exif::orientation_from_app1(payload).unwrap_or(1));
            }
            0xDA => {
                scans += 1;
                // Skip entropy-coded data (as the CPU walk does).
                loop {
                    i += d.get(i..)?.iter().position(|&b| b == 0xFF)?;
                    let mut j = i + 1;
                    while d.get(j) == Some(&0xFF) {
                        j += 1;
                    }
                    match *d.get(j)? {
                        0x00 | 0xD0..=0xD7 => i = j + 1,
                        _ => {
                            i = j - 1;
                            break;
                        }
                    }
                }
            }
            _ => {}
        }
    }
    let mut f = out?;
    f.scans = scans;
    f.adobe_transform = adobe;
    f.orientation = orientation.unwrap_or(1);
    Some(f)
}
