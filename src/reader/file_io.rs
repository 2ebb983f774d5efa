//! Reading one sample's file: never blocking on what isn't a regular file, and refusing a
//! file over the size limit before allocating for it.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use crate::error::{DecodeError, SampleErrorKind};

/// Opens a file for reading without waiting on it: a FIFO opened normally would block until
/// a writer came. One path lookup serves both the type check and the read.
pub fn open_without_blocking(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Regular files ignore O_NONBLOCK; only the type check below ever sees the FIFO.
        options.custom_flags(libc::O_NONBLOCK);
    }
    options.open(path)
}

/// Reads one file, refusing what isn't a regular file (a FIFO would block forever, a
/// directory can't be read) and anything over `max_bytes`, before allocating for it. The
/// buffer comes from the scratch pools ([`crate::scratch`]).
pub fn read_file(path: &Path, max_bytes: u64) -> Result<Vec<u8>, SampleErrorKind> {
    let (file, len) = open_checked(path, max_bytes)?;
    // One byte more than the size, so read_to_end sees the end without growing.
    let mut buf = crate::scratch::empty::<u8>(len + 1);
    read_checked(file, max_bytes, &mut buf)?;
    Ok(buf)
}

/// As [`read_file`], into a buffer to be shared ([`crate::scratch::encoded`], given back by
/// [`crate::scratch::recycle_encoded`]): what a pipeline's reader hands on, read without
/// allocating once the pools hold the working set.
pub fn read_file_shared(path: &Path, max_bytes: u64) -> Result<Arc<Vec<u8>>, SampleErrorKind> {
    let (file, len) = open_checked(path, max_bytes)?;
    let mut buf = crate::scratch::encoded(len + 1);
    let bytes = Arc::get_mut(&mut buf).expect("a buffer from the pools is shared with no one");
    match read_checked(file, max_bytes, bytes) {
        Ok(()) => Ok(buf),
        Err(e) => {
            crate::scratch::recycle_encoded(buf);
            Err(e)
        }
    }
}

/// The file opened, with its size: a regular file within `max_bytes`.
fn open_checked(path: &Path, max_bytes: u64) -> Result<(std::fs::File, usize), SampleErrorKind> {
    let file = open_without_blocking(path).map_err(|e| SampleErrorKind::Read(e.to_string()))?;
    let meta = file
        .metadata()
        .map_err(|e| SampleErrorKind::Read(e.to_string()))?;
    if !meta.is_file() {
        let what = if meta.is_dir() {
            "a directory"
        } else {
            "not a regular file"
        };
        return Err(SampleErrorKind::Read(format!("{what}, not an image file")));
    }
    if meta.len() > max_bytes {
        return Err(SampleErrorKind::Decode(DecodeError::Limits(format!(
            "file is {} bytes, over the limit of {max_bytes} (max_file_bytes)",
            meta.len()
        ))));
    }
    Ok((file, meta.len() as usize))
}

/// Reads the rest of `file` into `buf`, refusing it if it grew over `max_bytes`.
fn read_checked(
    file: std::fs::File,
    max_bytes: u64,
    buf: &mut Vec<u8>,
) -> Result<(), SampleErrorKind> {
    file.take(max_bytes + 1)
        .read_to_end(buf)
        .map_err(|e| SampleErrorKind::Read(e.to_string()))?;
    if buf.len() as u64 > max_bytes {
        return Err(SampleErrorKind::Decode(DecodeError::Limits(format!(
            "file grew over the limit of {max_bytes} bytes (max_file_bytes) while being read"
        ))));
    }
    Ok(())
}
