//! [`Limits`]: how large a file and an image decoding accepts, checked before anything large
//! is allocated (the file size first, then width × height from the header).

use crate::error::DecodeError;

/// Resource limits, checked before decoding allocates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest width × height accepted (default 178 956 970, Pillow's decompression-bomb
    /// error threshold, twice its `MAX_IMAGE_PIXELS`).
    pub max_pixels: u64,
    /// Largest encoded file accepted, in bytes (default 256 MiB).
    pub max_file_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_pixels: 178_956_970,
            max_file_bytes: 256 << 20,
        }
    }
}

/// Fails with [`DecodeError::Limits`] when `width * height` is over `limits.max_pixels`.
pub(crate) fn check_pixels(
    width: usize,
    height: usize,
    limits: &Limits,
) -> Result<(), DecodeError> {
    let px = (width as u64).saturating_mul(height as u64);
    if px > limits.max_pixels {
        return Err(DecodeError::Limits(format!(
            "image is {width}x{height} = {} MP, over the limit of {} MP (max_pixels)",
            mp(px),
            mp(limits.max_pixels)
        )));
    }
    Ok(())
}

fn mp(px: u64) -> String {
    let m = px as f64 / 1e6;
    if m >= 10.0 {
        format!("{m:.0}")
    } else {
        format!("{m:.2}")
    }
}

/// Fails with [`DecodeError::Limits`] when `bytes` is over `limits.max_file_bytes`.
pub(crate) fn check_file_size(bytes: &[u8], limits: &Limits) -> Result<(), DecodeError> {
    if bytes.len() as u64 > limits.max_file_bytes {
        return Err(DecodeError::Limits(format!(
            "file is {} bytes, over the limit of {} bytes (max_file_bytes)",
            bytes.len(),
            limits.max_file_bytes
        )));
    }
    Ok(())
}
