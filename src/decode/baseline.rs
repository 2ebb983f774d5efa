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
    /// The DC and AC table of each Huffman slot (0..=3) the scan uses; a slot it doesn't
    /// use holds one of the others, never read. Arrays, not vectors: a scan allocates
    /// nothing.
    dc_tables: [Rc<HuffTable>; 4],
    ac_tables: [Rc<AcTable>; 4],
    /// For each scan component: its DC and AC slot.
    tables: [(usize, usize); 4],
    /// Scan component of each block of an MCU, the first `mcu_blocks` of them.
    members: [usize; MAX_MCU_BLOCKS],
    mcu_blocks: usize,
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
    let mut dc_tables: [Option<Rc<HuffTable>>; 4] = Default::default();
    let mut ac_tables: [Option<Rc<AcTable>>; 4] = Default::default();
    let mut tables = [(0, 0); 4];
    let (mut members, mut mcu_blocks) = ([0; MAX_MCU_BLOCKS], 0);
    for (si, s) in scan.components.iter().enumerate() {
        let ci = h.component_index(s.id).ok_or(Unsupported)?;
        let (td, ta) = (usize::from(s.dc_slot), usize::from(s.ac_slot));
        let dc = dc_tables.get_mut(td).ok_or(Unsupported)?;
        if dc.is_none() {
            let t = table_bytes(&scan.tables.dc, s.dc_slot)?;
            *dc = Some(cached(&DC_TABLES, t)?);
        }
        let ac = ac_tables.get_mut(ta).ok_or(Unsupported)?;
        if ac.is_none() {
            let t = table_bytes(&scan.tables.ac, s.ac_slot)?;
            *ac = Some(cached(&AC_TABLES, t)?);
        }
        *tables.get_mut(si).ok_or(Unsupported)? = (td, ta);
        // An interleaved scan's MCU: each component's h × v blocks in scan order; a lone
        // component's MCU is one block.
        let c = h.frame.components[ci];
        let blocks = if ns == 1 { 1 } else { usize::from(c.h * c.v) };
        members
            .get_mut(mcu_blocks..mcu_blocks + blocks)
            .ok_or(Unsupported)?
            .fill(si);
        mcu_blocks += blocks;
    }
    let restart_interval = usize::from(scan.tables.restart_interval);
    Ok(BaselineScan {
        reader: BitReader::new(d, scan.header.end, d.len()),
        dc_tables: every_slot(dc_tables)?,
        ac_tables: every_slot(ac_tables)?,
        tables,
        members,
        mcu_blocks,
        preds: [0; 4],
        restart_interval,
        restarts_left: restart_interval,
        next_restart: 0,
    })
}

/// The tables of the slots a scan uses, the others filled with one of them (a scan uses
/// at least one).
fn every_slot<T>(t: [Option<Rc<T>>; 4]) -> R<[Rc<T>; 4]> {
    let any = t.iter().flatten().next().cloned().ok_or(Unsupported)?;
    Ok(t.map(|t| t.unwrap_or_else(|| Rc::clone(&any))))
}

/// Blocks in an MCU at most (the JPEG standard's limit).
const MAX_MCU_BLOCKS: usize = 10;

/// Tables built lately on this thread, with the DHT bytes they were built from, most recent
/// first: photos from one source mostly share their tables, and building one costs about
/// as much as decoding a hundred blocks.
type TableCache<T> = RefCell<Vec<(Vec<u8>, Rc<T>)>>;

/// How many tables of each class a thread keeps.
const CACHED_TABLES: usize = 8;

/// The longest DHT entry: 16 counts and 256 symbols.
const MAX_DHT_BYTES: usize = 16 + 256;

thread_local! {
    static DC_TABLES: TableCache<HuffTable> = const { RefCell::new(Vec::new()) };
    static AC_TABLES: TableCache<AcTable> = const { RefCell::new(Vec::new()) };
}

/// A table a thread's cache builds from DHT bytes, or rebuilds in place.
trait CachedTable: Sized {
    fn build(t: &[u8]) -> R<Self>;
    fn rebuild(&mut self, t: &[u8]) -> R<()>;
}

impl CachedTable for HuffTable {
    fn build(t: &[u8]) -> R<Self> {
        HuffTable::from_dht(t)
    }
    fn rebuild(&mut self, t: &[u8]) -> R<()> {
        self.rebuild_from_dht(t)
    }
}

impl CachedTable for AcTable {
    fn build(t: &[u8]) -> R<Self> {
        Ok(AcTable::new(HuffTable::from_dht(t)?))
    }
    fn rebuild(&mut self, t: &[u8]) -> R<()> {
        self.rebuild_from_dht(t)
    }
}

/// The table of DHT bytes `t` from `cache`, or built (and kept). Once the cache is full a
/// miss rebuilds the least recent table in place, where no scan still holds it: ImageNet's
/// photos mostly carry tables of their own, and a miss then allocates nothing.
fn cached<T: CachedTable>(
    cache: &'static std::thread::LocalKey<TableCache<T>>,
    t: &[u8],
) -> R<Rc<T>> {
    cache.with(|c| {
        let mut c = c.borrow_mut();
        if let Some(i) = c.iter().position(|(k, _)| **k == *t) {
            c[..=i].rotate_right(1);
            return Ok(Rc::clone(&c[0].1));
        }
        if c.len() >= CACHED_TABLES {
            let mut oldest = c.pop().ok_or(Unsupported)?;
            if let Some(table) = Rc::get_mut(&mut oldest.1) {
                // On an error the half-rebuilt table is dropped with its entry.
                table.rebuild(t)?;
                oldest.0.clear();
                oldest.0.extend_from_slice(t);
                c.insert(0, oldest);
                return Ok(Rc::clone(&c[0].1));
            }
        }
        let table = Rc::new(T::build(t)?);
        let mut key = Vec::with_capacity(MAX_DHT_BYTES.max(t.len()));
        key.extend_from_slice(t);
        c.insert(0, (key, Rc::clone(&table)));
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
                for (i, &si) in self.members[..self.mcu_blocks].iter().enumerate() {
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
                for &si in &self.members[..self.mcu_blocks] {
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
        self.mcu_blocks
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

#[cfg(test)]
mod tests {
    use super::*;

    /// DHT bytes of a valid table, a different one for each `seed`: one in three a single
    /// code of one bit (half the lookup left empty, where the table rebuilt in its place
    /// had codes), the others the standard DC code's lengths with the 12 symbols rotated.
    fn dht(seed: u8) -> Vec<u8> {
        if seed % 3 == 1 {
            let mut t = vec![0; 16];
            t[0] = 1;
            t.push(seed);
            return t;
        }
        let mut t = vec![0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0];
        t.extend((0..12u8).map(|s| (s + seed) % 12 + 16 * (seed / 12)));
        t
    }

    /// More distinct tables than a thread keeps, revisited so that lookups hit, miss and
    /// rebuild the oldest table in place, some held (as a scan holds its tables) all along:
    /// every table handed out is the one built afresh from its bytes, a held one is never
    /// rebuilt under its holder, and a table that fails to build leaves the cache working.
    #[test]
    fn a_full_cache_rebuilds_in_place_only_what_no_scan_holds() {
        let tables: Vec<Vec<u8>> = (0..3 * CACHED_TABLES as u8).map(dht).collect();
        let mut held = Vec::new();
        for round in 0..3 {
            for (i, t) in tables.iter().enumerate() {
                let dc = cached(&DC_TABLES, t).unwrap();
                assert!(
                    *dc == HuffTable::from_dht(t).unwrap(),
                    "round {round}, table {i}"
                );
                let ac = cached(&AC_TABLES, t).unwrap();
                assert!(
                    *ac == AcTable::new(HuffTable::from_dht(t).unwrap()),
                    "round {round}, table {i}"
                );
                if i % 3 == round {
                    held.push((i, dc, ac));
                }
            }
            // A table the cache hit again is at the front (most recent).
            let last = tables.last().unwrap();
            assert!(DC_TABLES.with(|c| *c.borrow()[0].0 == **last));
        }
        let invalid = [3u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3];
        assert!(cached(&AC_TABLES, &invalid).is_err());
        for (i, dc, ac) in &held {
            assert!(
                **dc == HuffTable::from_dht(&tables[*i]).unwrap(),
                "held {i}"
            );
            assert!(**ac == AcTable::new(HuffTable::from_dht(&tables[*i]).unwrap()));
        }
        let t = &tables[0];
        assert!(*cached(&AC_TABLES, t).unwrap() == AcTable::new(HuffTable::from_dht(t).unwrap()));
        assert!(AC_TABLES.with(|c| c.borrow().len()) <= CACHED_TABLES);
    }
}
