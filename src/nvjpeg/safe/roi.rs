//! Which region nvJPEG decodes for a region of interest, and where the region asked for lies
//! in what it writes.
//!
//! A JPEG whose chroma is subsampled is decoded an MCU wider on every side too
//! ([`needs_margin`]): the GPU stage rebuilds libjpeg's interpolated chroma from the
//! decoded pixels (`kernels/chroma.cu`), and a pixel's interpolated chroma reads the
//! neighbouring chroma blocks.
//!
//! nvJPEG before 13.3 decodes the border of a region of interest wrongly when chroma is
//! upsampled by interpolation (`NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION`, which we ask
//! for `upsampling = "fancy"`; fixed in 13.3, and the GPU machines' CUDA 13.0 has 13.0). With
//! such a library the region is widened by one MCU on every side (clamped to the image),
//! repeated chroma included (untried there, and nearly free), so the wrong border falls
//! outside what is used, and the kernel that reads the decoded image
//! reads only the [`DecodeRegion::window`] (the window goes into its descriptor, as any crop).

use super::super::result::NvjpegError;
use super::handle::Roi;
use crate::decode::JpegHeader;

/// How one image is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeRegion {
    /// The region nvJPEG decodes (stored-image coordinates); `None` for the whole image.
    pub decode: Option<Roi>,
    /// Width of what is written.
    pub width: usize,
    /// Height of what is written.
    pub height: usize,
    /// The region asked for, inside what is written.
    pub window: Roi,
}

/// Whether a region of `header`'s image must be decoded with a margin: its chroma is
/// subsampled, and the interpolation the GPU stage rebuilds reads the neighbouring chroma
/// blocks.
pub fn needs_margin(header: &JpegHeader) -> bool {
    let c = &header.frame.components;
    c.len() > 1 && c.iter().any(|k| (k.h, k.v) != (c[0].h, c[0].v))
}

/// The region to decode for `roi` (stored-image coordinates; `None`: the whole image) of the
/// JPEG whose header is `header`; `pad` when the library has the ROI boundary bug
/// ([`super::super::Nvjpeg::roi_boundary_bug`]) or the caller needs a margin. An error
/// when the region is empty or not inside the image.
pub fn decode_region(
    header: &JpegHeader,
    roi: Option<Roi>,
    pad: bool,
) -> Result<DecodeRegion, NvjpegError> {
    let (w, h) = (header.width(), header.height());
    let mcu = header.frame.components.iter().fold((8, 8), |(mw, mh), c| {
        (mw.max(8 * usize::from(c.h)), mh.max(8 * usize::from(c.v)))
    });
    region_in(w, h, mcu, roi, pad)
}

/// [`decode_region`] for a `w` × `h` image whose MCU is `mcu` = (width, height) pixels.
pub(crate) fn region_in(
    w: usize,
    h: usize,
    mcu: (usize, usize),
    roi: Option<Roi>,
    pad: bool,
) -> Result<DecodeRegion, NvjpegError> {
    let whole = Roi {
        x: 0,
        y: 0,
        width: w,
        height: h,
    };
    let Some(r) = roi else {
        return Ok(DecodeRegion {
            decode: None,
            width: w,
            height: h,
            window: whole,
        });
    };
    let right = r.x.checked_add(r.width);
    let bottom = r.y.checked_add(r.height);
    if r.width == 0 || r.height == 0 || right.is_none_or(|e| e > w) || bottom.is_none_or(|e| e > h)
    {
        return Err(NvjpegError::InvalidArgument(format!(
            "ROI {r:?} is not inside the {w}x{h} image"
        )));
    }
    let decoded = if pad {
        let x = r.x.saturating_sub(mcu.0);
        let y = r.y.saturating_sub(mcu.1);
        let x1 = (r.x + r.width).saturating_add(mcu.0).min(w);
        let y1 = (r.y + r.height).saturating_add(mcu.1).min(h);
        Roi {
            x,
            y,
            width: x1 - x,
            height: y1 - y,
        }
    } else {
        r
    };
    Ok(DecodeRegion {
        // A region that covers the image is decoded as the whole image (no ROI path at all).
        decode: (decoded != whole).then_some(decoded),
        width: decoded.width,
        height: decoded.height,
        window: Roi {
            x: r.x - decoded.x,
            y: r.y - decoded.y,
            width: r.width,
            height: r.height,
        },
    })
}
