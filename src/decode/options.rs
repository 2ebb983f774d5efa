//! How to decode ([`DecodeOptions`]): the output colour, the EXIF orientation, the limits and
//! who entropy-decodes JPEGs. Each pipeline (each `decode` operator) has its own options: two
//! pipelines in one process may decode differently.

use super::color::ColorMode;
use super::limits::Limits;

/// Who entropy-decodes a JPEG's Huffman-coded data. The pixels are the same either way:
/// everything after entropy decoding is libjpeg-turbo's, and our decoder hands every file it
/// cannot decode exactly as libjpeg would (corrupt data, data that ends early, progressions
/// libjpeg smooths, CMYK progressive ...) to libjpeg-turbo (tested against libjpeg-turbo
/// alone on every file we have, whole images and windows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum EntropyDecoder {
    /// stokehold's own: several times faster for progressive scans (and stops at the last
    /// block row a window needs), faster Huffman decoding for sequential ones.
    #[default]
    Stokehold,
    /// libjpeg-turbo alone: for comparisons, and an escape hatch.
    Libjpeg,
}

impl EntropyDecoder {
    /// The names of the choices, as the `decode` operator's arguments take them.
    pub const NAMES: &'static [&'static str] = &["stokehold", "libjpeg"];

    /// The name the `decode` operator's arguments use (`"stokehold"`, `"libjpeg"`).
    pub fn name(self) -> &'static str {
        match self {
            EntropyDecoder::Stokehold => "stokehold",
            EntropyDecoder::Libjpeg => "libjpeg",
        }
    }

    /// The decoder [`EntropyDecoder::name`] names.
    pub fn from_name(name: &str) -> Option<EntropyDecoder> {
        match name {
            "stokehold" => Some(EntropyDecoder::Stokehold),
            "libjpeg" => Some(EntropyDecoder::Libjpeg),
            _ => None,
        }
    }
}

/// How chroma stored at a lower resolution (4:2:0, 4:2:2, 4:4:0) is brought to full size
/// (the `decode` operator's `upsampling`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Upsampling {
    /// libjpeg's interpolation ("fancy upsampling"), as Pillow and torchvision decode: the
    /// reference.
    #[default]
    Fancy,
    /// Each chroma sample repeated over its block, as the JPEG engines of A100/H100/H200
    /// write it by default and libjpeg's `-nosmooth` does (DALI's GPU decoder too, unless
    /// asked for `jpeg_fancy_upsampling`). On the GPU path the engines' own output: no
    /// interpolation for nvJPEG to do on the host, nothing for the kernels to rebuild
    /// (`docs/gpu.md`, Chroma).
    Nearest,
}

impl Upsampling {
    /// The names of the choices, as the `decode` operator's arguments take them.
    pub const NAMES: &'static [&'static str] = &["fancy", "nearest"];

    /// The name the `decode` operator's arguments use (`"fancy"`, `"nearest"`).
    pub fn name(self) -> &'static str {
        match self {
            Upsampling::Fancy => "fancy",
            Upsampling::Nearest => "nearest",
        }
    }

    /// The choice [`Upsampling::name`] names.
    pub fn from_name(name: &str) -> Option<Upsampling> {
        match name {
            "fancy" => Some(Upsampling::Fancy),
            "nearest" => Some(Upsampling::Nearest),
            _ => None,
        }
    }
}

/// How to decode. Each pipeline (each `decode` operator) has its own: two pipelines in one
/// process may decode differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Output colour.
    pub color: ColorMode,
    /// Apply the EXIF orientation (as Pillow's `exif_transpose`).
    pub apply_exif: bool,
    /// Resource limits.
    pub limits: Limits,
    /// Who entropy-decodes sequential (baseline and extended) Huffman-coded JPEGs.
    pub sequential_decoder: EntropyDecoder,
    /// Who entropy-decodes progressive Huffman-coded JPEGs (at full scale; DCT-scaled
    /// decodes are libjpeg-turbo's).
    pub progressive_decoder: EntropyDecoder,
    /// Chroma upsampling of subsampled JPEGs.
    pub upsampling: Upsampling,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            color: ColorMode::Rgb,
            apply_exif: true,
            limits: Limits::default(),
            sequential_decoder: EntropyDecoder::Stokehold,
            progressive_decoder: EntropyDecoder::Stokehold,
            upsampling: Upsampling::Fancy,
        }
    }
}
