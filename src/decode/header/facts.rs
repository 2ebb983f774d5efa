//! What a read header says about the image and its decoding: the chroma subsampling, the
//! colour space libjpeg reads, and which of our entropy decoders takes the file.

use super::fields::{slot, JpegHeader, Scan};

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

impl JpegHeader {
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

    /// Whether our sequential entropy decoder (`decode/baseline.rs`) decodes this file's
    /// first scan for libjpeg; otherwise libjpeg-turbo entropy-decodes it. It takes a
    /// Huffman-coded sequential frame (SOF0, SOF1; 8-bit, 1, 3 or 4 components with distinct
    /// ids) whose first scan libjpeg decodes in one pass: every component, Ss 0, Se 63, no
    /// successive approximation, at most 10 blocks per MCU, every Huffman table it uses
    /// defined, and nothing irregular up to its header.
    pub fn own_sequential_fit(&self) -> bool {
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

    /// Whether our progressive decoder (`decode/progressive/`) decodes this file's
    /// coefficients for libjpeg; otherwise libjpeg-turbo decodes it alone. It takes a
    /// complete Huffman-coded progressive frame (SOF2; 8-bit, 1 or 3 components with distinct
    /// ids, quantisation slots 0..=3, at most 10 blocks per MCU) with nothing irregular,
    /// whose scans follow libjpeg's rules for progressive scans, refine every coefficient of
    /// every component exactly to its last bit (libjpeg would otherwise smooth blocks), and
    /// have the tables they use defined.
    pub fn own_progressive_fit(&self) -> bool {
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
