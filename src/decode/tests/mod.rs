//! Tests of the CPU decoder, by subject: round trips on generated fixtures and EXIF
//! orientation (`round_trip`), real and damaged files (`files`), the one JPEG header parser
//! (`header`), window and DCT-scaled decodes (`window`), our entropy decoders against
//! libjpeg's and the choice between them (`entropy`), damaged image data against Pillow's
//! verdict (`bit_flips`); this file holds the helpers they share.

mod bit_flips;
mod entropy;
mod files;
mod header;
mod round_trip;
mod window;

use super::*;
use crate::testutil::{
    encode_jpeg, encode_jpeg_opts, exif_orientation_tiff, pattern_rgb, psnr_u8, shared_data,
    JpegOpts, Sub,
};
use proptest::prelude::*;

fn rgb_opts() -> DecodeOptions {
    DecodeOptions::default()
}

fn gray_of(rgb: &[u8]) -> Vec<u8> {
    rgb.chunks_exact(3)
        .map(|p| luma(p[0], p[1], p[2]))
        .collect()
}

/// A smooth RGB pattern (low-frequency in every channel, so that chroma subsampling
/// loses little): what photographs look like, unlike `pattern_rgb`'s blue channel.
fn smooth_rgb(h: usize, w: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(h * w * 3);
    for y in 0..h {
        for x in 0..w {
            // Features are ~10 pixels or more across, whatever the image size.
            let (fy, fx) = (y as f64, x as f64);
            v.push((128.0 + 100.0 * (fx / 14.0).sin()) as u8);
            v.push((128.0 + 100.0 * (fy / 12.0).cos()) as u8);
            v.push((128.0 + 90.0 * ((fx + fy) / 20.0).sin()) as u8);
        }
    }
    v
}

const SIZES: [(usize, usize); 5] = [(1, 1), (9, 17), (65, 33), (48, 64), (8, 8)];

fn encode_png(
    data: &[u8],
    w: u32,
    h: u32,
    ct: ::png::ColorType,
    depth: ::png::BitDepth,
    palette: Option<Vec<u8>>,
) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut enc = ::png::Encoder::new(&mut out, w, h);
        enc.set_color(ct);
        enc.set_depth(depth);
        if let Some(p) = palette {
            enc.set_palette(p);
        }
        let mut wr = enc.write_header().unwrap();
        wr.write_image_data(data).unwrap();
    }
    out
}

/// The pixels of `win` (top, left, height, width) of an HWC image.
fn crop_of(im: &Image, win: Window) -> Vec<u8> {
    let (t, l, h, w) = win;
    let c = im.channels;
    let px = im.as_u8_hwc().unwrap();
    let mut out = Vec::with_capacity(h * w * c);
    for y in t..t + h {
        out.extend_from_slice(&px[(y * im.width + l) * c..(y * im.width + l + w) * c]);
    }
    out
}

/// Checks that `decode_window` equals the crop of the full decode on `win`.
fn assert_window_exact(bytes: &[u8], opts: &DecodeOptions, full: &Image, win: Window, what: &str) {
    let got = decode_window(bytes, opts, win).unwrap_or_else(|e| panic!("{what} {win:?}: {e}"));
    assert_eq!(
        (got.height, got.width, got.channels),
        (win.2, win.3, full.channels),
        "{what} {win:?}"
    );
    assert!(
        got.as_u8_hwc().unwrap() == &crop_of(full, win)[..],
        "{what}: window {win:?} differs from the full decode"
    );
    // The same window inside the decoder's rows (the fused crop-and-resize reads it there).
    let (within, at) = ParsedImage::parse(bytes, opts)
        .and_then(|p| p.decode_window_within(win))
        .unwrap_or_else(|e| panic!("{what} {win:?} within: {e}"));
    assert_eq!((at.2, at.3, within.channels), (win.2, win.3, full.channels));
    assert!(
        crop_of(&within, at) == crop_of(full, win),
        "{what}: window {win:?} at {at:?} of the decoder's rows differs from the full decode"
    );
}

/// Windows touching every edge and none, sizes from 1 pixel to the whole image.
fn windows_for(h: usize, w: usize) -> Vec<Window> {
    let mut v = Vec::new();
    let ys = [
        0,
        1,
        7,
        8,
        9,
        15,
        16,
        17,
        31,
        33,
        h / 2,
        h.saturating_sub(17),
        h - 1,
    ];
    let xs = [
        0,
        1,
        7,
        8,
        15,
        16,
        17,
        32,
        47,
        w / 3,
        w.saturating_sub(9),
        w - 1,
    ];
    for &t in &ys {
        for &l in &xs {
            for (dh, dw) in [(1, 1), (3, 40), (40, 3), (24, 24), (h, w)] {
                let (t, l) = (t.min(h - 1), l.min(w - 1));
                v.push((t, l, dh.min(h - t), dw.min(w - l)));
            }
        }
    }
    v.push((0, 0, h, w));
    v
}

/// [`windows_for`] of a photograph whose every window is a whole decode: the non-empty ones
/// inside the image, and on images over 300×300 only every `sample`th of them.
fn windows_sampled(h: usize, w: usize, sample: usize) -> Vec<Window> {
    let mut wins = windows_for(h, w);
    wins.retain(|&(t, l, wh, ww)| wh > 0 && ww > 0 && t + wh <= h && l + ww <= w);
    if h * w > 300 * 300 {
        wins = wins.into_iter().step_by(sample).collect();
    }
    wins
}

/// The header of a JPEG the test knows is whole.
fn header(jpg: &[u8]) -> JpegHeader {
    JpegHeader::read(jpg, &Limits::default()).unwrap()
}

/// The committed fixtures `tests/golden/<folder>/<prefix>-<name>.jpg`, named by file name.
fn golden_jpegs(folder: &str, prefix: &str, names: &[&str]) -> Vec<(String, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(folder);
    names
        .iter()
        .map(|n| {
            let name = format!("{prefix}-{n}.jpg");
            let bytes = std::fs::read(dir.join(&name)).unwrap();
            (name, bytes)
        })
        .collect()
}
