//! The random parameters an operator chose for one sample, as recorded in each batch's
//! [`SampleInfo`](crate::pipeline::SampleInfo) so users can transform boxes and masks the
//! same way (and as the GPU path receives them from the host setup).

use std::sync::Arc;

/// The parameters one sample's operators drew, by operator name, in the order they ran: up
/// to four held in place (no heap allocation a sample). It reads as a slice.
pub type SampleParams = smallvec::SmallVec<[(Arc<str>, OpParams); 4]>;

/// A crop window in an image, with that image's size: `top`/`left` are negative when the
/// window starts above or left of the image (a crop larger than the image, filled outside).
///
/// To map a point `(y, x)` of the source image into the crop: `(y - top, x - left)`; the crop
/// holds `height` × `width` pixels. Operators that resize after cropping
/// (`random_resized_crop`) scale by `output / (height, width)` afterwards.
///
/// ```
/// use stokehold::CropParams;
///
/// let c = CropParams { top: 10, left: 20, height: 100, width: 200, source_height: 480, source_width: 640 };
/// // The centre of the source, in the crop's pixels.
/// assert_eq!((240 - c.top, 320 - c.left), (230, 300));
/// assert!(c.is_inside());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CropParams {
    /// First row, in the source image (after EXIF orientation).
    pub top: i64,
    /// First column.
    pub left: i64,
    /// Rows of the window.
    pub height: usize,
    /// Columns of the window.
    pub width: usize,
    /// Rows of the image the window was cut from.
    pub source_height: usize,
    /// Columns of the image the window was cut from.
    pub source_width: usize,
}

impl CropParams {
    /// Whether the window lies entirely inside its source image (no filled border).
    pub fn is_inside(&self) -> bool {
        let fits = |a: i64, n: usize, max: usize| {
            a >= 0
                && (a as u64)
                    .checked_add(n as u64)
                    .is_some_and(|e| e <= max as u64)
        };
        fits(self.top, self.height, self.source_height)
            && fits(self.left, self.width, self.source_width)
    }
}

/// Which flips were applied to a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlipParams {
    /// Mirrored left–right.
    pub horizontal: bool,
    /// Mirrored top–bottom.
    pub vertical: bool,
}

/// Color jitter factors and the order they were applied in. A disabled adjustment is
/// recorded as its neutral value (factor 1, hue 0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ColorJitterParams {
    /// Indices into [brightness, contrast, saturation, hue], in application order.
    pub order: [u8; 4],
    /// Brightness factor (1 = unchanged).
    pub brightness: f64,
    /// Contrast factor (1 = unchanged).
    pub contrast: f64,
    /// Saturation factor (1 = unchanged).
    pub saturation: f64,
    /// Hue shift in turns, in [-0.5, 0.5] (0 = unchanged).
    pub hue: f64,
}

/// Random parameters an operator chose for one sample, returned with the batch so users
/// can transform boxes and masks the same way. Read them with the typed accessors of
/// [`SampleInfo`](crate::pipeline::SampleInfo) (`crop()`, `flip()`, `color_jitter()`).
#[derive(Debug, Clone, PartialEq)]
pub enum OpParams {
    /// A crop window (`crop`, `random_resized_crop`).
    Crop(CropParams),
    /// Which flips were applied (`flip`).
    Flip(FlipParams),
    /// Color jitter factors (`color_jitter`).
    ColorJitter(ColorJitterParams),
}

impl OpParams {
    /// The crop window, if these are crop parameters.
    pub fn as_crop(&self) -> Option<&CropParams> {
        match self {
            OpParams::Crop(c) => Some(c),
            _ => None,
        }
    }

    /// The flips, if these are flip parameters.
    pub fn as_flip(&self) -> Option<&FlipParams> {
        match self {
            OpParams::Flip(f) => Some(f),
            _ => None,
        }
    }

    /// The jitter factors, if these are color jitter parameters.
    pub fn as_color_jitter(&self) -> Option<&ColorJitterParams> {
        match self {
            OpParams::ColorJitter(j) => Some(j),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_means_no_border() {
        let c = |top, left, height, width| CropParams {
            top,
            left,
            height,
            width,
            source_height: 10,
            source_width: 20,
        };
        assert!(c(0, 0, 10, 20).is_inside());
        assert!(c(3, 5, 7, 15).is_inside());
        assert!(!c(-1, 0, 5, 5).is_inside());
        assert!(!c(0, 0, 11, 5).is_inside());
        assert!(!c(0, 16, 5, 5).is_inside());
        let p = OpParams::Crop(c(1, 2, 3, 4));
        assert_eq!(p.as_crop().map(|c| c.top), Some(1));
        assert!(p.as_flip().is_none() && p.as_color_jitter().is_none());
    }
}
