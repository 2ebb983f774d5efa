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
//!   is applied exactly like Pillow's `ImageOps.exif_transpose` (see [`exif`]).
//!
//! JPEG specifics (what is supported, the truncation policy) are in [`jpeg`]; pixels come
//! from libjpeg-turbo (the same decoder Pillow uses, bundled by `mozjpeg-sys`; building needs
//! a C compiler and `nasm`). Huffman-coded JPEGs are entropy-decoded by our own code
//! (`progressive` for progressive scans, `baseline` for sequential ones, which share
//! `huffman`), which hands libjpeg-turbo the coefficients in place of its own entropy
//! decoding, so the pixels are libjpeg-turbo's; whatever ours cannot match exactly goes to
//! libjpeg-turbo alone. PNG conversions are in [`png`]. No input panics: libjpeg's
//! fatal errors unwind to a `catch_unwind` (never `longjmp`), both decoders run under
//! `catch_unwind` as a last line of defence, and a panic is reported as
//! [`DecodeError::Corrupt`].
//!
//! [`decode_window`] decodes only a window of the (oriented) image, with exactly the pixels a
//! full [`decode`] has there: for JPEG it skips the rows above the window and the iMCU columns
//! left and right of it (libjpeg-turbo's `jpeg_skip_scanlines` / `jpeg_crop_scanline`).

mod baseline;
pub mod exif;
mod huffman;
pub mod jpeg;
pub mod png;
mod progressive;
mod turbo;

#[cfg(test)]
mod tests;

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

/// How to decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Output colour.
    pub color: ColorMode,
    /// Apply the EXIF orientation (as Pillow's `exif_transpose`).
    pub apply_exif: bool,
    /// Resource limits.
    pub limits: Limits,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            color: ColorMode::Rgb,
            apply_exif: true,
            limits: Limits::default(),
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

/// What [`probe`] learns from the header.
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
    } else if jpeg::find_soi(bytes).is_some() {
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
/// orientation and components. Cheap (no pixel data is touched) and checks the limits.
pub fn probe(bytes: &[u8], opts: &DecodeOptions) -> Result<ImageInfo, DecodeError> {
    check_file_size(bytes, &opts.limits)?;
    let format = sniff(bytes).ok_or(DecodeError::UnknownFormat)?;
    let (w, h, orientation, components) = match format {
        Format::Jpeg => {
            let hd = jpeg::scan(bytes, false, &opts.limits)?;
            (hd.width, hd.height, hd.orientation, hd.components)
        }
        Format::Png => {
            let hd = png::scan(bytes, &opts.limits)?;
            (hd.width, hd.height, hd.orientation, hd.components)
        }
    };
    let (width, height) = if opts.apply_exif && exif::swaps_axes(orientation) {
        (h, w)
    } else {
        (w, h)
    };
    Ok(ImageInfo {
        format,
        width,
        height,
        orientation,
        components,
    })
}

/// Decodes a JPEG or PNG into an 8-bit HWC image with `opts.color.channels()` channels.
pub fn decode(bytes: &[u8], opts: &DecodeOptions) -> Result<Image, DecodeError> {
    check_file_size(bytes, &opts.limits)?;
    let format = sniff(bytes).ok_or(DecodeError::UnknownFormat)?;
    let (w, h, orientation, pixels, channels) = match format {
        Format::Jpeg => {
            let hd = jpeg::scan(bytes, true, &opts.limits)?;
            let (px, c) = guarded(|| jpeg::decode_pixels(bytes, &hd, None, 1))?;
            (hd.width, hd.height, hd.orientation, px, c)
        }
        Format::Png => {
            let hd = png::scan(bytes, &opts.limits)?;
            let (px, c) = guarded(|| png::decode_pixels(bytes, &hd))?;
            (hd.width, hd.height, hd.orientation, px, c)
        }
    };
    let pixels = convert_channels(pixels, channels, opts.color);
    let c = opts.color.channels();
    let (pixels, h, w) = if opts.apply_exif {
        exif::apply_orientation(pixels, h, w, c, orientation)
    } else {
        (pixels, h, w)
    };
    Ok(Image::from_u8_hwc(h, w, c, pixels))
}

/// Whether Huffman-coded progressive JPEGs get their coefficients from stokehold's own
/// decoder (the default) or are decoded by libjpeg-turbo alone. Process-wide.
///
/// Ours decodes progressive scans several times faster than libjpeg-turbo and stops at the
/// last block row a window needs, then hands libjpeg-turbo the needed part's coefficients
/// to turn into pixels as for a sequential JPEG. The pixels are the same either way (tested against libjpeg-turbo
/// on every progressive file we have, whole images and windows); a file ours cannot match
/// exactly (corrupt data, incomplete refinement, CMYK...) goes to libjpeg-turbo anyway. The
/// switch is for comparisons, and an escape hatch.
pub fn set_own_progressive_decoder(on: bool) {
    jpeg::OWN_PROGRESSIVE_DECODER.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Whether sequential (baseline) Huffman-coded JPEGs are entropy-decoded by stokehold
/// (the default) or by libjpeg-turbo. Process-wide.
///
/// Either way libjpeg-turbo does everything after entropy decoding, so the pixels are the
/// same (tested against libjpeg-turbo alone on every file we have, whole images and
/// windows); ours reads the Huffman codes faster. A file ours cannot decode exactly as
/// libjpeg-turbo would (corrupt data, data that ends early) goes to libjpeg-turbo anyway.
/// The switch is for comparisons, and an escape hatch.
pub fn set_own_sequential_decoder(on: bool) {
    jpeg::OWN_SEQUENTIAL_DECODER.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// A window of an image: (top, left, height, width).
pub type Window = (usize, usize, usize, usize);

/// Decodes only `window` (top, left, height, width) of the image, in the coordinates of the
/// image [`decode`] returns with the same `opts` (after the EXIF orientation when
/// `opts.apply_exif`). The result equals cropping the full decode to `window`, pixel for
/// pixel, but a JPEG decodes only the rows down to the window's bottom and the iMCU columns
/// around it (rows above it are skipped without colour conversion or upsampling). PNG is
/// decoded fully and cropped. The window must be non-empty and inside the image, else
/// [`DecodeError::Window`].
pub fn decode_window(
    bytes: &[u8],
    opts: &DecodeOptions,
    window: Window,
) -> Result<Image, DecodeError> {
    decode_window_at(bytes, opts, window, 1)
}

/// **Opt-in, not the reference pixels.** Decodes a JPEG downscaled by 1/`scale_denom`
/// (1, 2, 4 or 8) in the DCT domain (libjpeg's scaled IDCT: much less work than a full
/// decode, but the pixels differ from resizing a full decode). The result is `ceil(width /
/// scale_denom)` × `ceil(height / scale_denom)` (after orientation as in [`decode`]).
/// `window` (as in [`decode_window`], or `None` for all of it) is in the *scaled* image's
/// coordinates, and the window's pixels equal the same window of the full scaled decode.
/// PNG is not supported here ([`DecodeError::Unsupported`]).
pub fn decode_scaled(
    bytes: &[u8],
    opts: &DecodeOptions,
    scale_denom: u8,
    window: Option<Window>,
) -> Result<Image, DecodeError> {
    if !matches!(scale_denom, 1 | 2 | 4 | 8) {
        return Err(DecodeError::Unsupported(format!(
            "DCT-domain scale 1/{scale_denom} (only 1/1, 1/2, 1/4, 1/8)"
        )));
    }
    match window {
        Some(w) => decode_window_at(bytes, opts, w, scale_denom),
        None => {
            let info = probe(bytes, opts)?;
            if info.format != Format::Jpeg {
                return Err(DecodeError::Unsupported(
                    "DCT-domain scaling is for JPEG only".into(),
                ));
            }
            let d = usize::from(scale_denom);
            let (h, w) = (info.height.div_ceil(d), info.width.div_ceil(d));
            decode_window_at(bytes, opts, (0, 0, h, w), scale_denom)
        }
    }
}

fn decode_window_at(
    bytes: &[u8],
    opts: &DecodeOptions,
    window: Window,
    scale_denom: u8,
) -> Result<Image, DecodeError> {
    check_file_size(bytes, &opts.limits)?;
    let format = sniff(bytes).ok_or(DecodeError::UnknownFormat)?;
    match format {
        Format::Jpeg => {
            let hd = jpeg::scan(bytes, true, &opts.limits)?;
            let o = if opts.apply_exif { hd.orientation } else { 1 };
            let (sw, sh) = jpeg::scaled_size(hd.width, hd.height, scale_denom);
            let (oh, ow) = if exif::swaps_axes(o) {
                (sw, sh)
            } else {
                (sh, sw)
            };
            check_window(window, oh, ow)?;
            let stored = exif::stored_rect(window, sh, sw, o);
            let (px, c) = guarded(|| jpeg::decode_pixels(bytes, &hd, Some(stored), scale_denom))?;
            let pixels = convert_channels(px, c, opts.color);
            let c = opts.color.channels();
            let (pixels, h, w) = exif::apply_orientation(pixels, stored.2, stored.3, c, o);
            Ok(Image::from_u8_hwc(h, w, c, pixels))
        }
        Format::Png if scale_denom > 1 => Err(DecodeError::Unsupported(
            "DCT-domain scaling is for JPEG only".into(),
        )),
        Format::Png => {
            let im = decode(bytes, opts)?;
            check_window(window, im.height, im.width)?;
            let (top, left, h, w) = window;
            let c = im.channels;
            let src = im
                .as_u8_hwc()
                .ok_or_else(|| DecodeError::Corrupt("decoded image is not u8 HWC".into()))?;
            let mut out = Vec::with_capacity(h * w * c);
            for y in top..top + h {
                let row = (y * im.width + left) * c;
                out.extend_from_slice(&src[row..row + w * c]);
            }
            Ok(Image::from_u8_hwc(h, w, c, out))
        }
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
