//! JPEG pixels from a header read once ([`JpegHeader`]): which decoder does the entropy
//! decoding (ours for Huffman-coded files it takes, as [`DecodeOptions`] chooses, else
//! libjpeg-turbo), then libjpeg-turbo (the `turbo` module) for everything after it, as
//! Pillow decodes.

use super::header::JpegHeader;
use super::options::{DecodeOptions, EntropyDecoder, Upsampling};
use super::turbo::Decoded;
use crate::error::DecodeError;

/// Decodes the JPEG `bytes`, whose header `h` was read by [`JpegHeader::read`], with
/// libjpeg-turbo ([`super::turbo`]) and, where `opts` asks for it and the file fits, our own
/// entropy decoding; returns interleaved pixels with 1 channel (gray input) or 3 (everything
/// else), before orientation. With `region` (top, left, height, width in stored
/// coordinates), only that rectangle, bit-identical to the same rectangle of a full decode.
/// With `scale_denom` 2, 4 or 8, the image is downscaled in the DCT domain (libjpeg's scaled
/// IDCT) to [`scaled_size`] and `region` is in the scaled image.
pub(crate) fn decode_pixels(
    bytes: &[u8],
    h: &JpegHeader,
    region: Option<super::turbo::Rect>,
    scale_denom: u8,
    opts: &DecodeOptions,
) -> Result<(Vec<u8>, usize), DecodeError> {
    decode(bytes, h, region, scale_denom, opts, false).map(|d| (d.pixels, d.channels))
}

/// As [`decode_pixels`], for a `region` of the unscaled image, which may come with columns
/// either side of it: those libjpeg decodes anyway when our entropy decoding feeds it, kept
/// rather than copied out ([`super::turbo::decode_from_source_wide`]).
pub(crate) fn decode_pixels_wide(
    bytes: &[u8],
    h: &JpegHeader,
    region: super::turbo::Rect,
    opts: &DecodeOptions,
) -> Result<Decoded, DecodeError> {
    decode(bytes, h, Some(region), 1, opts, true)
}

fn decode(
    bytes: &[u8],
    h: &JpegHeader,
    region: Option<super::turbo::Rect>,
    scale_denom: u8,
    opts: &DecodeOptions,
    wide: bool,
) -> Result<Decoded, DecodeError> {
    let (width, height) = scaled_size(h.width(), h.height(), scale_denom);
    // The region's (or the image's) size, for a result given packed.
    let (rows, cols) = region.map_or((height, width), |(_, _, rh, rw)| (rh, rw));
    let packed = |(pixels, channels): (Vec<u8>, usize)| Decoded {
        pixels,
        height: rows,
        width: cols,
        channels,
        left: 0,
    };
    let data = &bytes[h.soi..];
    let huffman = !h.arithmetic();
    let progressive = huffman && h.progressive();
    if progressive && scale_denom == 1 && opts.progressive_decoder == EntropyDecoder::Stokehold {
        if let Some(coefficients) = super::progressive::coefficients(bytes, h, region) {
            // Should libjpeg ever refuse our coefficients, the original still decodes (below).
            let fancy = opts.upsampling == Upsampling::Fancy;
            if let Ok(decoded) = coefficients.decode(h.components(), fancy) {
                #[cfg(test)]
                ENTROPY_DECODED_BY.set("stokehold progressive");
                return Ok(packed(decoded));
            }
        }
    }
    let fewer_scans = if progressive && scale_denom == 8 {
        without_unused_ac_scans(bytes, h)
    } else {
        None
    };
    let req = super::turbo::Request {
        width,
        height,
        components: h.components(),
        region,
        scale_denom,
        block_smoothing: fewer_scans.is_none(),
        fancy_upsampling: opts.upsampling == Upsampling::Fancy,
    };
    if huffman && !h.progressive() && opts.sequential_decoder == EntropyDecoder::Stokehold {
        if let Some(mut scan) = super::baseline::scan(bytes, h) {
            // Should our entropy decoding decline, libjpeg decodes the file alone (below).
            let decoded = match wide {
                true => super::turbo::decode_from_source_wide(data, &req, &mut scan),
                false => super::turbo::decode_from_source(data, &req, &mut scan)
                    .map(|(px, _, _, c)| packed((px, c))),
            };
            if let Ok(decoded) = decoded {
                #[cfg(test)]
                ENTROPY_DECODED_BY.set("stokehold sequential");
                return Ok(decoded);
            }
        }
    }
    let (px, _, _, c) = super::turbo::decode(fewer_scans.as_deref().unwrap_or(data), &req)?;
    #[cfg(test)]
    ENTROPY_DECODED_BY.set("libjpeg");
    Ok(packed((px, c)))
}

#[cfg(test)]
thread_local! {
    /// Who entropy-decoded the last JPEG this thread decoded: tests check that the choice
    /// in [`DecodeOptions`] is what decodes (the pixels are the same either way).
    pub(super) static ENTROPY_DECODED_BY: std::cell::Cell<&'static str> =
        const { std::cell::Cell::new("") };
}

/// Size of a `width` × `height` JPEG decoded at 1/`scale_denom` (libjpeg rounds up).
pub(crate) fn scaled_size(width: usize, height: usize, scale_denom: u8) -> (usize, usize) {
    let d = usize::from(scale_denom.max(1));
    (width.div_ceil(d), height.div_ceil(d))
}

/// For a Huffman-coded progressive JPEG (`bytes`, header `h` read to EOI) decoded at 1/8: a
/// copy without the AC scans of the components whose scaled IDCT is 1×1, which reads nothing
/// but the DC coefficient. Those scans are most of a progressive file and most of its (slow,
/// bit-serial) decoding; the pixels are the same as decoding every scan, provided block
/// smoothing is off (libjpeg would otherwise treat the missing AC coefficients as "not yet
/// received" and estimate them, even moving DC). `None` when nothing can be dropped
/// (baseline, arithmetic-coded, or no component with a 1×1 IDCT) or the header has
/// something irregular; the caller then decodes `bytes` as they are.
pub(crate) fn without_unused_ac_scans(bytes: &[u8], h: &JpegHeader) -> Option<Vec<u8>> {
    if h.frame.marker != 0xC2 || !h.complete || h.irregular_at.is_some() {
        return None;
    }
    let droppable = one_by_one_idct_at_eighth(h)?;
    let mut out = Vec::with_capacity((h.end - h.soi) / 2);
    // Copied up to here.
    let mut from = h.soi;
    for s in &h.scans {
        let drop = matches!(&s.components[..], [c] if s.ss > 0 && droppable.contains(&c.id));
        if drop {
            out.extend_from_slice(&bytes[from..s.header.start]);
            from = s.data.as_ref()?.end;
        }
    }
    if from == h.soi {
        return None;
    }
    out.extend_from_slice(&bytes[from..h.end]);
    Some(out)
}

/// The ids of the components of a progressive frame that libjpeg-turbo decodes with a 1×1
/// IDCT at scale 1/8: it enlarges a subsampled component's IDCT (instead of upsampling)
/// while that divides evenly, as `jpeg_calc_output_dimensions` does. `None` when the ids
/// are not distinct.
fn one_by_one_idct_at_eighth(h: &JpegHeader) -> Option<Vec<u8>> {
    let comps = &h.frame.components;
    let max_h = comps.iter().map(|c| usize::from(c.h)).max()?;
    let max_v = comps.iter().map(|c| usize::from(c.v)).max()?;
    if (1..comps.len()).any(|i| comps[..i].iter().any(|c| c.id == comps[i].id)) {
        return None;
    }
    // At 1/8 the smallest IDCT is 1×1; a component's grows ×2 while both its sampling
    // ratios stay divisible.
    Some(
        comps
            .iter()
            .filter(|c| {
                let (h, v) = (usize::from(c.h), usize::from(c.v));
                !(max_h % (h * 2) == 0 && max_v % (v * 2) == 0)
            })
            .map(|c| c.id)
            .collect(),
    )
}
