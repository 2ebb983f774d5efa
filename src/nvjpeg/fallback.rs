//! Which images go to nvJPEG, and to which of its decoders, decided on the host from the JPEG
//! header before anything is submitted to the GPU.
//!
//! The CPU decoder ([`crate::decode`]) is the reference: every image it would reject (not a
//! JPEG, truncated, 12-bit, lossless, over the limits, ...) is sent back to it, so that the
//! error a user sees is the same on both paths. Beyond that, images that nvJPEG can't
//! decode, or can't decode the way the CPU path does, are sent to the CPU too:
//!
//! | what | route | why |
//! | --- | --- | --- |
//! | baseline (SOF0/SOF1), one interleaved scan, 4:4:4, 4:2:2, 4:2:0, 4:4:0 or gray | [`GpuRoute::Hardware`] when a JPEG engine is present, else [`GpuRoute::Hybrid`] | what the A100/H100/H200 engines decode (`NVJPEG_BACKEND_HARDWARE`: "baseline JPEG bitstream with single scan; 410 and 411 not supported") |
//! | baseline with several scans (non-interleaved), 4:1:1, 4:1:0 | [`GpuRoute::Hybrid`] | not on the engines; the CUDA decoders take them |
//! | progressive Huffman (SOF2) | [`GpuRoute::Hybrid`] | same |
//! | arithmetic-coded (SOF9, SOF10) | CPU ([`FallbackReason::Arithmetic`]) | nvJPEG decodes Huffman-coded JPEGs only; the CPU path's libjpeg-turbo decodes these |
//! | 4 components (CMYK, YCCK) | CPU ([`FallbackReason::FourComponents`]) | nvJPEG converts CMYK only with `nvjpegDecodeParamsSetAllowCMYK`, by an unspecified "simple subtractive scheme", and not at all on the default/hybrid batched backend; the CPU path's conversion is the reference |
//! | 3 components stored as RGB (Adobe transform 0, or ids `R` `G` `B`, without JFIF) | CPU ([`FallbackReason::RgbStored`]) | nvJPEG documents 3-channel JPEGs as YCbCr only and would convert the R G B samples as if they were Y Cb Cr; libjpeg (the CPU path, as Pillow) reads them as RGB |
//! | chroma sampling nvJPEG has no name for (Cb ≠ Cr factors, chroma larger than luma, ...) | CPU ([`FallbackReason::Sampling`]) | `nvjpegGetImageInfo` reports `NVJPEG_CSS_UNKNOWN` |
//! | anything the CPU decoder rejects | CPU ([`FallbackReason::Rejected`]) | same error on both paths |
//! | a segment libjpeg judges itself (a malformed or refused table, a frame or scan header of the wrong length, bytes between segments: [`JpegHeader::irregular_at`]) | CPU ([`FallbackReason::Irregular`]) | libjpeg refuses some of these when it decodes (a "Bogus Huffman table definition", a "Bogus marker length") and the engines' batched call reports no error per image: on the engines such a file would come out as whatever they wrote, where the CPU path skips it |
//! | restart intervals | GPU | supported by all backends |
//!
//! Everything is decided from the one header the CPU path reads too
//! ([`crate::decode::header`], read to EOI so that truncated files are caught here): give
//! [`route_header`] a header already read (once per sample), or let [`classify`] read it.

use smallvec::SmallVec;

use crate::decode::header::ColorSpace;
use crate::decode::{sniff, DecodeError, Format, JpegHeader, Limits};

pub use crate::decode::header::Subsampling;

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
        /// `true` when libjpeg reads the components as YCCK
        /// ([`crate::decode::header::ColorSpace::Ycck`]: an Adobe APP14 segment with a
        /// transform other than 0, in practice 2).
        ycck: bool,
    },
    /// Arithmetic-coded (SOF9/SOF10): nvJPEG decodes Huffman-coded JPEGs only; the CPU
    /// path's libjpeg-turbo decodes these.
    Arithmetic,
    /// Three components stored as R G B rather than Y Cb Cr (libjpeg's reading: an Adobe
    /// transform 0, or component ids `R` `G` `B`, and no JFIF marker); nvJPEG documents
    /// 3-channel JPEGs as YCbCr only.
    RgbStored,
    /// Chroma sampling factors nvJPEG has no subsampling name for.
    Sampling(String),
    /// A segment libjpeg judges when it decodes ([`JpegHeader::irregular_at`], the byte where
    /// it starts): the CPU path's libjpeg decodes the file or refuses it, for both paths.
    Irregular(usize),
    /// nvJPEG itself declined it (`nvjpegDecoderJpegSupported`), found at decode time.
    NvjpegUnsupported(String),
    /// nvJPEG failed on it (a call, or the GPU work found failed at synchronisation) without
    /// losing the CUDA context: the CPU decodes it again, and reports the reference error if
    /// the file is bad.
    NvjpegFailed(String),
}

impl std::fmt::Display for FallbackReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FallbackReason::NotJpeg => write!(f, "not a JPEG"),
            FallbackReason::Rejected(e) => write!(f, "rejected by the JPEG checks: {e}"),
            FallbackReason::FourComponents { ycck: true } => write!(f, "YCCK JPEG"),
            FallbackReason::FourComponents { ycck: false } => write!(f, "CMYK JPEG"),
            FallbackReason::Arithmetic => write!(f, "arithmetic-coded JPEG"),
            FallbackReason::RgbStored => write!(f, "JPEG stored as RGB"),
            FallbackReason::Sampling(s) => write!(f, "chroma sampling {s}"),
            FallbackReason::Irregular(at) => {
                write!(f, "a segment at byte {at} that libjpeg judges (left to it)")
            }
            FallbackReason::NvjpegUnsupported(s) => write!(f, "nvJPEG: {s}"),
            FallbackReason::NvjpegFailed(s) => write!(f, "nvJPEG failed: {s}"),
        }
    }
}

/// What routing read from a JPEG's header ([`JpegHeader`]), as the GPU decoder keeps it.
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
    pub sampling: SmallVec<[(u8, u8); 4]>,
    /// Adobe APP14 colour transform, when present (0 none/CMYK, 1 YCbCr, 2 YCCK).
    pub adobe_transform: Option<u8>,
    /// EXIF orientation, 1..=8 (1 when absent or invalid).
    pub orientation: u8,
    /// The subsampling nvJPEG would report, or `None` for `NVJPEG_CSS_UNKNOWN`
    /// ([`JpegHeader::subsampling`]).
    pub subsampling: Option<Subsampling>,
}

impl JpegFacts {
    /// The facts of header `h`.
    pub fn of(h: &JpegHeader) -> JpegFacts {
        JpegFacts {
            width: h.width(),
            height: h.height(),
            components: h.components(),
            progressive: h.progressive(),
            scans: h.scans.len(),
            sampling: h.frame.components.iter().map(|c| (c.h, c.v)).collect(),
            adobe_transform: h.adobe_transform,
            orientation: h.orientation,
            subsampling: h.subsampling(),
        }
    }

    /// The subsampling nvJPEG would report, or `None` for `NVJPEG_CSS_UNKNOWN`.
    pub fn subsampling(&self) -> Option<Subsampling> {
        self.subsampling
    }

    /// Whether libjpeg repeats this image's chroma even when asked to interpolate it: a
    /// component at half the horizontal sampling whose stored width is 1 or 2 samples
    /// (images up to 4 pixels wide in 4:2:0 or 4:2:2), which its fancy upsampling doesn't
    /// take (jdsample.c: `downsampled_width > 2`).
    pub fn chroma_repeated_when_fancy(&self) -> bool {
        let h_max = self.sampling.iter().map(|&(h, _)| h).max().unwrap_or(1);
        self.sampling.iter().any(|&(h, _)| {
            2 * h == h_max && (self.width * usize::from(h)).div_ceil(usize::from(h_max)) <= 2
        })
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

/// Decides where `bytes` are decoded, reading the header (to EOI) with `limits`. `hardware`
/// says whether the decoder has JPEG engines (a handle created with
/// `NVJPEG_BACKEND_HARDWARE`). Where the header was read already, use [`route_header`].
pub fn classify(bytes: &[u8], limits: &Limits, hardware: bool) -> Route {
    if sniff(bytes) != Some(Format::Jpeg) {
        return Route::Cpu(FallbackReason::NotJpeg);
    }
    if bytes.len() as u64 > limits.max_file_bytes {
        return Route::Cpu(FallbackReason::Rejected(DecodeError::Limits(format!(
            "file is {} bytes, over the limit of {} bytes (max_file_bytes)",
            bytes.len(),
            limits.max_file_bytes
        ))));
    }
    // The CPU path's own header and checks (truncation, unsupported processes, precision,
    // limits).
    match JpegHeader::read(bytes, limits) {
        Err(e) => Route::Cpu(FallbackReason::Rejected(e)),
        Ok(h) => route_header(&h, hardware),
    }
}

/// Decides where a JPEG whose header `h` was read (to EOI, by [`JpegHeader::read`] or
/// [`crate::decode::ParsedImage::parse`]) is decoded; see the module docs for the rules.
pub fn route_header(h: &JpegHeader, hardware: bool) -> Route {
    debug_assert!(
        h.complete,
        "routing needs every scan: read the header to EOI"
    );
    if let Some(at) = h.irregular_at {
        return Route::Cpu(FallbackReason::Irregular(at));
    }
    if h.arithmetic() {
        return Route::Cpu(FallbackReason::Arithmetic);
    }
    match h.color_space() {
        ColorSpace::Cmyk => return Route::Cpu(FallbackReason::FourComponents { ycck: false }),
        ColorSpace::Ycck => return Route::Cpu(FallbackReason::FourComponents { ycck: true }),
        ColorSpace::Rgb => return Route::Cpu(FallbackReason::RgbStored),
        ColorSpace::Gray | ColorSpace::YCbCr => {}
    }
    let facts = JpegFacts::of(h);
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

/// The routing facts of `bytes`, read from its header (to EOI, without limits); `None` when
/// the header can't be read.
pub fn facts(bytes: &[u8]) -> Option<JpegFacts> {
    let no_limits = Limits {
        max_pixels: u64::MAX,
        max_file_bytes: u64::MAX,
    };
    JpegHeader::read(bytes, &no_limits)
        .ok()
        .map(|h| JpegFacts::of(&h))
}
