//! Reading a tar stream one member at a time (ustar, GNU long names, pax headers as Python's
//! `tarfile` writes them), with every header's checksum checked; damage is an error naming
//! where it is, never a panic, and after a broken header the reader finds the next good one.

use std::io::{self, Read};

/// Tar's block size: headers are one block, member data is padded to whole blocks.
pub const BLOCK: u64 = 512;

/// The most bytes a GNU long name or pax header may hold; more is taken as damage rather
/// than allocated.
const MAX_META_BYTES: u64 = 1 << 20;

/// A byte stream a shard is read from: sequential reads, and skipping ahead (a seek for a
/// local file, reading and dropping for a network stream).
pub trait ShardRead: Read + Send {
    /// Skips `n` bytes; returns how many it skipped, fewer only where the stream ended
    /// first (so that a truncation is reported where the stream ends).
    fn skip(&mut self, n: u64) -> io::Result<u64> {
        skip_by_reading(self, n)
    }
}

/// Skips `n` bytes of `r` by reading them; the bytes skipped, fewer where it ends first.
pub fn skip_by_reading<R: Read + ?Sized>(r: &mut R, n: u64) -> io::Result<u64> {
    let mut buf = [0u8; 16 * 1024];
    let mut left = n;
    while left > 0 {
        let want = left.min(buf.len() as u64) as usize;
        match r.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(got) => left -= got as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n - left)
}

impl ShardRead for std::io::BufReader<std::fs::File> {
    fn skip(&mut self, n: u64) -> io::Result<u64> {
        use std::io::Seek;
        // A member's padding (under a block) is read through the buffer: the fill it may
        // cost brings the next header too, where a seek would cost two system calls more.
        if n < BLOCK {
            return skip_by_reading(self, n);
        }
        // Seeking past the end of a file succeeds, so the length is checked first.
        let here = self.stream_position()?;
        let len = self.get_ref().metadata()?.len();
        if here.saturating_add(n) > len {
            self.seek(io::SeekFrom::Start(len))?;
            return Ok(len.saturating_sub(here));
        }
        self.seek_relative(n as i64).map(|()| n)
    }
}

impl ShardRead for io::Cursor<Vec<u8>> {}

/// What kind of member a header announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberKind {
    /// A regular file (its data follows).
    File,
    /// Anything else (folder, link, device): its data, if any, is skipped.
    Other,
}

/// One member's header, long names and pax records applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The member's path in the archive.
    pub name: String,
    /// Bytes of data.
    pub size: u64,
    /// What it is.
    pub kind: MemberKind,
    /// Where its (first) header starts in the stream.
    pub offset: u64,
}

/// Why a tar stream could not be read further, or what was wrong with one member.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TarError {
    /// A header failed its checksum or holds a malformed field. The reader goes on with the
    /// next good header.
    #[error("broken tar header at byte {offset}{}: {why}", name.as_ref().map(|n| format!(" (member '{n}')")).unwrap_or_default())]
    BadHeader {
        /// Where the header starts.
        offset: u64,
        /// The member's name as far as it could be read.
        name: Option<String>,
        /// What is wrong.
        why: String,
    },
    /// The stream does not start with a tar header: it is no tar file (a web page, say).
    #[error("not a tar shard: its first bytes are no tar header (they read \"{start}\")")]
    NotTar {
        /// Its first bytes, as text (`.` for what isn't printable).
        start: String,
    },
    /// The stream ended inside a header or a member's data.
    #[error("tar stream truncated at byte {offset}")]
    Truncated {
        /// How far it got.
        offset: u64,
    },
    /// Reading failed.
    #[error("read failed at byte {offset}: {message}")]
    Io {
        /// How far it got.
        offset: u64,
        /// The cause.
        message: String,
    },
}

impl TarError {
    /// True when nothing more can be read from this stream.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, TarError::BadHeader { .. })
    }
}

/// A streaming tar reader: [`TarReader::next_member`], then the member's data with
/// [`TarReader::read_data`] or [`TarReader::skip_data`] (or neither: the next call skips it).
pub struct TarReader<R> {
    inner: R,
    /// Bytes consumed so far.
    pos: u64,
    /// Data bytes of the current member not yet consumed, and the padding after them.
    left: u64,
    pad: u64,
    /// After a broken header: look for the next good one block by block.
    resync: bool,
    done: bool,
    /// The stream ended early (see [`TarReader::ended_early`]).
    cut: bool,
}

impl<R: ShardRead> TarReader<R> {
    /// A reader of the archive in `inner`.
    pub fn new(inner: R) -> TarReader<R> {
        TarReader {
            inner,
            pos: 0,
            left: 0,
            pad: 0,
            resync: false,
            done: false,
            cut: false,
        }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Whether the stream ended before its end-of-archive (truncated, or a read failed).
    pub fn ended_early(&self) -> bool {
        self.cut
    }

    fn io_error(&mut self, e: io::Error) -> TarError {
        self.done = true;
        self.cut = true;
        if e.kind() == io::ErrorKind::UnexpectedEof {
            TarError::Truncated { offset: self.pos }
        } else {
            TarError::Io {
                offset: self.pos,
                message: e.to_string(),
            }
        }
    }

    fn skip(&mut self, n: u64) -> Result<(), TarError> {
        if n == 0 {
            return Ok(());
        }
        match self.inner.skip(n) {
            Ok(skipped) => {
                self.pos += skipped;
                match skipped < n {
                    true => Err(self.io_error(io::ErrorKind::UnexpectedEof.into())),
                    false => Ok(()),
                }
            }
            Err(e) => Err(self.io_error(e)),
        }
    }

    /// The error for a stream whose first block (`got` bytes of `b`) is no tar header.
    fn not_tar(&mut self, b: &[u8]) -> TarError {
        self.done = true;
        self.cut = true;
        let start: String = b
            .iter()
            .take(32)
            .map(|&c| {
                if c == b' ' || c.is_ascii_graphic() {
                    c as char
                } else {
                    '.'
                }
            })
            .collect();
        TarError::NotTar { start }
    }

    /// Reads one block; `None` at a clean end of the stream.
    fn block(&mut self) -> Result<Option<[u8; 512]>, TarError> {
        let mut b = [0u8; 512];
        let mut got = 0;
        while got < b.len() {
            match self.inner.read(&mut b[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.pos += got as u64;
                    return Err(self.io_error(e));
                }
            }
        }
        self.pos += got as u64;
        match got {
            0 => Ok(None),
            512 => Ok(Some(b)),
            // Shorter than one header: a small file or page, no tar at all.
            _ if self.pos == got as u64 => Err(self.not_tar(&b[..got])),
            _ => Err(self.io_error(io::ErrorKind::UnexpectedEof.into())),
        }
    }

    /// Reads `size` bytes of a meta member (long name, pax records) and its padding.
    fn meta(&mut self, offset: u64, size: u64) -> Result<Vec<u8>, TarError> {
        if size > MAX_META_BYTES {
            self.resync = true;
            return Err(TarError::BadHeader {
                offset,
                name: None,
                why: format!("a {size}-byte long name or pax header"),
            });
        }
        let mut v = Vec::with_capacity(size as usize);
        match (&mut self.inner).take(size).read_to_end(&mut v) {
            Ok(got) => {
                self.pos += got as u64;
                if (got as u64) < size {
                    return Err(self.io_error(io::ErrorKind::UnexpectedEof.into()));
                }
            }
            Err(e) => return Err(self.io_error(e)),
        }
        self.skip(padding(size))?;
        Ok(v)
    }

    /// Skips what is left of the current member's data.
    pub fn skip_data(&mut self) -> Result<(), TarError> {
        // A size field near u64::MAX (base-256 or pax) must end as a truncation, not wrap.
        let n = std::mem::take(&mut self.left).saturating_add(std::mem::take(&mut self.pad));
        self.skip(n)
    }

    /// Reads the current member's data (all of it, or an error when it is over `max` bytes:
    /// then it is skipped).
    pub fn read_data(&mut self, max: u64) -> Result<Result<Vec<u8>, u64>, TarError> {
        let size = self.left;
        if size > max {
            self.skip_data()?;
            return Ok(Err(size));
        }
        let mut v = Vec::new();
        if v.try_reserve_exact(size as usize).is_err() {
            self.skip_data()?;
            return Ok(Err(size));
        }
        // Into the reserved capacity: no zeroing first, and a local shard's reader hands the
        // bulk of it over straight from the file (its buffer is smaller than most members).
        match (&mut self.inner).take(size).read_to_end(&mut v) {
            Ok(got) if got as u64 == size => {}
            Ok(got) => {
                self.pos += got as u64;
                return Err(self.io_error(io::ErrorKind::UnexpectedEof.into()));
            }
            Err(e) => return Err(self.io_error(e)),
        }
        self.pos += size;
        self.left = 0;
        let pad = std::mem::take(&mut self.pad);
        self.skip(pad)?;
        Ok(Ok(v))
    }

    /// The next member's header (the data of the one before skipped if unread); `Ok(None)`
    /// at the end of the archive. A [`TarError::BadHeader`] is about one member: call again
    /// for the next; any other error ends the stream.
    pub fn next_member(&mut self) -> Result<Option<Member>, TarError> {
        if self.done {
            return Ok(None);
        }
        self.skip_data()?;
        let mut long_name: Option<String> = None;
        let mut pax_path: Option<String> = None;
        let mut pax_size: Option<u64> = None;
        let mut first_offset: Option<u64> = None;
        loop {
            let offset = self.pos;
            let Some(b) = self.block()? else {
                // A clean end without the two zero blocks: tarfile accepts it too.
                self.done = true;
                return Ok(None);
            };
            if self.resync {
                // Only a block that is a well-formed ustar header ends the search.
                if b.iter().all(|&x| x == 0) || !is_ustar(&b) || checksum_ok(&b).is_err() {
                    continue;
                }
                self.resync = false;
            }
            if b.iter().all(|&x| x == 0) {
                self.done = true;
                return Ok(None);
            }
            let start = *first_offset.get_or_insert(offset);
            let bad = |why: String| TarError::BadHeader {
                offset,
                name: readable_name(&b),
                why,
            };
            if let Err(why) = checksum_ok(&b) {
                if offset == 0 && !is_ustar(&b) {
                    return Err(self.not_tar(&b));
                }
                self.resync = true;
                return Err(bad(why));
            }
            let size = match number(&b[124..136]) {
                Ok(s) => s,
                Err(why) => {
                    self.resync = true;
                    return Err(bad(format!("size field: {why}")));
                }
            };
            match b[156] {
                b'L' => {
                    let v = self.meta(offset, size)?;
                    long_name = Some(c_string(&v));
                }
                b'K' => {
                    self.meta(offset, size)?;
                }
                b'x' => {
                    let v = self.meta(offset, size)?;
                    match pax_records(&v) {
                        Ok(records) => {
                            for (k, val) in records {
                                match k.as_str() {
                                    "path" => pax_path = Some(val),
                                    "size" => match val.parse::<u64>() {
                                        Ok(s) => pax_size = Some(s),
                                        Err(_) => {
                                            return Err(bad(format!("pax size '{val}'")));
                                        }
                                    },
                                    _ => {}
                                }
                            }
                        }
                        Err(why) => return Err(bad(format!("pax header: {why}"))),
                    }
                }
                b'g' => {
                    // Global pax records (comments, mtimes) change nothing we use.
                    self.meta(offset, size)?;
                }
                t => {
                    let size = pax_size.unwrap_or(size);
                    let name = pax_path.or(long_name).unwrap_or_else(|| header_name(&b));
                    let kind = if matches!(t, b'0' | 0 | b'7') {
                        MemberKind::File
                    } else {
                        MemberKind::Other
                    };
                    // Links, folders and devices carry no data whatever their size field.
                    let data = if matches!(t, b'1' | b'2' | b'3' | b'4' | b'5' | b'6') {
                        0
                    } else {
                        size
                    };
                    self.left = data;
                    self.pad = padding(data);
                    return Ok(Some(Member {
                        name,
                        size: data,
                        kind,
                        offset: start,
                    }));
                }
            }
        }
    }
}

/// Padding after `size` bytes of data, to a whole block.
pub fn padding(size: u64) -> u64 {
    (BLOCK - size % BLOCK) % BLOCK
}

fn is_ustar(b: &[u8; 512]) -> bool {
    &b[257..262] == b"ustar"
}

/// Checks a header's checksum: the sum of its bytes with the checksum field taken as spaces
/// (unsigned, or signed as some old writers computed it).
fn checksum_ok(b: &[u8; 512]) -> Result<(), String> {
    let stored = number(&b[148..156]).map_err(|e| format!("checksum field: {e}"))?;
    let (mut unsigned, mut signed) = (0u64, 0i64);
    for (i, &x) in b.iter().enumerate() {
        let x = if (148..156).contains(&i) { b' ' } else { x };
        unsigned += u64::from(x);
        signed += i64::from(x as i8);
    }
    if stored == unsigned || stored as i64 == signed {
        Ok(())
    } else {
        Err(format!(
            "checksum mismatch (stored {stored}, computed {unsigned})"
        ))
    }
}

/// A numeric field: octal digits (space or NUL padded), or GNU's base-256 (high bit set).
fn number(field: &[u8]) -> Result<u64, String> {
    if field.first().is_some_and(|&f| f & 0x80 != 0) {
        if field[0] & 0x40 != 0 {
            return Err("negative number".into());
        }
        let mut v: u64 = u64::from(field[0] & 0x3f);
        for &x in &field[1..] {
            v = v
                .checked_mul(256)
                .and_then(|v| v.checked_add(u64::from(x)))
                .ok_or("number too large")?;
        }
        return Ok(v);
    }
    let text: Vec<u8> = field
        .iter()
        .copied()
        .skip_while(|&c| c == b' ')
        .take_while(|&c| c != 0 && c != b' ')
        .collect();
    if text.is_empty() {
        return Ok(0);
    }
    let mut v: u64 = 0;
    for &c in &text {
        if !(b'0'..=b'7').contains(&c) {
            return Err(format!("'{}' is not octal", String::from_utf8_lossy(&text)));
        }
        v = v
            .checked_mul(8)
            .and_then(|v| v.checked_add(u64::from(c - b'0')))
            .ok_or("number too large")?;
    }
    Ok(v)
}

fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// The name a header holds: ustar's prefix joined to the name (GNU headers keep other data
/// where the prefix would be).
fn header_name(b: &[u8; 512]) -> String {
    let name = c_string(&b[..100]);
    if &b[257..263] == b"ustar\0" && b[345] != 0 {
        format!("{}/{name}", c_string(&b[345..500]))
    } else {
        name
    }
}

/// A broken header's name, when it looks like one (printable text).
fn readable_name(b: &[u8; 512]) -> Option<String> {
    let n = header_name(b);
    (!n.is_empty() && n.chars().all(|c| !c.is_control())).then_some(n)
}

/// Parses pax records: `LEN key=value\n`, LEN counting the whole record.
fn pax_records(mut v: &[u8]) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    while !v.is_empty() {
        if v.iter().all(|&c| c == 0) {
            break;
        }
        let sp = v
            .iter()
            .position(|&c| c == b' ')
            .ok_or("a record without a length")?;
        let len: usize = std::str::from_utf8(&v[..sp])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or("a record with a bad length")?;
        if len <= sp + 1 || len > v.len() || v[len - 1] != b'\n' {
            return Err("a record's length does not fit it".into());
        }
        let rec = &v[sp + 1..len - 1];
        let eq = rec
            .iter()
            .position(|&c| c == b'=')
            .ok_or("a record without '='")?;
        out.push((
            String::from_utf8_lossy(&rec[..eq]).into_owned(),
            String::from_utf8_lossy(&rec[eq + 1..]).into_owned(),
        ));
        v = &v[len..];
    }
    Ok(out)
}

/// Writes tar members: ustar headers, with a pax record for a name ustar can't hold.
pub struct TarWriter<W> {
    out: W,
    written: u64,
}

impl<W: io::Write> TarWriter<W> {
    /// A writer into `out`.
    pub fn new(out: W) -> TarWriter<W> {
        TarWriter { out, written: 0 }
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    fn header(&mut self, name: &[u8], size: u64, kind: u8) -> io::Result<()> {
        let mut h = [0u8; 512];
        h[..name.len()].copy_from_slice(name);
        h[100..108].copy_from_slice(b"0000644\0");
        h[108..116].copy_from_slice(b"0000000\0");
        h[116..124].copy_from_slice(b"0000000\0");
        let size_field = format!("{size:011o}\0");
        if size_field.len() != 12 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a member over 8 GiB",
            ));
        }
        h[124..136].copy_from_slice(size_field.as_bytes());
        h[136..148].copy_from_slice(b"00000000000\0");
        h[156] = kind;
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        h[148..156].copy_from_slice(b"        ");
        let sum: u64 = h.iter().map(|&x| u64::from(x)).sum();
        h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        self.out.write_all(&h)?;
        self.written += BLOCK;
        Ok(())
    }

    fn data(&mut self, data: &[u8]) -> io::Result<()> {
        self.out.write_all(data)?;
        let pad = padding(data.len() as u64);
        self.out.write_all(&[0u8; 512][..pad as usize])?;
        self.written += data.len() as u64 + pad;
        Ok(())
    }

    /// Appends a regular file.
    pub fn append(&mut self, name: &str, data: &[u8]) -> io::Result<()> {
        let bytes = name.as_bytes();
        if bytes.len() >= 100 {
            let mut record = format!(" path={name}\n");
            // The length counts its own digits.
            let mut len = record.len() + 1;
            while len.to_string().len() + record.len() != len {
                len = len.to_string().len() + record.len();
            }
            record.insert_str(0, &len.to_string());
            self.header(b"././@PaxHeader", record.len() as u64, b'x')?;
            self.data(record.as_bytes())?;
            // The ustar name stands in for readers without pax: the name's last 90 bytes.
            let mut cut = name.len().saturating_sub(90);
            while !name.is_char_boundary(cut) {
                cut += 1;
            }
            let short = &name[cut..];
            self.header(
                short.trim_start_matches('/').as_bytes(),
                data.len() as u64,
                b'0',
            )?;
        } else {
            self.header(bytes, data.len() as u64, b'0')?;
        }
        self.data(data)
    }

    /// Writes the two zero blocks that end an archive and hands the output back.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.write_all(&[0u8; 1024])?;
        self.written += 2 * BLOCK;
        self.out.flush()?;
        Ok(self.out)
    }
}
