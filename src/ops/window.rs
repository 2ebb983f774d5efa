//! Cutting a window out of an image, filling what lies outside with a constant: the pixel
//! code `crop` and `pad` share (a pad is a window that starts outside the image).

use half::f16;

use crate::image::{Image, Layout, Pixels};

/// Largest magnitude of a fill value (the largest finite f16).
pub const MAX_FILL: f64 = 65504.0;

/// An element type that can be written from a fill value.
trait FillValue: Copy {
    fn from_fill(v: f64) -> Self;
}

impl FillValue for u8 {
    fn from_fill(v: f64) -> Self {
        v.round().clamp(0.0, 255.0) as u8
    }
}

impl FillValue for f16 {
    fn from_fill(v: f64) -> Self {
        f16::from_f64(v)
    }
}

impl FillValue for f32 {
    fn from_fill(v: f64) -> Self {
        v as f32
    }
}

/// The `height` × `width` window of `im` whose top-left corner is at (`top`, `left`) (which
/// may be negative or past the image); pixels outside the image take `fill`, one value per
/// channel or a single value for all. Any dtype and layout; the layout is kept.
pub fn crop_fill(
    im: &Image,
    top: i64,
    left: i64,
    height: usize,
    width: usize,
    fill: &[f64],
) -> Result<Image, String> {
    let c = im.channels;
    let fill: Vec<f64> = match fill.len() {
        1 => vec![fill[0]; c],
        n if n == c => fill.to_vec(),
        n => {
            let has = if c == 1 {
                "1 channel".to_string()
            } else {
                format!("{c} channels")
            };
            return Err(format!("{n} fill values for an image with {has}"));
        }
    };
    let elems = height.checked_mul(width).and_then(|p| p.checked_mul(c));
    if elems.is_none_or(|n| n > (1usize << 31)) {
        return Err(format!("output {height}x{width}x{c} is too large"));
    }
    let g = Geometry {
        h: im.height,
        w: im.width,
        c,
        layout: im.layout,
        top,
        left,
        oh: height,
        ow: width,
    };
    if im.pixels.len() != im.height * im.width * c {
        return Err("pixel buffer does not match the image size".to_string());
    }
    let pixels = match &im.pixels {
        Pixels::U8(v) => Pixels::U8(g.run(v, &fill)),
        Pixels::F16(v) => Pixels::F16(g.run(v, &fill)),
        Pixels::F32(v) => Pixels::F32(g.run(v, &fill)),
    };
    Ok(Image {
        height,
        width,
        channels: c,
        layout: im.layout,
        pixels,
    })
}

struct Geometry {
    h: usize,
    w: usize,
    c: usize,
    layout: Layout,
    top: i64,
    left: i64,
    oh: usize,
    ow: usize,
}

impl Geometry {
    fn run<T: FillValue>(&self, src: &[T], fill: &[f64]) -> Vec<T> {
        let fill: Vec<T> = fill.iter().map(|&v| T::from_fill(v)).collect();
        // Both layouts are `planes` planes of rows of `px`-element pixels.
        let (planes, px) = match self.layout {
            Layout::Hwc => (1, self.c),
            Layout::Chw => (self.c, 1),
        };
        let mut out = Vec::with_capacity(self.oh * self.ow * self.c);
        // Columns of the output that come from the image: [x0, x1), reading from column sx0.
        let x0 = (-self.left).clamp(0, self.ow as i64) as usize;
        let x1 = (self.w as i64 - self.left).clamp(x0 as i64, self.ow as i64) as usize;
        let sx0 = (self.left + x0 as i64).max(0) as usize;
        for p in 0..planes {
            let pat: &[T] = match self.layout {
                Layout::Hwc => &fill,
                Layout::Chw => &fill[p..p + 1],
            };
            let plane = &src[p * self.h * self.w * px..][..self.h * self.w * px];
            for y in 0..self.oh {
                let sy = self.top + y as i64;
                if sy < 0 || sy >= self.h as i64 || x0 == x1 {
                    for _ in 0..self.ow {
                        out.extend_from_slice(pat);
                    }
                    continue;
                }
                for _ in 0..x0 {
                    out.extend_from_slice(pat);
                }
                let row = &plane[sy as usize * self.w * px..][..self.w * px];
                out.extend_from_slice(&row[sx0 * px..(sx0 + x1 - x0) * px]);
                for _ in x1..self.ow {
                    out.extend_from_slice(pat);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SampleRng;
    use proptest::prelude::*;

    /// Element (y, x, k) of the window, straight from the definition.
    #[allow(clippy::too_many_arguments)]
    fn naive(
        src: &[u8],
        h: usize,
        w: usize,
        c: usize,
        top: i64,
        left: i64,
        oh: usize,
        ow: usize,
        fill: u8,
    ) -> Vec<u8> {
        let mut out = Vec::new();
        for y in 0..oh as i64 {
            for x in 0..ow as i64 {
                for k in 0..c {
                    let (sy, sx) = (top + y, left + x);
                    let inside = sy >= 0 && sx >= 0 && sy < h as i64 && sx < w as i64;
                    out.push(if inside {
                        src[(sy as usize * w + sx as usize) * c + k]
                    } else {
                        fill
                    });
                }
            }
        }
        out
    }

    proptest! {
        #[test]
        fn matches_naive(h in 1usize..9, w in 1usize..9, c in 1usize..5, top in -10i64..10, left in -10i64..10,
                         oh in 1usize..12, ow in 1usize..12, seed: u64) {
            let mut rng = SampleRng::from_key(seed);
            let src: Vec<u8> = (0..h * w * c).map(|_| rng.next_u64() as u8).collect();
            let im = Image::from_u8_hwc(h, w, c, src.clone());
            let out = crop_fill(&im, top, left, oh, ow, &[7.0]).unwrap();
            prop_assert_eq!(out.as_u8_hwc().unwrap(), &naive(&src, h, w, c, top, left, oh, ow, 7)[..]);
        }

        #[test]
        fn chw_matches_hwc(h in 1usize..7, w in 1usize..7, c in 1usize..4, top in -4i64..6, left in -4i64..6,
                           oh in 1usize..9, ow in 1usize..9) {
            let src: Vec<u8> = (0..h * w * c).map(|i| i as u8).collect();
            let hwc = Image::from_u8_hwc(h, w, c, src);
            let chw = crate::testutil::to_layout(&hwc, Layout::Chw);
            let fill: Vec<f64> = (0..c).map(|k| 200.0 + k as f64).collect();
            let a = crop_fill(&hwc, top, left, oh, ow, &fill).unwrap();
            let b = crop_fill(&chw, top, left, oh, ow, &fill).unwrap();
            prop_assert_eq!(crate::testutil::to_layout(&b, Layout::Hwc), a);
        }

    }

    #[test]
    fn float_types_and_fill() {
        let im = Image {
            height: 1,
            width: 1,
            channels: 2,
            layout: Layout::Hwc,
            pixels: Pixels::F32(vec![1.5, -2.0]),
        };
        let out = crop_fill(&im, 0, -1, 1, 2, &[0.25, -0.75]).unwrap();
        assert_eq!(out.pixels, Pixels::F32(vec![0.25, -0.75, 1.5, -2.0]));
        assert!(crop_fill(&im, 0, 0, 1, 1, &[1.0, 2.0, 3.0]).is_err());
        assert_eq!(u8::from_fill(300.0), 255);
        assert_eq!(u8::from_fill(-3.0), 0);
        assert_eq!(u8::from_fill(2.5), 3);
    }
}
