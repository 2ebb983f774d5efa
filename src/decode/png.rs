//! PNG through the `png` crate, with the header (IHDR) and the EXIF orientation (eXIf chunk)
//! read by a bounds-checked chunk walk of our own, so that limits are checked before the
//! `png` crate allocates anything.
//!
//! Conversions (what Pillow's `convert("RGB")` gives, except where noted):
//! - palette images are expanded to RGB; transparency (tRNS or alpha) is dropped, not
//!   composited (Pillow's `RGBA → RGB` and `LA → RGB` also just drop it);
//! - 1/2/4-bit gray is scaled to 0..255 (Pillow: same);
//! - 16-bit samples keep their high byte (Pillow: same for RGB/RGBA/LA 16-bit; for 16-bit
//!   *gray* Pillow opens mode `I;16` and clamps every value above 255 to 255, which turns
//!   almost any real 16-bit gray image white; we take the high byte there too, on purpose);
//! - gray is replicated into three channels for [`super::ColorMode::Rgb`].

use std::io::Cursor;

use png::{BitDepth, ColorType, Transformations};

use super::exif::orientation_from_tiff;
use super::limits::{check_pixels, Limits};
use crate::error::DecodeError;

/// The 8-byte PNG signature.
pub(crate) const SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];

/// What the chunk walk found.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PngHeader {
    pub width: usize,
    pub height: usize,
    /// Channels in the file (1 gray, 2 gray+alpha, 3 RGB or palette, 4 RGBA).
    pub components: usize,
    pub orientation: u8,
}

fn corrupt(msg: impl Into<String>) -> DecodeError {
    DecodeError::Corrupt(msg.into())
}

/// Reads IHDR and walks the chunks up to the first IDAT looking for eXIf.
pub(crate) fn scan(bytes: &[u8], limits: &Limits) -> Result<PngHeader, DecodeError> {
    let be32 = |off: usize| -> Option<u32> {
        let b = bytes.get(off..off.checked_add(4)?)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    if bytes.get(12..16) != Some(b"IHDR") {
        return Err(corrupt(
            "PNG: the first chunk is not IHDR (or the file is truncated)",
        ));
    }
    let (Some(w), Some(h), Some(ihdr)) = (be32(16), be32(20), bytes.get(24..29)) else {
        return Err(corrupt("truncated: the PNG ends inside its header (IHDR)"));
    };
    if w == 0 || h == 0 || w > i32::MAX as u32 || h > i32::MAX as u32 {
        return Err(corrupt(format!("PNG: invalid dimensions {w}x{h}")));
    }
    let components = match ihdr[1] {
        0 => 1,
        2 | 3 => 3,
        4 => 2,
        6 => 4,
        t => return Err(corrupt(format!("PNG: invalid color type {t}"))),
    };
    let (width, height) = (w as usize, h as usize);
    check_pixels(width, height, limits)?;
    // Walk chunks after IHDR (8 signature + 4 len + 4 type + 13 data + 4 crc = 33).
    let mut orientation = 1;
    let mut at = 33usize;
    while let (Some(len), Some(ty)) = (be32(at), bytes.get(at + 4..at + 8)) {
        if ty == b"IDAT" || ty == b"IEND" {
            break;
        }
        let start = at + 8;
        let end = start.saturating_add(len as usize);
        if ty == b"eXIf" {
            if let Some(data) = bytes.get(start..end) {
                let tiff = data.strip_prefix(b"Exif\0\0").unwrap_or(data);
                orientation = orientation_from_tiff(tiff).unwrap_or(1);
            }
            break;
        }
        at = end.saturating_add(4);
    }
    Ok(PngHeader {
        width,
        height,
        components,
        orientation,
    })
}

fn map_png(e: png::DecodingError) -> DecodeError {
    match e {
        png::DecodingError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            corrupt("truncated: the PNG data ends before the image is complete")
        }
        png::DecodingError::LimitsExceeded => {
            DecodeError::Limits("PNG: decoder memory limit exceeded".into())
        }
        png::DecodingError::Parameter(p) => corrupt(format!("PNG: {p}")),
        other => corrupt(format!("PNG: {other}")),
    }
}

/// Decodes the first frame to 8-bit samples with 1 channel (gray input without colour) or
/// 3 (everything else); alpha is dropped.
pub(crate) fn decode_pixels(
    bytes: &[u8],
    hdr: &PngHeader,
) -> Result<(Vec<u8>, usize), DecodeError> {
    // Working memory besides our output: a few rows plus the inflate window.
    let limits = png::Limits {
        bytes: hdr.width.saturating_mul(8 * 8).saturating_add(64 << 20),
    };
    let mut dec = png::Decoder::new_with_limits(Cursor::new(bytes), limits);
    dec.set_transformations(Transformations::EXPAND | Transformations::STRIP_16);
    dec.set_ignore_text_chunk(true);
    let mut reader = dec.read_info().map_err(map_png)?;
    let (w, h) = reader.info().size();
    if (w as usize, h as usize) != (hdr.width, hdr.height) {
        return Err(corrupt("PNG: header size changed"));
    }
    let (ct, depth) = reader.output_color_type();
    if depth != BitDepth::Eight {
        return Err(corrupt(format!("PNG: unexpected output depth {depth:?}")));
    }
    let in_ch = match ct {
        ColorType::Grayscale => 1,
        ColorType::GrayscaleAlpha => 2,
        ColorType::Rgb => 3,
        ColorType::Rgba => 4,
        ColorType::Indexed => return Err(corrupt("PNG: palette was not expanded")),
    };
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| DecodeError::Limits("PNG: output size overflows".into()))?;
    if size != hdr.width * hdr.height * in_ch {
        return Err(corrupt("PNG: unexpected output size"));
    }
    let mut buf = vec![0u8; size];
    reader.next_frame(&mut buf).map_err(map_png)?;
    let out_ch = if in_ch <= 2 { 1 } else { 3 };
    if in_ch != out_ch {
        // Drop alpha in place: compact each pixel to its first `out_ch` samples.
        let n = hdr.width * hdr.height;
        for p in 0..n {
            for k in 0..out_ch {
                buf[p * out_ch + k] = buf[p * in_ch + k];
            }
        }
        buf.truncate(n * out_ch);
    }
    Ok((buf, out_ch))
}
