//! `color_jitter`: random brightness, contrast, saturation and hue changes of 8-bit RGB
//! images, with torchvision `ColorJitter` semantics and the exact arithmetic of its PIL path
//! (Pillow's `ImageEnhance` and `Image.convert("HSV")`).
//!
//! # Specification (the GPU path must reproduce it bit for bit)
//!
//! All pixels are `u8`, HWC, 3 channels (R, G, B). Every adjustment maps the image to a new
//! `u8` image; they are applied one after another in the order [`JitterParams::order`], each
//! to the result of the previous one.
//!
//! **Blend** (Pillow `Image.blend`, `src/libImaging/Blend.c`), used by brightness, contrast
//! and saturation: with `alpha = factor as f32` (round to nearest), for each byte
//! `a` of the "degenerate" image and `b` of the current image
//!
//! ```text
//! t   = f32(a) + alpha * f32(b - a)        // f32 multiply, then f32 add: two roundings, NO fma
//! out = t <= 0 ? 0 : t >= 255 ? 255 : trunc(t)
//! ```
//!
//! Pillow only clips when `alpha` is outside `[0, 1]`, but inside that range `t` always lies in
//! `[0, 255]`, so the single formula above is identical (and `alpha == 0` / `alpha == 1` give
//! `a` / `b` exactly, like Pillow's shortcuts). In CUDA write `__fadd_rn(a, __fmul_rn(alpha, d))`
//! so nvcc does not contract it into an FMA.
//!
//! **Luma** (`convert("L")`, `L24` in `src/libImaging/Convert.c`):
//! `L = (R * 19595 + G * 38470 + B * 7471 + 0x8000) >> 16` in 32-bit integers.
//!
//! - **brightness** `f`: `blend(0, x, f)` per byte.
//! - **contrast** `f`: `m = floor((2 * S + n) / (2 * n))` in 64-bit integers, where `S` is the
//!   sum of `L` over the `n` pixels (this equals Pillow's `int(ImageStat.mean + 0.5)` for every
//!   `n < 2^40`); then `blend(m, x, f)` per byte.
//! - **saturation** `f`: per pixel `l = L(R, G, B)`, then `blend(l, x, f)` for each channel.
//! - **hue** `h` in `[-0.5, 0.5]` (torchvision `adjust_hue`): `shift = u8(i32(trunc(h * 255.0)) mod
//!   256)` with `h * 255.0` in f64 (torchvision: `np.int32(h * 255).astype(np.uint8)`); per pixel
//!   `(H, S, V) = rgb_to_hsv(R, G, B)`, `H = (H + shift) mod 256`, `(R, G, B) = hsv_to_rgb(H, S, V)`.
//!   See [`rgb_to_hsv`] and [`hsv_to_rgb`] for their exact f32/f64 arithmetic (Pillow's
//!   `rgb2hsv_row` / `hsv2rgb`). The round trip is lossy, so an *enabled* hue adjustment changes
//!   pixels even when `shift == 0`, exactly as torchvision does; a *disabled* one is skipped.
//!
//! # Randomness
//!
//! [`ColorJitter::choose`]: first `rng.shuffle(&mut [0u8, 1, 2, 3])` (Fisher–Yates) gives the
//! order (0 = brightness, 1 = contrast, 2 = saturation, 3 = hue); then exactly four
//! `rng.uniform()` draws `u_b, u_c, u_s, u_h`, always all four in this order, whether or not the
//! adjustment is enabled (so enabling one adjustment never changes another's factor). An enabled
//! factor is `lo + (hi - lo) * u` in f64 with `[lo, hi] = [max(0, 1 - v), 1 + v]` for brightness,
//! contrast, saturation and `[-v, v]` for hue. An adjustment is disabled when its argument is 0.

/// GPU launcher.
pub mod gpu;

use crate::error::SampleErrorKind;
use crate::image::{DType, Layout, Pixels};
use crate::rng::SampleRng;
use crate::schema::expect_image;
use crate::value::{smallvec, Value, ValueType, Values};

use super::{
    single_image, ArgError, ArgSpec, ArgType, Args, Backends, ColorJitterParams, ImageShape,
    OpParams, OpSchema, Operator, PortSpec, SampleContext, SampleKey, Setup, SetupInput,
};

#[cfg(test)]
pub(crate) mod tests;

/// Schema of `color_jitter`.
pub static SCHEMA: OpSchema = OpSchema {
    kind: "color_jitter",
    doc: "Randomly changes brightness, contrast, saturation and hue of 8-bit RGB HWC images, in \
          a random order, like torchvision's ColorJitter on PIL images (bit-exact with Pillow). \
          Each factor is drawn uniformly from [max(0, 1 - v), 1 + v] (hue: a shift in [-v, v] \
          turns); an argument of 0 disables that adjustment. Place it before `normalize`.",
    inputs: &[PortSpec {
        name: "images",
        doc: "u8 HWC RGB images",
    }],
    outputs: &[PortSpec {
        name: "images",
        doc: "u8 HWC RGB images",
    }],
    args: &[
        ArgSpec {
            name: "brightness",
            ty: ArgType::Float { min: 0.0, max: 1e6 },
            default: Some("0.0"),
            doc: "brightness factor drawn from [max(0, 1 - v), 1 + v]; 0 = off",
        },
        ArgSpec {
            name: "contrast",
            ty: ArgType::Float { min: 0.0, max: 1e6 },
            default: Some("0.0"),
            doc: "contrast factor drawn from [max(0, 1 - v), 1 + v]; 0 = off",
        },
        ArgSpec {
            name: "saturation",
            ty: ArgType::Float { min: 0.0, max: 1e6 },
            default: Some("0.0"),
            doc: "saturation factor drawn from [max(0, 1 - v), 1 + v]; 0 = off",
        },
        ArgSpec {
            name: "hue",
            ty: ArgType::Float { min: 0.0, max: 0.5 },
            default: Some("0.0"),
            doc: "hue shift (in turns) drawn from [-v, v]; 0 = off",
        },
    ],
    aliases: &[],
    backends: Backends::CpuAndGpu,
};

/// The built operator: the jitter strengths as given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ColorJitter {
    /// Brightness strength `v` (factor in `[max(0, 1 - v), 1 + v]`; 0 = off).
    pub brightness: f64,
    /// Contrast strength (same form as brightness).
    pub contrast: f64,
    /// Saturation strength (same form as brightness).
    pub saturation: f64,
    /// Hue strength in `[0, 0.5]` (shift in `[-v, v]`; 0 = off).
    pub hue: f64,
}

/// The random choice for one sample. `None` = adjustment disabled (skipped entirely).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JitterParams {
    /// Application order, as indices 0 = brightness, 1 = contrast, 2 = saturation, 3 = hue.
    pub order: [u8; 4],
    /// Brightness factor.
    pub brightness: Option<f64>,
    /// Contrast factor.
    pub contrast: Option<f64>,
    /// Saturation factor.
    pub saturation: Option<f64>,
    /// Hue shift in turns, in `[-0.5, 0.5]`.
    pub hue: Option<f64>,
}

impl JitterParams {
    /// What is recorded for the batch: disabled factors as 1.0 (hue as 0.0).
    pub fn to_op_params(&self) -> OpParams {
        OpParams::ColorJitter(ColorJitterParams {
            order: self.order,
            brightness: self.brightness.unwrap_or(1.0),
            contrast: self.contrast.unwrap_or(1.0),
            saturation: self.saturation.unwrap_or(1.0),
            hue: self.hue.unwrap_or(0.0),
        })
    }
}

/// Builds the operator from validated arguments.
pub fn build(args: &Args) -> Result<Box<dyn Operator>, ArgError> {
    Ok(Box::new(ColorJitter::from_args(args)?))
}

impl ColorJitter {
    /// The operator from validated arguments (defaults filled in).
    pub fn from_args(args: &Args) -> Result<ColorJitter, ArgError> {
        ColorJitter::new(
            args.float("brightness"),
            args.float("contrast"),
            args.float("saturation"),
            args.float("hue"),
        )
    }

    /// Checks the strengths (finite, ≥ 0, hue ≤ 0.5) and builds the operator.
    pub fn new(
        brightness: f64,
        contrast: f64,
        saturation: f64,
        hue: f64,
    ) -> Result<ColorJitter, ArgError> {
        for (name, v) in [
            ("brightness", brightness),
            ("contrast", contrast),
            ("saturation", saturation),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(
                    ArgError::arg(name, format!("argument '{name}' = {v} must be ≥ 0"))
                        .with_help("use 0 to disable it, or e.g. 0.4"),
                );
            }
        }
        if !(0.0..=0.5).contains(&hue) {
            return Err(ArgError::arg(
                "hue",
                format!("argument 'hue' = {hue} must be in [0, 0.5]"),
            )
            .with_help("use 0 to disable it, or e.g. 0.1"));
        }
        Ok(ColorJitter {
            brightness,
            contrast,
            saturation,
            hue,
        })
    }

    /// The random choice for one sample (see the module docs for the exact draws).
    pub fn choose(&self, rng: &mut SampleRng) -> JitterParams {
        let mut order = [0u8, 1, 2, 3];
        rng.shuffle(&mut order);
        let (ub, uc, us, uh) = (rng.uniform(), rng.uniform(), rng.uniform(), rng.uniform());
        let factor = |v: f64, u: f64| {
            (v > 0.0).then(|| {
                let lo = (1.0 - v).max(0.0);
                lo + ((1.0 + v) - lo) * u
            })
        };
        JitterParams {
            order,
            brightness: factor(self.brightness, ub),
            contrast: factor(self.contrast, uc),
            saturation: factor(self.saturation, us),
            hue: (self.hue > 0.0).then(|| -self.hue + (2.0 * self.hue) * uh),
        }
    }

    /// The choice back from what was recorded: an adjustment is enabled exactly when its
    /// strength is not 0, so the neutral values recorded for disabled ones are dropped again
    /// (a hue shift of 0 that is enabled still converts through HSV, one that is disabled
    /// does not).
    pub fn from_recorded(&self, p: &ColorJitterParams) -> JitterParams {
        JitterParams {
            order: p.order,
            brightness: (self.brightness > 0.0).then_some(p.brightness),
            contrast: (self.contrast > 0.0).then_some(p.contrast),
            saturation: (self.saturation > 0.0).then_some(p.saturation),
            hue: (self.hue > 0.0).then_some(p.hue),
        }
    }

    /// Checks that `s` is a u8 HWC RGB image, the only input this operator takes.
    fn check_input(s: &ImageShape) -> Result<(), String> {
        if s.layout != Layout::Hwc || s.channels != 3 {
            return Err(format!(
                "needs HWC RGB images, got {} with {} channels",
                s.layout.name(),
                s.channels
            ));
        }
        if s.dtype != DType::U8 {
            return Err(format!(
                "needs u8 images, got {}; place it before normalize and cast",
                s.dtype.name()
            ));
        }
        Ok(())
    }
}

impl Operator for ColorJitter {
    /// Draws the order and the four factors (see the module docs for the exact draws).
    fn setup(&self, input: SetupInput<'_>, sample: &SampleKey) -> Result<Setup, String> {
        let s = input.image()?;
        ColorJitter::check_input(&s)?;
        Ok(Setup {
            output: s,
            params: Some(self.choose(&mut sample.rng()).to_op_params()),
        })
    }

    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
        let t = expect_image("color_jitter", inputs)?;
        let rgb =
            t.dtype == DType::U8 && t.layout == Layout::Hwc && matches!(t.channels, Some(3) | None);
        if !rgb {
            // What to change depends on what is wrong: the colour is the decoder's, the rest
            // comes from operators that must follow color_jitter.
            let fix = match t.channels {
                Some(c) if c != 3 => {
                    "decode in colour (`color = \"rgb\"` on the decode operator), or leave \
                     color_jitter out"
                }
                _ => "place it before normalize, cast and layout",
            };
            return Err(format!(
                "'color_jitter' needs u8 HWC RGB (3-channel) images, but its input carries {}; \
                 {fix}",
                ValueType::Image(t)
            ));
        }
        Ok(vec![ValueType::Image(t)])
    }

    fn run_cpu(
        &self,
        inputs: Values,
        ctx: &mut SampleContext<'_>,
    ) -> Result<Values, SampleErrorKind> {
        let mut im = single_image(inputs, ctx)?;
        let s = ctx.setup(self, SetupInput::Image(ImageShape::of(&im)))?;
        let Some(recorded) = s.color_jitter() else {
            unreachable!("color_jitter's setup draws factors")
        };
        let p = self.from_recorded(recorded);
        if let Pixels::U8(d) = &mut im.pixels {
            apply(d, &p);
        }
        Ok(smallvec![Value::Image(im)])
    }

    fn gpu(&self) -> Option<&dyn super::GpuOperator> {
        Some(self)
    }
}

/// Applies every enabled adjustment of `p` in `p.order` to an HWC RGB buffer, in place.
/// A trailing partial pixel (length not a multiple of 3) is left unchanged.
pub fn apply(rgb: &mut [u8], p: &JitterParams) {
    for &k in &p.order {
        match k {
            0 => {
                if let Some(f) = p.brightness {
                    adjust_brightness(rgb, f);
                }
            }
            1 => {
                if let Some(f) = p.contrast {
                    adjust_contrast(rgb, f);
                }
            }
            2 => {
                if let Some(f) = p.saturation {
                    adjust_saturation(rgb, f);
                }
            }
            _ => {
                if let Some(h) = p.hue {
                    adjust_hue(rgb, h);
                }
            }
        }
    }
}

/// Pillow's blend of one byte: `a` (degenerate) towards `b` (image) by `alpha` (f32).
/// `t = a + alpha * (b - a)` (f32 multiply, then f32 add, no FMA), clipped to [0, 255], truncated.
#[inline]
pub fn blend(a: u8, b: u8, alpha: f32) -> u8 {
    let d = f32::from(i16::from(b) - i16::from(a));
    let t = f32::from(a) + alpha * d;
    if t <= 0.0 {
        0
    } else if t >= 255.0 {
        255
    } else {
        t as u8
    }
}

/// Pillow's RGB → L: `(R * 19595 + G * 38470 + B * 7471 + 0x8000) >> 16`.
#[inline]
pub fn luma(r: u8, g: u8, b: u8) -> u8 {
    ((u32::from(r) * 19595 + u32::from(g) * 38470 + u32::from(b) * 7471 + 0x8000) >> 16) as u8
}

/// The byte table of `blend(a, x, alpha)` for every `x`.
fn blend_table(a: u8, alpha: f32) -> [u8; 256] {
    let mut t = [0u8; 256];
    for (x, o) in t.iter_mut().enumerate() {
        *o = blend(a, x as u8, alpha);
    }
    t
}

/// Brightness (`ImageEnhance.Brightness`): `blend(0, x, factor)` per byte, in place.
pub fn adjust_brightness(rgb: &mut [u8], factor: f64) {
    let t = blend_table(0, factor as f32);
    for x in rgb.iter_mut() {
        *x = t[usize::from(*x)];
    }
}

/// The contrast "degenerate" gray: `floor((2 S + n) / (2 n))`, `S` the sum of [`luma`] over
/// the `n` whole pixels (Pillow: `int(ImageStat.Stat(img.convert("L")).mean[0] + 0.5)`); 0 when empty.
pub fn contrast_mean(rgb: &[u8]) -> u8 {
    let mut sum: u64 = 0;
    let mut n: u64 = 0;
    for p in rgb.chunks_exact(3) {
        sum += u64::from(luma(p[0], p[1], p[2]));
        n += 1;
    }
    if n == 0 {
        return 0;
    }
    ((2 * sum + n) / (2 * n)) as u8
}

/// Contrast (`ImageEnhance.Contrast`): `blend(contrast_mean, x, factor)` per byte, in place.
pub fn adjust_contrast(rgb: &mut [u8], factor: f64) {
    let m = contrast_mean(rgb);
    let t = blend_table(m, factor as f32);
    for x in rgb.iter_mut() {
        *x = t[usize::from(*x)];
    }
}

/// Saturation (`ImageEnhance.Color`): per pixel `blend(luma, x, factor)` per channel, in place.
pub fn adjust_saturation(rgb: &mut [u8], factor: f64) {
    let alpha = factor as f32;
    for p in rgb.chunks_exact_mut(3) {
        let l = luma(p[0], p[1], p[2]);
        p[0] = blend(l, p[0], alpha);
        p[1] = blend(l, p[1], alpha);
        p[2] = blend(l, p[2], alpha);
    }
}

/// The byte added (mod 256) to Pillow's H channel for a hue shift `hue` in turns:
/// `i32(trunc(hue * 255.0))` (f64 product) reduced mod 256, as torchvision's
/// `np.int32(hue * 255).astype(np.uint8)`; e.g. -0.5 → 129, -0.2 → 205, 0.3 → 76.
#[inline]
pub fn hue_shift(hue: f64) -> u8 {
    ((hue * 255.0) as i32) as u8
}

/// Hue (torchvision `adjust_hue` on PIL): RGB → HSV, `H += hue_shift(hue)` (wrapping), HSV → RGB.
///
/// Gives exactly `hsv_to_rgb(H + shift, S, V)` of `rgb_to_hsv(R, G, B)`, through lookup tables
/// built once per process from those two functions.
pub fn adjust_hue(rgb: &mut [u8], hue: f64) {
    let shift = hue_shift(hue);
    let t = HsvTables::get();
    for p in rgb.chunks_exact_mut(3) {
        let [h, s, v] = t.rgb_to_hsv(p[0], p[1], p[2]);
        let [r, g, b] = t.hsv_to_rgb(h.wrapping_add(shift), s, v);
        p[0] = r;
        p[1] = g;
        p[2] = b;
    }
}

/// Tables that make [`rgb_to_hsv`] and [`hsv_to_rgb`] cheap; every entry is computed by those
/// functions, so the results are identical.
///
/// `rgb_to_hsv` only depends on which channel is the (first) maximum and on the differences
/// `max - x`: H is tabulated by (max channel, the two other differences), S by
/// (`max - min`, `max`). For `hsv_to_rgb`, `i mod 6` and `f` depend on H only and `fs` on S only.
struct HsvTables {
    /// H by `case * 65536 + (max - x) * 256 + (max - y)`; case 0: R is max (x = G, y = B),
    /// 1: G (x = R, y = B), 2: B (x = R, y = G).
    hue: Vec<u8>,
    /// S by `(max - min) * 256 + max`.
    sat: Vec<u8>,
    /// `i mod 6` by H.
    sector: [u8; 256],
    /// `f` by H.
    frac: [f32; 256],
    /// `fs` by S.
    fs: [f32; 256],
}

impl HsvTables {
    fn get() -> &'static HsvTables {
        static TABLES: std::sync::OnceLock<HsvTables> = std::sync::OnceLock::new();
        TABLES.get_or_init(HsvTables::build)
    }

    fn build() -> HsvTables {
        let mut hue = vec![0u8; 3 * 65536];
        for (idx, e) in hue.iter_mut().enumerate() {
            let (case, dx, dy) = (idx >> 16, ((idx >> 8) & 255) as u8, (idx & 255) as u8);
            let (x, y) = (255 - dx, 255 - dy);
            let px = match case {
                0 => [255, x, y],
                1 => [x, 255, y],
                _ => [x, y, 255],
            };
            *e = rgb_to_hsv(px[0], px[1], px[2])[0];
        }
        let mut sat = vec![0u8; 65536];
        for (idx, e) in sat.iter_mut().enumerate() {
            let (cr, max) = ((idx >> 8) as u8, (idx & 255) as u8);
            if cr <= max {
                *e = rgb_to_hsv(max, max - cr, max - cr)[1];
            }
        }
        let mut sector = [0u8; 256];
        let mut frac = [0f32; 256];
        let mut fs = [0f32; 256];
        for k in 0..256 {
            let x = k as f64 * 6.0 / 255.0;
            let i = x as i32;
            sector[k] = (i % 6) as u8;
            frac[k] = (x - f64::from(i)) as f32;
            fs[k] = (k as f64 / 255.0) as f32;
        }
        HsvTables {
            hue,
            sat,
            sector,
            frac,
            fs,
        }
    }

    #[inline]
    fn rgb_to_hsv(&self, r: u8, g: u8, b: u8) -> [u8; 3] {
        let max = r.max(g).max(b);
        let min = r.min(g).min(b);
        let (case, x, y) = if r == max {
            (0, g, b)
        } else if g == max {
            (1, r, b)
        } else {
            (2, r, g)
        };
        let hi = (case << 16) | (usize::from(max - x) << 8) | usize::from(max - y);
        let si = (usize::from(max - min) << 8) | usize::from(max);
        // Gray (max == min): S = 0 from the table, and H must be 0.
        let h = if max == min { 0 } else { self.hue[hi] };
        [h, self.sat[si], max]
    }

    #[inline]
    fn hsv_to_rgb(&self, h: u8, s: u8, v: u8) -> [u8; 3] {
        if s == 0 {
            return [v, v, v];
        }
        let f = self.frac[usize::from(h)];
        let fs = self.fs[usize::from(s)];
        let vf = f64::from(v);
        let p = round_half_away(vf * (1.0 - f64::from(fs)));
        let q = round_half_away(vf * (1.0 - f64::from(fs * f)));
        let t = round_half_away(vf * (1.0 - f64::from(fs) * (1.0 - f64::from(f))));
        match self.sector[usize::from(h)] {
            0 => [v, t, p],
            1 => [q, v, p],
            2 => [p, v, t],
            3 => [p, q, v],
            4 => [t, p, v],
            _ => [v, p, q],
        }
    }
}

/// Pillow's `rgb2hsv_row` (`src/libImaging/Convert.c`), exactly. With `max`, `min` of R, G, B:
///
/// ```text
/// if max == min: return (0, 0, max)
/// cr = f32(max - min); s = cr / f32(max)                               // f32
/// rc = f32(max - R) / cr; gc = f32(max - G) / cr; bc = f32(max - B) / cr  // f32
/// h = R == max ? bc - gc                                                // f32
///   : G == max ? f32((2.0 + f64(rc)) - f64(bc))                         // f64, rounded to f32
///   :            f32((4.0 + f64(gc)) - f64(rc))
/// h = f32(fmod(f64(h) / 6.0 + 1.0, 1.0))                                 // f64, rounded to f32
/// H = clamp(trunc(f64(h) * 255.0), 0, 255); S = clamp(trunc(f64(s) * 255.0), 0, 255); V = max
/// ```
#[inline]
pub fn rgb_to_hsv(r: u8, g: u8, b: u8) -> [u8; 3] {
    let maxc = r.max(g).max(b);
    let minc = r.min(g).min(b);
    if maxc == minc {
        return [0, 0, maxc];
    }
    let cr = f32::from(maxc - minc);
    let s = cr / f32::from(maxc);
    let rc = f32::from(maxc - r) / cr;
    let gc = f32::from(maxc - g) / cr;
    let bc = f32::from(maxc - b) / cr;
    let h: f32 = if r == maxc {
        bc - gc
    } else if g == maxc {
        ((2.0 + f64::from(rc)) - f64::from(bc)) as f32
    } else {
        ((4.0 + f64::from(gc)) - f64::from(rc)) as f32
    };
    // fmod(y, 1.0) for y in [5/6, 11/6]: y - 1.0 is exact when y >= 1 (Sterbenz), so this is
    // the same value without a libm call.
    let y = f64::from(h) / 6.0 + 1.0;
    let h = (if y >= 1.0 { y - 1.0 } else { y }) as f32;
    [
        clip8((f64::from(h) * 255.0) as i32),
        clip8((f64::from(s) * 255.0) as i32),
        maxc,
    ]
}

/// Pillow's `hsv2rgb` (`src/libImaging/Convert.c`), exactly:
///
/// ```text
/// if S == 0: return (V, V, V)
/// x  = f64(H) * 6.0 / 255.0                      // f64: multiply, then divide
/// i  = floor(x)                                  // 0..=6
/// f  = f32(x - f64(i))                           // f64, rounded to f32
/// fs = f32(f64(S) / 255.0)                       // f64 divide, rounded to f32
/// p  = round(f64(V) * (1.0 - f64(fs)))                          // f64; round = half away from 0
/// q  = round(f64(V) * (1.0 - f64(fs * f)))                      // fs * f is an f32 product
/// t  = round(f64(V) * (1.0 - f64(fs) * (1.0 - f64(f))))         // f64
/// (each clamped to 0..=255), then by i mod 6:
/// 0: (V, t, p)  1: (q, V, p)  2: (p, V, t)  3: (p, q, V)  4: (t, p, V)  5: (V, p, q)
/// ```
///
/// No FMA contraction anywhere (CUDA: `__dmul_rn`, `__dadd_rn`, `__fmul_rn`).
#[inline]
pub fn hsv_to_rgb(h: u8, s: u8, v: u8) -> [u8; 3] {
    if s == 0 {
        return [v, v, v];
    }
    let x = f64::from(h) * 6.0 / 255.0;
    let i = x as i32; // floor, as x >= 0
    let f = (x - f64::from(i)) as f32;
    let fs = (f64::from(s) / 255.0) as f32;
    let vf = f64::from(v);
    let p = round_half_away(vf * (1.0 - f64::from(fs)));
    let q = round_half_away(vf * (1.0 - f64::from(fs * f)));
    let t = round_half_away(vf * (1.0 - f64::from(fs) * (1.0 - f64::from(f))));
    match i % 6 {
        0 => [v, t, p],
        1 => [q, v, p],
        2 => [p, v, t],
        3 => [p, q, v],
        4 => [t, p, v],
        _ => [v, p, q],
    }
}

/// C `round` (half away from zero) of `x` in `[0, 255]`, clamped to a byte. Equal to
/// `x.round()` there, without a libm call: `x - trunc(x)` is exact.
#[inline]
fn round_half_away(x: f64) -> u8 {
    let i = x as i32;
    clip8(if x - f64::from(i) >= 0.5 { i + 1 } else { i })
}

#[inline]
fn clip8(x: i32) -> u8 {
    x.clamp(0, 255) as u8
}
