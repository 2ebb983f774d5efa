//! One sample of the fused chain ([`FusedSample`]: window → resize with antialias → crop of
//! the resized image → flip → color jitter → normalize → cast → layout) and the kernel
//! descriptor built from it.
//!
//! Tap tables are computed on the host by the same Rust functions the CPU path uses
//! ([`whole_axis_taps`], [`nearest_indices`], [`vertical_first`]) and uploaded once per batch,
//! so the integer arithmetic on the device sees exactly the CPU's weights. The kernel
//! reproduces Pillow's u8 rounding between the two passes by computing, per output tile, the
//! rounded first-pass lines the tile needs into shared memory and summing the second pass
//! from them (see `kernels/common/resample.cuh`): `taps_v + taps_h` reads per output element,
//! as the CPU's two passes, and no scratch image in device memory. (A tile whose lines are
//! sparse, a shrink without antialias, recomputes per pixel instead, which is cheaper there.)

use crate::cuda::desc::{dtype, fused_flags, FusedDesc, JitterDesc};
use crate::error::Error;
use crate::image::{DType, Image, Layout};
use crate::resample::{nearest_indices, vertical_first, whole_axis_taps, Interp, Taps};

/// A window `(top, left, height, width)` in pixels.
pub type Rect = (usize, usize, usize, usize);

/// What the fused chain does to one sample of a u8 HWC source image: take `window`, resample
/// it to `out_h` × `out_w`, keep the part `keep` of that (a crop after the resize), mirror,
/// jitter, normalize, convert to `dtype` and write in `layout`.
///
/// A source stored before its EXIF orientation (as nvJPEG decodes it) is read through
/// `orientation`: `window` and everything after it are in the displayed image, which is what
/// the CPU path decodes, so both paths compute the same pixels without a rotation pass.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FusedSample {
    /// EXIF orientation (1..=8) of the source as stored; 1 = read as is.
    pub orientation: u8,
    /// Window (top, left, height, width) inside the source image as displayed.
    pub window: Rect,
    /// Rows the window is resampled to.
    pub out_h: usize,
    /// Columns the window is resampled to.
    pub out_w: usize,
    /// The part of the resampled window that is output (top, left, height, width inside
    /// `out_h` × `out_w`): a crop after the resize, computed without resampling the rest;
    /// `None` = all of it.
    pub keep: Option<Rect>,
    /// Interpolation.
    pub interp: Interp,
    /// Widen the bilinear filter when shrinking.
    pub antialias: bool,
    /// Mirror left–right (after resizing).
    pub flip_h: bool,
    /// Mirror top–bottom (after resizing).
    pub flip_v: bool,
    /// Color jitter (after the flip, on the u8 pixels); `None` = none.
    pub jitter: Option<JitterSample>,
    /// Per-channel `(mean, 1 / std)` in f32, as `Normalize` holds them; `None` = no normalize.
    pub normalize: Option<([f32; 4], [f32; 4])>,
    /// Output element type (u8 only without normalize, or as `cast` to u8 after it).
    pub dtype: DType,
    /// Output layout.
    pub layout: Layout,
}

impl FusedSample {
    /// A plain resize of `window` to `out_h` × `out_w`, u8 HWC output.
    pub fn resize(
        window: Rect,
        out_h: usize,
        out_w: usize,
        interp: Interp,
        antialias: bool,
    ) -> Self {
        FusedSample {
            orientation: 1,
            window,
            out_h,
            out_w,
            keep: None,
            interp,
            antialias,
            flip_h: false,
            flip_v: false,
            jitter: None,
            normalize: None,
            dtype: DType::U8,
            layout: Layout::Hwc,
        }
    }

    /// The output's (rows, columns): the kept part of the resampled window.
    pub fn output_size(&self) -> (usize, usize) {
        self.keep.map_or((self.out_h, self.out_w), |k| (k.2, k.3))
    }

    /// `(mean, inv_std)` for the descriptor from `Normalize`'s one-or-per-channel values.
    pub fn normalize_params(
        mean: &[f32],
        inv_std: &[f32],
        channels: usize,
    ) -> Result<([f32; 4], [f32; 4]), Error> {
        let mut m = [0f32; 4];
        let mut s = [0f32; 4];
        for (dst, src, name) in [(&mut m, mean, "mean"), (&mut s, inv_std, "std")] {
            match src.len() {
                1 => dst.fill(src[0]),
                n if n == channels && n <= 4 => dst[..n].copy_from_slice(src),
                n => {
                    return Err(Error::Cuda(format!(
                        "normalize: {n} '{name}' values for {channels} channels (GPU path: 1, or one per channel up to 4)"
                    )))
                }
            }
        }
        Ok((m, s))
    }
}

/// One sample's color jitter as the jitter kernels take it: the adjustments in `order`
/// (0 brightness, 1 contrast, 2 saturation, 3 hue), each `None` when disabled. Built by the
/// `color_jitter` operator from the factors its setup drew (see that operator for the
/// arithmetic).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JitterSample {
    /// Application order.
    pub order: [u8; 4],
    /// Brightness blend factor.
    pub brightness: Option<f32>,
    /// Contrast blend factor.
    pub contrast: Option<f32>,
    /// Saturation blend factor.
    pub saturation: Option<f32>,
    /// Byte added to H (mod 256).
    pub hue_shift: Option<u8>,
}

impl JitterSample {
    /// No adjustment (every step disabled).
    pub const NONE: JitterSample = JitterSample {
        order: [0, 1, 2, 3],
        brightness: None,
        contrast: None,
        saturation: None,
        hue_shift: None,
    };

    /// The descriptor for an image of `pixels` pixels (address left 0).
    pub fn desc(&self, pixels: usize) -> Result<JitterDesc, Error> {
        if self.order.iter().any(|&k| k > 3) {
            return Err(Error::Cuda(format!(
                "bad adjustment order {:?}",
                self.order
            )));
        }
        let mut d = JitterDesc {
            pixels: u32::try_from(pixels)
                .map_err(|_| Error::Cuda(format!("pixel count {pixels} is too large")))?,
            order: u32::from_le_bytes(self.order),
            ..JitterDesc::default()
        };
        if let Some(f) = self.brightness {
            d.enabled |= 1;
            d.brightness = f;
        }
        if let Some(f) = self.contrast {
            d.enabled |= 2;
            d.contrast = f;
        }
        if let Some(f) = self.saturation {
            d.enabled |= 4;
            d.saturation = f;
        }
        if let Some(h) = self.hue_shift {
            d.enabled |= 8;
            d.hue_shift = u32::from(h);
        }
        Ok(d)
    }
}

/// Appends outputs `keep` of `t` to `table`, their source indices `shift` further along
/// (`t.subset(keep).shifted(shift)`, without building it: this runs for every sample):
/// starts, lengths, then weights. Returns their offset in the table and the tap count.
fn push_taps(
    table: &mut Vec<i32>,
    t: &Taps,
    keep: std::ops::Range<usize>,
    shift: usize,
) -> Result<(u32, u32), Error> {
    let off = u32::try_from(table.len()).map_err(|_| Error::Cuda("tap table too large".into()))?;
    let shift = shift as u32;
    table.extend(t.start[keep.clone()].iter().map(|&s| (s + shift) as i32));
    table.extend(t.len[keep.clone()].iter().map(|&n| n as i32));
    table.extend_from_slice(&t.weights[keep.start * t.ksize..keep.end * t.ksize]);
    Ok((off, t.ksize as u32))
}

fn push_indices(table: &mut Vec<i32>, v: &[u32]) -> Result<u32, Error> {
    let off = u32::try_from(table.len()).map_err(|_| Error::Cuda("tap table too large".into()))?;
    table.extend(v.iter().map(|&s| s as i32));
    Ok(off)
}

/// The size and row pitch of a u8 HWC source image, as stored (before any EXIF
/// orientation the chain reads it through).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceDims {
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
    /// Channels (1..=4).
    pub channels: usize,
    /// Bytes from one row to the next.
    pub pitch: usize,
}

impl SourceDims {
    /// The dimensions of a host image packed as the decoder leaves it, if it is u8 HWC.
    pub fn of(im: &Image) -> Result<SourceDims, Error> {
        if im.dtype() != DType::U8 || im.layout != Layout::Hwc {
            return Err(Error::Cuda(format!(
                "the fused chain takes u8 HWC images, got {} {}",
                im.dtype().name(),
                im.layout.name()
            )));
        }
        Ok(SourceDims {
            height: im.height,
            width: im.width,
            channels: im.channels,
            pitch: im.width * im.channels,
        })
    }
}

/// The descriptor of one sample (addresses left 0) and its tables appended to `table`.
/// Errors on what the CPU path also rejects (window outside the image, empty sizes) and on
/// what the fused kernel does not take (more than 4 channels). The descriptor holds the
/// resampling, flip, normalize, dtype and layout; the jitter is applied between launches
/// (see `launcher::JitterStages`).
pub fn build_desc(
    im: SourceDims,
    s: &FusedSample,
    table: &mut Vec<i32>,
) -> Result<FusedDesc, Error> {
    if !(1..=4).contains(&im.channels) {
        return Err(Error::Cuda(format!(
            "fused resize takes 1 to 4 channels, got {}",
            im.channels
        )));
    }
    if im.pitch < im.width * im.channels {
        return Err(Error::Cuda(format!(
            "pitch {} below the row size",
            im.pitch
        )));
    }
    if !(1..=8).contains(&s.orientation) {
        return Err(Error::Cuda(format!(
            "EXIF orientation {} (1 to 8)",
            s.orientation
        )));
    }
    // The window is in the displayed image, whose axes orientations 5 to 8 swap.
    let (shown_h, shown_w) = if crate::decode::exif::swaps_axes(s.orientation) {
        (im.width, im.height)
    } else {
        (im.height, im.width)
    };
    let (top, left, wh, ww) = s.window;
    if top.checked_add(wh).is_none_or(|e| e > shown_h)
        || left.checked_add(ww).is_none_or(|e| e > shown_w)
    {
        return Err(Error::Cuda(format!(
            "window {wh}x{ww} at ({top}, {left}) is outside the {shown_h}x{shown_w} image"
        )));
    }
    if wh == 0 || ww == 0 || s.out_h == 0 || s.out_w == 0 {
        return Err(Error::Cuda(format!(
            "empty window {wh}x{ww} or output {}x{}",
            s.out_h, s.out_w
        )));
    }
    // The kept part of the resampled window: whole rows `kt..kt + kh`, columns `kl..kl + kw`.
    let (kt, kl, kh, kw) = s.keep.unwrap_or((0, 0, s.out_h, s.out_w));
    if kt.checked_add(kh).is_none_or(|e| e > s.out_h)
        || kl.checked_add(kw).is_none_or(|e| e > s.out_w)
        || kh == 0
        || kw == 0
    {
        return Err(Error::Cuda(format!(
            "kept part {kh}x{kw} at ({kt}, {kl}) is not inside the resampled {}x{}",
            s.out_h, s.out_w
        )));
    }
    let u = |v: usize| u32::try_from(v).map_err(|_| Error::Cuda(format!("size {v} too large")));
    let mut d = FusedDesc {
        src_pitch: u(im.pitch)?,
        src_h: u(im.height)?,
        src_w: u(im.width)?,
        channels: im.channels as u32,
        win_top: u(top)?,
        win_left: u(left)?,
        win_h: u(wh)?,
        win_w: u(ww)?,
        out_h: u(kh)?,
        out_w: u(kw)?,
        out_dtype: dtype::code(s.dtype),
        orientation: u32::from(s.orientation),
        ..FusedDesc::default()
    };
    match s.interp {
        Interp::Bilinear => {
            // Taps of the whole resize restricted to the kept outputs, so the pass order and
            // skipped passes are those of the whole resize (as the CPU's resize → crop).
            if s.out_w != ww {
                let t = whole_axis_taps(ww, s.out_w, s.antialias);
                (d.h_off, d.h_ksize) = push_taps(table, &t, kl..kl + kw, left)?;
                d.flags |= fused_flags::H_PASS;
            } else {
                // No horizontal pass: the kernel reads columns `win_left + x`.
                d.win_left = u(left + kl)?;
            }
            if s.out_h != wh {
                let t = whole_axis_taps(wh, s.out_h, s.antialias);
                (d.v_off, d.v_ksize) = push_taps(table, &t, kt..kt + kh, top)?;
                d.flags |= fused_flags::V_PASS;
            } else {
                d.win_top = u(top + kt)?;
            }
            if vertical_first(wh, ww, s.out_h, s.out_w) {
                d.flags |= fused_flags::VERTICAL_FIRST;
            }
        }
        Interp::Nearest => {
            let xs: Vec<u32> = nearest_indices(ww, 0.0, ww as f32, s.out_w)[kl..kl + kw]
                .iter()
                .map(|&x| x + left as u32)
                .collect();
            let ys: Vec<u32> = nearest_indices(wh, 0.0, wh as f32, s.out_h)[kt..kt + kh]
                .iter()
                .map(|&y| y + top as u32)
                .collect();
            d.h_off = push_indices(table, &xs)?;
            d.v_off = push_indices(table, &ys)?;
            d.flags |= fused_flags::NEAREST;
        }
    }
    if s.flip_h {
        d.flags |= fused_flags::FLIP_H;
    }
    if s.flip_v {
        d.flags |= fused_flags::FLIP_V;
    }
    if let Some((m, inv)) = s.normalize {
        d.flags |= fused_flags::NORMALIZE;
        d.mean = m;
        d.inv_std = inv;
    }
    if s.layout == Layout::Chw {
        d.flags |= fused_flags::CHW;
    }
    Ok(d)
}
