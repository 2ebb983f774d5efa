//! The marker walk: finds each segment, reads the frame, tables, scans and APPn segments
//! into a [`JpegHeader`], and decides on the way what is unsupported or truncated.

use std::ops::Range;

use smallvec::SmallVec;

use super::super::exif::orientation_from_app1;
use super::super::limits::{check_pixels, Limits};
use super::fields::{
    Frame, FrameComponent, HuffmanTable, JpegHeader, QuantTable, Scan, ScanComponent,
    TablesInEffect,
};
use super::refusals::{
    doubtful_scan, refused_after_first_scan, refused_huffman_table, refused_marker,
    refused_progression, scan_end,
};
use crate::error::DecodeError;

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
        walk(bytes, true, limits)
    }

    /// Reads the markers up to the first scan's header only: enough for the size, the
    /// components and the orientation ([`probe`](crate::decode::probe)), and cheap (no
    /// entropy-coded data is touched). Truncation after that point goes unnoticed.
    pub fn read_to_first_scan(bytes: &[u8], limits: &Limits) -> Result<JpegHeader, DecodeError> {
        walk(bytes, false, limits)
    }
}

fn corrupt(msg: impl Into<String>) -> DecodeError {
    DecodeError::Corrupt(msg.into())
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

/// The marker walk behind [`JpegHeader::read`] (`full`) and
/// [`JpegHeader::read_to_first_scan`].
pub(super) fn walk(bytes: &[u8], full: bool, limits: &Limits) -> Result<JpegHeader, DecodeError> {
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
            components: SmallVec::new(),
        },
        orientation: 1,
        jfif: false,
        adobe_transform: None,
        scans: SmallVec::new(),
        huffman_tables: SmallVec::new(),
        quant_tables: SmallVec::new(),
        color_segments: SmallVec::new(),
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
            0xDE => {
                return Err(DecodeError::Unsupported(
                    "hierarchical JPEG (DHP marker) is not supported".into(),
                ))
            }
            m if refused_marker(m) => {
                return Err(corrupt(format!(
                    "damaged data: an invalid marker 0xFF{m:02X} at byte {start} (libjpeg, \
                     and so Pillow, refuse the file)"
                )))
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
        if let Some(first) = h.scans.first() {
            if let Some(why) =
                refused_after_first_scan(m, payload, &h.frame, first.components.len())
            {
                return Err(corrupt(format!(
                    "damaged data at byte {start}: {why} (libjpeg, and so Pillow, refuse the file)"
                )));
            }
        }
        match m {
            0xC0..=0xCF if m != 0xC4 && m != 0xC8 && m != 0xCC => {
                if has_frame {
                    return Err(corrupt("more than one frame header (SOF)"));
                }
                h.frame = read_frame(m, payload, limits)?;
                has_frame = true;
                // libjpeg refuses a frame header longer than its components need ("Bogus
                // marker length") and a side above 65500 ("Maximum supported image
                // dimension"): its verdict, as for the tables below.
                if payload.len() != 6 + 3 * h.frame.components.len()
                    || h.frame.width.max(h.frame.height) > 65500
                {
                    h.irregular_at.get_or_insert(start);
                }
            }
            // Tables: recorded as found; a malformed segment is libjpeg's to report.
            0xC4 | 0xDB | 0xDD => {
                let read = match m {
                    0xC4 => read_dht(payload, payload_at, &mut h.huffman_tables, &mut tables),
                    0xDB => read_dqt(payload, &mut h.quant_tables, &mut tables),
                    _ => read_dri(payload, &mut tables),
                };
                if read.is_none() {
                    h.irregular_at.get_or_insert(start);
                }
            }
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
                        components: SmallVec::new(),
                        ss: 0,
                        se: 0,
                        ah: 0,
                        al: 0,
                        tables,
                    }
                });
                if doubtful_scan(&scan, &h.frame, &h.huffman_tables) {
                    h.irregular_at.get_or_insert(start);
                }
                let progressive = matches!(h.frame.marker, 0xC2 | 0xCA);
                // (Asked of progressive scans only: a sequential one's bands would make a
                // message per file for nothing.)
                if let Some(why) = progressive.then(|| refused_progression(&scan)).flatten() {
                    return Err(corrupt(format!(
                        "damaged data at byte {start}: {why} (libjpeg, and so Pillow, refuse \
                         the file)"
                    )));
                }
                if !full {
                    h.scans.push(scan);
                    h.end = i;
                    return Ok(h);
                }
                let n = h.scans.len() + 1;
                let data_end = scan_end(d, i, scan.tables.restart_interval).ok_or_else(|| {
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
    let mut components = SmallVec::new();
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
    defs: &mut SmallVec<[HuffmanTable; 4]>,
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
            refused: refused_huffman_table(class, counts, &p[17..17 + n]),
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
fn read_dqt(
    mut p: &[u8],
    defs: &mut SmallVec<[QuantTable; 3]>,
    tables: &mut TablesInEffect,
) -> Option<()> {
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

/// Sets the restart interval of a DRI payload. `None` when it is not two bytes long (as
/// libjpeg requires; the interval is still read from a longer one, for the walk's search of
/// restart markers).
fn read_dri(p: &[u8], tables: &mut TablesInEffect) -> Option<()> {
    tables.restart_interval = u16::from_be_bytes([*p.first()?, *p.get(1)?]);
    (p.len() == 2).then_some(())
}

/// The scan of an SOS payload, or `None` when libjpeg refuses its length: 1 to 4
/// components, and exactly the bytes they need.
fn read_sos(p: &[u8], header: Range<usize>, tables: TablesInEffect) -> Option<Scan> {
    let ns = usize::from(*p.first()?);
    if !(1..=4).contains(&ns) || p.len() != 2 * ns + 4 {
        return None;
    }
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
