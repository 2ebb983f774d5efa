//! Per-sample image tensors: element type, memory layout, and the pixel buffer.

use half::f16;

/// Element type of an image tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// 8-bit unsigned integer (decoded pixels).
    U8,
    /// IEEE half precision.
    F16,
    /// IEEE single precision.
    F32,
}

impl DType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::U8 => 1,
            DType::F16 => 2,
            DType::F32 => 4,
        }
    }

    /// The name used in pipeline files (`u8`, `f16`, `f32`).
    pub fn name(self) -> &'static str {
        match self {
            DType::U8 => "u8",
            DType::F16 => "f16",
            DType::F32 => "f32",
        }
    }

    /// Parses a pipeline-file name.
    pub fn from_name(s: &str) -> Option<DType> {
        match s {
            "u8" | "uint8" => Some(DType::U8),
            "f16" | "float16" => Some(DType::F16),
            "f32" | "float32" => Some(DType::F32),
            _ => None,
        }
    }
}

/// Memory layout of one image: interleaved channels or planes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Height, width, channels (interleaved; what decoders produce).
    Hwc,
    /// Channels, height, width (planar; what PyTorch models take).
    Chw,
}

impl Layout {
    /// The name used in pipeline files.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Hwc => "HWC",
            Layout::Chw => "CHW",
        }
    }

    /// Parses a pipeline-file name (case-insensitive).
    pub fn from_name(s: &str) -> Option<Layout> {
        match s.to_ascii_uppercase().as_str() {
            "HWC" => Some(Layout::Hwc),
            "CHW" => Some(Layout::Chw),
            _ => None,
        }
    }
}

/// The pixel buffer of an [`Image`], by element type.
#[derive(Debug, Clone, PartialEq)]
pub enum Pixels {
    /// 8-bit values.
    U8(Vec<u8>),
    /// Half-precision values.
    F16(Vec<f16>),
    /// Single-precision values.
    F32(Vec<f32>),
}

impl Pixels {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            Pixels::U8(_) => DType::U8,
            Pixels::F16(_) => DType::F16,
            Pixels::F32(_) => DType::F32,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Pixels::U8(v) => v.len(),
            Pixels::F16(v) => v.len(),
            Pixels::F32(v) => v.len(),
        }
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Values of `dtype` from their raw bytes in native endianness (the inverse of
    /// [`Pixels::as_bytes`]; a trailing partial element is dropped).
    pub fn from_bytes(b: &[u8], dtype: DType) -> Pixels {
        match dtype {
            DType::U8 => Pixels::U8(b.to_vec()),
            DType::F16 => Pixels::F16(
                b.chunks_exact(2)
                    .map(|c| f16::from_ne_bytes([c[0], c[1]]))
                    .collect(),
            ),
            DType::F32 => Pixels::F32(
                b.chunks_exact(4)
                    .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
        }
    }

    /// The raw bytes in native endianness.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Pixels::U8(v) => v,
            Pixels::F16(v) => bytemuck_f16(v),
            Pixels::F32(v) => bytemuck_f32(v),
        }
    }
}

fn bytemuck_f16(v: &[f16]) -> &[u8] {
    // SAFETY: f16 is a plain 2-byte value type with no padding or invalid bit patterns;
    // the returned slice covers exactly the same memory and lifetime.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

fn bytemuck_f32(v: &[f32]) -> &[u8] {
    // SAFETY: f32 has no padding and every byte pattern is a valid u8; same memory and lifetime.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// One image (or image-shaped tensor) of one sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
    /// Channels (1 or 3 for decoded images; any count for tensors).
    pub channels: usize,
    /// Memory order of the elements.
    pub layout: Layout,
    /// The elements, `height * width * channels` of them.
    pub pixels: Pixels,
}

impl Image {
    /// An 8-bit HWC image from a buffer; panics if the length does not match.
    pub fn from_u8_hwc(height: usize, width: usize, channels: usize, data: Vec<u8>) -> Image {
        assert_eq!(data.len(), height * width * channels, "buffer size");
        Image {
            height,
            width,
            channels,
            layout: Layout::Hwc,
            pixels: Pixels::U8(data),
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.pixels.dtype()
    }

    /// Shape in the order of the layout: `[h, w, c]` for HWC, `[c, h, w]` for CHW.
    pub fn shape(&self) -> [usize; 3] {
        match self.layout {
            Layout::Hwc => [self.height, self.width, self.channels],
            Layout::Chw => [self.channels, self.height, self.width],
        }
    }

    /// The 8-bit HWC buffer, if this image is one.
    pub fn as_u8_hwc(&self) -> Option<&[u8]> {
        match (&self.pixels, self.layout) {
            (Pixels::U8(v), Layout::Hwc) => Some(v),
            _ => None,
        }
    }
}

/// Applies `f` to the pixel buffer whatever its element type; used by operators that only
/// move elements around (crop, flip, pad, layout).
#[macro_export]
macro_rules! map_pixels {
    ($pixels:expr, |$v:ident| $body:expr) => {
        match $pixels {
            $crate::image::Pixels::U8($v) => $crate::image::Pixels::U8($body),
            $crate::image::Pixels::F16($v) => $crate::image::Pixels::F16($body),
            $crate::image::Pixels::F32($v) => $crate::image::Pixels::F32($body),
        }
    };
}
