//! Huffman decoding shared by our progressive and baseline JPEG decoders: a 64-bit bit
//! reader over entropy-coded data and table-driven code lookup, with libjpeg's conventions
//! (zeros fed past a marker, `HUFF_EXTEND`), so that what they decode is what libjpeg-turbo
//! decodes from the same bytes. The tables' bytes come from the header
//! ([`super::header::JpegHeader`]).

#[derive(Clone, PartialEq)]
pub(super) struct HuffTable {
    /// For the top `LOOKUP_BITS` bits: (code length << 8) | symbol, or 0 when the code is
    /// longer.
    lookup: [u16; 1 << LOOKUP_BITS],
    /// Largest code of each length (1..=16), -1 when none; index 17 is a sentinel.
    maxcode: [i32; 18],
    /// Offset of each length's first symbol in `symbols`, minus its first code.
    valoffset: [i32; 17],
    /// The symbols, the first `symbol_count` of them defined (a DHT has at most 256).
    symbols: [u8; 256],
    symbol_count: usize,
}

pub(super) const LOOKUP_BITS: u32 = 11;

impl HuffTable {
    /// Builds a table from a DHT's 16 counts and its symbols; None when the counts describe
    /// an invalid code (more codes than fit, more than 256 symbols) or more symbols than
    /// `symbols` holds.
    pub(super) fn new(counts: &[u8; 16], symbols: &[u8]) -> Option<HuffTable> {
        let mut t = HuffTable {
            lookup: [0; 1 << LOOKUP_BITS],
            maxcode: [-1; 18],
            valoffset: [0; 17],
            symbols: [0; 256],
            symbol_count: 0,
        };
        t.rebuild(counts, symbols)?;
        Some(t)
    }

    /// [`HuffTable::new`] in place (a thread's cached tables are rebuilt, not allocated).
    /// On None the table is left invalid: the caller drops it.
    pub(super) fn rebuild(&mut self, counts: &[u8; 16], symbols: &[u8]) -> Option<()> {
        let lookup = &mut self.lookup;
        lookup.fill(0);
        let mut maxcode = [-1i32; 18];
        let mut valoffset = [0i32; 17];
        let mut code: u32 = 0;
        let mut k = 0usize;
        for len in 1..=16u32 {
            let n = usize::from(counts[len as usize - 1]);
            if n > 0 {
                valoffset[len as usize] = k as i32 - code as i32;
                for _ in 0..n {
                    if code >= (1 << len) {
                        return None;
                    }
                    if len <= LOOKUP_BITS {
                        let shift = LOOKUP_BITS - len;
                        let base = (code << shift) as usize;
                        let entry = ((len as u16) << 8) | u16::from(*symbols.get(k)?);
                        lookup[base..base + (1 << shift)].fill(entry);
                    }
                    code += 1;
                    k += 1;
                }
                maxcode[len as usize] = code as i32 - 1;
            }
            code <<= 1;
        }
        maxcode[17] = i32::MAX;
        let (used, rest) = self.symbols.split_at_mut_checked(k)?;
        used.copy_from_slice(symbols.get(..k)?);
        // Past the table's symbols, zeros: a rebuilt table is the same as one built afresh.
        rest.fill(0);
        self.symbol_count = k;
        self.maxcode = maxcode;
        self.valoffset = valoffset;
        Some(())
    }
}

/// A [`BitReader`]'s accumulator as a value: a decoding loop that works on a local copy keeps
/// it in registers (through the reader, every step would store and reload it), and hands it
/// to [`BitReader::fill`] for more bits.
#[derive(Clone, Copy)]
pub(super) struct Bits {
    /// Bits MSB-first.
    acc: u64,
    /// How many of `acc`'s bits are data (or padding).
    bits: u32,
}

impl Bits {
    /// The next `n` (1..=32) bits, not consumed.
    #[inline(always)]
    pub(super) fn peek(&self, n: u32) -> u32 {
        (self.acc >> (64 - n)) as u32
    }

    /// Drops `n` bits (no more than it holds).
    #[inline(always)]
    pub(super) fn consume(&mut self, n: u32) {
        self.acc <<= n;
        self.bits -= n;
    }

    /// `n` (1..=16, no more than it holds) bits as an unsigned value.
    #[inline(always)]
    pub(super) fn get(&mut self, n: u32) -> u32 {
        let v = self.peek(n);
        self.consume(n);
        v
    }

    /// The next symbol of `t`; needs 16 bits held.
    #[inline(always)]
    pub(super) fn decode(&mut self, t: &HuffTable) -> R<u8> {
        let e = t.lookup[self.peek(LOOKUP_BITS) as usize];
        if e != 0 {
            self.consume(u32::from(e >> 8));
            return Ok(e as u8);
        }
        let mut len = LOOKUP_BITS + 1;
        loop {
            let code = (self.acc >> (64 - len)) as i32;
            if code <= t.maxcode[len as usize] {
                self.consume(len);
                let i = code + t.valoffset[len as usize];
                return t.symbols[..t.symbol_count]
                    .get(i as usize)
                    .copied()
                    .ok_or(Unsupported);
            }
            len += 1;
            if len > 16 {
                return Err(Unsupported);
            }
        }
    }
}

/// A sequential scan's AC table with, for each value of the next [`LOOKUP_BITS`] bits, up
/// to two whole steps (code, run and sign-extended coefficient, or end of block) when
/// their codes and magnitude bits fit in them. Most steps are short codes of small
/// coefficients, so one lookup often replaces two code lookups, two bit reads and two
/// `HUFF_EXTEND`s: each lookup waits for the one before (its bits start where the last
/// step ended), and that wait is most of the decoding time.
#[derive(PartialEq)]
pub(super) struct AcTable {
    /// Bits 0..5: bits both steps take (0: not in the table, decode `huff`); 5..10: bits
    /// the first takes; 10..17: the first step's run (zeros before its coefficient), or
    /// [`AC_END_OF_BLOCK`]; 17..24: the second's run, or [`AC_END_OF_BLOCK`] (0 when there
    /// is no second step); bit 24: whether there is a second step that is not an end of
    /// block; 32..48 and 48..64: the two coefficients (i16; 0 for ZRL, end of block or no
    /// step).
    pub(super) fast: Box<[u64; 1 << LOOKUP_BITS]>,
    pub(super) huff: HuffTable,
}

/// The run of an end-of-block step in [`AcTable::fast`]: past every position.
pub(super) const AC_END_OF_BLOCK: u32 = 64;

impl AcTable {
    pub(super) fn new(huff: HuffTable) -> AcTable {
        let mut t = AcTable {
            fast: Box::new([0u64; 1 << LOOKUP_BITS]),
            huff,
        };
        t.fill_fast();
        t
    }

    /// [`AcTable::new`] in place, from a DHT's bytes ([`HuffTable::from_dht`]).
    pub(super) fn rebuild_from_dht(&mut self, t: &[u8]) -> R<()> {
        self.huff.rebuild_from_dht(t)?;
        self.fill_fast();
        Ok(())
    }

    /// Builds [`AcTable::fast`] from the code table, in two passes over it: each index's
    /// first step, a code at a time ([`AcTable::fill_first_steps`]), then the second step of
    /// each, read from the entry of the bits after the first (an entry's first-step fields
    /// — bits 5..17 and 32..48 — never change, and its bits 0..5 stay non-zero, so the
    /// table is its own table of single steps).
    fn fill_fast(&mut self) {
        const MASK: usize = (1 << LOOKUP_BITS) - 1;
        self.fill_first_steps();
        for i in 0..self.fast.len() {
            let e = self.fast[i];
            let (len1, run1) = ((e >> 5) & 31, (e >> 10) & 127);
            if e & 31 == 0 || run1 == u64::from(AC_END_OF_BLOCK) || len1 == u64::from(LOOKUP_BITS) {
                continue;
            }
            // The step in the bits after the first: decided by them alone when it takes no
            // more than they are (no code is another's prefix).
            let next = self.fast[(i << len1) & MASK];
            let (len2, run2) = ((next >> 5) & 31, (next >> 10) & 127);
            if next & 31 != 0 && len2 <= u64::from(LOOKUP_BITS) - len1 {
                self.fast[i] = (len1 + len2)
                    | len1 << 5
                    | run1 << 10
                    | run2 << 17
                    | u64::from(run2 != u64::from(AC_END_OF_BLOCK)) << 24
                    | (e & (0xFFFF << 32))
                    | ((next >> 32) & 0xFFFF) << 48;
            }
        }
    }

    /// Writes each index's first step alone (both lengths that step's, no second step; 0
    /// where none fits), a code at a time: a code's lookup entries are one run of indices
    /// (canonical codes fill the index space in order from 0, longer codes' empty entries
    /// after them), within which the magnitude bits' value changes every 2^(bits left)
    /// indices. A photo's own tables are built for every photo (ImageNet's carry their own):
    /// index by index this was 2% of the train pipeline's CPU.
    fn fill_first_steps(&mut self) {
        let step = |len: u32, run: u32, v: i16| {
            u64::from(len) | u64::from(len) << 5 | u64::from(run) << 10 | u64::from(v as u16) << 32
        };
        self.fast.fill(0);
        let mut i = 0usize;
        while i < self.fast.len() {
            let e = self.huff.lookup[i];
            if e == 0 {
                i += 1;
                continue;
            }
            let len = u32::from(e >> 8);
            let span = 1usize << (LOOKUP_BITS - len);
            let (run, s) = (u32::from(e & 0xFF) >> 4, u32::from(e & 15));
            let steps = &mut self.fast[i..i + span];
            if s == 0 {
                steps.fill(step(len, if run == 15 { 15 } else { AC_END_OF_BLOCK }, 0));
            } else if len + s <= LOOKUP_BITS {
                let per_value = 1usize << (LOOKUP_BITS - len - s);
                for (v, same) in steps.chunks_exact_mut(per_value).enumerate() {
                    same.fill(step(len + s, run, extend(v as u32, s) as i16));
                }
            }
            i += span;
        }
    }
}

/// The AC step whose code starts the [`LOOKUP_BITS`]-bit `bits`: (bits it takes, run or
/// [`AC_END_OF_BLOCK`], coefficient), None unless it fits in the top `avail` of them.
/// ZRL is sixteen zeros (fifteen, then a zero "coefficient"); every other zero-magnitude
/// symbol ends the block, as libjpeg's sequential decoder reads it. The reference the
/// table's first steps are checked against.
#[cfg(test)]
fn ac_step(huff: &HuffTable, bits: u32, avail: u32) -> Option<(u32, u32, i16)> {
    let e = huff.lookup[bits as usize];
    let len = u32::from(e >> 8);
    // A code of at most `avail` bits is decided by them alone (no code is another's prefix).
    if e == 0 || len > avail {
        return None;
    }
    let (run, s) = (u32::from(e & 0xFF) >> 4, u32::from(e & 15));
    if s == 0 {
        return Some((len, if run == 15 { 15 } else { AC_END_OF_BLOCK }, 0));
    }
    if len + s > avail {
        return None;
    }
    let v = (bits >> (LOOKUP_BITS - len - s)) & ((1 << s) - 1);
    Some((len + s, run, extend(v, s) as i16))
}

/// Why decoding stopped early: the caller falls back to libjpeg.
#[derive(Debug)]
pub(super) struct Unsupported;

pub(super) type R<T> = Result<T, Unsupported>;

/// Entropy-coded data reader: bits MSB-first in a 64-bit accumulator, byte stuffing
/// (0xFF 0x00) removed, zeros fed once a marker is reached (as libjpeg does; using them
/// means the data was short, which [`BitReader::check_no_padding_used`] reports).
pub(super) struct BitReader<'a> {
    d: &'a [u8],
    pos: usize,
    end: usize,
    acc: u64,
    bits: u32,
    padding: u32,
    at_marker: bool,
}

impl<'a> BitReader<'a> {
    pub(super) fn new(d: &'a [u8], start: usize, end: usize) -> BitReader<'a> {
        BitReader {
            d,
            pos: start,
            end,
            acc: 0,
            bits: 0,
            padding: 0,
            at_marker: false,
        }
    }

    #[inline(always)]
    pub(super) fn refill(&mut self) {
        let b = self.fill(self.take(), 57);
        self.put(b);
    }

    /// The accumulator, for a hot loop to keep in registers (see [`Bits`]); give it back
    /// with [`BitReader::put`] before any other method is called.
    #[inline(always)]
    pub(super) fn take(&self) -> Bits {
        Bits {
            acc: self.acc,
            bits: self.bits,
        }
    }

    #[inline(always)]
    pub(super) fn put(&mut self, b: Bits) {
        self.acc = b.acc;
        self.bits = b.bits;
    }

    /// `b` (taken from this reader) refilled unless it holds `n` (at most 57) bits:
    /// afterwards it holds at least 57 (past a marker, zeros).
    #[inline(always)]
    pub(super) fn fill(&mut self, mut b: Bits, n: u32) -> Bits {
        if b.bits >= n {
            return b;
        }
        if !self.at_marker && self.pos + 8 <= self.end {
            let w = u64::from_be_bytes(self.d[self.pos..self.pos + 8].try_into().unwrap());
            // No 0xFF byte among the eight: take as many whole bytes as fit at once.
            if (!w).wrapping_sub(0x0101_0101_0101_0101) & w & 0x8080_8080_8080_8080 == 0 {
                let take = (64 - b.bits) / 8;
                b.acc |= (w >> (64 - 8 * take)) << (64 - b.bits - 8 * take);
                b.bits += 8 * take;
                self.pos += take as usize;
                return b;
            }
        }
        self.fill_slow(b)
    }

    /// [`BitReader::fill`] byte by byte (stuffing, markers); `b` passes by value so that
    /// callers keep theirs in registers.
    #[cold]
    #[inline(never)]
    fn fill_slow(&mut self, b: Bits) -> Bits {
        self.put(b);
        self.refill_slow();
        self.take()
    }

    #[cold]
    fn refill_slow(&mut self) {
        while self.bits <= 56 {
            let mut byte = 0u8;
            if self.at_marker || self.pos >= self.end {
                self.padding += 8;
            } else if self.d[self.pos] != 0xFF {
                byte = self.d[self.pos];
                self.pos += 1;
            } else {
                // 0xFF: stuffing when followed by 0x00 (after any fill bytes), else a marker.
                let mut j = self.pos + 1;
                while j < self.end && self.d[j] == 0xFF {
                    j += 1;
                }
                if j < self.end && self.d[j] == 0 {
                    byte = 0xFF;
                    self.pos = j + 1;
                } else {
                    self.at_marker = true;
                    self.padding += 8;
                }
            }
            self.acc |= u64::from(byte) << (56 - self.bits);
            self.bits += 8;
        }
    }

    /// `n` (1..=16) bits as an unsigned value.
    #[inline(always)]
    pub(super) fn get(&mut self, n: u32) -> u32 {
        if self.bits < n {
            self.refill();
        }
        let mut b = self.take();
        let v = b.get(n);
        self.put(b);
        v
    }

    #[inline(always)]
    pub(super) fn bit(&mut self) -> bool {
        self.get(1) != 0
    }

    #[inline(always)]
    pub(super) fn decode(&mut self, t: &HuffTable) -> R<u8> {
        if self.bits < 16 {
            self.refill();
        }
        let mut b = self.take();
        let symbol = b.decode(t);
        self.put(b);
        symbol
    }

    pub(super) fn check_no_padding_used(&self) -> R<()> {
        if self.bits < self.padding {
            Err(Unsupported)
        } else {
            Ok(())
        }
    }

    /// At a restart boundary: at most 7 padding bits may remain, then marker RSTn.
    pub(super) fn restart(&mut self, n: u8) -> R<()> {
        self.check_no_padding_used()?;
        if self.bits - self.padding >= 8 {
            return Err(Unsupported);
        }
        let mut j = self.pos;
        if self.d.get(j) != Some(&0xFF) {
            return Err(Unsupported);
        }
        while self.d.get(j) == Some(&0xFF) {
            j += 1;
        }
        if self.d.get(j) != Some(&(0xD0 + n)) {
            return Err(Unsupported);
        }
        self.pos = j + 1;
        self.acc = 0;
        self.bits = 0;
        self.padding = 0;
        self.at_marker = false;
        Ok(())
    }
}

/// `HUFF_EXTEND`: the signed value of `s` magnitude bits `v`.
#[inline(always)]
pub(super) fn extend(v: u32, s: u32) -> i32 {
    if s == 0 {
        0
    } else if v < (1 << (s - 1)) {
        v as i32 - (1 << s) + 1
    } else {
        v as i32
    }
}

impl HuffTable {
    /// The table of a DHT's bytes: its 16 counts, then its symbols
    /// ([`super::header::HuffmanTable::bytes`]).
    pub(super) fn from_dht(t: &[u8]) -> R<HuffTable> {
        let (counts, symbols) = split_dht(t)?;
        HuffTable::new(counts, symbols).ok_or(Unsupported)
    }

    /// [`HuffTable::from_dht`] in place.
    pub(super) fn rebuild_from_dht(&mut self, t: &[u8]) -> R<()> {
        let (counts, symbols) = split_dht(t)?;
        self.rebuild(counts, symbols).ok_or(Unsupported)
    }
}

/// A DHT's bytes as its 16 counts and its symbols.
fn split_dht(t: &[u8]) -> R<(&[u8; 16], &[u8])> {
    let (counts, symbols) = t.split_first_chunk::<16>().ok_or(Unsupported)?;
    Ok((counts, symbols))
}

/// The table in `slot` (0..=3) of a scan's tables.
pub(super) fn table<'t>(t: &[Option<&'t HuffTable>; 4], slot: usize) -> R<&'t HuffTable> {
    t.get(slot).copied().flatten().ok_or(Unsupported)
}

/// Zigzag index → natural (row-major) position in an 8×8 block.
pub(super) const NATURAL_ORDER: [u8; 64] = [
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20,
    13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59,
    52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::header::JpegHeader;
    use crate::decode::Limits;

    /// The AC tables of the Pillow fixtures (standard-like and optimised codes).
    fn ac_tables() -> Vec<HuffTable> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
        let mut tables = Vec::new();
        for f in [
            "sequential/optimised-444-q100.jpg",
            "sequential/optimised-420.jpg",
            "progressive/progressive-420.jpg",
        ] {
            let d = std::fs::read(dir.join(f)).unwrap();
            let h = JpegHeader::read(&d, &Limits::default()).unwrap();
            // Those defined before the first scan.
            let first_scan = h.scans[0].header.start;
            for t in h.huffman_tables.iter().filter(|t| t.class == 1) {
                if t.bytes.start > first_scan {
                    break;
                }
                tables.push(HuffTable::from_dht(&d[t.bytes.clone()]).unwrap());
            }
        }
        assert!(tables.len() >= 4);
        tables
    }

    /// One AC step read the plain way: (bits taken, run or end of block, coefficient).
    fn plain_step(t: &HuffTable, b: &mut Bits) -> (u32, u32, i16) {
        let before = b.bits;
        let rs = u32::from(b.decode(t).unwrap());
        let (run, s) = (rs >> 4, rs & 15);
        let (run, v) = if s == 0 {
            (if run == 15 { 15 } else { AC_END_OF_BLOCK }, 0)
        } else {
            (run, extend(b.get(s), s) as i16)
        };
        (before - b.bits, run, v)
    }

    /// AC codes that leave part of the index space empty or run past it: one code of one
    /// bit (half the indices have none); codes of 1, 4 and 12 bits (the last past the
    /// lookup) with magnitudes that fit and don't; end of block, ZRL and a 15-bit magnitude
    /// among short codes.
    fn sparse_ac_tables() -> Vec<HuffTable> {
        let sparse: [(&[u8], &[u8]); 3] = [
            (&[1], &[0x23]),
            (
                &[1, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1],
                &[0x01, 0x0a, 0xf0, 0x15],
            ),
            (&[0, 3, 1], &[0x00, 0xf0, 0x0f, 0x11]),
        ];
        sparse
            .into_iter()
            .map(|(counts, symbols)| {
                let mut c = [0u8; 16];
                c[..counts.len()].copy_from_slice(counts);
                HuffTable::new(&c, symbols).unwrap()
            })
            .collect()
    }

    /// The two-step table built index by index, as before it was built a code at a time.
    fn fast_reference(huff: &HuffTable) -> Box<[u64; 1 << LOOKUP_BITS]> {
        const MASK: u32 = (1 << LOOKUP_BITS) - 1;
        let mut single = [(0u32, 0u32, 0i16); 1 << LOOKUP_BITS];
        for (bits, step) in single.iter_mut().enumerate() {
            if let Some(s) = ac_step(huff, bits as u32, LOOKUP_BITS) {
                *step = s;
            }
        }
        let mut fast = Box::new([0u64; 1 << LOOKUP_BITS]);
        for (bits, (entry, &(len1, run1, v1))) in fast.iter_mut().zip(&single).enumerate() {
            if len1 == 0 {
                continue;
            }
            *entry = u64::from(len1)
                | u64::from(len1) << 5
                | u64::from(run1) << 10
                | u64::from(v1 as u16) << 32;
            if run1 == AC_END_OF_BLOCK || len1 == LOOKUP_BITS {
                continue;
            }
            let (len2, run2, v2) = single[((bits as u32) << len1 & MASK) as usize];
            if len2 != 0 && len2 <= LOOKUP_BITS - len1 {
                *entry = u64::from(len1 + len2)
                    | u64::from(len1) << 5
                    | u64::from(run1) << 10
                    | u64::from(run2) << 17
                    | u64::from(run2 != AC_END_OF_BLOCK) << 24
                    | u64::from(v1 as u16) << 32
                    | u64::from(v2 as u16) << 48;
            }
        }
        fast
    }

    /// The table built a code at a time, in place, is the one built index by index, bit for
    /// bit, and its first steps are each index's own step (its entry's first-step fields):
    /// on the fixtures' tables and the sparse codes.
    #[test]
    fn fast_table_is_the_one_built_index_by_index() {
        for (n, huff) in ac_tables()
            .into_iter()
            .chain(sparse_ac_tables())
            .enumerate()
        {
            let table = AcTable::new(huff.clone());
            let reference = fast_reference(&huff);
            for (idx, (&e, &want)) in table.fast.iter().zip(reference.iter()).enumerate() {
                assert_eq!(e, want, "table {n}, index {idx:#x}");
                let first = if e & 31 == 0 {
                    (0, 0, 0)
                } else {
                    (
                        ((e >> 5) & 31) as u32,
                        ((e >> 10) & 127) as u32,
                        (e >> 32) as u16 as i16,
                    )
                };
                let own = ac_step(&huff, idx as u32, LOOKUP_BITS).unwrap_or((0, 0, 0));
                assert_eq!(first, own, "table {n}, index {idx:#x}: first step");
            }
        }
    }

    /// Every entry of the two-step table says what decoding the same bits one step at a
    /// time says.
    #[test]
    fn two_step_ac_table_matches_plain_decoding() {
        for huff in ac_tables() {
            let table = AcTable::new(huff.clone());
            let (mut pairs, mut singles) = (0, 0);
            for (idx, &e) in table.fast.iter().enumerate() {
                // The index's bits, then ones: a step that fits must not read past them.
                let acc = ((idx as u64) << (64 - LOOKUP_BITS)) | ((1 << (64 - LOOKUP_BITS)) - 1);
                let mut b = Bits { acc, bits: 64 };
                if e & 31 == 0 {
                    continue;
                }
                let (len1, run1, v1) = plain_step(&huff, &mut b);
                assert_eq!(
                    ((e >> 5) & 31, (e >> 10) & 127, (e >> 32) as u16 as i16),
                    (u64::from(len1), u64::from(run1), v1),
                    "index {idx:#x}: first step"
                );
                if e & 31 == (e >> 5) & 31 {
                    singles += 1;
                    // One step alone only where no second one fits in the index's bits.
                    if run1 != AC_END_OF_BLOCK && len1 < LOOKUP_BITS {
                        let mut next = b;
                        let second = next.decode(&huff).ok().map(|rs| {
                            next.consume(u32::from(rs & 15));
                            b.bits - next.bits
                        });
                        assert!(
                            second.is_none_or(|len2| len1 + len2 > LOOKUP_BITS),
                            "index {idx:#x}: a second step of {second:?} bits fits"
                        );
                    }
                    continue;
                }
                pairs += 1;
                let (len2, run2, v2) = plain_step(&huff, &mut b);
                assert_eq!(
                    (
                        e & 31,
                        (e >> 17) & 127,
                        (e >> 48) as u16 as i16,
                        (e >> 24) & 1
                    ),
                    (
                        u64::from(len1 + len2),
                        u64::from(run2),
                        v2,
                        u64::from(run2 != AC_END_OF_BLOCK)
                    ),
                    "index {idx:#x}: second step"
                );
                assert!(len1 + len2 <= LOOKUP_BITS);
            }
            assert!(pairs > 0, "{pairs} pairs, {singles} single steps");
            println!("{pairs} pairs, {singles} single steps");
        }
    }
}
