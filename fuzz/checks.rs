//! What the fuzz targets check on each input: arbitrary bytes must give typed errors, never a
//! panic, and what decodes must keep the promises the pipeline builds on. Shared with
//! `tests/fuzz_regressions.rs`, which runs the same checks over committed inputs (so these
//! compile, and hold, in every test run, not only where cargo-fuzz is installed).
// Each fuzz target uses one of the checks.
#![allow(dead_code)]

use stokehold::decode::{
    decode, probe, ColorMode, DecodeOptions, EntropyDecoder, Limits, ParsedImage, Upsampling,
};
use stokehold::nvjpeg::{
    classify, decode_region, roi_for_display_window, route_header, Roi, Route,
};
use stokehold::Image;

/// Pixels a check decodes at most: a header may legally ask for ~180 MP within the default
/// limits; decoding that is correct but slow, so larger images are only probed (the limits
/// themselves are exercised by the small ones).
const DECODE_AT_MOST: usize = 1 << 22;

/// The option sets every input goes through: the default; gray with EXIF and small limits; no
/// EXIF; and the GPU path's other choices (chroma repeated as the JPEG engines write it,
/// libjpeg's own entropy decoders).
pub fn option_sets() -> [DecodeOptions; 4] {
    let d = DecodeOptions::default();
    [
        d,
        DecodeOptions {
            color: ColorMode::Gray,
            apply_exif: true,
            limits: Limits {
                max_pixels: 1 << 16,
                max_file_bytes: 1 << 16,
            },
            ..d
        },
        DecodeOptions {
            apply_exif: false,
            ..d
        },
        DecodeOptions {
            upsampling: Upsampling::Nearest,
            sequential_decoder: EntropyDecoder::Libjpeg,
            progressive_decoder: EntropyDecoder::Libjpeg,
            ..d
        },
    ]
}

/// A window of an `h` × `w` image chosen by `pick` (a few bytes of the input): never empty,
/// always inside.
fn window_of(h: usize, w: usize, pick: &[u8]) -> (usize, usize, usize, usize) {
    let at = |k: usize, n: usize| pick.get(k).map_or(0, |&b| usize::from(b) * n / 256);
    let (top, left) = (at(0, h), at(1, w));
    let height = 1 + at(2, h - top);
    let width = 1 + at(3, w - left);
    (top, left, height.min(h - top), width.min(w - left))
}

/// The decoder: `probe` and `decode` agree on the size; a window decodes to exactly that
/// window of the whole decode (what the CPU path's fused decode-and-crop and the GPU path's
/// CPU share rely on), at full size and at half size in the DCT domain. Returns how many
/// windows it compared (a test on good files asserts some).
pub fn decode_checks(data: &[u8]) -> usize {
    let pick = data.get(data.len().saturating_sub(4)..).unwrap_or(&[]);
    let mut compared = 0;
    for opts in option_sets() {
        let info = probe(data, &opts);
        if matches!(&info, Ok(i) if i.width * i.height > DECODE_AT_MOST) {
            continue;
        }
        let img = decode(data, &opts);
        let (Ok(info), Ok(img)) = (&info, &img) else {
            continue;
        };
        assert_eq!((img.width, img.height), (info.width, info.height));
        assert_eq!(img.channels, opts.color.channels());
        let whole = img.pixels.as_bytes();
        assert_eq!(whole.len(), img.width * img.height * img.channels);
        let (top, left, h, w) = window_of(img.height, img.width, pick);
        let Ok(parsed) = ParsedImage::parse(data, &opts) else {
            panic!("decoded, yet the parse alone fails");
        };
        // Damaged data below the window may fail the whole decode only; both decoded, the
        // window's pixels are the whole decode's. The window where it lies in the decoder's
        // rows (the fused crop-and-resize's) is decoded or refused alike, and the same.
        let part = parsed.decode_window((top, left, h, w));
        let within = parsed.decode_window_within((top, left, h, w));
        assert_eq!(
            part.is_ok(),
            within.is_ok(),
            "{:?} / {:?}",
            part.err(),
            within.err()
        );
        if let (Ok(part), Ok((rows, at))) = (part, within) {
            assert_window_of(&part, img, (top, left, h, w), "");
            let window = Image::from_u8_hwc(h, w, rows.channels, crop(&rows, at));
            assert_window_of(&window, img, (top, left, h, w), " in the decoder's rows");
            compared += 2;
        }
        // The same for a JPEG decoded at half size in the DCT domain (`dct_downscale`).
        if let Ok(half) = parsed.decode_scaled(2, None) {
            let (top, left, h, w) = window_of(half.height, half.width, pick);
            if let Ok(part) = parsed.decode_scaled(2, Some((top, left, h, w))) {
                assert_window_of(&part, &half, (top, left, h, w), " at 1/2");
                compared += 1;
            }
        }
    }
    compared
}

/// The `window` (top, left, height, width) of `im`'s pixels, packed.
fn crop(im: &Image, (top, left, h, w): (usize, usize, usize, usize)) -> Vec<u8> {
    let (c, all) = (im.channels, im.pixels.as_bytes());
    assert!(
        top + h <= im.height && left + w <= im.width,
        "window outside its rows"
    );
    (top..top + h)
        .flat_map(|y| &all[(y * im.width + left) * c..(y * im.width + left + w) * c])
        .copied()
        .collect()
}

/// Asserts that `part` is the `window` (top, left, height, width) of `whole`.
fn assert_window_of(
    part: &stokehold::Image,
    whole: &stokehold::Image,
    (top, left, h, w): (usize, usize, usize, usize),
    what: &str,
) {
    assert_eq!((part.height, part.width), (h, w));
    let c = whole.channels;
    let (got, all) = (part.pixels.as_bytes(), whole.pixels.as_bytes());
    for r in 0..h {
        let row = (top + r) * whole.width * c + left * c;
        assert_eq!(
            &got[r * w * c..(r + 1) * w * c],
            &all[row..row + w * c],
            "window ({top}, {left}, {h}, {w}){what} row {r} differs from the whole decode"
        );
    }
}

/// The GPU path's routing: `classify` (reads the header itself) and `route_header` on the
/// header the GPU path's workers parse once agree; an image routed to nvJPEG has a region of
/// interest for every window of its displayed image, inside the stored image, and the region
/// to decode holds it. Returns how many regions it checked.
pub fn gpu_route_checks(data: &[u8]) -> usize {
    let opts = DecodeOptions::default();
    let limits = opts.limits;
    // Not a JPEG the workers can parse (a PNG, whose bytes may hold a JPEG's SOI; a parse
    // error): the CPU's, whatever the device.
    let parsed = ParsedImage::parse(data, &opts);
    let Some(header) = parsed.as_ref().ok().and_then(|p| p.jpeg_header()).cloned() else {
        for hardware in [true, false] {
            let routed = classify(data, &limits, hardware);
            assert!(matches!(routed, Route::Cpu(_)), "{routed:?}");
        }
        return 0;
    };
    let mut checked = 0;
    let pick = data.get(data.len().saturating_sub(4)..).unwrap_or(&[]);
    for hardware in [true, false] {
        let routed = route_header(&header, hardware);
        assert_eq!(classify(data, &limits, hardware), routed);
        let Route::Gpu(_, facts) = routed else {
            continue;
        };
        let (sw, sh) = (facts.width, facts.height);
        assert_eq!((sw, sh), (header.width(), header.height()));
        if sw * sh > DECODE_AT_MOST {
            continue;
        }
        for orientation in 1..=8u8 {
            let swaps = orientation >= 5;
            let (dw, dh) = if swaps { (sh, sw) } else { (sw, sh) };
            let (y, x, height, width) = window_of(dh, dw, pick);
            let win = Roi {
                x,
                y,
                width,
                height,
            };
            let roi = roi_for_display_window(win, orientation, sw, sh)
                .expect("a window inside the displayed image has a stored region");
            assert!(
                roi.x + roi.width <= sw && roi.y + roi.height <= sh,
                "{roi:?}"
            );
            let (ew, eh) = if swaps {
                (height, width)
            } else {
                (width, height)
            };
            assert_eq!((roi.width, roi.height), (ew, eh));
            for pad in [false, true] {
                let region = decode_region(&header, Some(roi), pad).expect("an inside region");
                let decoded = region.decode.unwrap_or(Roi {
                    x: 0,
                    y: 0,
                    width: sw,
                    height: sh,
                });
                assert_eq!(
                    (decoded.width, decoded.height),
                    (region.width, region.height)
                );
                assert!(decoded.x + decoded.width <= sw && decoded.y + decoded.height <= sh);
                let w = region.window;
                assert_eq!((w.width, w.height), (roi.width, roi.height));
                assert!(w.x + w.width <= region.width && w.y + w.height <= region.height);
                assert_eq!((decoded.x + w.x, decoded.y + w.y), (roi.x, roi.y));
                checked += 1;
            }
        }
    }
    checked
}

/// A tar shard: the reader ends (every member read, skipped or left consumes a block at
/// least; a broken header is passed over), never panics, and the items of the shard are the
/// same whether the images are loaded or not (an epoch's sample count and order are read
/// without loading them). Returns each label rule's items (member, label of a sample), for
/// a test to hold an intact shard's to what it holds.
pub fn shard_checks(data: &[u8]) -> Vec<Vec<(String, Option<i64>)>> {
    use std::io::Cursor;
    use std::sync::Arc;
    use stokehold::reader::shards::samples::{Item, LabelFrom, SampleRules, ShardItems};
    use stokehold::reader::shards::tar::{TarReader, BLOCK};

    let most = data.len() as u64 / BLOCK + 2;
    let mut tar = TarReader::new(Cursor::new(data.to_vec()));
    for k in 0.. {
        assert!(k <= most, "more headers than blocks");
        let before = tar.position();
        match tar.next_member() {
            Ok(None) => break,
            Ok(Some(m)) => match k % 3 {
                0 => {
                    if let Ok(Ok(v)) = tar.read_data(1 << 20) {
                        assert_eq!(v.len() as u64, m.size);
                    }
                }
                1 => {
                    let _ = tar.skip_data();
                }
                _ => {}
            },
            Err(e) if e.is_fatal() => break,
            Err(_) => assert!(tar.position() > before, "a broken header read nothing"),
        }
    }
    let mut per_rule = Vec::new();
    for label in [
        LabelFrom::None,
        LabelFrom::Text("cls".into()),
        LabelFrom::Json("a.b".into()),
    ] {
        let rules = Arc::new(SampleRules {
            extensions: vec!["jpg".into(), "png".into()],
            label,
            max_bytes: 1 << 16,
        });
        let items = |load: bool| {
            let mut shard = ShardItems::new(Cursor::new(data.to_vec()), rules.clone());
            let mut out = Vec::new();
            while let Some(item) = shard.next_item(load) {
                assert!(out.len() as u64 <= most, "more items than blocks");
                out.push(match item {
                    Item::Sample { member, label, .. } => (member, Some(label)),
                    Item::Damaged { member, .. } => (member, None),
                });
            }
            (out, shard.not_tar(), shard.cut().map(str::to_owned))
        };
        let loaded = items(true);
        assert_eq!(loaded, items(false), "loading changed the shard's items");
        per_rule.push(loaded.0);
    }
    per_rule
}
