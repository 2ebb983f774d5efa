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
mod color;
pub mod exif;
mod format;
pub mod header;
mod huffman;
mod jpeg;
mod limits;
mod options;
mod parsed;
pub mod png;
mod progressive;
mod simd;
mod turbo;

#[cfg(test)]
mod tests;

pub use color::{luma, ColorMode};
pub use format::{sniff, Format, ImageInfo};
pub use header::JpegHeader;
pub use limits::Limits;
pub use options::{DecodeOptions, EntropyDecoder, Upsampling};
pub use parsed::{ParsedImage, Window};
pub use simd::{jpeg_simd, jpeg_simd_warning, JpegSimd};

pub use crate::error::DecodeError;
use crate::image::Image;
use format::image_info;
use limits::check_file_size;
use parsed::check_scale;

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

/// Decodes a JPEG or PNG into an 8-bit HWC image with `opts.color.channels()` channels
/// ([`ParsedImage::parse`], then [`ParsedImage::decode`]).
pub fn decode(bytes: &[u8], opts: &DecodeOptions) -> Result<Image, DecodeError> {
    ParsedImage::parse(bytes, opts)?.decode()
}

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
