//! Which format a file is ([`sniff`], from its first bytes, never from its name) and what its
//! header tells before decoding ([`ImageInfo`]).

use super::exif;
use super::header::find_soi;
use super::options::DecodeOptions;
use super::png;

/// Encoded image formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// JPEG (8-bit baseline, extended or progressive; Huffman or arithmetic coding).
    Jpeg,
    /// PNG.
    Png,
}

/// What [`probe`](super::probe) (or [`ParsedImage::info`](super::ParsedImage::info)) learns
/// from the header.
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
    } else if find_soi(bytes).is_some() {
        Some(Format::Jpeg)
    } else {
        None
    }
}

/// The [`ImageInfo`] of a stored `w` × `h` image.
pub(super) fn image_info(
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
