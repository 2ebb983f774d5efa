//! CPU decoding of JPEG and PNG into 8-bit HWC images (the reference the GPU decoder must
//! match).
//!
//! - The format is sniffed from the first bytes (JPEG: `FF D8 FF`, also found within the
//!   first 64 KiB when junk precedes it; PNG: its 8-byte signature), never from a file name.
//! - [`Limits`] are checked before any large allocation: the file size first, then
//!   width × height from the header.
//! - Output is RGB (3 channels) or gray (1 channel, Pillow's `L` formula
//!   `(R*19595 + G*38470 + B*7471 + 0x8000) >> 16` from RGB; gray sources are passed through).
//! - With [`DecodeOptions::apply_exif`], the EXIF orientation (JPEG APP1 `Exif`, PNG `eXIf`)
//!   is applied exactly like Pillow's `ImageOps.exif_transpose` (see [`exif`], the one
//!   place orientations are mapped).
//!
//! A file's header is read once ([`ParsedImage::parse`]; for JPEG the one parser in
//! [`header`], which also decides what is supported and what is truncated) and every step
//! works from it: the size a crop window is drawn on, the window's decode, the entropy
//! decoders. [`decode`], [`decode_window`] and [`decode_scaled`] are that, in one call.
//!
//! JPEG pixels come from libjpeg-turbo (the same decoder Pillow uses, bundled by
//! `mozjpeg-sys`; building needs a C compiler and, on x86, `nasm` for its SIMD code:
//! [`jpeg_simd`] says which it uses). Huffman-coded JPEGs are
//! entropy-decoded by our own code (`progressive` for progressive scans, `baseline` for
//! sequential ones, which share `huffman`), which hands libjpeg-turbo the coefficients in
//! place of its own entropy decoding, so the pixels are libjpeg-turbo's; whatever ours cannot
//! match exactly goes to libjpeg-turbo alone, and [`DecodeOptions::sequential_decoder`] /
//! [`DecodeOptions::progressive_decoder`] choose libjpeg-turbo alone for comparisons. PNG
//! conversions are in [`png`]. No input panics: libjpeg's fatal errors unwind to a
//! `catch_unwind` (never `longjmp`), both decoders run under `catch_unwind` as a last line
//! of defence, and a panic is reported as [`DecodeError::Corrupt`].
//!
//! [`decode_window`] decodes only a window of the (oriented) image, with exactly the pixels a
//! full [`decode`] has there: for JPEG it skips the rows above the window and the iMCU columns
//! left and right of it (libjpeg-turbo's `jpeg_skip_scanlines` / `jpeg_crop_scanline`).

mod baseline;
pub mod exif;
pub mod header;
mod huffman;
mod jpeg;
mod parsed;
pub mod png;
mod progressive;
mod simd;
mod turbo;

#[cfg(test)]
mod tests;

pub use header::JpegHeader;
pub use parsed::ParsedImage;
pub use simd::{jpeg_simd, jpeg_simd_warning, JpegSimd};

use std::panic::{catch_unwind, AssertUnwindSafe};

pub use crate::error::DecodeError;
use crate::image::Image;

/// Resource limits, checked before decoding allocates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest width × height accepted (default 178 956 970, Pillow's decompression-bomb
    /// error threshold, twice its `MAX_IMAGE_PIXELS`).
    pub max_pixels: u64,
    /// Largest encoded file accepted, in bytes (default 256 MiB).
    pub max_file_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_pixels: 178_956_970,
            max_file_bytes: 256 << 20,
        }
    }
}

/// Output colour of decoded images.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColorMode {
    /// Three channels, R G B.
    Rgb,
    /// One channel, luma by Pillow's `L` formula.
    Gray,
}

impl ColorMode {
    /// Channels in the output (3 or 1).
    pub fn channels(self) -> usize {
        match self {
            ColorMode::Rgb => 3,
            ColorMode::Gray => 1,
        }
    }
}

/// Who entropy-decodes a JPEG's Huffman-coded data. The pixels are the same either way:
/// everything after entropy decoding is libjpeg-turbo's, and our decoder hands every file it
/// cannot decode exactly as libjpeg would (corrupt data, data that ends early, progressions
/// libjpeg smooths, CMYK progressive ...) to libjpeg-turbo (tested against libjpeg-turbo
/// alone on every file we have, whole images and windows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum EntropyDecoder {
    /// stokehold's own: several times faster for progressive scans (and stops at the last
    /// block row a window needs), faster Huffman decoding for sequential ones.
    #[default]
    Stokehold,
    /// libjpeg-turbo alone: for comparisons, and an escape hatch.
    Libjpeg,
}

impl EntropyDecoder {
    /// The names of the choices, as the `decode` operator's arguments take them.
    pub const NAMES: &'static [&'static str] = &["stokehold", "libjpeg"];

    /// The name the `decode` operator's arguments use (`"stokehold"`, `"libjpeg"`).
    pub fn name(self) -> &'static str {
        match self {
            EntropyDecoder::Stokehold => "stokehold",
            EntropyDecoder::Libjpeg => "libjpeg",
        }
    }

    /// The decoder [`EntropyDecoder::name`] names.
    pub fn from_name(name: &str) -> Option<EntropyDecoder> {
        match name {
            "stokehold" => Some(EntropyDecoder::Stokehold),
            "libjpeg" => Some(EntropyDecoder::Libjpeg),
            _ => None,
        }
    }
}

/// How to decode. Each pipeline (each `decode` operator) has its own: two pipelines in one
/// process may decode differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Output colour.
    pub color: ColorMode,
    /// Apply the EXIF orientation (as Pillow's `exif_transpose`).
    pub apply_exif: bool,
    /// Resource limits.
    pub limits: Limits,
    /// Who entropy-decodes sequential (baseline and extended) Huffman-coded JPEGs.
    pub sequential_decoder: EntropyDecoder,
    /// Who entropy-decodes progressive Huffman-coded JPEGs (at full scale; DCT-scaled
    /// decodes are libjpeg-turbo's).
    pub progressive_decoder: EntropyDecoder,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            color: ColorMode::Rgb,
            apply_exif: true,
            limits: Limits::default(),
            sequential_decoder: EntropyDecoder::Stokehold,
            progressive_decoder: EntropyDecoder::Stokehold,
        }
    }
}

/// Encoded image formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// JPEG (8-bit baseline, extended or progressive; Huffman or arithmetic coding).
    Jpeg,
    /// PNG.
    Png,
}

/// What [`probe`] (or [`ParsedImage::info`]) learns from the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageInfo {
    /// The format, from the magic bytes.
    pub format: Format,
    /// Width of the decoded image: after the EXIF orientation when
    /// [`DecodeOptions::apply_exif`] is set (orientations 5–8 swap the axes), else as stored.
    pub width: usize,
    /// Height of the decoded image, with the same rule as `width`.
    pub height: usize,
    /// EXIF orientation, 1..=8 (1 when there is none or it is invalid).
    pub orientation: u8,
    /// Components stored in the file (JPEG: 1, 3 or 4; PNG: 1 gray, 2 gray+alpha,
    /// 3 RGB or palette, 4 RGBA).
    pub components: usize,
}

/// Sniffs the format from the first bytes.
pub fn sniff(bytes: &[u8]) -> Option<Format> {
    if bytes.starts_with(&png::SIGNATURE) {
        Some(Format::Png)
    } else if header::find_soi(bytes).is_some() {
        Some(Format::Jpeg)
    } else {
        None
    }
}

/// Fails with [`DecodeError::Limits`] when `width * height` is over `limits.max_pixels`.
pub(crate) fn check_pixels(
    width: usize,
    height: usize,
    limits: &Limits,
) -> Result<(), DecodeError> {
    let px = (width as u64).saturating_mul(height as u64);
    if px > limits.max_pixels {
        return Err(DecodeError::Limits(format!(
            "image is {width}x{height} = {} MP, over the limit of {} MP (max_pixels)",
            mp(px),
            mp(limits.max_pixels)
        )));
    }
    Ok(())
}

fn mp(px: u64) -> String {
    let m = px as f64 / 1e6;
    if m >= 10.0 {
        format!("{m:.0}")
    } else {
        format!("{m:.2}")
    }
}

fn check_file_size(bytes: &[u8], limits: &Limits) -> Result<(), DecodeError> {
    if bytes.len() as u64 > limits.max_file_bytes {
        return Err(DecodeError::Limits(format!(
            "file is {} bytes, over the limit of {} bytes (max_file_bytes)",
            bytes.len(),
            limits.max_file_bytes
        )));
    }
    Ok(())
}

/// Reads only the header: format, size (after orientation when `opts.apply_exif`),
/// orientation and components. Cheap (a JPEG is read up to its first scan, no pixel data is
/// touched) and checks the limits. To decode the same bytes afterwards, read the header once
/// with [`ParsedImage::parse`] instead (its [`ParsedImage::info`] says the same).
pub fn probe(bytes: &[u8], opts: &DecodeOptions) -> Result<ImageInfo, DecodeError> {
    check_file_size(bytes, &opts.limits)?;
    let format = sniff(bytes).ok_or(DecodeError::UnknownFormat)?;
    let (w, h, orientation, components) = match format {
        Format::Jpeg => {
            let hd = JpegHeader::read_to_first_scan(bytes, &opts.limits)?;
            (hd.width(), hd.height(), hd.orientation, hd.components())
        }
        Format::Png => {
            let hd = png::scan(bytes, &opts.limits)?;
            (hd.width, hd.height, hd.orientation, hd.components)
        }
    };
    Ok(image_info(format, w, h, orientation, components, opts))
}

/// The [`ImageInfo`] of a stored `w` × `h` image.
fn image_info(
    format: Format,
    w: usize,
    h: usize,
    orientation: u8,
    components: usize,
    opts: &DecodeOptions,
) -> ImageInfo {
    let (width, height) = if opts.apply_exif && exif::swaps_axes(orientation) {
        (h, w)
    } else {
        (w, h)
    };
    ImageInfo {
        format,
        width,
        height,
        orientation,
        components,
    }
}

/// Decodes a JPEG or PNG into an 8-bit HWC image with `opts.color.channels()` channels
/// ([`ParsedImage::parse`], then [`ParsedImage::decode`]).
pub fn decode(bytes: &[u8], opts: &DecodeOptions) -> Result<Image, DecodeError> {
    ParsedImage::parse(bytes, opts)?.decode()
}

/// A window of an image: (top, left, height, width).
pub type Window = (usize, usize, usize, usize);

/// Decodes only `window` (top, left, height, width) of the image, in the coordinates of the
/// image [`decode`] returns with the same `opts` (after the EXIF orientation when
/// `opts.apply_exif`). The result equals cropping the full decode to `window`, pixel for
/// pixel, but a JPEG decodes only the rows down to the window's bottom and the iMCU columns
/// around it (rows above it are skipped without colour conversion or upsampling). PNG is
/// decoded fully and cropped. The window must be non-empty and inside the image, else
/// [`DecodeError::Window`]. ([`ParsedImage::parse`], then [`ParsedImage::decode_window`]: use
/// those to choose the window from the size without reading the header twice.)
pub fn decode_window(
    bytes: &[u8],
    opts: &DecodeOptions,
    window: Window,
) -> Result<Image, DecodeError> {
    ParsedImage::parse(bytes, opts)?.decode_window(window)
}

/// **Opt-in, not the reference pixels.** Decodes a JPEG downscaled by 1/`scale_denom`
/// (1, 2, 4 or 8) in the DCT domain (libjpeg's scaled IDCT: much less work than a full
/// decode, but the pixels differ from resizing a full decode). The result is `ceil(width /
/// scale_denom)` × `ceil(height / scale_denom)` (after orientation as in [`decode`]).
/// `window` (as in [`decode_window`], or `None` for all of it) is in the *scaled* image's
/// coordinates, and the window's pixels equal the same window of the full scaled decode.
/// PNG is not supported here ([`DecodeError::Unsupported`]). ([`ParsedImage::parse`], then
/// [`ParsedImage::decode_scaled`].)
pub fn decode_scaled(
    bytes: &[u8],
    opts: &DecodeOptions,
    scale_denom: u8,
    window: Option<Window>,
) -> Result<Image, DecodeError> {
    check_scale(scale_denom)?;
    ParsedImage::parse(bytes, opts)?.decode_scaled(scale_denom, window)
}

/// Fails with [`DecodeError::Unsupported`] unless `scale_denom` is 1, 2, 4 or 8.
fn check_scale(scale_denom: u8) -> Result<(), DecodeError> {
    if matches!(scale_denom, 1 | 2 | 4 | 8) {
        Ok(())
    } else {
        Err(DecodeError::Unsupported(format!(
            "DCT-domain scale 1/{scale_denom} (only 1/1, 1/2, 1/4, 1/8)"
        )))
    }
}

fn check_window(window: Window, h: usize, w: usize) -> Result<(), DecodeError> {
    let (top, left, wh, ww) = window;
    if wh == 0 || ww == 0 || top.saturating_add(wh) > h || left.saturating_add(ww) > w {
        return Err(DecodeError::Window(format!(
            "window {wh}x{ww} at ({top}, {left}) is empty or outside the {w}x{h} image"
        )));
    }
    Ok(())
}

/// Runs a decoder, turning a panic into [`DecodeError::Corrupt`].
fn guarded<T>(f: impl FnOnce() -> Result<T, DecodeError>) -> Result<T, DecodeError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            Err(DecodeError::Corrupt(format!("decoder panicked: {msg}")))
        }
    }
}

/// Pillow's RGB → `L`: `(R*19595 + G*38470 + B*7471 + 0x8000) >> 16`.
#[inline]
pub fn luma(r: u8, g: u8, b: u8) -> u8 {
    ((u32::from(r) * 19595 + u32::from(g) * 38470 + u32::from(b) * 7471 + 0x8000) >> 16) as u8
}

/// 1 or 3 channels in, `mode` out.
fn convert_channels(px: Vec<u8>, channels: usize, mode: ColorMode) -> Vec<u8> {
    match (channels, mode) {
        (1, ColorMode::Gray) | (3, ColorMode::Rgb) => px,
        (1, ColorMode::Rgb) => {
            let mut out = Vec::with_capacity(px.len() * 3);
            for &v in &px {
                out.extend_from_slice(&[v, v, v]);
            }
            out
        }
        _ => px.chunks_exact(3).map(|p| luma(p[0], p[1], p[2])).collect(),
    }
}
