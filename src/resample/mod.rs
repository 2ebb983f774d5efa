//! Pillow-exact resampling of 8-bit HWC images, written so a GPU kernel can replay it bit for
//! bit: shared by the `resize` and `random_resized_crop` operators, the fused resize → crop
//! operators ([`crate::fusion`]) and the GPU chain ([`crate::cuda::chain`]), which is why it
//! lives in none of them.
//!
//! Everything is split in two steps:
//!
//! 1. per-axis tables ([`taps`]: [`Taps`] for bilinear, source indices for nearest), computed
//!    once per image exactly as Pillow computes them;
//! 2. integer-only passes over the pixels ([`passes`]), which the GPU kernels replay from the
//!    same tables.

pub mod passes;
#[cfg(target_arch = "x86_64")]
mod simd;
pub mod taps;

#[cfg(test)]
mod tests;

pub use passes::{
    resample_bilinear_u8, resample_nearest_u8, resize_u8, simd_available, ResizeError, SourceU8,
    Window,
};
pub use taps::{
    bilinear_taps, nearest_indices, vertical_first, whole_axis_taps, Interp, Taps, PRECISION_BITS,
};

use crate::image::Image;

/// Largest output side the resizing operators accept (`size`, `shorter`).
pub const MAX_SIDE: i64 = 1 << 15;

/// Largest output an operator will allocate, in pixels (a sample asking for more fails).
pub const MAX_OUTPUT_PIXELS: usize = 1 << 28;

/// Resizes `window` of an 8-bit HWC image to `out_h` × `out_w` (see [`resize_u8`]); errors
/// name what is wrong (not u8 HWC, window outside, output too large).
pub fn resize_image(
    im: &Image,
    window: Window,
    out_h: usize,
    out_w: usize,
    interp: Interp,
    antialias: bool,
) -> Result<Image, String> {
    let src = im.as_u8_hwc().ok_or_else(|| {
        format!(
            "resize works on u8 HWC images, got {} {}",
            im.dtype().name(),
            im.layout.name()
        )
    })?;
    if out_h
        .checked_mul(out_w)
        .is_none_or(|p| p > MAX_OUTPUT_PIXELS)
    {
        return Err(format!(
            "output {out_h}x{out_w} exceeds the limit of {MAX_OUTPUT_PIXELS} pixels"
        ));
    }
    let c = im.channels;
    let data = resize_u8(
        src, im.height, im.width, c, im.width, window, out_h, out_w, interp, antialias,
    )
    .map_err(|e| e.to_string())?;
    Ok(Image::from_u8_hwc(out_h, out_w, c, data))
}
