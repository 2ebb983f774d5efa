//! What libjpeg's marker reader refuses (a fatal error, not a warning), so that the walk can
//! refuse it too.
//!
//! Pillow decodes a JPEG to its end: after the last row it calls `jpeg_finish_decompress`,
//! which reads the markers that follow the image data up to EOI. A damaged byte in the
//! entropy-coded data (one flipped bit turns the stuffed pair `FF 00` into `FF 04`) ends the
//! scan early at a marker libjpeg has no meaning for, which that read refuses: Pillow raises
//! "broken data stream". Our decoders never make that call (a window decode stops above
//! the image's bottom, our entropy decoders replace libjpeg's reading of the data, nvJPEG
//! has its own), so without these checks such a file would decode, its rows after the damage
//! gray. The rules are libjpeg-turbo's (`jdmarker.c`: `read_markers`, `get_sos`, `get_dht`,
//! `get_dqt`, `get_dri`, `jpeg_resync_to_restart`; `jdinput.c`: a second scan where none
//! can follow).

use super::{slot, Frame, HuffmanTable, Scan};

/// A marker code libjpeg's marker reader refuses wherever it meets one: the reserved codes
/// (`RESn`, `JPGn`), `JPG` and `EXP`. (`DHP`, hierarchical, is refused as unsupported by the
/// walk before this is asked.)
pub(super) fn refused_marker(m: u8) -> bool {
    matches!(m, 0x02..=0xBF | 0xC8 | 0xDF | 0xF0..=0xFD)
}

/// Why libjpeg refuses the segment of marker `m` (payload `p`, the bytes after the length),
/// met after the first scan's data; `None` when it accepts it. The frame and the first scan's
/// component count decide whether another scan may follow.
pub(super) fn refused_after_first_scan(
    m: u8,
    p: &[u8],
    frame: &Frame,
    first_scan_components: usize,
) -> Option<String> {
    let bad_length = || Some(format!("marker 0xFF{m:02X} has a malformed segment"));
    match m {
        0xC4 => {
            // Tables of 17 + count bytes each, classes 0 and 1, slots 0..=3, no bytes left.
            let mut rest = p;
            while rest.len() > 16 {
                let count: usize = rest[1..17].iter().map(|&c| usize::from(c)).sum();
                let index = rest[0];
                if count > 256 || count > rest.len() - 17 || !matches!(index, 0..=3 | 0x10..=0x13) {
                    return bad_length();
                }
                rest = &rest[17 + count..];
            }
            if !rest.is_empty() {
                return bad_length();
            }
            None
        }
        0xDB => {
            // Tables of 65 bytes (any precision nibble but 0 makes them 129), slots 0..=3.
            let mut rest = p;
            while let Some(&first) = rest.first() {
                let size = if first >> 4 == 0 { 65 } else { 129 };
                if first & 15 > 3 || rest.len() < size {
                    return bad_length();
                }
                rest = &rest[size..];
            }
            None
        }
        0xDD if p.len() != 2 => bad_length(),
        0xDA => {
            let sequential = matches!(frame.marker, 0xC0 | 0xC1 | 0xC9);
            if sequential && first_scan_components == frame.components.len() {
                return Some(
                    "a second scan (SOS) in a sequential JPEG whose first scan holds every \
                     component"
                        .into(),
                );
            }
            let Some(&n) = p.first() else {
                return bad_length();
            };
            let n = usize::from(n);
            if !(1..=4).contains(&n) || p.len() != 2 * n + 4 {
                return bad_length();
            }
            let ids: Vec<u8> = p[1..1 + 2 * n].iter().step_by(2).copied().collect();
            let known = |id: &u8| frame.components.iter().any(|c| c.id == *id);
            let distinct = (1..ids.len()).all(|i| !ids[..i].contains(&ids[i]));
            (!(ids.iter().all(known) && distinct))
                .then(|| "a scan (SOS) names a component the frame doesn't have".to_string())
        }
        _ => None,
    }
}

/// Whether libjpeg refuses a Huffman table of class `class` (0 DC, 1 AC) with these 16 code
/// counts and symbols when a scan uses it ("Bogus Huffman table definition",
/// `jpeg_make_d_derived_tbl` in jdhuff.c): more codes of a length than the lengths before
/// leave room for (the all-ones code included), or a DC symbol above 15.
pub(super) fn refused_huffman_table(class: u8, counts: &[u8], symbols: &[u8]) -> bool {
    let used = counts
        .iter()
        .position(|&c| c != 0)
        .zip(counts.iter().rposition(|&c| c != 0));
    if let Some((first, last)) = used {
        // The canonical codes, length by length (index l holds the codes of length l + 1).
        let mut code = 0u32;
        for (l, &count) in counts.iter().enumerate().take(last + 1).skip(first) {
            code += u32::from(count);
            if code >= 1 << (l + 1) {
                return true;
            }
            code <<= 1;
        }
    }
    class == 0 && symbols.iter().any(|&s| s > 15)
}

/// Whether libjpeg may refuse `scan` of `frame` when it starts decoding it (jdmarker.c
/// `get_sos`, jdinput.c, jdhuff.c, jdphuff.c): a component the frame doesn't have, named
/// twice or out of the frame's order ("Invalid component ID"; libjpeg takes some orders a
/// strict reading refuses: conservative), more than 10 blocks per MCU in
/// an interleaved scan ("Sampling factors too large"), a Huffman table the scan decodes with
/// in a slot above 3, not defined, or refused (`tables`: every table defined), or a
/// component's quantisation table not defined. Conservative where libjpeg falls back on the
/// standard Huffman tables (undefined slots 0 and 1 of a sequential scan).
pub(super) fn doubtful_scan(scan: &Scan, frame: &Frame, tables: &[HuffmanTable]) -> bool {
    let huffman = !matches!(frame.marker, 0xC9 | 0xCA);
    let progressive = matches!(frame.marker, 0xC2 | 0xCA);
    // The tables a scan decodes with: a sequential scan both; a progressive DC scan its DC
    // table (none when it refines), an AC scan its AC table.
    let (uses_dc, uses_ac) = match (progressive, scan.ss, scan.ah) {
        (false, _, _) => (true, true),
        (true, 0, 0) => (true, false),
        (true, 0, _) => (false, false),
        (true, _, _) => (false, true),
    };
    // A usable table: defined, and not one libjpeg refuses.
    let usable = |slots: &[Option<u16>; 4], s: u8| {
        slot(slots, s).is_some_and(|i| tables.get(i).is_some_and(|t| !t.refused))
    };
    // Each scan component's place in the frame: present, in increasing order (libjpeg
    // looks for each after the one before). A scan read whole names 1 to 4 (`read_sos`);
    // no allocation, as this runs for every scan of every file.
    let mut places = [None; 4];
    for (p, c) in places.iter_mut().zip(&scan.components) {
        *p = frame.components.iter().position(|f| f.id == c.id);
    }
    let places = &places[..scan.components.len().min(4)];
    let in_order = places.iter().all(Option::is_some) && places.windows(2).all(|w| w[0] < w[1]);
    let blocks: usize = places
        .iter()
        .flatten()
        .map(|&k| usize::from(frame.components[k].h) * usize::from(frame.components[k].v))
        .sum();
    !in_order
        || (scan.components.len() > 1 && blocks > 10)
        || scan.components.iter().zip(places).any(|(c, &k)| {
            let fc = &frame.components[k.unwrap_or(0)];
            slot(&scan.tables.quant, fc.quant_slot).is_none()
                || (huffman && uses_dc && !usable(&scan.tables.dc, c.dc_slot))
                || (huffman && uses_ac && !usable(&scan.tables.ac, c.ac_slot))
        })
}

/// Why libjpeg refuses a progressive frame's scan, if it does: its spectral selection and
/// successive approximation must make a valid progression (`jdphuff.c`, `jdarith.c`: a bad
/// one is fatal, where a sequential scan's only warns).
pub(super) fn refused_progression(scan: &Scan) -> Option<String> {
    let (ss, se, ah, al) = (scan.ss, scan.se, scan.ah, scan.al);
    let band = if ss == 0 {
        se != 0
    } else {
        ss > se || se > 63 || scan.components.len() != 1
    };
    let bad = band || (ah != 0 && al + 1 != ah) || al > 13;
    bad.then(|| format!("a scan with an invalid progression (Ss {ss}, Se {se}, Ah {ah}, Al {al})"))
}

/// Where the entropy-coded data of a scan starting at `from` ends: the `0xFF` of the marker
/// that ends it for libjpeg. `None` if the data ends first (a truncated file).
///
/// Stuffed zeros (`FF 00`), fill bytes and restart markers are part of the data. In a scan
/// with restart markers (`restart_interval` > 0), libjpeg also passes over a marker below
/// `0xFFC0` (damage) when a restart marker follows it: it looks for the next restart marker
/// and goes on from there (`jpeg_resync_to_restart`). Any other marker ends the scan.
pub(super) fn scan_end(d: &[u8], from: usize, restart_interval: u16) -> Option<usize> {
    let mut i = from;
    loop {
        let (at, m) = next_marker(d, i)?;
        match m {
            0x00 | 0xD0..=0xD7 => i = at + 2,
            0x01..=0xBF if restart_interval > 0 && restart_follows(d, at + 2) => i = at + 2,
            _ => return Some(at),
        }
    }
}

/// The next marker at or after `from` that is not a stuffed zero (`FF 00`, part of the
/// data): the offset of its last `0xFF` and its code. `None` at the end of the data.
///
/// Entropy-coded data has an `FF 00` in about every 256 bytes; finding each with memchr cost
/// more than the search itself. A 64-byte block whose every `0xFF` is followed by `00` is
/// passed in a few vector instructions instead (the fold has no early exit, so it
/// vectorises).
fn next_marker(d: &[u8], from: usize) -> Option<(usize, u8)> {
    const BLOCK: usize = 64;
    let mut i = from;
    loop {
        while i + BLOCK < d.len() {
            let (x, y) = (&d[i..i + BLOCK], &d[i + 1..=i + BLOCK]);
            let marker = x
                .iter()
                .zip(y)
                .fold(0u8, |any, (&a, &b)| any | u8::from((a == 0xFF) & (b != 0)));
            if marker != 0 {
                break;
            }
            i += BLOCK;
        }
        let mut at = i + memchr::memchr(0xFF, d.get(i..)?)?;
        while d.get(at + 1) == Some(&0xFF) {
            at += 1;
        }
        match *d.get(at + 1)? {
            0x00 => i = at + 2,
            code => return Some((at, code)),
        }
    }
}

/// Whether a restart marker comes at or after `from` before any marker of `0xC0` and up
/// that is not one (libjpeg's search for the next restart marker).
fn restart_follows(d: &[u8], from: usize) -> bool {
    let mut i = from;
    while let Some((at, m)) = next_marker(d, i) {
        match m {
            0xD0..=0xD7 => return true,
            0xC0..=0xFF => return false,
            _ => i = at + 2,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts of code lengths 1..=16 from the first few.
    fn counts(first: &[u8]) -> [u8; 16] {
        let mut c = [0u8; 16];
        c[..first.len()].copy_from_slice(first);
        c
    }

    #[test]
    fn huffman_tables_are_refused_as_libjpeg_refuses_them() {
        // JPEG's standard luminance DC table (Annex K.3): 12 symbols, accepted.
        let dc = counts(&[0, 1, 5, 1, 1, 1, 1, 1, 1]);
        assert!(!refused_huffman_table(
            0,
            &dc,
            &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
        ));
        // Two codes of length 1: the second is all ones, which JPEG forbids.
        assert!(refused_huffman_table(1, &counts(&[2]), &[1, 2]));
        // Lengths with no codes between used ones: 1 code of length 1, 4 of length 3
        // fill the room (the last all ones); 3 leave it.
        assert!(refused_huffman_table(1, &counts(&[1, 0, 4]), &[1; 5]));
        assert!(!refused_huffman_table(1, &counts(&[1, 0, 3]), &[1; 4]));
        // 7 codes of length 3 with nothing shorter: the eighth would be all ones.
        assert!(!refused_huffman_table(1, &counts(&[0, 0, 7]), &[1; 7]));
        assert!(refused_huffman_table(1, &counts(&[0, 0, 8]), &[1; 8]));
        // A DC symbol is a magnitude category, 0..=15; an AC one may be anything.
        assert!(refused_huffman_table(0, &counts(&[0, 2]), &[3, 16]));
        assert!(!refused_huffman_table(1, &counts(&[0, 2]), &[3, 16]));
        // No codes at all: nothing to refuse.
        assert!(!refused_huffman_table(0, &[0; 16], &[]));
    }

    /// The marker search as it was: every `0xFF`, stuffed zeros included.
    fn next_marker_naive(d: &[u8], from: usize) -> Option<(usize, u8)> {
        let mut i = from;
        loop {
            let mut at = i + d.get(i..)?.iter().position(|&x| x == 0xFF)?;
            while d.get(at + 1) == Some(&0xFF) {
                at += 1;
            }
            match *d.get(at + 1)? {
                0x00 => i = at + 2,
                code => return Some((at, code)),
            }
        }
    }

    #[test]
    fn the_marker_search_passes_stuffed_zeros_from_any_start() {
        // Data with stuffed zeros everywhere, fill bytes, and markers at block edges and in
        // the tail.
        let mut d: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        for at in (5..990).step_by(37) {
            d[at] = 0xFF;
            d[at + 1] = 0;
        }
        for (at, code) in [
            (63, 0xD0),
            (127, 0xFF),
            (128, 0xD9),
            (511, 0xC4),
            (998, 0xD9),
        ] {
            d[at] = 0xFF;
            d[at + 1] = code;
        }
        d[999] = 0xFF;
        for from in 0..=d.len() + 1 {
            assert_eq!(
                next_marker(&d, from),
                next_marker_naive(&d, from),
                "from {from}"
            );
        }
    }
}
