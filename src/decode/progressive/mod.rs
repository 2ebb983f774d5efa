//! Exact, faster decoding of Huffman-coded progressive JPEGs: our own coefficient decoder,
//! whose coefficients libjpeg-turbo then turns into pixels as it would a sequential JPEG's.
//!
//! # Why
//!
//! libjpeg-turbo decodes progressive scans (above all the successive-approximation
//! refinement scans) with generic bit-at-a-time code, many times slower than its sequential
//! decoder (`docs/performance.md` has the figures on large progressive photographs). And it
//! decodes every block of every scan, into a whole-image buffer it allocates and clears
//! afresh, before it outputs a row, even when only a window is wanted.
//!
//! # How, and why the pixels are the same
//!
//! [`coefficients`] decodes the scans the header read once per sample lists
//! ([`JpegHeader::scans`], with the tables in effect for each) with a 64-bit bit reader and
//! table-driven Huffman decoding (refinement scans skip zeros with one `pdep` where the CPU
//! has a fast one, [`scans`]), and stops each scan after the last block row the window needs
//! (the rest of the scan's data, whose end the header knows, is not read). [`Coefficients::decode`] then gives libjpeg the header of
//! a sequential JPEG of the MCUs around the window (one MCU of margin on every side that is
//! not an image edge, so that libjpeg's fancy upsampling sees the same neighbours), with the
//! same quantisation tables (as latched for each component's first scan), component ids,
//! sampling factors and JFIF/Adobe markers, and hands it each MCU's coefficients in place
//! of entropy decoding ([`super::turbo::decode_from_source`]). Quantised DCT coefficients are
//! all a JPEG decoder works from: libjpeg dequantises, inverse-transforms, upsamples and
//! converts colour the same way for both codings, so the window's pixels are bit-identical
//! to libjpeg decoding the original (the tests check this against libjpeg on every fixture,
//! at many windows).
//!
//! Which files it takes is decided from the header ([`JpegHeader::own_progressive_fit`]: a
//! progression that leaves coefficients incomplete, where libjpeg would smooth blocks, or
//! more than three components, are left to libjpeg). Anything else it does not handle
//! exactly as libjpeg does — corrupt or truncated data in the part we decode, out-of-range
//! values, restart markers out of place — makes [`coefficients`] return `None` as well, and
//! the caller decodes the original with libjpeg alone. So this only ever changes speed.
//! The hand-over to libjpeg is in [`handover`].

mod frame;
mod handover;
mod scans;

use super::header::{slot, JpegHeader};
use super::huffman::{BitReader, HuffTable, Unsupported, R};
use super::turbo::Rect;
use frame::{mcu_size, Component, Frame, McuRegion, Scan};

pub(crate) use handover::Coefficients;
#[cfg(test)]
pub(super) use scans::NO_PDEP;

/// Decodes the coefficients of the Huffman-coded progressive JPEG `bytes` (its header `h`
/// read to EOI) that `region` needs (stored coordinates; None: the whole image). None when
/// the file is not one this decoder handles exactly (see the module docs).
pub(crate) fn coefficients(
    bytes: &[u8],
    h: &JpegHeader,
    region: Option<Rect>,
) -> Option<Coefficients> {
    if !h.own_progressive_fit() {
        return None;
    }
    read_coefficients(bytes, h, region).ok()
}

/// Decodes every scan of `h` (which [`JpegHeader::own_progressive_fit`] accepted) down to
/// the rows `region` needs.
fn read_coefficients(d: &[u8], h: &JpegHeader, region: Option<Rect>) -> R<Coefficients> {
    let mut f = frame_of(h)?;
    let need = needed_mcus(&f, region)?;
    // Every table defined, built once (as libjpeg would refuse an invalid one).
    let huffman = h
        .huffman_tables
        .iter()
        .map(|t| HuffTable::from_dht(d.get(t.bytes.clone()).ok_or(Unsupported)?))
        .collect::<R<Vec<HuffTable>>>()?;
    let in_slots = |slots: &[Option<u16>; 4]| -> [Option<&HuffTable>; 4] {
        std::array::from_fn(|i| slots[i].map(|t| &huffman[usize::from(t)]))
    };
    for s in &h.scans {
        let scan = scan_of(h, s)?;
        for &(ci, _, _) in &scan.comps {
            let c = &mut f.comps[ci];
            if c.quant.is_none() {
                let q = h.quant_tables[slot(&s.tables.quant, c.tq).ok_or(Unsupported)?];
                c.quant = Some((q.precision, q.values));
            }
        }
        let data = s.data.clone().ok_or(Unsupported)?;
        let mut reader = BitReader::new(d, data.start, data.end);
        let (dc_tables, ac_tables) = (in_slots(&s.tables.dc), in_slots(&s.tables.ac));
        let job = scans::ScanJob {
            scan: &scan,
            dc_tables: &dc_tables,
            ac_tables: &ac_tables,
            restart_interval: usize::from(s.tables.restart_interval),
            mcu_rows_needed: need.r1,
        };
        scans::decode_scan(&mut f, &job, &mut reader)?;
    }
    let color_markers: Vec<u8> = h
        .color_segments
        .iter()
        .flat_map(|r| d[r.clone()].iter().copied())
        .collect();
    handover::coefficients_of(f, need, region, &color_markers)
}

/// The frame of `h` with its coefficient storage still empty (sized at the first scan).
fn frame_of(h: &JpegHeader) -> R<Frame> {
    let (width, height) = (h.width(), h.height());
    let nc = h.components();
    let comps: Vec<Component> = h
        .frame
        .components
        .iter()
        .map(|c| Component {
            id: c.id,
            h: usize::from(c.h),
            v: usize::from(c.v),
            tq: c.quant_slot,
            width_blocks: 0,
            height_blocks: 0,
            stride_blocks: 0,
            rows_stored: 0,
            coefs: Vec::new(),
            dc: Vec::new(),
            nonzero: Vec::new(),
            quant: None,
        })
        .collect();
    let max_h = comps.iter().map(|c| c.h).max().ok_or(Unsupported)?;
    let max_v = comps.iter().map(|c| c.v).max().ok_or(Unsupported)?;
    let mcus_x = width.div_ceil(8 * max_h);
    let mcus_y = height.div_ceil(8 * max_v);
    let mut f = Frame {
        width,
        height,
        max_h,
        max_v,
        mcus_x,
        mcus_y,
        comps,
    };
    for c in &mut f.comps {
        c.width_blocks = (width * c.h).div_ceil(max_h).div_ceil(8);
        c.height_blocks = (height * c.v).div_ceil(max_v).div_ceil(8);
        if nc == 1 {
            // One component: every scan is non-interleaved, an MCU is one block.
            c.stride_blocks = c.width_blocks;
        } else {
            c.stride_blocks = mcus_x * c.h;
        }
    }
    Ok(f)
}

/// The scan `s` of `h` with its components as indices into the frame.
fn scan_of(h: &JpegHeader, s: &super::header::Scan) -> R<Scan> {
    let comps = s
        .components
        .iter()
        .map(|c| {
            let ci = h.component_index(c.id).ok_or(Unsupported)?;
            Ok((ci, usize::from(c.dc_slot), usize::from(c.ac_slot)))
        })
        .collect::<R<Vec<_>>>()?;
    Ok(Scan {
        comps,
        ss: usize::from(s.ss),
        se: usize::from(s.se),
        ah: s.ah,
        al: s.al,
    })
}

/// The MCUs to keep: the region's, plus one on every side that has more image (the
/// upsampling filters reach one sample across an MCU edge). Also sizes the coefficient
/// storage down to the last needed row.
fn needed_mcus(f: &Frame, region: Option<Rect>) -> R<McuRegion> {
    let (mw, mh) = mcu_size(f);
    let (mx, my) = (f.width.div_ceil(mw), f.height.div_ceil(mh));
    Ok(match region {
        None => McuRegion {
            r0: 0,
            r1: my,
            c0: 0,
            c1: mx,
        },
        Some((top, left, h, w)) => {
            if h == 0 || w == 0 || top + h > f.height || left + w > f.width {
                return Err(Unsupported);
            }
            McuRegion {
                r0: (top / mh).saturating_sub(1),
                r1: ((top + h).div_ceil(mh) + 1).min(my),
                c0: (left / mw).saturating_sub(1),
                c1: ((left + w).div_ceil(mw) + 1).min(mx),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::huffman::NATURAL_ORDER;
    use super::scans::skip_lowest;

    #[test]
    fn pdep_and_the_loop_skip_the_same_bits() {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("bmi2") {
            let mut rng = crate::rng::SampleRng::from_key(3);
            for _ in 0..100_000 {
                let bits = rng.next_u64() & rng.next_u64();
                let n = (rng.next_u64() % 17) as u32;
                assert_eq!(skip_lowest::<true>(bits, n), skip_lowest::<false>(bits, n));
            }
        }
        assert_eq!(skip_lowest::<false>(0b1011_0100, 2), 0b1010_0000);
        assert_eq!(skip_lowest::<false>(0b1011_0100, 4), 0);
        assert_eq!(skip_lowest::<false>(u64::MAX, 0), u64::MAX);
    }

    #[test]
    fn zigzag_order_is_a_permutation_along_the_antidiagonals() {
        let mut seen = [false; 64];
        for (k, &n) in NATURAL_ORDER.iter().enumerate() {
            assert!(!std::mem::replace(&mut seen[usize::from(n)], true));
            if k > 0 {
                let (r0, c0) = (NATURAL_ORDER[k - 1] / 8, NATURAL_ORDER[k - 1] % 8);
                let (r, c) = (n / 8, n % 8);
                // Each step moves one place along an antidiagonal, or on to the next one.
                assert!((r + c == r0 + c0) || (r + c == r0 + c0 + 1), "step {k}");
            }
        }
    }
}
