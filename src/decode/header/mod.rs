//! The one JPEG header parser: a bounds-checked walk of the markers (SOF, DQT, DHT, SOS, DRI,
//! APPn) into a [`JpegHeader`], read once per sample and handed to every decoder — our
//! entropy decoders, the libjpeg-turbo hand-over, [`super::probe`], window and scaled
//! decodes, and the nvJPEG routing ([`crate::nvjpeg::fallback`]).
//!
//! What we decode, what is [`DecodeError::Unsupported`] and what is truncated is decided
//! here, once, as the walk meets it:
//! - lossless (SOF3, SOF7, SOF11, SOF15), hierarchical (SOF5–SOF7, SOF13–SOF15, DHP) and
//!   12/16-bit precision are `Unsupported`, with a message naming the feature;
//!   arithmetic-coded sequential and progressive JPEGs (SOF9, SOF10) are decoded
//!   (libjpeg-turbo is built with arithmetic decoding, Pillow decodes them too);
//! - frames of 1, 3 or 4 components with sampling factors 1..=4 are decoded;
//! - frame dimensions are checked against [`Limits`] before anything is allocated;
//! - bytes before SOI (within the first 64 KiB) or between segments (garbage that libjpeg
//!   skips with a warning) are tolerated, as Pillow does.
//!
//! # Truncated files
//!
//! [`JpegHeader::read`] follows every scan to the end-of-image marker: a JPEG whose data ends
//! inside a scan or before EOI is rejected with [`DecodeError::Corrupt`] ("truncated: ...").
//! libjpeg would otherwise fill the missing blocks with gray and only warn, and a silently
//! gray-filled image poisons training. Pillow also refuses such files unless
//! `ImageFile.LOAD_TRUNCATED_IMAGES` is set. [`JpegHeader::read_to_first_scan`] stops at the
//! first scan, for what only needs the size.
//!
//! # Damaged data: what libjpeg refuses
//!
//! A marker libjpeg has no meaning for (`FF 04`, which one flipped bit makes of a stuffed
//! `FF 00` in the image data), a progressive scan whose progression libjpeg refuses, and
//! after the first scan's data a malformed DHT, DQT, DRI or SOS segment or a second scan
//! where none can follow, are [`DecodeError::Corrupt`]
//! ("damaged data: ..."): libjpeg refuses them when Pillow finishes the decode
//! (`jpeg_finish_decompress`), which our decoders never call (see `refusals.rs`). Every
//! decoder, nvJPEG's routing included, takes this verdict from the one header read, so both
//! devices skip such a file, as Pillow does. Other damage in the data (an invalid Huffman
//! code, restart markers out of order) only makes libjpeg warn: the file decodes, as in
//! Pillow.
//!
//! # What the walk leaves to libjpeg
//!
//! Before the first scan, tables and scan headers are recorded as found, not judged: a
//! malformed DHT, DQT, SOS or DRI (which libjpeg reports with its own error when it reads
//! the header), or garbage between segments (which it skips), is noted in
//! [`JpegHeader::irregular_at`]. Our entropy decoders then leave the file to libjpeg-turbo
//! ([`JpegHeader::own_sequential_fit`], [`JpegHeader::own_progressive_fit`] say which files
//! they take), so that such files decode, or fail, exactly as libjpeg has them.
//!
//! The walk is in `walk.rs`, the refusals in `refusals.rs`; what a header says beyond its
//! fields (subsampling, the colour space libjpeg reads, which of our entropy decoders takes
//! the file) in `facts.rs`.

mod facts;
mod refusals;
mod walk;

pub use facts::{ColorSpace, Subsampling};

use std::ops::Range;

use super::{DecodeError, Limits};

/// A JPEG's markers, read once: the frame, every table and scan header in file order, the
/// colour markers, the EXIF orientation, and where the entropy-coded data of each scan lies.
/// Offsets are into the bytes given to [`JpegHeader::read`] (junk before SOI included).
///
/// ```
/// use stokehold::decode::header::{ColorSpace, JpegHeader, Subsampling};
/// use stokehold::decode::Limits;
///
/// # let mut jpeg = Vec::new();
/// # let mut encoder = jpeg_encoder::Encoder::new(&mut jpeg, 90);
/// # encoder.set_progressive(true);
/// # encoder.set_sampling_factor(jpeg_encoder::SamplingFactor::R_4_2_0);
/// # encoder.encode(&[90u8; 40 * 30 * 3], 40, 30, jpeg_encoder::ColorType::Rgb).unwrap();
/// let h = JpegHeader::read(&jpeg, &Limits::default())?;
/// assert_eq!((h.width(), h.height(), h.components()), (40, 30, 3));
/// assert!(h.progressive() && h.scans.len() > 1);
/// assert_eq!(h.subsampling(), Some(Subsampling::S420));
/// assert_eq!(h.color_space(), ColorSpace::YCbCr);
/// // Cut anywhere before its end-of-image marker, it is refused as truncated.
/// assert!(JpegHeader::read(&jpeg[..jpeg.len() - 1], &Limits::default()).is_err());
/// # Ok::<(), stokehold::DecodeError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JpegHeader {
    /// Offset of the SOI marker.
    pub soi: usize,
    /// The frame (SOF).
    pub frame: Frame,
    /// EXIF orientation, 1..=8, from the first APP1 `Exif` segment before the first scan (as
    /// Pillow reads it); 1 when absent or invalid.
    pub orientation: u8,
    /// A JFIF APP0 segment comes before the first scan (libjpeg then reads 3 components as
    /// YCbCr whatever the Adobe marker says).
    pub jfif: bool,
    /// The colour transform of the last Adobe APP14 segment before the first scan: 0 (RGB or
    /// CMYK as stored), 1 (YCbCr), 2 (YCCK).
    pub adobe_transform: Option<u8>,
    /// The scans, in file order: all of them from [`JpegHeader::read`], the first from
    /// [`JpegHeader::read_to_first_scan`].
    pub scans: Vec<Scan>,
    /// Every Huffman table defined (DHT), in file order; scans refer to them by index.
    pub huffman_tables: Vec<HuffmanTable>,
    /// Every quantisation table defined (DQT), in file order; scans refer to them by index.
    pub quant_tables: Vec<QuantTable>,
    /// The APP0 and APP14 segments before the first scan (marker to end), which decide
    /// libjpeg's colour space: what a rewritten header must carry over.
    pub color_segments: Vec<Range<usize>>,
    /// The walk went to the end-of-image marker ([`JpegHeader::read`]).
    pub complete: bool,
    /// Where the walk ended: just past EOI when complete, else just past the first scan's
    /// header.
    pub end: usize,
    /// Where the file first departs from the strict marker syntax (garbage between segments,
    /// a malformed DHT, DQT, SOS or DRI segment), if it does: see the module docs.
    pub irregular_at: Option<usize>,
}

/// The frame header (SOF).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The SOF marker: 0xC0 baseline, 0xC1 extended sequential, 0xC2 progressive, 0xC9 and
    /// 0xCA their arithmetic-coded forms.
    pub marker: u8,
    /// Bits per sample (8: anything else is refused).
    pub precision: u8,
    /// Width as stored (before orientation).
    pub width: usize,
    /// Height as stored.
    pub height: usize,
    /// The components (1, 3 or 4), in frame order.
    pub components: Vec<FrameComponent>,
}

/// One component of the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameComponent {
    /// Component id, which scans select it by.
    pub id: u8,
    /// Horizontal sampling factor, 1..=4.
    pub h: u8,
    /// Vertical sampling factor, 1..=4.
    pub v: u8,
    /// Quantisation table slot (`Tq`).
    pub quant_slot: u8,
}

/// A scan: its header (SOS) and where its entropy-coded data lies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan {
    /// The SOS segment, from its marker to the end of its header.
    pub header: Range<usize>,
    /// The entropy-coded data, up to the next marker (restart markers included); `None`
    /// when the walk stopped at the first scan.
    pub data: Option<Range<usize>>,
    /// The scan's components, in scan order (empty when the header is malformed).
    pub components: Vec<ScanComponent>,
    /// Start of spectral selection (`Ss`).
    pub ss: u8,
    /// End of spectral selection (`Se`).
    pub se: u8,
    /// Successive approximation, bit position high (`Ah`).
    pub ah: u8,
    /// Successive approximation, bit position low (`Al`).
    pub al: u8,
    /// The tables and restart interval in effect for this scan.
    pub tables: TablesInEffect,
}

/// One component selector of a scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanComponent {
    /// The id of the frame component it selects.
    pub id: u8,
    /// DC Huffman table slot (`Td`).
    pub dc_slot: u8,
    /// AC Huffman table slot (`Ta`).
    pub ac_slot: u8,
}

/// What each table slot holds at a point of the file (indices into
/// [`JpegHeader::huffman_tables`] and [`JpegHeader::quant_tables`]), and the restart interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TablesInEffect {
    /// DC Huffman tables of slots 0..=3.
    pub dc: [Option<u16>; 4],
    /// AC Huffman tables of slots 0..=3.
    pub ac: [Option<u16>; 4],
    /// Quantisation tables of slots 0..=3.
    pub quant: [Option<u16>; 4],
    /// Restart interval in MCUs (0: none), from the last DRI.
    pub restart_interval: u16,
}

/// A Huffman table definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HuffmanTable {
    /// 0: DC, 1: AC.
    pub class: u8,
    /// Slot 0..=3.
    pub slot: u8,
    /// Its 16 code counts and then its symbols, in the file.
    pub bytes: Range<usize>,
}

/// A quantisation table definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuantTable {
    /// Slot 0..=3.
    pub slot: u8,
    /// Element precision as stored: 0 (8-bit) or 1 (16-bit).
    pub precision: u8,
    /// The 64 values in zigzag order, as stored.
    pub values: [u16; 64],
}

/// Where the JPEG starts: `FF D8 FF` at offset 0, or within the first 64 KiB (junk before
/// SOI, e.g. a leftover container header).
pub(crate) fn find_soi(bytes: &[u8]) -> Option<usize> {
    let window = &bytes[..bytes.len().min(64 * 1024 + 3)];
    window.windows(3).position(|w| w == [0xFF, 0xD8, 0xFF])
}

impl JpegHeader {
    /// Reads every marker up to EOI, following each scan's entropy-coded data to its end
    /// (without decoding it): what decoding needs. Fails as the module docs say (truncated,
    /// unsupported, over `limits.max_pixels`); never panics.
    pub fn read(bytes: &[u8], limits: &Limits) -> Result<JpegHeader, DecodeError> {
        walk::walk(bytes, true, limits)
    }

    /// Reads the markers up to the first scan's header only: enough for the size, the
    /// components and the orientation ([`super::probe`]), and cheap (no entropy-coded data is
    /// touched). Truncation after that point goes unnoticed.
    pub fn read_to_first_scan(bytes: &[u8], limits: &Limits) -> Result<JpegHeader, DecodeError> {
        walk::walk(bytes, false, limits)
    }

    /// Width as stored (before orientation).
    pub fn width(&self) -> usize {
        self.frame.width
    }

    /// Height as stored.
    pub fn height(&self) -> usize {
        self.frame.height
    }

    /// Components in the frame (1, 3 or 4).
    pub fn components(&self) -> usize {
        self.frame.components.len()
    }

    /// Progressive (SOF2, or SOF10 arithmetic-coded).
    pub fn progressive(&self) -> bool {
        matches!(self.frame.marker, 0xC2 | 0xCA)
    }

    /// Arithmetic-coded (SOF9, SOF10) rather than Huffman-coded.
    pub fn arithmetic(&self) -> bool {
        matches!(self.frame.marker, 0xC9 | 0xCA)
    }

    /// The restart interval of the first scan, in MCUs (0: none).
    pub fn restart_interval(&self) -> u16 {
        self.scans.first().map_or(0, |s| s.tables.restart_interval)
    }

    /// The index in [`Frame::components`] of the component with id `id`.
    pub fn component_index(&self, id: u8) -> Option<usize> {
        self.frame.components.iter().position(|c| c.id == id)
    }
}

/// The table a slot (0..=3) holds, if any.
pub(crate) fn slot(slots: &[Option<u16>; 4], s: u8) -> Option<usize> {
    slots
        .get(usize::from(s))
        .copied()
        .flatten()
        .map(usize::from)
}
