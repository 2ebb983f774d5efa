//! An encoded image whose header was read once ([`ParsedImage`]), and the decodes that start
//! from it: whole, a window, or DCT-scaled.

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::color::convert_channels;
use super::format::{image_info, sniff, Format, ImageInfo};
use super::header::JpegHeader;
use super::limits::check_file_size;
use super::options::DecodeOptions;
use super::{exif, jpeg, png};
use crate::error::DecodeError;
use crate::image::Image;

/// A window of an image: (top, left, height, width).
pub type Window = (usize, usize, usize, usize);

/// An encoded JPEG or PNG whose header has been read, with the options to decode it with:
/// what every decode starts from, so that a sample's header is read once however many steps
/// use it (the size a crop window is drawn on, then the window's decode, then the entropy
/// decoders).
///
/// ```
/// use stokehold::decode::{DecodeOptions, ParsedImage};
///
/// # fn main() -> Result<(), stokehold::decode::DecodeError> {
/// # let mut jpeg = Vec::new();
/// # jpeg_encoder::Encoder::new(&mut jpeg, 90)
/// #     .encode(&[128u8; 64 * 48 * 3], 64, 48, jpeg_encoder::ColorType::Rgb)
/// #     .unwrap();
/// let image = ParsedImage::parse(&jpeg, &DecodeOptions::default())?; // the header, once
/// let info = image.info(); // size after the EXIF orientation
/// assert_eq!((info.width, info.height), (64, 48));
/// // The centre half, exactly the pixels a full decode has there.
/// let window = (info.height / 4, info.width / 4, info.height / 2, info.width / 2);
/// let part = image.decode_window(window)?;
/// assert_eq!((part.height, part.width, part.channels), (24, 32, 3));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ParsedImage<'a> {
    bytes: &'a [u8],
    opts: DecodeOptions,
    header: Header,
}

/// The header of either format (a JPEG's in place: boxing it would allocate a sample).
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
enum Header {
    Jpeg(JpegHeader),
    Png(png::PngHeader),
}

impl<'a> ParsedImage<'a> {
    /// Reads the header of `bytes` (a JPEG's every marker to EOI, so a truncated file fails
    /// here; see [`super::header`]), checking `opts.limits` before anything is allocated.
    /// The decodes of the result use `opts`.
    pub fn parse(bytes: &'a [u8], opts: &DecodeOptions) -> Result<ParsedImage<'a>, DecodeError> {
        check_file_size(bytes, &opts.limits)?;
        let header = match sniff(bytes).ok_or(DecodeError::UnknownFormat)? {
            Format::Jpeg => Header::Jpeg(JpegHeader::read(bytes, &opts.limits)?),
            Format::Png => Header::Png(png::scan(bytes, &opts.limits)?),
        };
        Ok(ParsedImage {
            bytes,
            opts: *opts,
            header,
        })
    }

    /// `bytes` whose JPEG header `header` was read already (by [`JpegHeader::read`] with
    /// `opts.limits`, or taken from a parse of the same bytes with
    /// [`ParsedImage::into_jpeg_header`]): the decodes of [`ParsedImage::parse`] without
    /// reading the header again.
    pub(crate) fn with_jpeg_header(
        bytes: &'a [u8],
        opts: &DecodeOptions,
        header: JpegHeader,
    ) -> ParsedImage<'a> {
        ParsedImage {
            bytes,
            opts: *opts,
            header: Header::Jpeg(header),
        }
    }

    /// The JPEG header, for a JPEG, to hand on (the GPU path's decoder takes it).
    pub(crate) fn into_jpeg_header(self) -> Option<JpegHeader> {
        match self.header {
            Header::Jpeg(h) => Some(h),
            Header::Png(_) => None,
        }
    }

    /// The encoded bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The options it decodes with.
    pub fn options(&self) -> &DecodeOptions {
        &self.opts
    }

    /// The format.
    pub fn format(&self) -> Format {
        match self.header {
            Header::Jpeg(_) => Format::Jpeg,
            Header::Png(_) => Format::Png,
        }
    }

    /// The JPEG header (markers, tables, scans), for a JPEG.
    pub fn jpeg_header(&self) -> Option<&JpegHeader> {
        match &self.header {
            Header::Jpeg(h) => Some(h),
            Header::Png(_) => None,
        }
    }

    /// Format, size (after the orientation when the options apply it), orientation and
    /// components: what [`super::probe`] says of the same bytes.
    pub fn info(&self) -> ImageInfo {
        let (w, h, orientation, components) = match &self.header {
            Header::Jpeg(hd) => (hd.width(), hd.height(), hd.orientation, hd.components()),
            Header::Png(hd) => (hd.width, hd.height, hd.orientation, hd.components),
        };
        image_info(self.format(), w, h, orientation, components, &self.opts)
    }

    /// Decodes the image into an 8-bit HWC image with `color.channels()` channels of the
    /// options ([`super::decode`]).
    pub fn decode(&self) -> Result<Image, DecodeError> {
        let opts = &self.opts;
        let (w, h, orientation, pixels, channels) = match &self.header {
            Header::Jpeg(hd) => {
                let (px, c) = guarded(|| jpeg::decode_pixels(self.bytes, hd, None, 1, opts))?;
                (hd.width(), hd.height(), hd.orientation, px, c)
            }
            Header::Png(hd) => {
                let (px, c) = guarded(|| png::decode_pixels(self.bytes, hd))?;
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

    /// Decodes only `window` (top, left, height, width, in the coordinates of the image
    /// [`ParsedImage::decode`] returns): see [`super::decode_window`].
    pub fn decode_window(&self, window: Window) -> Result<Image, DecodeError> {
        self.decode_window_at(window, 1)
    }

    /// As [`ParsedImage::decode_window`], but the image may hold columns either side of the
    /// window — those the decoder produced anyway, kept rather than copied out — so it comes
    /// with where the window lies in it: the same pixels there. For code that reads a window
    /// of the image (a resize of it, as the fused crop-and-resize operators do).
    ///
    /// ```
    /// use stokehold::decode::{DecodeOptions, ParsedImage};
    ///
    /// # fn main() -> Result<(), stokehold::decode::DecodeError> {
    /// # let mut jpeg = Vec::new();
    /// # jpeg_encoder::Encoder::new(&mut jpeg, 90)
    /// #     .encode(&[128u8; 160 * 64 * 3], 160, 64, jpeg_encoder::ColorType::Rgb)
    /// #     .unwrap();
    /// let image = ParsedImage::parse(&jpeg, &DecodeOptions::default())?;
    /// let (rows, at) = image.decode_window_within((10, 50, 30, 40))?;
    /// let (top, left, h, w) = at;
    /// assert_eq!((top, h, w, rows.height), (0, 30, 40, 30));
    /// assert!(left + w <= rows.width); // what `decode_window` gives, from column `left`
    /// # Ok(())
    /// # }
    /// ```
    pub fn decode_window_within(&self, window: Window) -> Result<(Image, Window), DecodeError> {
        let opts = &self.opts;
        if let Header::Jpeg(hd) = &self.header {
            let o = if opts.apply_exif { hd.orientation } else { 1 };
            let c = opts.color.channels();
            // Stored = oriented coordinates, and no channel conversion to come.
            if !(2..=8).contains(&o) && hd.components() == c {
                check_window(window, hd.height(), hd.width())?;
                let d = guarded(|| jpeg::decode_pixels_wide(self.bytes, hd, window, opts))?;
                let within = (0, d.left, window.2, window.3);
                return Ok((Image::from_u8_hwc(d.height, d.width, c, d.pixels), within));
            }
        }
        let im = self.decode_window(window)?;
        let within = (0, 0, im.height, im.width);
        Ok((im, within))
    }

    /// **Opt-in, not the reference pixels.** Decodes a JPEG downscaled by 1/`scale_denom`
    /// (1, 2, 4 or 8) in the DCT domain, `window` (or all of it) in the scaled image's
    /// coordinates: see [`super::decode_scaled`].
    pub fn decode_scaled(
        &self,
        scale_denom: u8,
        window: Option<Window>,
    ) -> Result<Image, DecodeError> {
        check_scale(scale_denom)?;
        match window {
            Some(w) => self.decode_window_at(w, scale_denom),
            None => {
                if self.format() != Format::Jpeg {
                    return Err(DecodeError::Unsupported(
                        "DCT-domain scaling is for JPEG only".into(),
                    ));
                }
                let info = self.info();
                let d = usize::from(scale_denom);
                let (h, w) = (info.height.div_ceil(d), info.width.div_ceil(d));
                self.decode_window_at((0, 0, h, w), scale_denom)
            }
        }
    }

    fn decode_window_at(&self, window: Window, scale_denom: u8) -> Result<Image, DecodeError> {
        let opts = &self.opts;
        match &self.header {
            Header::Jpeg(hd) => {
                let o = if opts.apply_exif { hd.orientation } else { 1 };
                let (sw, sh) = jpeg::scaled_size(hd.width(), hd.height(), scale_denom);
                let (oh, ow) = if exif::swaps_axes(o) {
                    (sw, sh)
                } else {
                    (sh, sw)
                };
                check_window(window, oh, ow)?;
                let stored = exif::stored_rect(window, sh, sw, o);
                let (px, c) = guarded(|| {
                    jpeg::decode_pixels(self.bytes, hd, Some(stored), scale_denom, opts)
                })?;
                let pixels = convert_channels(px, c, opts.color);
                let c = opts.color.channels();
                let (pixels, h, w) = exif::apply_orientation(pixels, stored.2, stored.3, c, o);
                Ok(Image::from_u8_hwc(h, w, c, pixels))
            }
            Header::Png(_) if scale_denom > 1 => Err(DecodeError::Unsupported(
                "DCT-domain scaling is for JPEG only".into(),
            )),
            Header::Png(_) => {
                let im = self.decode()?;
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
}

/// Fails with [`DecodeError::Unsupported`] unless `scale_denom` is 1, 2, 4 or 8.
pub(super) fn check_scale(scale_denom: u8) -> Result<(), DecodeError> {
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
