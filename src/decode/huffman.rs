//! Huffman decoding shared by our progressive and baseline JPEG decoders: a 64-bit bit
//! reader over entropy-coded data and table-driven code lookup, with libjpeg's conventions
//! (zeros fed past a marker, `HUFF_EXTEND`), so that what they decode is what libjpeg-turbo
//! decodes from the same bytes; and the header parsing both need (marker segments, DHT,
//! DRI).

#[derive(Clone)]
pub(super) struct HuffTable {
    /// For the top `LOOKUP_BITS` bits: (code length << 8) | symbol, or 0 when the code is
    /// longer.
    lookup: Vec<u16>,
    /// Largest code of each length (1..=16), -1 when none; index 17 is a sentinel.
    maxcode: [i32; 18],
    /// Offset of each length's first symbol in `symbols`, minus its first code.
    valoffset: [i32; 17],
    symbols: Vec<u8>,
}

pub(super) const LOOKUP_BITS: u32 = 11;

impl HuffTable {
    /// Builds a table from a DHT's 16 counts and its symbols; None when the counts describe
    /// an invalid code (more codes than fit).
    pub(super) fn new(counts: &[u8; 16], symbols: &[u8]) -> Option<HuffTable> {
        let mut lookup = vec![0u16; 1 << LOOKUP_BITS];
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
        Some(HuffTable {
            lookup,
            maxcode,
            valoffset,
            symbols: symbols[..k].to_vec(),
        })
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
                return t.symbols.get(i as usize).copied().ok_or(Unsupported);
            }
            len += 1;
            if len > 16 {
                return Err(Unsupported);
            }
        }
    }
}

/// A sequential scan's AC table with, for each value of the next [`LOOKUP_BITS`] bits, the
/// whole step when the code and its magnitude bits fit in them (most do: short codes of
/// small coefficients), so that one lookup replaces a code lookup, a bit read and
/// `HUFF_EXTEND`.
pub(super) struct AcTable {
    /// Bits 0..8: bits the step takes (0: not in the table, decode `huff`); 8..16: zeros
    /// before the coefficient (run), or [`AC_END_OF_BLOCK`]; 16..32: the coefficient (i16).
    pub(super) fast: Box<[u32; 1 << LOOKUP_BITS]>,
    pub(super) huff: HuffTable,
}

/// The run of an end-of-block step in [`AcTable::fast`]: past every position.
pub(super) const AC_END_OF_BLOCK: u32 = 0xFF;

impl AcTable {
    pub(super) fn new(huff: HuffTable) -> AcTable {
        let mut fast = Box::new([0u32; 1 << LOOKUP_BITS]);
        for (bits, entry) in fast.iter_mut().enumerate() {
            let e = huff.lookup[bits];
            if e == 0 {
                continue;
            }
            let (len, rs) = (u32::from(e >> 8), u32::from(e & 0xFF));
            let (run, s) = (rs >> 4, rs & 15);
            *entry = if s == 0 {
                // ZRL (sixteen zeros: fifteen, then a zero "coefficient") or, for every
                // other run, end of block as libjpeg's sequential decoder reads it.
                let run = if run == 15 { 15 } else { AC_END_OF_BLOCK };
                (run << 8) | len
            } else if len + s <= LOOKUP_BITS {
                let v = (bits as u32 >> (LOOKUP_BITS - len - s)) & ((1 << s) - 1);
                (u32::from(extend(v, s) as i16 as u16) << 16) | (run << 8) | (len + s)
            } else {
                0
            };
        }
        AcTable { fast, huff }
    }
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

/// A marker segment: its marker, where it starts (at 0xFF) and ends, and its payload
/// (empty for EOI).
pub(super) struct Segment<'a> {
    pub(super) marker: u8,
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) payload: &'a [u8],
}

/// The segment at `i` of a JPEG's headers (after any fill bytes; standalone RSTn and TEM
/// markers passed over). Err when there is none: another byte than a marker, a bad length,
/// the data ending.
pub(super) fn next_segment(d: &[u8], mut i: usize) -> R<Segment<'_>> {
    loop {
        while d.get(i) == Some(&0xFF) && d.get(i + 1) == Some(&0xFF) {
            i += 1;
        }
        if d.get(i) != Some(&0xFF) {
            return Err(Unsupported);
        }
        let marker = *d.get(i + 1).ok_or(Unsupported)?;
        if (0xD0..=0xD7).contains(&marker) || marker == 0x01 {
            i += 2;
            continue;
        }
        if marker == 0xD9 {
            return Ok(Segment {
                marker,
                start: i,
                end: i + 2,
                payload: &[],
            });
        }
        let len = usize::from(u16::from_be_bytes([
            *d.get(i + 2).ok_or(Unsupported)?,
            *d.get(i + 3).ok_or(Unsupported)?,
        ]));
        if len < 2 {
            return Err(Unsupported);
        }
        return Ok(Segment {
            marker,
            start: i,
            end: i + 2 + len,
            payload: d.get(i + 4..i + 2 + len).ok_or(Unsupported)?,
        });
    }
}

/// A DRI segment's restart interval (MCUs; 0: none).
pub(super) fn parse_dri(p: &[u8]) -> R<usize> {
    match p {
        [a, b, ..] => Ok(usize::from(u16::from_be_bytes([*a, *b]))),
        _ => Err(Unsupported),
    }
}

pub(super) fn parse_dht(
    mut p: &[u8],
    dc: &mut [Option<HuffTable>; 4],
    ac: &mut [Option<HuffTable>; 4],
) -> R<()> {
    while !p.is_empty() {
        if p.len() < 17 {
            return Err(Unsupported);
        }
        let (class, id) = (p[0] >> 4, usize::from(p[0] & 15));
        let counts: [u8; 16] = p[1..17].try_into().map_err(|_| Unsupported)?;
        let n: usize = counts.iter().map(|&c| usize::from(c)).sum();
        if id > 3 || class > 1 || n > 256 || p.len() < 17 + n {
            return Err(Unsupported);
        }
        let t = HuffTable::new(&counts, &p[17..17 + n]).ok_or(Unsupported)?;
        if class == 0 {
            dc[id] = Some(t);
        } else {
            ac[id] = Some(t);
        }
        p = &p[17 + n..];
    }
    Ok(())
}

pub(super) fn table(t: &[Option<HuffTable>; 4], i: usize) -> R<&HuffTable> {
    t.get(i).and_then(|t| t.as_ref()).ok_or(Unsupported)
}

/// Zigzag index → natural (row-major) position in an 8×8 block.
pub(super) const NATURAL_ORDER: [u8; 64] = [
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20,
    13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59,
    52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
];
