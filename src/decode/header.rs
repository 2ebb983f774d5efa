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
//! # What the walk leaves to libjpeg
//!
//! Tables and scan headers are recorded as found, not judged: a malformed DHT, DQT, SOS or
//! DRI (which libjpeg reports with its own error), or garbage between segments (which it
//! skips), is noted in [`JpegHeader::irregular_at`]. Our entropy decoders then leave the file
//! to libjpeg-turbo ([`JpegHeader::own_sequential_fit`], [`JpegHeader::own_progressive_fit`]
//! say which files they take), so that such files decode, or fail, exactly as libjpeg has
//! them.

use std::ops::Range;

use super::exif::orientation_from_app1;
use super::{check_pixels, DecodeError, Limits};

/// A JPEG's markers, read once: the frame, every table and scan header in file order, the
/// colour markers, the EXIF orientation, and where the entropy-coded data of each scan lies.
/// Offsets are into the bytes given to [`JpegHeader::read`] (junk before SOI included).
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

/// Chroma subsampling, named as nvJPEG names it (`nvjpegChromaSubsampling_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Subsampling {
    /// 4:4:4.
    S444,
    /// 4:2:2 (half horizontal).
    S422,
    /// 4:2:0 (half both ways).
    S420,
    /// 4:4:0 (half vertical).
    S440,
    /// 4:1:1 (quarter horizontal).
    S411,
    /// 4:1:0 (quarter horizontal, half vertical).
    S410,
    /// 4:1:0 vertical (half horizontal, quarter vertical).
    S410V,
    /// One component.
    Gray,
}

/// How the stored components are to be read: libjpeg's `jpeg_color_space` guess from the
/// markers and component ids (jdapimin.c), which the CPU decoder follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColorSpace {
    /// One component.
    Gray,
    /// Three components, Y Cb Cr (JFIF, Adobe transform 1, ids 1 2 3, or unknown).
    YCbCr,
    /// Three components stored as R G B (no JFIF, and Adobe transform 0 or ids `R` `G` `B`).
    Rgb,
    /// Four components, C M Y K (Adobe transform 0, or no Adobe marker).
    Cmyk,
    /// Four components, Y Cb Cr K (any other Adobe transform).
    Ycck,
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

impl JpegHeader {
    /// Reads every marker up to EOI, following each scan's entropy-coded data to its end
    /// (without decoding it): what decoding needs. Fails as the module docs say (truncated,
    /// unsupported, over `limits.max_pixels`); never panics.
    pub fn read(bytes: &[u8], limits: &Limits) -> Result<JpegHeader, DecodeError> {
        walk(bytes, true, limits)
    }

    /// Reads the markers up to the first scan's header only: enough for the size, the
    /// components and the orientation ([`super::probe`]), and cheap (no entropy-coded data is
    /// touched). Truncation after that point goes unnoticed.
    pub fn read_to_first_scan(bytes: &[u8], limits: &Limits) -> Result<JpegHeader, DecodeError> {
        walk(bytes, false, limits)
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

    /// The chroma subsampling nvJPEG would report, or `None` for what it has no name for
    /// (`NVJPEG_CSS_UNKNOWN`: Cb and Cr sampled differently, chroma larger than luma, four
    /// components).
    pub fn subsampling(&self) -> Option<Subsampling> {
        let c = &self.frame.components;
        match c.len() {
            1 => Some(Subsampling::Gray),
            3 => {
                let (y, cb, cr) = ((c[0].h, c[0].v), (c[1].h, c[1].v), (c[2].h, c[2].v));
                if cb != cr || y.0 % cb.0 != 0 || y.1 % cb.1 != 0 {
                    return None;
                }
                match (y.0 / cb.0, y.1 / cb.1) {
                    (1, 1) => Some(Subsampling::S444),
                    (2, 1) => Some(Subsampling::S422),
                    (2, 2) => Some(Subsampling::S420),
                    (1, 2) => Some(Subsampling::S440),
                    (4, 1) => Some(Subsampling::S411),
                    (4, 2) => Some(Subsampling::S410),
                    (2, 4) => Some(Subsampling::S410V),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// How libjpeg (and so the CPU decoder) reads the stored components: its rules, in its
    /// order (a JFIF marker means YCbCr; then the Adobe transform; then the component ids).
    pub fn color_space(&self) -> ColorSpace {
        let c = &self.frame.components;
        match c.len() {
            1 => ColorSpace::Gray,
            4 => match self.adobe_transform {
                None | Some(0) => ColorSpace::Cmyk,
                Some(_) => ColorSpace::Ycck,
            },
            _ if self.jfif => ColorSpace::YCbCr,
            _ => match self.adobe_transform {
                Some(0) => ColorSpace::Rgb,
                Some(_) => ColorSpace::YCbCr,
                None if [c[0].id, c[1].id, c[2].id] == *b"RGB" => ColorSpace::Rgb,
                None => ColorSpace::YCbCr,
            },
        }
    }

    /// The index in [`Frame::components`] of the component with id `id`.
    pub fn component_index(&self, id: u8) -> Option<usize> {
        self.frame.components.iter().position(|c| c.id == id)
    }

    /// Whether our sequential entropy decoder ([`super::baseline`]) decodes this file's
    /// first scan for libjpeg; otherwise libjpeg-turbo entropy-decodes it. It takes a
    /// Huffman-coded sequential frame (SOF0, SOF1; 8-bit, 1, 3 or 4 components with distinct
    /// ids) whose first scan libjpeg decodes in one pass: every component, Ss 0, Se 63, no
    /// successive approximation, at most 10 blocks per MCU, every Huffman table it uses
    /// defined, and nothing irregular up to its header.
    pub(crate) fn own_sequential_fit(&self) -> bool {
        let f = &self.frame;
        let Some(scan) = self.scans.first() else {
            return false;
        };
        let ns = scan.components.len();
        let blocks: usize = if ns == 1 {
            1
        } else {
            f.components.iter().map(|c| usize::from(c.h * c.v)).sum()
        };
        matches!(f.marker, 0xC0 | 0xC1)
            && self.irregular_at.is_none_or(|at| at >= scan.header.end)
            && self.distinct_component_ids()
            && ns == f.components.len()
            && (scan.ss, scan.se, scan.ah, scan.al) == (0, 63, 0, 0)
            && self.selects_distinct_frame_components(scan)
            && scan.components.iter().all(|s| {
                slot(&scan.tables.dc, s.dc_slot).is_some()
                    && slot(&scan.tables.ac, s.ac_slot).is_some()
            })
            && blocks <= 10
    }

    /// Whether our progressive decoder ([`super::progressive`]) decodes this file's
    /// coefficients for libjpeg; otherwise libjpeg-turbo decodes it alone. It takes a
    /// complete Huffman-coded progressive frame (SOF2; 8-bit, 1 or 3 components with distinct
    /// ids, quantisation slots 0..=3, at most 10 blocks per MCU) with nothing irregular,
    /// whose scans follow libjpeg's rules for progressive scans, refine every coefficient of
    /// every component exactly to its last bit (libjpeg would otherwise smooth blocks), and
    /// have the tables they use defined.
    pub(crate) fn own_progressive_fit(&self) -> bool {
        let f = &self.frame;
        let nc = f.components.len();
        let frame_ok = f.marker == 0xC2
            && self.complete
            && self.irregular_at.is_none()
            && matches!(nc, 1 | 3)
            && self.distinct_component_ids()
            && f.components.iter().all(|c| c.quant_slot <= 3)
            && (nc == 1 || f.components.iter().map(|c| c.h * c.v).sum::<u8>() <= 10);
        frame_ok && self.progression_is_exact()
    }

    fn distinct_component_ids(&self) -> bool {
        let c = &self.frame.components;
        (1..c.len()).all(|i| c[..i].iter().all(|x| x.id != c[i].id))
    }

    /// Every selector of `scan` names a frame component, none twice.
    fn selects_distinct_frame_components(&self, scan: &Scan) -> bool {
        let s = &scan.components;
        s.iter().all(|c| self.component_index(c.id).is_some())
            && (1..s.len()).all(|i| s[..i].iter().all(|x| x.id != s[i].id))
    }

    /// The scans of a progressive frame, checked as our decoder needs them: each valid by
    /// libjpeg's rules, coefficients refined in order (each scan's `Ah` the last one's `Al`)
    /// and completely, the quantisation table of each component defined at its first scan,
    /// and the Huffman tables each scan decodes with defined.
    fn progression_is_exact(&self) -> bool {
        let nc = self.frame.components.len();
        // libjpeg's `coef_bits`: per component and coefficient, -1 before its first scan,
        // then the last scan's Al.
        let mut bits = vec![[-1i8; 64]; nc];
        for scan in &self.scans {
            let ns = scan.components.len();
            let (ss, se, ah, al) = (scan.ss, scan.se, scan.ah, scan.al);
            let valid = if ss == 0 {
                se == 0
            } else {
                ns == 1 && ss <= se && se <= 63
            };
            if !(1..=4).contains(&ns)
                || !self.selects_distinct_frame_components(scan)
                || !valid
                || al > 13
                || (ah != 0 && ah != al + 1)
            {
                return false;
            }
            for s in &scan.components {
                let Some(ci) = self.component_index(s.id) else {
                    return false;
                };
                let b = &mut bits[ci];
                if b.iter().all(|&x| x < 0)
                    && slot(&scan.tables.quant, self.frame.components[ci].quant_slot).is_none()
                {
                    return false; // no quantisation table to latch
                }
                let needs_table = if ss == 0 {
                    ah > 0 || slot(&scan.tables.dc, s.dc_slot).is_some()
                } else {
                    slot(&scan.tables.ac, s.ac_slot).is_some()
                };
                if !needs_table || (ss > 0 && b[0] < 0) {
                    return false; // a table missing, or AC before DC
                }
                let expected = if ah == 0 { -1 } else { ah as i8 };
                for x in &mut b[usize::from(ss)..=usize::from(se)] {
                    if *x != expected {
                        return false;
                    }
                    *x = al as i8;
                }
            }
        }
        bits.iter().all(|b| b.iter().all(|&x| x == 0))
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

/// The marker walk behind [`JpegHeader::read`] (`full`) and
/// [`JpegHeader::read_to_first_scan`].
fn walk(bytes: &[u8], full: bool, limits: &Limits) -> Result<JpegHeader, DecodeError> {
    let soi = find_soi(bytes).ok_or(DecodeError::UnknownFormat)?;
    let d = bytes;
    let mut i = soi + 2;
    let mut h = JpegHeader {
        soi,
        frame: Frame {
            marker: 0,
            precision: 0,
            width: 0,
            height: 0,
            components: Vec::new(),
        },
        orientation: 1,
        jfif: false,
        adobe_transform: None,
        scans: Vec::new(),
        huffman_tables: Vec::new(),
        quant_tables: Vec::new(),
        color_segments: Vec::new(),
        complete: false,
        end: 0,
        irregular_at: None,
    };
    let mut has_frame = false;
    let mut exif_seen = false;
    let mut tables = TablesInEffect::default();
    loop {
        // The next marker: garbage up to 0xFF, then fill bytes. (Entropy-coded data is most
        // of the file and is skipped in `end_of_entropy_data`; this finds the next segment.)
        let expected = i;
        i = memchr::memchr(0xFF, &d[i.min(d.len())..]).map_or(d.len(), |k| i + k);
        if i > expected && i < d.len() {
            h.irregular_at.get_or_insert(expected);
        }
        while i < d.len() && d[i] == 0xFF {
            i += 1;
        }
        let Some(&m) = d.get(i) else {
            return Err(match (has_frame, h.scans.len()) {
                (false, _) => corrupt("truncated: the JPEG ends before its frame header (SOF)"),
                (true, 0) => corrupt("truncated: the JPEG ends before its first scan (SOS)"),
                _ => corrupt("truncated: the JPEG ends without an end-of-image marker (EOI)"),
            });
        };
        let start = i - 1;
        i += 1;
        match m {
            0x00 => {
                // Stray stuffing: no length; libjpeg skips it with a warning.
                h.irregular_at.get_or_insert(start);
                continue;
            }
            0x01 | 0xD0..=0xD7 => continue, // TEM / RSTn: no length
            0xD8 => {
                return Err(corrupt(
                    "a second start-of-image marker (SOI) inside the JPEG",
                ))
            }
            0xD9 => {
                return if !has_frame {
                    Err(corrupt("end-of-image marker (EOI) before any frame header"))
                } else if h.scans.is_empty() {
                    Err(corrupt("the JPEG has no image data (no SOS)"))
                } else {
                    h.complete = true;
                    h.end = i;
                    Ok(h)
                };
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
        let payload_at = i + 2;
        i += len;
        let before_first_scan = h.scans.is_empty();
        match m {
            0xC0..=0xCF if m != 0xC4 && m != 0xC8 && m != 0xCC => {
                if has_frame {
                    return Err(corrupt("more than one frame header (SOF)"));
                }
                h.frame = read_frame(m, payload, limits)?;
                has_frame = true;
            }
            0xDE => {
                return Err(DecodeError::Unsupported(
                    "hierarchical JPEG (DHP marker) is not supported".into(),
                ))
            }
            0xC4 => {
                if read_dht(payload, payload_at, &mut h.huffman_tables, &mut tables).is_none() {
                    h.irregular_at.get_or_insert(start);
                }
            }
            0xDB => {
                if read_dqt(payload, &mut h.quant_tables, &mut tables).is_none() {
                    h.irregular_at.get_or_insert(start);
                }
            }
            0xDD => match payload {
                [a, b, ..] => tables.restart_interval = u16::from_be_bytes([*a, *b]),
                _ => {
                    h.irregular_at.get_or_insert(start);
                }
            },
            0xE0 | 0xEE if before_first_scan => {
                h.color_segments.push(start..i);
                // libjpeg's rules: a JFIF APP0 of at least 14 bytes, an Adobe APP14 of 12.
                if m == 0xE0 && payload.len() >= 14 && payload.starts_with(b"JFIF\0") {
                    h.jfif = true;
                }
                if m == 0xEE && payload.len() >= 12 && payload.starts_with(b"Adobe") {
                    h.adobe_transform = Some(payload[11]);
                }
            }
            // Only an EXIF block before the first scan counts (as in Pillow, which reads
            // the markers up to SOS); one between scans would make `probe`, which stops
            // at the first SOS, disagree with `decode`.
            0xE1 if before_first_scan && !exif_seen && payload.starts_with(b"Exif\0\0") => {
                exif_seen = true;
                h.orientation = orientation_from_app1(payload).unwrap_or(1);
            }
            0xDA => {
                if !has_frame {
                    return Err(corrupt("scan (SOS) before the frame header (SOF)"));
                }
                let mut scan = read_sos(payload, start..i, tables).unwrap_or_else(|| {
                    h.irregular_at.get_or_insert(start);
                    Scan {
                        header: start..i,
                        data: None,
                        components: Vec::new(),
                        ss: 0,
                        se: 0,
                        ah: 0,
                        al: 0,
                        tables,
                    }
                });
                if !full {
                    h.scans.push(scan);
                    h.end = i;
                    return Ok(h);
                }
                let n = h.scans.len() + 1;
                let data_end = end_of_entropy_data(d, i).ok_or_else(|| {
                    corrupt(format!("truncated: the JPEG data ends inside scan {n}"))
                })?;
                scan.data = Some(i..data_end);
                h.scans.push(scan);
                i = data_end;
            }
            _ => {}
        }
    }
}

/// A frame header (SOF payload) we decode, or why not.
fn read_frame(m: u8, payload: &[u8], limits: &Limits) -> Result<Frame, DecodeError> {
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
    let Some(specs) = payload.get(6..6 + 3 * nc) else {
        return Err(corrupt("frame header (SOF) is too short"));
    };
    let mut components = Vec::with_capacity(nc);
    for c in specs.chunks_exact(3) {
        let (h, v) = (c[1] >> 4, c[1] & 15);
        if !(1..=4).contains(&h) || !(1..=4).contains(&v) {
            return Err(corrupt(format!(
                "invalid sampling factors {h}x{v} in the frame header"
            )));
        }
        components.push(FrameComponent {
            id: c[0],
            h,
            v,
            quant_slot: c[2],
        });
    }
    check_pixels(width, height, limits)?;
    Ok(Frame {
        marker: m,
        precision,
        width,
        height,
        components,
    })
}

/// Records the tables of a DHT payload (starting at `at` in the file) and puts them in their
/// slots. `None` when the segment is malformed (tables up to there are kept).
fn read_dht(
    mut p: &[u8],
    mut at: usize,
    defs: &mut Vec<HuffmanTable>,
    tables: &mut TablesInEffect,
) -> Option<()> {
    while !p.is_empty() {
        let counts = p.get(1..17)?;
        let (class, slot) = (p[0] >> 4, p[0] & 15);
        let n: usize = counts.iter().map(|&c| usize::from(c)).sum();
        if slot > 3 || class > 1 || n > 256 || p.len() < 17 + n {
            return None;
        }
        let index = u16::try_from(defs.len()).ok()?;
        defs.push(HuffmanTable {
            class,
            slot,
            bytes: at + 1..at + 17 + n,
        });
        let slots = if class == 0 {
            &mut tables.dc
        } else {
            &mut tables.ac
        };
        slots[usize::from(slot)] = Some(index);
        p = &p[17 + n..];
        at += 17 + n;
    }
    Some(())
}

/// Records the tables of a DQT payload and puts them in their slots. `None` when the
/// segment is malformed (tables up to there are kept).
fn read_dqt(mut p: &[u8], defs: &mut Vec<QuantTable>, tables: &mut TablesInEffect) -> Option<()> {
    while !p.is_empty() {
        let (precision, slot) = (p[0] >> 4, p[0] & 15);
        if slot > 3 || precision > 1 {
            return None;
        }
        let n = if precision == 0 { 64 } else { 128 };
        let body = p.get(1..1 + n)?;
        let mut values = [0u16; 64];
        for (k, v) in values.iter_mut().enumerate() {
            *v = if precision == 0 {
                u16::from(body[k])
            } else {
                u16::from_be_bytes([body[2 * k], body[2 * k + 1]])
            };
        }
        let index = u16::try_from(defs.len()).ok()?;
        defs.push(QuantTable {
            slot,
            precision,
            values,
        });
        tables.quant[usize::from(slot)] = Some(index);
        p = &p[1 + n..];
    }
    Some(())
}

/// The scan of an SOS payload, or `None` when it is too short to hold what it declares.
fn read_sos(p: &[u8], header: Range<usize>, tables: TablesInEffect) -> Option<Scan> {
    let ns = usize::from(*p.first()?);
    let selectors = p.get(1..1 + 2 * ns)?;
    let t = p.get(1 + 2 * ns..1 + 2 * ns + 3)?;
    Some(Scan {
        header,
        data: None,
        components: selectors
            .chunks_exact(2)
            .map(|s| ScanComponent {
                id: s[0],
                dc_slot: s[1] >> 4,
                ac_slot: s[1] & 15,
            })
            .collect(),
        ss: t[0],
        se: t[1],
        ah: t[2] >> 4,
        al: t[2] & 15,
        tables,
    })
}

/// Where the entropy-coded data starting at `from` ends: the 0xFF of the next marker that is
/// neither stuffing (0xFF00), fill (0xFFFF) nor a restart marker. `None` if the data ends
/// first (a truncated file).
fn end_of_entropy_data(d: &[u8], from: usize) -> Option<usize> {
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
