//! Handing our coefficients to libjpeg: the header of a sequential JPEG of the needed part,
//! and each MCU's blocks in place of libjpeg's entropy decoding.

use super::super::huffman::{Unsupported, NATURAL_ORDER, R};
use super::super::turbo::{self, Rect};
use super::frame::{keep_buffers, mcu_size, Frame, McuRegion};
use crate::error::DecodeError;

/// The decoded coefficients of the part of a progressive JPEG a request needs (its MCUs and
/// one more on every side where the image goes on), with the header of a sequential JPEG of
/// that part: libjpeg decodes the header and takes each MCU's blocks from here
/// ([`turbo::decode_from_source`]).
pub(crate) struct Coefficients {
    header: Vec<u8>,
    /// Width of the part.
    pub width: usize,
    /// Height of the part.
    pub height: usize,
    /// The requested region in the part's coordinates (None: all of it is the request).
    pub region: Option<Rect>,
    frame: Frame,
    need: McuRegion,
    /// For each block of an MCU, in scan order: component, block row and column in the MCU.
    mcu_blocks: Vec<(usize, usize, usize)>,
    /// MCUs across the part, and in all.
    mcus_across: usize,
    mcus: usize,
    /// The MCU libjpeg asks for next.
    next: usize,
}

impl Coefficients {
    /// The pixels of the request: interleaved, `components` channels as the frame has (1
    /// or 3), and the channel count; chroma upsampled the fancy way or by repetition.
    pub(crate) fn decode(
        mut self,
        components: usize,
        fancy_upsampling: bool,
    ) -> Result<(Vec<u8>, usize), DecodeError> {
        let req = turbo::Request {
            width: self.width,
            height: self.height,
            components,
            region: self.region,
            scale_denom: 1,
            block_smoothing: true,
            fancy_upsampling,
        };
        let header = std::mem::take(&mut self.header);
        let out = turbo::decode_from_source(&header, &req, &mut self);
        keep_buffers(self.frame);
        out.map(|(px, _, _, c)| (px, c))
    }
}

impl turbo::McuSource for Coefficients {
    fn blocks_per_mcu(&self) -> usize {
        self.mcu_blocks.len()
    }

    fn next_mcu(&mut self, blocks: Option<turbo::McuBlocks<'_>>) -> bool {
        let mcu = self.next;
        if mcu >= self.mcus {
            return false;
        }
        self.next += 1;
        let Some(mut blocks) = blocks else {
            return true;
        };
        let (row, col) = (mcu / self.mcus_across, mcu % self.mcus_across);
        for (i, &(ci, y, x)) in self.mcu_blocks.iter().enumerate() {
            let c = &self.frame.comps[ci];
            let b = (self.need.r0 + row) * c.v * c.stride_blocks
                + y * c.stride_blocks
                + (self.need.c0 + col) * c.h
                + x;
            let out = blocks.get(i);
            // `out` comes zeroed; only the slots `nonzero` marks hold this image's values
            // (see `Component::coefs`).
            out[0] = c.dc[b];
            let coefs = &c.coefs[b * 64..b * 64 + 64];
            let mut m = c.nonzero[b] & !1;
            while m != 0 {
                let k = m.trailing_zeros() as usize;
                m &= m - 1;
                out[usize::from(NATURAL_ORDER[k])] = coefs[k];
            }
        }
        true
    }
}

/// The [`Coefficients`] of MCUs `need` of the decoded frame `f`, with their header.
pub(super) fn coefficients_of(
    f: Frame,
    need: McuRegion,
    region: Option<Rect>,
    color_markers: &[u8],
) -> R<Coefficients> {
    let (mw, mh) = mcu_size(&f);
    let (x0, y0) = (need.c0 * mw, need.r0 * mh);
    let width = (need.c1 * mw).min(f.width) - x0;
    let height = (need.r1 * mh).min(f.height) - y0;
    let (mcus_across, mcus_down) = (width.div_ceil(mw), height.div_ceil(mh));
    // One component: its blocks are the MCUs (`mcu_size` is a block, so h = v = 1 here).
    let mcu_blocks: Vec<(usize, usize, usize)> = if f.comps.len() == 1 {
        vec![(0, 0, 0)]
    } else {
        f.comps
            .iter()
            .enumerate()
            .flat_map(|(ci, c)| (0..c.v).flat_map(move |y| (0..c.h).map(move |x| (ci, y, x))))
            .collect()
    };
    let one = f.comps.len() == 1;
    // Every block read must be stored: the last MCU's, in each component, is the furthest.
    for c in &f.comps {
        let (h, v) = if one { (1, 1) } else { (c.h, c.v) };
        let last_row = (need.r0 + mcus_down) * v - 1;
        let last_col = (need.c0 + mcus_across) * h - 1;
        let last = last_row * c.stride_blocks + last_col;
        if last_col >= c.stride_blocks
            || last >= c.dc.len()
            || last >= c.nonzero.len()
            || (last + 1) * 64 > c.coefs.len()
        {
            return Err(Unsupported);
        }
    }
    let header = sequential_header(&f, width, height, color_markers)?;
    let region = region.map(|(t, l, h, w)| (t - y0, l - x0, h, w));
    let mut f = f;
    if one {
        // Blocks of a lone component are addressed as 1×1 MCUs.
        f.comps[0].h = 1;
        f.comps[0].v = 1;
    }
    Ok(Coefficients {
        header,
        width,
        height,
        region,
        frame: f,
        need,
        mcu_blocks,
        mcus_across,
        mcus: mcus_across * mcus_down,
        next: 0,
    })
}

/// A sequential JPEG's header for a `width` × `height` part of `f`, up to and with its one
/// scan's header (all components, Ss 0, Se 63): the same quantisation tables (as latched
/// for each component's first scan), component ids, sampling factors and JFIF/Adobe
/// markers. No Huffman tables: libjpeg installs the standard ones, and never reads them.
fn sequential_header(f: &Frame, width: usize, height: usize, color_markers: &[u8]) -> R<Vec<u8>> {
    let nc = f.comps.len();
    let mut out = Vec::with_capacity(1024);
    out.extend_from_slice(&[0xFF, 0xD8]);
    out.extend_from_slice(color_markers);
    let mut any_16bit = false;
    for (ci, c) in f.comps.iter().enumerate() {
        let (pq, q) = c.quant.ok_or(Unsupported)?;
        any_16bit |= pq != 0;
        let n = if pq == 0 { 64 } else { 128 };
        out.extend_from_slice(&[0xFF, 0xDB]);
        out.extend_from_slice(&(2 + 1 + n as u16).to_be_bytes());
        out.push((pq << 4) | ci as u8);
        for v in q {
            if pq == 0 {
                out.push(v as u8);
            } else {
                out.extend_from_slice(&v.to_be_bytes());
            }
        }
    }
    // SOF0 (SOF1 when a table has 16-bit entries, which baseline forbids).
    out.extend_from_slice(&[0xFF, if any_16bit { 0xC1 } else { 0xC0 }]);
    out.extend_from_slice(&(8 + 3 * nc as u16).to_be_bytes());
    out.push(8);
    out.extend_from_slice(&(height as u16).to_be_bytes());
    out.extend_from_slice(&(width as u16).to_be_bytes());
    out.push(nc as u8);
    for (ci, c) in f.comps.iter().enumerate() {
        out.extend_from_slice(&[c.id, ((c.h as u8) << 4) | c.v as u8, ci as u8]);
    }
    out.extend_from_slice(&[0xFF, 0xDA]);
    out.extend_from_slice(&(6 + 2 * nc as u16).to_be_bytes());
    out.push(nc as u8);
    for c in &f.comps {
        out.extend_from_slice(&[c.id, 0x00]);
    }
    out.extend_from_slice(&[0, 63, 0]);
    out.extend_from_slice(&[0xFF, 0xD9]);
    Ok(out)
}
