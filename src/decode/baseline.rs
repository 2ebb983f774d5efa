//! Faster entropy decoding of sequential (baseline and extended 8-bit) Huffman-coded JPEGs,
//! handed to libjpeg-turbo in place of its own: bit-identical pixels.
//!
//! # Why
//!
//! Huffman decoding is most of a JPEG decode, far more than the IDCT and colour conversion
//! (`docs/performance.md`, "Where the time goes"). libjpeg-turbo's fast path looks up a code
//! in 8 bits, then reads the coefficient's magnitude bits and sign-extends it as separate
//! steps, refilling its bit buffer a byte at a time. Each code's lookup needs the bits where
//! the last step ended, so the lookups form one sequence of dependent loads: their number is
//! what decides the time.
//!
//! # How, and why the pixels are the same
//!
//! [`scan`] takes the header read once per sample ([`JpegHeader`]) and accepts only a file
//! libjpeg decodes in one pass ([`JpegHeader::own_sequential_fit`]): a Huffman-coded
//! sequential frame of 8-bit samples whose first scan holds every component (Ss 0, Se 63, no
//! successive approximation), with every Huffman table it uses defined. libjpeg-turbo then decodes the file as always, except that its entropy
//! decoder's `decode_mcu` asks [`BaselineScan`] for each MCU's coefficients
//! ([`turbo::decode_from_source`]), skipped rows included: everything after entropy
//! decoding (dequantisation, IDCT, upsampling, colour conversion, cropping) is libjpeg's
//! own, so equal coefficients make equal pixels. The decoding here is libjpeg's
//! (`decode_mcu` in jdhuff.c: DC predictions per component reset at restart markers, runs,
//! ZRL, every other zero-magnitude symbol ending the block), with a 64-bit bit reader that
//! refills eight bytes at a time, kept in registers through a block, and an AC table that
//! resolves up to two whole steps (code, run and sign-extended coefficient, or end of
//! block) in one lookup of 11 bits ([`AcTable`]; most steps of photos take 3 to 6 bits).
//! Built tables are kept per thread by their DHT bytes: photos of one source share them.
//!
//! Where libjpeg would do something else than decode the data as written — corrupt data
//! (an invalid code, a run past the block's end, a restart marker out of place), data that
//! ends early (libjpeg fills with zeros and stops decoding) — the source declines, the
//! decode stops, and the caller decodes the file with libjpeg alone. So this only ever
//! changes speed.

use super::header::{slot, JpegHeader};
use super::huffman::{
    extend, AcTable, BitReader, HuffTable, Unsupported, AC_END_OF_BLOCK, LOOKUP_BITS,
    NATURAL_ORDER, R,
};
use super::turbo::{McuBlocks, McuSource};
use std::cell::RefCell;
use std::rc::Rc;

/// The entropy-coded first scan of a sequential JPEG, decoded MCU by MCU for libjpeg.
pub(crate) struct BaselineScan<'a> {
    reader: BitReader<'a>,
    dc_tables: Vec<Rc<HuffTable>>,
    ac_tables: Vec<Rc<AcTable>>,
    /// For each scan component: its DC and AC table (indices into the vectors above).
    tables: Vec<(usize, usize)>,
    /// Scan component of each block of an MCU.
    members: Vec<usize>,
    /// DC prediction of each scan component.
    preds: [i32; 4],
    restart_interval: usize,
    /// MCUs left before the next restart marker.
    restarts_left: usize,
    /// Number (0..=7) of the next restart marker.
    next_restart: u8,
}

/// The first scan of the JPEG `bytes` (header `h`), when it is one [`BaselineScan`] decodes
/// ([`JpegHeader::own_sequential_fit`]) and its Huffman tables are valid; None otherwise.
pub(crate) fn scan<'a>(bytes: &'a [u8], h: &JpegHeader) -> Option<BaselineScan<'a>> {
    if !h.own_sequential_fit() {
        return None;
    }
    scan_from(bytes, h).ok()
}

/// The first scan of `h`, which [`JpegHeader::own_sequential_fit`] accepted: its tables
/// built (or taken from this thread's cache), its MCU layout, a reader at its data.
fn scan_from<'a>(d: &'a [u8], h: &JpegHeader) -> R<BaselineScan<'a>> {
    let scan = h.scans.first().ok_or(Unsupported)?;
    let ns = scan.components.len();
    let table_bytes = |slots: &[Option<u16>; 4], s: u8| -> R<&'a [u8]> {
        let t = h.huffman_tables.get(slot(slots, s).ok_or(Unsupported)?);
        d.get(t.ok_or(Unsupported)?.bytes.clone())
            .ok_or(Unsupported)
    };
    let mut dc_tables: Vec<Rc<HuffTable>> = Vec::new();
    let mut ac_tables: Vec<Rc<AcTable>> = Vec::new();
    // Place in dc_tables / ac_tables of each slot, once taken.
    let (mut dc_place, mut ac_place) = ([usize::MAX; 4], [usize::MAX; 4]);
    let mut tables = Vec::with_capacity(ns);
    let mut members = Vec::with_capacity(10);
    for (si, s) in scan.components.iter().enumerate() {
        let ci = h.component_index(s.id).ok_or(Unsupported)?;
        let (td, ta) = (usize::from(s.dc_slot), usize::from(s.ac_slot));
        if dc_place[td] == usize::MAX {
            dc_place[td] = dc_tables.len();
            let t = table_bytes(&scan.tables.dc, s.dc_slot)?;
            dc_tables.push(cached(&DC_TABLES, t, HuffTable::from_dht)?);
        }
        if ac_place[ta] == usize::MAX {
            ac_place[ta] = ac_tables.len();
            let t = table_bytes(&scan.tables.ac, s.ac_slot)?;
            ac_tables.push(cached(&AC_TABLES, t, |t| {
                Ok(AcTable::new(HuffTable::from_dht(t)?))
            })?);
        }
        tables.push((dc_place[td], ac_place[ta]));
        // An interleaved scan's MCU: each component's h × v blocks in scan order; a lone
        // component's MCU is one block.
        let c = h.frame.components[ci];
        let blocks = if ns == 1 { 1 } else { usize::from(c.h * c.v) };
        members.extend(std::iter::repeat_n(si, blocks));
    }
    let restart_interval = usize::from(scan.tables.restart_interval);
    Ok(BaselineScan {
        reader: BitReader::new(d, scan.header.end, d.len()),
        dc_tables,
        ac_tables,
        tables,
        members,
        preds: [0; 4],
        restart_interval,
        restarts_left: restart_interval,
        next_restart: 0,
    })
}

/// Tables built lately on this thread, with the DHT bytes they were built from, most recent
/// first: photos from one source mostly share their tables, and building one costs about
/// as much as decoding a hundred blocks.
type TableCache<T> = RefCell<Vec<(Box<[u8]>, Rc<T>)>>;

/// How many tables of each class a thread keeps.
const CACHED_TABLES: usize = 8;

thread_local! {
    static DC_TABLES: TableCache<HuffTable> = const { RefCell::new(Vec::new()) };
    static AC_TABLES: TableCache<AcTable> = const { RefCell::new(Vec::new()) };
}

/// The table of DHT bytes `t` from `cache`, or built by `build` (and kept).
fn cached<T>(
    cache: &'static std::thread::LocalKey<TableCache<T>>,
    t: &[u8],
    build: impl FnOnce(&[u8]) -> R<T>,
) -> R<Rc<T>> {
    cache.with(|c| {
        let mut c = c.borrow_mut();
        if let Some(i) = c.iter().position(|(k, _)| **k == *t) {
            let hit = c.remove(i);
            let table = Rc::clone(&hit.1);
            c.insert(0, hit);
            return Ok(table);
        }
        let table = Rc::new(build(t)?);
        c.insert(0, (t.into(), Rc::clone(&table)));
        c.truncate(CACHED_TABLES);
        Ok(table)
    })
}

impl BaselineScan<'_> {
    fn mcu(&mut self, blocks: Option<McuBlocks<'_>>) -> R<()> {
        if self.restart_interval > 0 {
            if self.restarts_left == 0 {
                self.reader.restart(self.next_restart)?;
                self.next_restart = (self.next_restart + 1) & 7;
                self.restarts_left = self.restart_interval;
                self.preds = [0; 4];
            }
            self.restarts_left -= 1;
        }
        let r = &mut self.reader;
        match blocks {
            Some(mut blocks) => {
                for (i, &si) in self.members.iter().enumerate() {
                    let (dc, ac) = self.tables[si];
                    decode_block::<true>(
                        r,
                        &self.dc_tables[dc],
                        &self.ac_tables[ac],
                        &mut self.preds[si],
                        blocks.get(i),
                    )?;
                }
            }
            None => {
                let mut discard = [0i16; 64];
                for &si in &self.members {
                    let (dc, ac) = self.tables[si];
                    decode_block::<false>(
                        r,
                        &self.dc_tables[dc],
                        &self.ac_tables[ac],
                        &mut self.preds[si],
                        &mut discard,
                    )?;
                }
            }
        }
        // Bits past the data's end read as zeros; libjpeg would stop decoding there.
        r.check_no_padding_used()
    }
}

impl McuSource for BaselineScan<'_> {
    fn blocks_per_mcu(&self) -> usize {
        self.members.len()
    }

    fn next_mcu(&mut self, blocks: Option<McuBlocks<'_>>) -> bool {
        self.mcu(blocks).is_ok()
    }
}

/// Decodes one block: its DC difference (added to `pred`) and its AC coefficients, written
/// into `block` (natural order, which comes zeroed) when `STORE`.
#[inline(always)]
fn decode_block<const STORE: bool>(
    r: &mut BitReader<'_>,
    dc: &HuffTable,
    ac: &AcTable,
    pred: &mut i32,
    block: &mut [i16; 64],
) -> R<()> {
    let fast: &[u64; 1 << LOOKUP_BITS] = &ac.fast;
    // A code (up to 16 bits) and its magnitude bits (up to 15) without another refill.
    let mut b = r.fill(r.take(), 31);
    let s = u32::from(b.decode(dc)?);
    if s > 0 {
        if s > 15 {
            return Err(Unsupported);
        }
        *pred += extend(b.get(s), s);
        // Real data stays far inside this; libjpeg stops on overflowing its int.
        if pred.unsigned_abs() > 1 << 24 {
            return Err(Unsupported);
        }
    }
    if STORE {
        block[0] = *pred as i16;
    }
    // The next position to fill.
    let mut k = 1usize;
    while k < 64 {
        b = r.fill(b, 31);
        let e = fast[b.peek(LOOKUP_BITS) as usize];
        if e & 31 != 0 {
            let p1 = k + ((e >> 10) & 127) as usize;
            let v1 = (e >> 32) as u16 as i16;
            if p1 >= 63 {
                // The block ends with the first step: the bits after it are the next
                // block's.
                b.consume(((e >> 5) & 31) as u32);
                if p1 > 63 {
                    if v1 == 0 {
                        break; // end of block, or a ZRL that reaches past it
                    }
                    return Err(Unsupported); // a run past the end: corrupt
                }
                if STORE {
                    block[63] = v1;
                }
                break;
            }
            b.consume((e & 31) as u32);
            if STORE {
                block[usize::from(NATURAL_ORDER[p1]) & 63] = v1;
            }
            // The second step (without one: a zero written at the next position, which
            // is zero anyway, and no advance).
            let p2 = p1 + 1 + ((e >> 17) & 127) as usize;
            let v2 = (e >> 48) as u16 as i16;
            if p2 > 63 {
                if v2 == 0 {
                    break;
                }
                return Err(Unsupported);
            }
            if STORE {
                block[usize::from(NATURAL_ORDER[p2]) & 63] = v2;
            }
            k = p2 + ((e >> 24) & 1) as usize;
        } else {
            let rs = u32::from(b.decode(&ac.huff)?);
            let (run, s) = (rs >> 4, rs & 15);
            let (run, value) = if s == 0 {
                (if run == 15 { 15 } else { AC_END_OF_BLOCK }, 0)
            } else {
                (run, extend(b.get(s), s) as i16)
            };
            let p = k + run as usize;
            if p > 63 {
                if value == 0 {
                    break; // end of block, or a ZRL that reaches past it (libjpeg writes nothing)
                }
                // A run past the block's end: corrupt (libjpeg would write position 63).
                return Err(Unsupported);
            }
            if STORE {
                block[usize::from(NATURAL_ORDER[p]) & 63] = value;
            }
            k = p + 1;
        }
    }
    r.put(b);
    Ok(())
}
