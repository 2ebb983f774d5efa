//! Fuzz target: arbitrary bytes through `probe` and `decode`, with the default options and
//! with small limits. Any panic or abort is a bug; errors are fine.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stokehold::decode::{decode, probe, ColorMode, DecodeOptions, Limits};

fuzz_target!(|data: &[u8]| {
    let default = DecodeOptions::default();
    let small = DecodeOptions {
        color: ColorMode::Gray,
        apply_exif: true,
        limits: Limits {
            max_pixels: 1 << 16,
            max_file_bytes: 1 << 16,
        },
    };
    let raw = DecodeOptions {
        apply_exif: false,
        ..default
    };
    for opts in [&default, &small, &raw] {
        let info = probe(data, opts);
        // Within the default limits a header may legally ask for ~180 MP; decoding that
        // is correct but slow, so big images are only probed here (the limits themselves
        // are exercised by `small`).
        if opts.limits.max_pixels > small.limits.max_pixels
            && matches!(&info, Ok(i) if i.width * i.height > 1 << 22)
        {
            continue;
        }
        let img = decode(data, opts);
        // A decoded image agrees with its probe.
        if let (Ok(info), Ok(img)) = (&info, &img) {
            assert_eq!((img.width, img.height), (info.width, info.height));
            assert_eq!(img.channels, opts.color.channels());
            assert_eq!(img.pixels.len(), img.width * img.height * img.channels);
        }
    }
});
