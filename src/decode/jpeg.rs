//! JPEG: our own bounds-checked marker walk (what the file is, whether we decode it, whether
//! it is complete), then libjpeg-turbo (the `turbo` module) for the pixels, as Pillow does.
//!
//! The marker walk runs before libjpeg sees the data, so that
//! - lossless (SOF3, SOF7, SOF11, SOF15), hierarchical (SOF5–SOF7, SOF13–SOF15, DHP) and
//!   12/16-bit precision are rejected as [`DecodeError::Unsupported`] with a message naming
//!   the feature; arithmetic-coded sequential and progressive JPEGs (SOF9, SOF10) are
//!   decoded (libjpeg-turbo is built with arithmetic decoding, Pillow decodes them too);
//! - frame dimensions are checked against [`Limits`] before anything is allocated;
//! - files that end before the image is complete are rejected (see below);
//! - bytes before SOI or between segments (garbage that libjpeg skips with a warning) are
//!   tolerated, as Pillow does.
//!
//! # Truncated files
//!
//! A JPEG whose data ends inside a scan or before the EOI marker is rejected with
//! [`DecodeError::Corrupt`] ("truncated: ..."). libjpeg would otherwise fill the
//! missing blocks with gray and only warn, and a silently gray-filled image poisons training.
//! Pillow also refuses such files unless `ImageFile.LOAD_TRUNCATED_IMAGES` is set.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use super::exif::orientation_from_app1;
use super::{check_pixels, DecodeError, Limits};

/// What the marker walk found.
#[derive(Debug, Clone)]
pub(crate) struct JpegHeader {
    /// Offset of the SOI marker in the input.
    pub soi: usize,
    /// Frame width (as stored, before orientation).
    pub width: usize,
    /// Frame height (as stored).
    pub height: usize,
    /// Components in the frame (1, 3 or 4).
    pub components: usize,
    /// EXIF orientation, 1 when absent.
    pub orientation: u8,
    /// Arithmetic-coded (SOF9/SOF10) rather than Huffman-coded.
    pub arithmetic: bool,
    /// Huffman-coded progressive (SOF2).
    pub progressive: bool,
}

fn corrupt(msg: impl Into<String>) -> DecodeError {
    DecodeError::Corrupt(msg.into())
}

/// Where the JPEG starts: `FF D8 FF` at offset 0, or within the first 64 KiB (junk before
/// SOI, e.g. a leftover container header).
pub(crate) fn find_soi(bytes: &[u8]) -> Option<usize> {
    let window = &bytes[..bytes.len().min(64 * 1024 + 3)];
    window.windows(3).position(|w| w == [0xFF, 0xD8, 0xFF])
}

fn sof_name(m: u8) -> &'static str {
    match m {
        0xC0 => "baseline",
        0xC1 => "extended sequential",
        0xC2 => "progressive",
        0xC3 => "lossless (SOF3)",
        0xC5 => "differential sequential (SOF5)",
        0xC6 => "differential progressive (SOF6)",
        0xC7 => "differential lossless (SOF7)",
        0xC9 => "arithmetic-coded (SOF9)",
        0xCA => "arithmetic-coded progressive (SOF10)",
        0xCB => "arithmetic-coded lossless (SOF11)",
        0xCD => "arithmetic-coded differential (SOF13)",
        0xCE => "arithmetic-coded differential progressive (SOF14)",
        0xCF => "arithmetic-coded differential lossless (SOF15)",
        _ => "unknown",
    }
}

/// Walks the markers. With `full`, follows every scan to EOI and fails when the data ends
/// first; without, stops at the first SOS (enough for [`super::probe`]).
pub(crate) fn scan(bytes: &[u8], full: bool, limits: &Limits) -> Result<JpegHeader, DecodeError> {
    let soi = find_soi(bytes).ok_or(DecodeError::UnknownFormat)?;
    let d = bytes;
    let mut i = soi + 2;
    let mut frame: Option<(usize, usize, usize)> = None;
    let mut orientation: Option<u8> = None;
    let mut scans = 0usize;
    let mut arithmetic = false;
    let mut progressive = false;
    loop {
        // Find the next marker: skip garbage up to 0xFF, then fill bytes.
        // (Entropy-coded data is most of the file: search it with memchr's vector loop.)
        i = memchr::memchr(0xFF, &d[i.min(d.len())..]).map_or(d.len(), |k| i + k);
        while i < d.len() && d[i] == 0xFF {
            i += 1;
        }
        let Some(&m) = d.get(i) else {
            return Err(match (frame, scans) {
                (None, _) => corrupt("truncated: the JPEG ends before its frame header (SOF)"),
                (Some(_), 0) => corrupt("truncated: the JPEG ends before its first scan (SOS)"),
                _ => corrupt("truncated: the JPEG ends without an end-of-image marker (EOI)"),
            });
        };
        i += 1;
        match m {
            0x00 | 0x01 | 0xD0..=0xD7 => continue, // stray stuffing / TEM / RSTn: no length
            0xD8 => {
                return Err(corrupt(
                    "a second start-of-image marker (SOI) inside the JPEG",
                ))
            }
            0xD9 => {
                return match frame {
                    None => Err(corrupt("end-of-image marker (EOI) before any frame header")),
                    Some(_) if scans == 0 => Err(corrupt("the JPEG has no image data (no SOS)")),
                    Some((width, height, components)) => Ok(JpegHeader {
                        soi,
                        width,
                        height,
                        components,
                        orientation: orientation.unwrap_or(1),
                        arithmetic,
                        progressive,
                    }),
                }
            }
            _ => {}
        }
        let len = match d.get(i..i + 2) {
            Some(b) => usize::from(u16::from_be_bytes([b[0], b[1]])),
            None => return Err(corrupt("truncated: the JPEG ends inside a marker segment")),
        };
        if len < 2 {
            return Err(corrupt(format!(
                "marker 0xFF{m:02X} has an invalid length {len}"
            )));
        }
        let Some(payload) = d.get(i + 2..i + len) else {
            return Err(corrupt(format!(
                "truncated: the JPEG ends inside marker segment 0xFF{m:02X}"
            )));
        };
        i += len;
        match m {
            0xC0..=0xCF if m != 0xC4 && m != 0xC8 && m != 0xCC => {
                if frame.is_some() {
                    return Err(corrupt("more than one frame header (SOF)"));
                }
                if !matches!(m, 0xC0..=0xC2 | 0xC9 | 0xCA) {
                    return Err(DecodeError::Unsupported(format!(
                        "{} JPEG is not supported",
                        sof_name(m)
                    )));
                }
                if payload.len() < 6 {
                    return Err(corrupt("frame header (SOF) is too short"));
                }
                let precision = payload[0];
                if precision != 8 {
                    return Err(DecodeError::Unsupported(format!(
                        "{precision}-bit JPEG is not supported (only 8-bit precision)"
                    )));
                }
                let height = usize::from(u16::from_be_bytes([payload[1], payload[2]]));
                let width = usize::from(u16::from_be_bytes([payload[3], payload[4]]));
                let nc = usize::from(payload[5]);
                if height == 0 {
                    return Err(DecodeError::Unsupported(
                        "JPEG with the height given later in a DNL marker is not supported".into(),
                    ));
                }
                if width == 0 {
                    return Err(corrupt("frame header (SOF) gives width 0"));
                }
                if !matches!(nc, 1 | 3 | 4) {
                    return Err(DecodeError::Unsupported(format!(
                        "JPEG with {nc} components is not supported (only 1, 3 or 4)"
                    )));
                }
                if payload.len() < 6 + 3 * nc {
                    return Err(corrupt("frame header (SOF) is too short"));
                }
                for c in payload[6..6 + 3 * nc].chunks_exact(3) {
                    let (h, v) = (c[1] >> 4, c[1] & 15);
                    if !(1..=4).contains(&h) || !(1..=4).contains(&v) {
                        return Err(corrupt(format!(
                            "invalid sampling factors {h}x{v} in the frame header"
                        )));
                    }
                }
                check_pixels(width, height, limits)?;
                frame = Some((width, height, nc));
                arithmetic = matches!(m, 0xC9 | 0xCA);
                progressive = m == 0xC2;
            }
            0xDE => {
                return Err(DecodeError::Unsupported(
                    "hierarchical JPEG (DHP marker) is not supported".into(),
                ))
            }
            // Only an EXIF block before the first scan counts (as in Pillow, which reads
            // the markers up to SOS); one between scans would make `probe`, which stops
            // at the first SOS, disagree with `decode`.
            0xE1 if scans == 0 && orientation.is_none() && payload.starts_with(b"Exif\0\0") => {
                orientation = Some(orientation_from_app1(payload).unwrap_or(1));
            }
            0xDA => {
                if frame.is_none() {
                    return Err(corrupt("scan (SOS) before the frame header (SOF)"));
                }
                scans += 1;
                if !full {
                    let (width, height, components) = frame.unwrap_or((0, 0, 0));
                    return Ok(JpegHeader {
                        soi,
                        width,
                        height,
                        components,
                        orientation: orientation.unwrap_or(1),
                        arithmetic,
                        progressive,
                    });
                }
                i = end_of_entropy_data(d, i).ok_or_else(|| {
                    corrupt(format!("truncated: the JPEG data ends inside scan {scans}"))
                })?;
            }
            _ => {}
        }
    }
}

/// Decodes a JPEG whose header `h` was found by a full [`scan`] with libjpeg-turbo
/// ([`super::turbo`]); returns interleaved pixels with 1 channel (gray input) or 3
/// (everything else), before orientation. With `region` (top, left, height, width in stored
/// coordinates), only that rectangle, bit-identical to the same rectangle of a full decode.
/// With `scale_denom` 2, 4 or 8, the image is downscaled in the DCT domain (libjpeg's scaled
/// IDCT) to [`scaled_size`] and `region` is in the scaled image.
pub(crate) fn decode_pixels(
    bytes: &[u8],
    h: &JpegHeader,
    region: Option<super::turbo::Rect>,
    scale_denom: u8,
) -> Result<(Vec<u8>, usize), DecodeError> {
    let (width, height) = scaled_size(h.width, h.height, scale_denom);
    let data = &bytes[h.soi..];
    if h.progressive && scale_denom == 1 && OWN_PROGRESSIVE_DECODER.load(Relaxed) {
        if let Some(coefficients) = super::progressive::coefficients(data, region) {
            // Should libjpeg ever refuse our coefficients, the original still decodes (below).
            if let Ok(decoded) = coefficients.decode(h.components) {
                return Ok(decoded);
            }
        }
    }
    let fewer_scans = if h.progressive && scale_denom == 8 && !h.arithmetic {
        without_unused_ac_scans(data)
    } else {
        None
    };
    let req = super::turbo::Request {
        width,
        height,
        components: h.components,
        region,
        scale_denom,
        block_smoothing: fewer_scans.is_none(),
    };
    if !h.progressive && !h.arithmetic && OWN_SEQUENTIAL_DECODER.load(Relaxed) {
        if let Some(mut scan) = super::baseline::scan(data) {
            // Should our entropy decoding decline, libjpeg decodes the file alone (below).
            if let Ok((px, _, _, c)) = super::turbo::decode_from_source(data, &req, &mut scan) {
                return Ok((px, c));
            }
        }
    }
    let (px, _, _, c) = super::turbo::decode(fewer_scans.as_deref().unwrap_or(data), &req)?;
    Ok((px, c))
}

/// Whether sequential Huffman-coded JPEGs are entropy-decoded by [`super::baseline`] (on)
/// or by libjpeg-turbo.
pub(crate) static OWN_SEQUENTIAL_DECODER: AtomicBool = AtomicBool::new(true);

/// Whether progressive JPEGs go through [`super::progressive`] (on; tests and the decoder
/// comparison turn it off to get libjpeg's own progressive decoding as the reference).
pub(crate) static OWN_PROGRESSIVE_DECODER: AtomicBool = AtomicBool::new(true);

/// Size of a `width` × `height` JPEG decoded at 1/`scale_denom` (libjpeg rounds up).
pub(crate) fn scaled_size(width: usize, height: usize, scale_denom: u8) -> (usize, usize) {
    let d = usize::from(scale_denom.max(1));
    (width.div_ceil(d), height.div_ceil(d))
}

/// Where the entropy-coded data starting at `from` ends: the 0xFF of the next marker that is
/// neither stuffing (0xFF00), fill (0xFFFF) nor a restart marker. `None` if the data ends
/// first (a truncated file).
pub(super) fn end_of_entropy_data(d: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    loop {
        i += memchr::memchr(0xFF, d.get(i..)?)?;
        let mut j = i + 1;
        while d.get(j) == Some(&0xFF) {
            j += 1;
        }
        match *d.get(j)? {
            0x00 | 0xD0..=0xD7 => i = j + 1,
            _ => return Some(j - 1),
        }
    }
}

/// For a Huffman-coded progressive JPEG decoded at 1/8: a copy without the AC scans of the
/// components whose scaled IDCT is 1×1, which reads nothing but the DC coefficient. Those
/// scans are most of a progressive file and most of its (slow, bit-serial) decoding; the
/// pixels are the same as decoding every scan, provided block smoothing is off (libjpeg
/// would otherwise treat the missing AC coefficients as "not yet received" and estimate
/// them, even moving DC). `None` when nothing can be dropped (baseline, arithmetic-coded, or
/// no component with a 1×1 IDCT) or the walk meets something unexpected; the caller then
/// decodes `bytes` as they are.
pub(crate) fn without_unused_ac_scans(bytes: &[u8]) -> Option<Vec<u8>> {
    let d = bytes;
    if d.get(..2) != Some(&[0xFF, 0xD8]) {
        return None;
    }
    let mut out = Vec::with_capacity(d.len() / 2);
    out.extend_from_slice(&d[..2]);
    // Component ids whose AC scans can go.
    let mut droppable: Vec<u8> = Vec::new();
    let mut dropped = false;
    let mut i = 2;
    loop {
        // Fill bytes before a marker are allowed.
        while d.get(i) == Some(&0xFF) && d.get(i + 1) == Some(&0xFF) {
            i += 1;
        }
        if d.get(i) != Some(&0xFF) {
            return None;
        }
        let m = *d.get(i + 1)?;
        if m == 0xD9 {
            out.extend_from_slice(&d[i..i + 2]);
            return dropped.then_some(out);
        }
        let len = usize::from(u16::from_be_bytes([*d.get(i + 2)?, *d.get(i + 3)?]));
        let payload = d.get(i + 4..i + 2 + len)?;
        let segment_end = i + 2 + len;
        match m {
            0xC2 => droppable = one_by_one_idct_at_eighth(payload)?,
            // Any other frame type: leave the file alone.
            0xC0 | 0xC1 | 0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xCD..=0xCF => return None,
            _ => {}
        }
        if m != 0xDA {
            out.extend_from_slice(&d[i..segment_end]);
            i = segment_end;
            continue;
        }
        // A scan: its header, then entropy-coded data up to the next marker.
        let ns = usize::from(*payload.first()?);
        let ss = *payload.get(1 + 2 * ns)?;
        let drop = ns == 1 && ss > 0 && droppable.contains(payload.get(1)?);
        let j = end_of_entropy_data(d, segment_end)?;
        if drop {
            dropped = true;
        } else {
            out.extend_from_slice(&d[i..j]);
        }
        i = j;
    }
}

/// The ids of the components of a progressive frame (SOF2 payload) that libjpeg-turbo
/// decodes with a 1×1 IDCT at scale 1/8: it enlarges a subsampled component's IDCT (instead
/// of upsampling) while that divides evenly, as `jpeg_calc_output_dimensions` does.
fn one_by_one_idct_at_eighth(sof: &[u8]) -> Option<Vec<u8>> {
    let nc = usize::from(*sof.get(5)?);
    let comps = sof.get(6..6 + 3 * nc)?;
    let factors: Vec<(u8, usize, usize)> = comps
        .chunks_exact(3)
        .map(|c| (c[0], usize::from(c[1] >> 4), usize::from(c[1] & 15)))
        .collect();
    let max_h = factors.iter().map(|f| f.1).max()?;
    let max_v = factors.iter().map(|f| f.2).max()?;
    let mut ids: Vec<u8> = factors.iter().map(|f| f.0).collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.len() != nc || factors.iter().any(|&(_, h, v)| h == 0 || v == 0) {
        return None;
    }
    // At 1/8 the smallest IDCT is 1×1; a component's grows ×2 while both its sampling
    // ratios stay divisible.
    Some(
        factors
            .iter()
            .filter(|&&(_, h, v)| !(max_h % (h * 2) == 0 && max_v % (v * 2) == 0))
            .map(|&(id, _, _)| id)
            .collect(),
    )
}
