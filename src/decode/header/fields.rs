//! What a read JPEG header holds ([`JpegHeader`] and its parts), and the plain facts read off
//! it; the walk that fills it is `walk.rs`.

use std::ops::Range;

use smallvec::SmallVec;

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
    pub scans: SmallVec<[Scan; 1]>,
    /// Every Huffman table defined (DHT), in file order; scans refer to them by index.
    pub huffman_tables: SmallVec<[HuffmanTable; 4]>,
    /// Every quantisation table defined (DQT), in file order; scans refer to them by index.
    pub quant_tables: SmallVec<[QuantTable; 3]>,
    /// The APP0 and APP14 segments before the first scan (marker to end), which decide
    /// libjpeg's colour space: what a rewritten header must carry over.
    pub color_segments: SmallVec<[Range<usize>; 2]>,
    /// The walk went to the end-of-image marker ([`JpegHeader::read`]).
    pub complete: bool,
    /// Where the walk ended: just past EOI when complete, else just past the first scan's
    /// header.
    pub end: usize,
    /// Where the file first departs from the strict marker syntax or holds what libjpeg
    /// refuses when it decodes (garbage between segments; a malformed DHT, DQT, SOS or DRI
    /// segment; a frame header too long or too large; a scan naming a component out of the
    /// frame's order, a table that isn't there or one libjpeg refuses), if it does: see the
    /// module docs.
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
    pub components: SmallVec<[FrameComponent; 4]>,
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
    pub components: SmallVec<[ScanComponent; 4]>,
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
    /// libjpeg refuses it when a scan decodes with it ("Bogus Huffman table definition":
    /// codes that overflow their lengths, a DC symbol above 15).
    pub refused: bool,
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

impl JpegHeader {
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
