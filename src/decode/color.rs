//! The output colour of decoded images: RGB, or one gray channel by Pillow's `L` formula.

/// Output colour of decoded images.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColorMode {
    /// Three channels, R G B.
    Rgb,
    /// One channel, luma by Pillow's `L` formula.
    Gray,
}

impl ColorMode {
    /// Channels in the output (3 or 1).
    pub fn channels(self) -> usize {
        match self {
            ColorMode::Rgb => 3,
            ColorMode::Gray => 1,
        }
    }
}

/// Pillow's RGB → `L`: `(R*19595 + G*38470 + B*7471 + 0x8000) >> 16`.
#[inline]
pub fn luma(r: u8, g: u8, b: u8) -> u8 {
    ((u32::from(r) * 19595 + u32::from(g) * 38470 + u32::from(b) * 7471 + 0x8000) >> 16) as u8
}

/// 1 or 3 channels in, `mode` out.
pub(super) fn convert_channels(px: Vec<u8>, channels: usize, mode: ColorMode) -> Vec<u8> {
    match (channels, mode) {
        (1, ColorMode::Gray) | (3, ColorMode::Rgb) => px,
        (1, ColorMode::Rgb) => {
            let mut out = Vec::with_capacity(px.len() * 3);
            for &v in &px {
                out.extend_from_slice(&[v, v, v]);
            }
            out
        }
        _ => px.chunks_exact(3).map(|p| luma(p[0], p[1], p[2])).collect(),
    }
}
