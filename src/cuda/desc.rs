//! `#[repr(C)]` mirrors of the descriptor structs of `kernels/common/desc.cuh`.
//!
//! Field order, types and sizes match the C structs exactly; the C side has
//! `static_assert(sizeof(..) == N)`, this side `const` asserts of the same N, and the tests
//! check every field offset against the C layout. Flags and element-type codes are the
//! `#define`s of the header.

/// Element type codes (`DT_*`).
pub mod dtype {
    /// `u8`.
    pub const U8: u32 = 0;
    /// IEEE half.
    pub const F16: u32 = 1;
    /// IEEE single.
    pub const F32: u32 = 2;

    /// The code of a [`DType`](crate::image::DType).
    pub fn code(d: crate::image::DType) -> u32 {
        match d {
            crate::image::DType::U8 => U8,
            crate::image::DType::F16 => F16,
            crate::image::DType::F32 => F32,
        }
    }
}

/// Flags of [`FusedDesc::flags`] (`FUSED_*`).
pub mod fused_flags {
    /// Mirror left–right.
    pub const FLIP_H: u32 = 1;
    /// Mirror top–bottom.
    pub const FLIP_V: u32 = 2;
    /// Bilinear: vertical pass first (Pillow 13's rule).
    pub const VERTICAL_FIRST: u32 = 4;
    /// Bilinear: the width changes (horizontal taps present).
    pub const H_PASS: u32 = 8;
    /// Bilinear: the height changes (vertical taps present).
    pub const V_PASS: u32 = 16;
    /// Nearest neighbour (index tables instead of taps).
    pub const NEAREST: u32 = 32;
    /// Apply `(x - mean) * inv_std`.
    pub const NORMALIZE: u32 = 64;
    /// Write CHW instead of HWC.
    pub const CHW: u32 = 128;
}

/// Plain-old-data descriptor types that may be copied byte for byte to the device.
///
/// # Safety
/// Implementors are `#[repr(C)]`, have no padding bytes (every byte is initialised) and no
/// pointers or references (device addresses are stored as `u64`).
pub unsafe trait Pod: Copy + 'static {}

// SAFETY: primitive integers have no padding and no invalid bit patterns.
unsafe impl Pod for i32 {}
// SAFETY: as above.
unsafe impl Pod for u32 {}

/// The bytes of a slice of [`Pod`] values.
pub fn as_bytes<T: Pod>(items: &[T]) -> &[u8] {
    // SAFETY: `T: Pod` has no padding, so all `size_of_val(items)` bytes are initialised; the
    // slice covers exactly the same memory and borrows it for the same lifetime.
    unsafe { std::slice::from_raw_parts(items.as_ptr().cast::<u8>(), std::mem::size_of_val(items)) }
}

/// One sample of the fused chain / the resize kernel (C `FusedDesc`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FusedDesc {
    /// Device address of the u8 HWC source, as stored (before the EXIF orientation).
    pub src: u64,
    /// Device address of this sample's output.
    pub dst: u64,
    /// Bytes from one source row to the next.
    pub src_pitch: u32,
    /// Source rows, as stored.
    pub src_h: u32,
    /// Source columns, as stored.
    pub src_w: u32,
    /// Channels (1..=4).
    pub channels: u32,
    /// Window top (inside the source as displayed: after the orientation).
    pub win_top: u32,
    /// Window left.
    pub win_left: u32,
    /// Window rows.
    pub win_h: u32,
    /// Window columns.
    pub win_w: u32,
    /// Output rows.
    pub out_h: u32,
    /// Output columns.
    pub out_w: u32,
    /// [`fused_flags`].
    pub flags: u32,
    /// Output element type ([`dtype`]).
    pub out_dtype: u32,
    /// Offset of the horizontal table in the tap array (i32 entries).
    pub h_off: u32,
    /// Horizontal taps per output column.
    pub h_ksize: u32,
    /// Offset of the vertical table.
    pub v_off: u32,
    /// Vertical taps per output row.
    pub v_ksize: u32,
    /// Per-channel mean (normalize).
    pub mean: [f32; 4],
    /// Per-channel `1 / std` (normalize).
    pub inv_std: [f32; 4],
    /// EXIF orientation (1..=8; 0 reads as 1) the kernel reads the source through: output
    /// pixels are computed from the displayed image, pixels are fetched from the stored one.
    pub orientation: u32,
    /// Unused (keeps the size a multiple of 8, as in C).
    pub reserved: u32,
}

/// Color jitter of one u8 HWC RGB image in place (C `JitterDesc`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct JitterDesc {
    /// Device address of the pixels (modified in place).
    pub data: u64,
    /// Pixels (`height * width`).
    pub pixels: u32,
    /// Byte k: the adjustment applied at step k (0 brightness, 1 contrast, 2 saturation, 3 hue).
    pub order: u32,
    /// Bit k: adjustment k is enabled.
    pub enabled: u32,
    /// Brightness factor as f32.
    pub brightness: f32,
    /// Contrast factor as f32.
    pub contrast: f32,
    /// Saturation factor as f32.
    pub saturation: f32,
    /// Byte added to H (mod 256).
    pub hue_shift: u32,
    /// Unused.
    pub reserved: u32,
}

/// One region the JPEG engines decoded with nearest-upsampled chroma, rebuilt with libjpeg's
/// fancy upsampling by the kernels of `kernels/chroma.cu` (`ChromaDesc`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChromaDesc {
    /// Device address of the engines' u8 RGB, `pitch` bytes per row.
    pub src: u64,
    /// Device address of the rebuilt u8 RGB (same geometry, another buffer).
    pub dst: u64,
    /// Scratch: [`ChromaDesc::plane_bytes`] bytes.
    pub planes: u64,
    /// Bytes per row of `src` and `dst`.
    pub pitch: u32,
    /// Width of the region decoded.
    pub width: u32,
    /// Height of the region decoded.
    pub height: u32,
    /// Left of the region in the stored image.
    pub x0: u32,
    /// Top of the region in the stored image.
    pub y0: u32,
    /// Width of the stored image.
    pub image_w: u32,
    /// Height of the stored image.
    pub image_h: u32,
    /// Horizontal chroma subsampling (1 or 2).
    pub sx: u32,
    /// Vertical chroma subsampling (1 or 2).
    pub sy: u32,
    /// Unused.
    pub reserved: u32,
}

impl ChromaDesc {
    /// Chroma blocks the region covers (columns, rows).
    pub fn blocks(&self) -> (usize, usize) {
        let (sx, sy) = (self.sx.max(1), self.sy.max(1));
        let cols = (self.x0 + self.width.max(1) - 1) / sx - self.x0 / sx + 1;
        let rows = (self.y0 + self.height.max(1) - 1) / sy - self.y0 / sy + 1;
        (cols as usize, rows as usize)
    }

    /// Scratch bytes the kernels use at `planes` (Cb, Cr and a state per block).
    pub fn plane_bytes(&self) -> usize {
        let (c, r) = self.blocks();
        3 * c * r
    }
}

const _: () = assert!(std::mem::size_of::<FusedDesc>() == 120);
const _: () = assert!(std::mem::size_of::<ChromaDesc>() == 64);
const _: () = assert!(std::mem::size_of::<JitterDesc>() == 40);
const _: () = assert!(std::mem::align_of::<FusedDesc>() == 8);

// SAFETY: each struct is #[repr(C)] with u64 fields first and then only 4-byte fields, an even
// number of them (sizes asserted above equal the sum of the field sizes), so no padding; no
// pointers (addresses are u64).
unsafe impl Pod for FusedDesc {}
// SAFETY: as above.
unsafe impl Pod for JitterDesc {}
// SAFETY: as above.
unsafe impl Pod for ChromaDesc {}
