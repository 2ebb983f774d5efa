//! Helpers shared by unit tests (compiled for tests only).
#![allow(dead_code)]

pub mod skip;

pub use skip::{shared_data, shared_data_part};

/// A smooth, deterministic RGB test pattern (h × w × 3, row-major HWC).
pub fn pattern_rgb(h: usize, w: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(h * w * 3);
    for y in 0..h {
        for x in 0..w {
            v.push(((x * 255) / w.max(1)) as u8);
            v.push(((y * 255) / h.max(1)) as u8);
            v.push((((x + y) * 37) % 256) as u8);
        }
    }
    v
}

/// Chroma subsampling for [`encode_jpeg`] fixtures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sub {
    /// No subsampling.
    S444,
    /// Half horizontal.
    S422,
    /// Half both ways.
    S420,
    /// Half vertical.
    S440,
    /// Quarter horizontal.
    S411,
}

/// Options for [`encode_jpeg_opts`].
#[derive(Debug, Clone)]
pub struct JpegOpts {
    /// Encoder quality (1..=100).
    pub quality: u8,
    /// Chroma subsampling (ignored for gray).
    pub sub: Sub,
    /// Progressive instead of baseline.
    pub progressive: bool,
    /// TIFF-structured EXIF block to embed in an APP1 segment.
    pub exif_tiff: Option<Vec<u8>>,
}

/// Encodes an 8-bit HWC buffer (`c` = 1 gray or 3 RGB) as a baseline JPEG.
pub fn encode_jpeg(src: &[u8], h: usize, w: usize, c: usize, quality: u8, sub: Sub) -> Vec<u8> {
    encode_jpeg_opts(
        src,
        h,
        w,
        c,
        &JpegOpts {
            quality,
            sub,
            progressive: false,
            exif_tiff: None,
        },
    )
}

/// Encodes an 8-bit HWC buffer (`c` = 1 or 3) as a JPEG with the given options.
pub fn encode_jpeg_opts(src: &[u8], h: usize, w: usize, c: usize, o: &JpegOpts) -> Vec<u8> {
    use jpeg_encoder::{ColorType, Encoder, SamplingFactor};
    let mut out = Vec::new();
    let mut enc = Encoder::new(&mut out, o.quality);
    enc.set_sampling_factor(match o.sub {
        Sub::S444 => SamplingFactor::R_4_4_4,
        Sub::S422 => SamplingFactor::R_4_2_2,
        Sub::S420 => SamplingFactor::R_4_2_0,
        Sub::S440 => SamplingFactor::R_4_4_0,
        Sub::S411 => SamplingFactor::R_4_1_1,
    });
    enc.set_progressive(o.progressive);
    if let Some(t) = &o.exif_tiff {
        enc.add_exif_metadata(t).expect("exif fits");
    }
    let ct = if c == 1 {
        ColorType::Luma
    } else {
        ColorType::Rgb
    };
    enc.encode(src, w as u16, h as u16, ct)
        .expect("encode jpeg");
    out
}

/// A minimal TIFF block whose IFD0 holds only the orientation tag.
pub fn exif_orientation_tiff(orientation: u16, big_endian: bool) -> Vec<u8> {
    let p16 = |x: u16| {
        if big_endian {
            x.to_be_bytes()
        } else {
            x.to_le_bytes()
        }
    };
    let p32 = |x: u32| {
        if big_endian {
            x.to_be_bytes()
        } else {
            x.to_le_bytes()
        }
    };
    let mut v: Vec<u8> = Vec::new();
    v.extend_from_slice(if big_endian { b"MM" } else { b"II" });
    v.extend_from_slice(&p16(42));
    v.extend_from_slice(&p32(8));
    v.extend_from_slice(&p16(1));
    v.extend_from_slice(&p16(0x0112));
    v.extend_from_slice(&p16(3));
    v.extend_from_slice(&p32(1));
    v.extend_from_slice(&p16(orientation));
    v.extend_from_slice(&p16(0));
    v.extend_from_slice(&p32(0));
    v
}

/// `im` in `layout`, straight from the definition (an element-by-element copy), so tests of
/// one operator need not call another operator to build CHW inputs.
pub fn to_layout(im: &crate::image::Image, layout: crate::image::Layout) -> crate::image::Image {
    use crate::image::{Layout, Pixels};
    fn reorder<T: Copy>(v: &[T], h: usize, w: usize, c: usize, to_chw: bool) -> Vec<T> {
        let mut out = v.to_vec();
        for p in 0..h * w {
            for k in 0..c {
                let (hwc, chw) = (p * c + k, k * h * w + p);
                if to_chw {
                    out[chw] = v[hwc];
                } else {
                    out[hwc] = v[chw];
                }
            }
        }
        out
    }
    if im.layout == layout {
        return im.clone();
    }
    let (h, w, c) = (im.height, im.width, im.channels);
    let to_chw = layout == Layout::Chw;
    let pixels = match &im.pixels {
        Pixels::U8(v) => Pixels::U8(reorder(v, h, w, c, to_chw)),
        Pixels::F16(v) => Pixels::F16(reorder(v, h, w, c, to_chw)),
        Pixels::F32(v) => Pixels::F32(reorder(v, h, w, c, to_chw)),
    };
    crate::image::Image {
        layout,
        pixels,
        ..im.clone()
    }
}

/// Every element of `im` as f32 (exact for every element type).
pub fn to_f32s(im: &crate::image::Image) -> Vec<f32> {
    use crate::image::Pixels;
    match &im.pixels {
        Pixels::U8(v) => v.iter().map(|&x| f32::from(x)).collect(),
        Pixels::F16(v) => v.iter().map(|x| x.to_f32()).collect(),
        Pixels::F32(v) => v.clone(),
    }
}

/// A file of the source tree the tests read at run time (`pipelines/…`, `kernels/`): under
/// `STOKEHOLD_SOURCE_DIR` when set — `gpu-check.sh` sets it to the bundle, which runs on a
/// machine without the build's checkout — else under the checkout the tests were built in.
pub fn source_file(rel: &str) -> std::path::PathBuf {
    match std::env::var_os("STOKEHOLD_SOURCE_DIR") {
        Some(dir) => std::path::PathBuf::from(dir).join(rel),
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel),
    }
}

/// A pipeline file shipped in `pipelines/`, read (not yet validated).
pub fn shipped_pipeline(name: &str) -> crate::pipeline::PipelineSpec {
    let path = source_file(&format!("pipelines/{name}"));
    crate::pipeline::file::load(&path)
        .expect("a shipped pipeline loads")
        .spec
}

/// PSNR in dB of two 8-bit images of the same size (infinite when they are equal), by the
/// formula of the library's comparisons ([`crate::pipeline::compare::psnr`]).
pub fn psnr_u8(a: &[u8], b: &[u8]) -> f64 {
    assert_eq!(a.len(), b.len());
    let sum_sq: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2))
        .sum();
    crate::pipeline::compare::psnr(sum_sq, a.len() as u64, 255.0)
}

/// `im`'s values as `dtype` elements in `layout`: exact from u8 and between floats except
/// f32 → f16 (round to nearest even); float → u8 is not needed by the tests and panics.
pub fn widen(
    im: &crate::image::Image,
    dtype: crate::image::DType,
    layout: crate::image::Layout,
) -> crate::image::Image {
    use crate::image::{DType, Pixels};
    use half::f16;
    let pixels = match (&im.pixels, dtype) {
        (p, d) if p.dtype() == d => p.clone(),
        (Pixels::U8(v), DType::F16) => {
            Pixels::F16(v.iter().map(|&x| f16::from_f32(f32::from(x))).collect())
        }
        (Pixels::U8(v), DType::F32) => Pixels::F32(v.iter().map(|&x| f32::from(x)).collect()),
        (Pixels::F16(v), DType::F32) => Pixels::F32(v.iter().map(|x| x.to_f32()).collect()),
        (Pixels::F32(v), DType::F16) => Pixels::F16(v.iter().map(|&x| f16::from_f32(x)).collect()),
        (p, d) => panic!("widen: {:?} to {d:?} is not a widening", p.dtype()),
    };
    to_layout(
        &crate::image::Image {
            pixels,
            ..im.clone()
        },
        layout,
    )
}

/// The golden file written by scripts/golden/color.py.
pub(crate) fn golden() -> serde_json::Value {
    let text = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/color.json"
    ));
    serde_json::from_str(text).expect("tests/golden/color.json is valid JSON")
}

const SATURATED: [[u8; 3]; 8] = [
    [255, 0, 0],
    [0, 255, 0],
    [0, 0, 255],
    [255, 255, 0],
    [0, 255, 255],
    [255, 0, 255],
    [0, 0, 0],
    [255, 255, 255],
];

/// The golden input image (HWC RGB); same formula as `pattern` in scripts/golden/color.py.
pub(crate) fn golden_input(h: usize, w: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(h * w * 3);
    for y in 0..h {
        for x in 0..w {
            let px: [u8; 3] = if (x * 3 + y) % 13 == 5 {
                SATURATED[(x + y) % 8]
            } else if (x + y) % 11 == 0 {
                [((x * y * 5) % 256) as u8; 3]
            } else {
                std::array::from_fn(|c| ((x * 7 + y * 13 + c * 29 + (x * y) % 17) % 256) as u8)
            };
            v.extend_from_slice(&px);
        }
    }
    v
}

/// How [`encode_rgb_stored_jpeg`] marks its file as RGB, in libjpeg's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RgbMark {
    /// An Adobe APP14 segment with colour transform 0, in place of the JFIF APP0.
    Adobe,
    /// Component ids `R` `G` `B`, and no JFIF APP0.
    ComponentIds,
    /// None: the JFIF APP0 stays, so libjpeg reads the R G B samples as Y Cb Cr (the
    /// control case).
    Jfif,
}

/// A baseline 4:4:4 JPEG whose three components hold `src`'s R, G and B samples as they are
/// (no conversion to Y Cb Cr), marked as `mark` says. `src` is h × w × 3.
pub fn encode_rgb_stored_jpeg(src: &[u8], h: usize, w: usize, mark: RgbMark) -> Vec<u8> {
    use jpeg_encoder::{ColorType, Encoder, SamplingFactor};
    let mut out = Vec::new();
    let mut enc = Encoder::new(&mut out, 95);
    enc.set_sampling_factor(SamplingFactor::R_4_4_4);
    // `Ycbcr` input is written as given: the components are R, G and B.
    enc.encode(src, w as u16, h as u16, ColorType::Ycbcr)
        .expect("encode jpeg");
    // jpeg-encoder writes SOI, then a 16-byte JFIF APP0.
    assert_eq!(&out[2..4], &[0xFF, 0xE0]);
    assert_eq!(&out[6..11], b"JFIF\0");
    let jfif = 2..2 + 2 + 16;
    match mark {
        RgbMark::Jfif => {}
        RgbMark::Adobe => {
            // "Adobe", version 100, flags 0 and 0, transform 0.
            let mut app14 = vec![0xFF, 0xEE, 0x00, 0x0E];
            app14.extend_from_slice(b"Adobe\x00\x64\x00\x00\x00\x00\x00");
            out.splice(jfif, app14);
        }
        RgbMark::ComponentIds => {
            out.drain(jfif);
            // The ids in the frame header and in the (one) scan's selectors.
            let mut i = 2;
            let mut ids: Vec<u8> = Vec::new();
            loop {
                assert_eq!(out[i], 0xFF);
                let m = out[i + 1];
                let len = usize::from(u16::from_be_bytes([out[i + 2], out[i + 3]]));
                let p = i + 4;
                if m == 0xC0 {
                    for (k, id) in b"RGB".iter().enumerate() {
                        ids.push(out[p + 6 + 3 * k]);
                        out[p + 6 + 3 * k] = *id;
                    }
                }
                if m == 0xDA {
                    for k in 0..usize::from(out[p]) {
                        let at = p + 1 + 2 * k;
                        let c = ids.iter().position(|&x| x == out[at]).expect("id");
                        out[at] = b"RGB"[c];
                    }
                    break;
                }
                i += 2 + len;
            }
        }
    }
    out
}

/// The decode job of the whole of `jpeg` (whose header is `header`) into `out`, device memory
/// of height × width × 3 bytes, as the GPU stage submits one.
pub fn whole_image_job<'a>(
    (jpeg, header): (&'a [u8], &'a crate::decode::JpegHeader),
    out: u64,
) -> crate::cuda::gpu_device::DecodeJob<'a> {
    let (h, w) = (header.height(), header.width());
    crate::cuda::gpu_device::DecodeJob {
        engines_checked: false,
        pinned: false,
        bytes: jpeg,
        header,
        roi: None,
        rebuilt: false,
        out: crate::nvjpeg::DeviceOutput {
            ptr: out,
            pitch: w * 3,
            len: h * w * 3,
        },
    }
}
