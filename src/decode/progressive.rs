//! Exact, faster decoding of Huffman-coded progressive JPEGs: our own coefficient decoder,
//! whose coefficients libjpeg-turbo then turns into pixels as it would a sequential JPEG's.
//!
//! # Why
//!
//! libjpeg-turbo decodes progressive scans (above all the successive-approximation
//! refinement scans) with generic bit-at-a-time code, about 10× slower than its sequential
//! decoder (`perf` on large progressive photographs: 60% of all CPU time in
//! `decode_mcu_AC_refine`, `decode_mcu_AC_first` and `decode_mcu_DC_*`). And it decodes every
//! block of every scan, into a whole-image buffer it allocates and clears afresh, before it
//! outputs a row, even when only a window is wanted.
//!
//! # How, and why the pixels are the same
//!
//! [`coefficients`] walks the scans with a 64-bit bit reader and table-driven Huffman
//! decoding (refinement scans skip zeros with one `pdep` where the CPU has a fast one), and
//! stops each scan after the last block row the window needs (the rest of the scan's data
//! is skipped to its next marker). [`Coefficients::decode`] then gives libjpeg the header of
//! a sequential JPEG of the MCUs around the window (one MCU of margin on every side that is
//! not an image edge, so that libjpeg's fancy upsampling sees the same neighbours), with the
//! same quantisation tables (as latched for each component's first scan), component ids,
//! sampling factors and JFIF/Adobe markers, and hands it each MCU's coefficients in place
//! of entropy decoding ([`turbo::decode_from_source`]). Quantised DCT coefficients are
//! all a JPEG decoder works from: libjpeg dequantises, inverse-transforms, upsamples and
//! converts colour the same way for both codings, so the window's pixels are bit-identical
//! to libjpeg decoding the original (the tests check this against libjpeg on every fixture,
//! at many windows).
//!
//! Anything this decoder does not handle exactly as libjpeg does — corrupt or truncated data
//! in the part we decode, a progression that leaves coefficients incomplete (libjpeg would
//! then smooth blocks), out-of-range values, restart markers out of place, more than three
//! components — makes [`coefficients`] return `None`, and the caller decodes the original
//! with libjpeg as before. So this only ever changes speed.

use super::huffman::{
    extend, next_segment, parse_dht, parse_dri, table, BitReader, HuffTable, Unsupported,
    NATURAL_ORDER, R,
};
use super::turbo::{self, Rect};
use super::DecodeError;

struct Component {
    id: u8,
    h: usize,
    v: usize,
    /// Quantisation table slot in the frame header.
    tq: usize,
    /// Blocks across and down that hold image data.
    width_blocks: usize,
    height_blocks: usize,
    /// Blocks across in storage (whole MCUs).
    stride_blocks: usize,
    /// Block rows stored (those the request needs, in whole MCU rows).
    rows_stored: usize,
    /// AC coefficients, 64 slots per block in zigzag order (slot 0 unused). Only the slots
    /// `nonzero` marks are ever read, so the buffer is not cleared between images: clearing
    /// tens of megabytes (and sweeping them in each DC scan) cost more than decoding.
    coefs: Vec<i16>,
    /// DC coefficients, one per block, apart from the AC ones so that DC scans touch a
    /// dense array instead of a cache line per block.
    dc: Vec<i16>,
    /// For each block, bit k set when AC coefficient k (zigzag) is nonzero: refinement
    /// scans and the hand-over to libjpeg visit only those.
    nonzero: Vec<u64>,
    /// Successive-approximation state of each coefficient (libjpeg's `coef_bits`): -1
    /// before its first scan, then the scan's Al.
    coef_bits: [i8; 64],
    /// The quantisation table latched at the component's first scan (precision, 64 values
    /// in zigzag order as stored).
    quant: Option<(u8, [u16; 64])>,
}

struct Frame {
    width: usize,
    height: usize,
    max_h: usize,
    max_v: usize,
    mcus_x: usize,
    mcus_y: usize,
    comps: Vec<Component>,
}

/// Scan header fields.
struct Scan {
    comps: Vec<(usize, usize, usize)>, // (component index, dc table, ac table)
    ss: usize,
    se: usize,
    ah: u8,
    al: u8,
}

/// The needed part of the image, in MCUs: rows r0..r1, columns c0..c1.
#[derive(Clone, Copy)]
struct McuRegion {
    r0: usize,
    r1: usize,
    c0: usize,
    c1: usize,
}

/// Decodes the coefficients of a Huffman-coded progressive JPEG (`data` starts at SOI) that
/// `region` needs (stored coordinates; None: the whole image). None when the file is not
/// one this decoder handles exactly (see the module docs).
pub(crate) fn coefficients(data: &[u8], region: Option<Rect>) -> Option<Coefficients> {
    read_coefficients(data, region).ok()
}

/// Coefficient storage kept by each thread between images, up to this many coefficients
/// (96 MiB): a large photograph's coefficients are tens of megabytes, and fresh pages cost
/// more to fault in than the whole DC scan takes to decode.
const KEPT_COEFFICIENTS: usize = 48 << 20;

thread_local! {
    static SPARE_COEFS: std::cell::RefCell<Vec<Vec<i16>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A buffer of at least `len` AC slots with unspecified (old, never uninitialised)
/// contents, one this thread used before when there is one.
fn ac_buffer(len: usize) -> Vec<i16> {
    let spare = SPARE_COEFS.with(|s| {
        let mut s = s.borrow_mut();
        let best = (0..s.len())
            .filter(|&i| s[i].capacity() >= len)
            .min_by_key(|&i| s[i].capacity())
            .or_else(|| (0..s.len()).max_by_key(|&i| s[i].capacity()));
        best.map(|i| s.swap_remove(i))
    });
    let mut v = spare.unwrap_or_default();
    if v.len() < len {
        v.resize(len, 0);
    }
    v
}

/// Keeps `frame`'s coefficient buffers for this thread's next image (within the limit).
fn keep_buffers(frame: Frame) {
    SPARE_COEFS.with(|s| {
        let mut s = s.borrow_mut();
        for c in frame.comps {
            s.push(c.coefs);
        }
        s.sort_by_key(|v| std::cmp::Reverse(v.capacity()));
        let mut total = 0;
        s.retain(|v| {
            let keep = total + v.capacity() <= KEPT_COEFFICIENTS;
            total += if keep { v.capacity() } else { 0 };
            keep
        });
    });
}

fn read_coefficients(d: &[u8], region: Option<Rect>) -> R<Coefficients> {
    if d.get(..2) != Some(&[0xFF, 0xD8]) {
        return Err(Unsupported);
    }
    let mut frame: Option<Frame> = None;
    let mut mcu: Option<McuRegion> = None;
    let mut quant: [Option<(u8, [u16; 64])>; 4] = [None; 4];
    let mut dc_tables: [Option<HuffTable>; 4] = Default::default();
    let mut ac_tables: [Option<HuffTable>; 4] = Default::default();
    let mut restart_interval = 0usize;
    // JFIF (APP0) and Adobe (APP14) segments before the first scan decide libjpeg's colour
    // space; they are copied verbatim.
    let mut color_markers: Vec<u8> = Vec::new();
    let mut seen_scan = false;
    let mut i = 2;
    loop {
        let seg = next_segment(d, i)?;
        let (p, segment_end) = (seg.payload, seg.end);
        match seg.marker {
            0xD9 => break,
            0xC2 => {
                if frame.is_some() {
                    return Err(Unsupported);
                }
                let f = parse_frame(p)?;
                mcu = Some(needed_mcus(&f, region)?);
                frame = Some(f);
            }
            0xC0 | 0xC1 | 0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xCD..=0xCF => {
                return Err(Unsupported)
            }
            0xC4 => parse_dht(p, &mut dc_tables, &mut ac_tables)?,
            0xDB => parse_dqt(p, &mut quant)?,
            0xDD => restart_interval = parse_dri(p)?,
            0xE0 | 0xEE if !seen_scan => {
                color_markers.extend_from_slice(&d[seg.start..segment_end])
            }
            _ => {}
        }
        if seg.marker != 0xDA {
            i = segment_end;
            continue;
        }
        seen_scan = true;
        let f = frame.as_mut().ok_or(Unsupported)?;
        let need = mcu.ok_or(Unsupported)?;
        let scan = parse_sos(p, f)?;
        let data_end = super::jpeg::end_of_entropy_data(d, segment_end).ok_or(Unsupported)?;
        for &(ci, _, _) in &scan.comps {
            let c = &mut f.comps[ci];
            if c.quant.is_none() {
                c.quant = Some(quant[c.tq].ok_or(Unsupported)?);
            }
        }
        let mut reader = BitReader::new(d, segment_end, data_end);
        let job = ScanJob {
            scan: &scan,
            dc_tables: &dc_tables,
            ac_tables: &ac_tables,
            restart_interval,
            mcu_rows_needed: need.r1,
        };
        decode_scan(f, &job, &mut reader)?;
        i = data_end;
    }
    let f = frame.ok_or(Unsupported)?;
    let need = mcu.ok_or(Unsupported)?;
    for c in &f.comps {
        if c.coef_bits.iter().any(|&b| b != 0) {
            // Never fully refined: libjpeg would smooth blocks.
            return Err(Unsupported);
        }
    }
    coefficients_of(f, need, region, &color_markers)
}

fn parse_frame(p: &[u8]) -> R<Frame> {
    if p.len() < 6 || p[0] != 8 {
        return Err(Unsupported);
    }
    let height = usize::from(u16::from_be_bytes([p[1], p[2]]));
    let width = usize::from(u16::from_be_bytes([p[3], p[4]]));
    let nc = usize::from(p[5]);
    if width == 0 || height == 0 || !(nc == 1 || nc == 3) || p.len() < 6 + 3 * nc {
        return Err(Unsupported);
    }
    let mut comps = Vec::with_capacity(nc);
    for c in p[6..6 + 3 * nc].chunks_exact(3) {
        let (h, v, tq) = (
            usize::from(c[1] >> 4),
            usize::from(c[1] & 15),
            usize::from(c[2]),
        );
        if !(1..=4).contains(&h) || !(1..=4).contains(&v) || tq > 3 {
            return Err(Unsupported);
        }
        if comps.iter().any(|x: &Component| x.id == c[0]) {
            return Err(Unsupported);
        }
        comps.push(Component {
            id: c[0],
            h,
            v,
            tq,
            width_blocks: 0,
            height_blocks: 0,
            stride_blocks: 0,
            rows_stored: 0,
            coefs: Vec::new(),
            dc: Vec::new(),
            nonzero: Vec::new(),
            coef_bits: [-1; 64],
            quant: None,
        });
    }
    let max_h = comps.iter().map(|c| c.h).max().unwrap_or(1);
    let max_v = comps.iter().map(|c| c.v).max().unwrap_or(1);
    // A sequential interleaved scan allows at most 10 blocks per MCU.
    if nc > 1 && comps.iter().map(|c| c.h * c.v).sum::<usize>() > 10 {
        return Err(Unsupported);
    }
    let mcus_x = width.div_ceil(8 * max_h);
    let mcus_y = height.div_ceil(8 * max_v);
    for c in &mut comps {
        c.width_blocks = (width * c.h).div_ceil(max_h).div_ceil(8);
        c.height_blocks = (height * c.v).div_ceil(max_v).div_ceil(8);
        if nc == 1 {
            // One component: every scan is non-interleaved, an MCU is one block.
            c.stride_blocks = c.width_blocks;
        } else {
            c.stride_blocks = mcus_x * c.h;
        }
    }
    Ok(Frame {
        width,
        height,
        max_h,
        max_v,
        mcus_x,
        mcus_y,
        comps,
    })
}

/// Pixels per MCU across and down in the sequential output (for one component, a block).
fn mcu_size(f: &Frame) -> (usize, usize) {
    if f.comps.len() == 1 {
        (8, 8)
    } else {
        (8 * f.max_h, 8 * f.max_v)
    }
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

fn parse_dqt(mut p: &[u8], quant: &mut [Option<(u8, [u16; 64])>; 4]) -> R<()> {
    while !p.is_empty() {
        let (pq, tq) = (p[0] >> 4, usize::from(p[0] & 15));
        if tq > 3 || pq > 1 {
            return Err(Unsupported);
        }
        let n = if pq == 0 { 64 } else { 128 };
        let body = p.get(1..1 + n).ok_or(Unsupported)?;
        let mut q = [0u16; 64];
        for (k, v) in q.iter_mut().enumerate() {
            *v = if pq == 0 {
                u16::from(body[k])
            } else {
                u16::from_be_bytes([body[2 * k], body[2 * k + 1]])
            };
        }
        quant[tq] = Some((pq, q));
        p = &p[1 + n..];
    }
    Ok(())
}

fn parse_sos(p: &[u8], f: &mut Frame) -> R<Scan> {
    let ns = usize::from(*p.first().ok_or(Unsupported)?);
    if ns == 0 || ns > 4 || p.len() < 1 + 2 * ns + 3 {
        return Err(Unsupported);
    }
    let mut comps = Vec::with_capacity(ns);
    for s in p[1..1 + 2 * ns].chunks_exact(2) {
        let ci = f
            .comps
            .iter()
            .position(|c| c.id == s[0])
            .ok_or(Unsupported)?;
        if comps.iter().any(|&(c, _, _)| c == ci) {
            return Err(Unsupported);
        }
        comps.push((ci, usize::from(s[1] >> 4), usize::from(s[1] & 15)));
    }
    let t = &p[1 + 2 * ns..];
    let (ss, se, ah, al) = (usize::from(t[0]), usize::from(t[1]), t[2] >> 4, t[2] & 15);
    // libjpeg's validity rules for progressive scans (it stops with an error otherwise).
    let valid = if ss == 0 {
        se == 0
    } else {
        ns == 1 && ss <= se && se <= 63
    };
    if !valid || al > 13 || (ah != 0 && ah != al + 1) {
        return Err(Unsupported);
    }
    // The coefficients' successive-approximation state must follow on exactly (libjpeg
    // only warns otherwise, and its output would then be hard to match).
    for &(ci, _, _) in &comps {
        let bits = &mut f.comps[ci].coef_bits;
        if ss > 0 && bits[0] < 0 {
            return Err(Unsupported); // AC before DC
        }
        for b in &mut bits[ss..=se] {
            let expected = if ah == 0 { -1 } else { ah as i8 };
            if *b != expected {
                return Err(Unsupported);
            }
            *b = al as i8;
        }
    }
    Ok(Scan {
        comps,
        ss,
        se,
        ah,
        al,
    })
}

/// What decoding one scan needs besides the frame and the reader.
#[derive(Clone, Copy)]
struct ScanJob<'a> {
    scan: &'a Scan,
    dc_tables: &'a [Option<HuffTable>; 4],
    ac_tables: &'a [Option<HuffTable>; 4],
    restart_interval: usize,
    /// Decode down to this MCU row.
    mcu_rows_needed: usize,
}

/// Decodes one scan into `f`'s coefficients, down to MCU row `job.mcu_rows_needed`: with
/// the refinement scans' zero skipping done by one `pdep` instruction where the CPU has a
/// fast one (see [`fast_pdep`]), else by a loop.
fn decode_scan(f: &mut Frame, job: &ScanJob<'_>, r: &mut BitReader<'_>) -> R<()> {
    #[cfg(target_arch = "x86_64")]
    if fast_pdep() {
        // SAFETY: fast_pdep() is true only when the CPU has BMI2, all decode_scan_bmi2 needs.
        return unsafe { decode_scan_bmi2(f, job, r) };
    }
    decode_scan_with::<false>(f, job, r)
}

/// [`decode_scan_with`] compiled for BMI2, with `pdep`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "bmi2")]
unsafe fn decode_scan_bmi2(f: &mut Frame, job: &ScanJob<'_>, r: &mut BitReader<'_>) -> R<()> {
    decode_scan_with::<true>(f, job, r)
}

/// Whether this CPU has a fast `pdep` (BMI2): Intel's since Haswell and AMD's since Zen 3.
/// AMD's earlier ones microcode it at up to hundreds of cycles, slower than the loop.
#[cfg(target_arch = "x86_64")]
fn fast_pdep() -> bool {
    #[cfg(test)]
    if NO_PDEP.with(|n| n.get()) {
        return false;
    }
    static FAST: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FAST.get_or_init(|| {
        if !std::arch::is_x86_feature_detected!("bmi2") {
            return false;
        }
        // SAFETY: every x86-64 CPU has CPUID (the intrinsic is safe from Rust 1.87 on).
        #[allow(unused_unsafe)]
        let (vendor, signature) = unsafe {
            let v = std::arch::x86_64::__cpuid(0);
            (
                [
                    v.ebx.to_le_bytes(),
                    v.edx.to_le_bytes(),
                    v.ecx.to_le_bytes(),
                ]
                .concat(),
                std::arch::x86_64::__cpuid(1).eax,
            )
        };
        let base_family = (signature >> 8) & 0xF;
        let family = if base_family == 0xF {
            base_family + ((signature >> 20) & 0xFF)
        } else {
            base_family
        };
        let slow = matches!(&vendor[..], b"AuthenticAMD" | b"HygonGenuine") && family < 0x19;
        !slow
    })
}

#[cfg(test)]
thread_local! {
    /// Tests set it to run the loop instead of `pdep` on a CPU that has a fast one.
    pub(super) static NO_PDEP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[inline(always)]
fn decode_scan_with<const PDEP: bool>(
    f: &mut Frame,
    job: &ScanJob<'_>,
    r: &mut BitReader<'_>,
) -> R<()> {
    let ScanJob {
        scan,
        dc_tables,
        ac_tables,
        restart_interval,
        mcu_rows_needed,
    } = *job;
    // Storage for the rows needed, allocated on first use.
    let nc = f.comps.len();
    for &(ci, _, _) in &scan.comps {
        let c = &mut f.comps[ci];
        if c.coefs.is_empty() {
            c.rows_stored = if nc == 1 {
                mcu_rows_needed.min(c.height_blocks)
            } else {
                mcu_rows_needed * c.v
            };
            let blocks = c.rows_stored * c.stride_blocks;
            c.coefs = ac_buffer(blocks * 64);
            c.dc = vec![0i16; blocks];
            c.nonzero = vec![0u64; blocks];
        }
    }
    let mut restarts = Restarts {
        interval: restart_interval,
        left: restart_interval,
        next: 0,
    };
    let mut st = ScanState {
        eobrun: 0,
        preds: [0; 4],
    };
    if scan.comps.len() == 1 {
        let (ci, td, ta) = scan.comps[0];
        let c = &mut f.comps[ci];
        let (al, ss, se) = (scan.al, scan.ss, scan.se);
        if scan.ss == 0 && scan.ah == 0 {
            let t = table(dc_tables, td)?;
            each_dc(c, r, &mut restarts, &mut st, |r, dc, st| {
                dc_first_block(r, t, &mut st.preds[0], al, dc)
            })?;
        } else if scan.ss == 0 {
            each_dc(c, r, &mut restarts, &mut st, |r, dc, _| {
                if r.bit() {
                    *dc |= 1 << al;
                }
                Ok(())
            })?;
        } else if scan.ah == 0 {
            let t = table(ac_tables, ta)?;
            each_block(c, r, &mut restarts, &mut st, |r, b, nz, st| {
                ac_first_block(r, t, ss, se, al, &mut st.eobrun, b, nz)
            })?;
        } else {
            let t = table(ac_tables, ta)?;
            each_block(c, r, &mut restarts, &mut st, |r, b, nz, st| {
                ac_refine_block::<PDEP>(r, t, ss, se, al, &mut st.eobrun, b, nz)
            })?;
        }
    } else {
        // Interleaved: DC scans only (checked in parse_sos).
        let dc_first = scan.ah == 0;
        let mut dcts = Vec::with_capacity(scan.comps.len());
        for &(_, td, _) in &scan.comps {
            dcts.push(if dc_first {
                Some(table(dc_tables, td)?)
            } else {
                None
            });
        }
        for my in 0..mcu_rows_needed.min(f.mcus_y) {
            for mx in 0..f.mcus_x {
                restarts.before_mcu(r, &mut st)?;
                for (si, &(ci, _, _)) in scan.comps.iter().enumerate() {
                    let c = &mut f.comps[ci];
                    for y in 0..c.v {
                        for x in 0..c.h {
                            let b = (my * c.v + y) * c.stride_blocks + mx * c.h + x;
                            let dc = c.dc.get_mut(b).ok_or(Unsupported)?;
                            if let Some(t) = dcts[si] {
                                dc_first_block(r, t, &mut st.preds[si], scan.al, dc)?;
                            } else if r.bit() {
                                *dc |= 1 << scan.al;
                            }
                        }
                    }
                }
            }
        }
    }
    r.check_no_padding_used()
}

/// End-of-band run and DC predictions, reset at each restart.
struct ScanState {
    eobrun: u32,
    preds: [i32; 4],
}

/// Restart-interval bookkeeping of a scan.
struct Restarts {
    interval: usize,
    left: usize,
    next: u8,
}

impl Restarts {
    #[inline(always)]
    fn before_mcu(&mut self, r: &mut BitReader<'_>, st: &mut ScanState) -> R<()> {
        if self.interval > 0 {
            if self.left == 0 {
                r.restart(self.next)?;
                self.next = (self.next + 1) & 7;
                self.left = self.interval;
                st.eobrun = 0;
                st.preds = [0; 4];
            }
            self.left -= 1;
        }
        Ok(())
    }
}

/// Runs `decode` on the AC slots and nonzero mask of every block of a one-component scan
/// down to the rows stored, in scan order (monomorphised per scan kind, so the per-block
/// loop has no dispatch).
#[inline(always)]
fn each_block<F>(
    c: &mut Component,
    r: &mut BitReader<'_>,
    restarts: &mut Restarts,
    st: &mut ScanState,
    mut decode: F,
) -> R<()>
where
    F: FnMut(&mut BitReader<'_>, &mut [i16; 64], &mut u64, &mut ScanState) -> R<()>,
{
    let rows = c.height_blocks.min(c.rows_stored);
    let (stride, width) = (c.stride_blocks, c.width_blocks);
    for by in 0..rows {
        let row = &mut c.coefs[by * stride * 64..(by * stride + width) * 64];
        let nz_row = &mut c.nonzero[by * stride..by * stride + width];
        for (block, nz) in row.chunks_exact_mut(64).zip(nz_row.iter_mut()) {
            restarts.before_mcu(r, st)?;
            let block: &mut [i16; 64] = block.try_into().map_err(|_| Unsupported)?;
            decode(r, block, nz, st)?;
        }
    }
    Ok(())
}

/// [`each_block`] for the DC coefficients.
#[inline(always)]
fn each_dc<F>(
    c: &mut Component,
    r: &mut BitReader<'_>,
    restarts: &mut Restarts,
    st: &mut ScanState,
    mut decode: F,
) -> R<()>
where
    F: FnMut(&mut BitReader<'_>, &mut i16, &mut ScanState) -> R<()>,
{
    let rows = c.height_blocks.min(c.rows_stored);
    let (stride, width) = (c.stride_blocks, c.width_blocks);
    for by in 0..rows {
        for dc in &mut c.dc[by * stride..by * stride + width] {
            restarts.before_mcu(r, st)?;
            decode(r, dc, st)?;
        }
    }
    Ok(())
}

#[inline(always)]
fn dc_first_block(
    r: &mut BitReader<'_>,
    t: &HuffTable,
    pred: &mut i32,
    al: u8,
    dc: &mut i16,
) -> R<()> {
    let s = u32::from(r.decode(t)?);
    if s > 11 {
        return Err(Unsupported);
    }
    let diff = if s > 0 { extend(r.get(s), s) } else { 0 };
    *pred = pred.wrapping_add(diff);
    *dc = (*pred << al) as i16;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn ac_first_block(
    r: &mut BitReader<'_>,
    t: &HuffTable,
    ss: usize,
    se: usize,
    al: u8,
    eobrun: &mut u32,
    block: &mut [i16; 64],
    nz: &mut u64,
) -> R<()> {
    if *eobrun > 0 {
        *eobrun -= 1;
        return Ok(());
    }
    let mut k = ss;
    while k <= se {
        let rs = r.decode(t)?;
        let (run, s) = (usize::from(rs >> 4), u32::from(rs & 15));
        if s != 0 {
            k += run;
            if k > se || s > 10 {
                return Err(Unsupported);
            }
            let v = (extend(r.get(s), s) << al) as i16;
            block[k & 63] = v;
            *nz |= u64::from(v != 0) << k;
        } else if run == 15 {
            k += 15;
        } else {
            *eobrun = eob_run(r, run as u32) - 1;
            break;
        }
        k += 1;
    }
    Ok(())
}

/// The length of an end-of-band run with symbol run `run` (0..=14): 2^run plus `run`
/// appended bits.
#[inline(always)]
fn eob_run(r: &mut BitReader<'_>, run: u32) -> u32 {
    let mut n = 1u32 << run;
    if run > 0 {
        n += r.get(run);
    }
    n
}

/// `bits` less its `n` lowest set bits.
#[inline(always)]
fn skip_lowest<const PDEP: bool>(bits: u64, n: u32) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if PDEP {
        // SAFETY: PDEP is true only in the code decode_scan_bmi2 runs (BMI2 detected).
        return unsafe { std::arch::x86_64::_pdep_u64(u64::MAX << n, bits) };
    }
    let mut bits = bits;
    for _ in 0..n {
        bits &= bits.wrapping_sub(1);
    }
    bits
}

/// Bits `from..=to` set.
#[inline(always)]
fn band(from: usize, to: usize) -> u64 {
    (u64::MAX << from) & (u64::MAX >> (63 - to))
}

/// Successive-approximation corrections: one bit for each coefficient in `mask` (already
/// nonzero), in zigzag order; a 1 adds `p1` to its magnitude unless that bit is already set.
#[inline(always)]
fn correct(r: &mut BitReader<'_>, block: &mut [i16; 64], mut mask: u64, p1: i16) {
    let mut n = mask.count_ones();
    while n > 0 {
        let take = n.min(32);
        let mut bits = r.get(take) << (32 - take);
        n -= take;
        if bits == 0 && n == 0 {
            return;
        }
        for _ in 0..take {
            let k = mask.trailing_zeros() as usize & 63;
            mask &= mask - 1;
            let c = block[k];
            // Branch-free: the correction bits are close to random.
            let add = (bits >> 31) as i16 & i16::from(c & p1 == 0);
            block[k] = c.wrapping_add(add * ((c >> 15) | 1) * p1);
            bits <<= 1;
        }
    }
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn ac_refine_block<const PDEP: bool>(
    r: &mut BitReader<'_>,
    t: &HuffTable,
    ss: usize,
    se: usize,
    al: u8,
    eobrun: &mut u32,
    block: &mut [i16; 64],
    nz: &mut u64,
) -> R<()> {
    let p1: i16 = 1 << al;
    let mut k = ss;
    if *eobrun == 0 {
        while k <= se {
            let rs = r.decode(t)?;
            let run = u32::from(rs >> 4);
            let s = rs & 15;
            let mut value = 0i16;
            if s != 0 {
                if s != 1 {
                    return Err(Unsupported);
                }
                value = if r.bit() { p1 } else { -p1 };
            } else if run != 15 {
                *eobrun = eob_run(r, run);
                break;
            }
            // Pass `run` zero coefficients (correcting the nonzero ones on the way) and
            // stop at the next zero: the new value goes there (ZRL: it is the 16th zero,
            // passed over).
            let rest = band(k, se);
            let zeros = skip_lowest::<PDEP>(rest & !*nz, run);
            if zeros == 0 {
                // Fewer zeros left than the run: the band ends first.
                correct(r, block, *nz & rest, p1);
                if value != 0 {
                    return Err(Unsupported);
                }
                k = se + 1;
            } else {
                let z = zeros.trailing_zeros() as usize;
                correct(r, block, *nz & rest & !(u64::MAX << z), p1);
                if value != 0 {
                    block[z & 63] = value;
                    *nz |= 1 << z;
                }
                k = z + 1;
            }
        }
    }
    if *eobrun > 0 {
        // The rest of the band is in an end-of-band run: only corrections.
        if k <= se {
            correct(r, block, *nz & band(k, se), p1);
        }
        *eobrun -= 1;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Handing the coefficients to libjpeg.

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
    /// or 3), and the channel count.
    pub(crate) fn decode(mut self, components: usize) -> Result<(Vec<u8>, usize), DecodeError> {
        let req = turbo::Request {
            width: self.width,
            height: self.height,
            components,
            region: self.region,
            scale_denom: 1,
            block_smoothing: true,
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
fn coefficients_of(
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

#[cfg(test)]
mod tests {
    use super::*;

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
