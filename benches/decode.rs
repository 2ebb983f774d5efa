//! JPEG decoding, one thread: zune-jpeg vs stokehold's libjpeg-turbo decoder (full image),
//! window decodes of random-resized-crop windows, the fused decode + crop to 224 (exact), the
//! opt-in DCT-scaled variant (not the reference pixels), and decode-then-crop for comparison.
//! Throughput is in images (per iteration: every file of the set once).
//!
//! `STOKEHOLD_SHARED=/work/shared cargo bench --bench decode`

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use stokehold::decode::{decode, decode_window, probe, DecodeOptions};
use stokehold::fusion::{decode_and_crop, decode_and_crop_scaled};
use stokehold::ops::random_resized_crop::{choose_window, RandomResizedCrop};
use stokehold::ops::resize::Interp;
use stokehold::rng::SampleRng;
use zune_core::bytestream::ZCursor;
use zune_core::colorspace::ColorSpace;
use zune_core::options::DecoderOptions;
use zune_jpeg::JpegDecoder;

mod common;

fn bench_decode(c: &mut Criterion) {
    let (files, src) = common::jpeg_files();
    let opts = DecodeOptions::default();
    files.iter().for_each(|f| {
        decode(f, &opts).expect("decodable bench input");
    });
    let mp: f64 = files
        .iter()
        .map(|f| {
            let i = probe(f, &opts).unwrap();
            (i.width * i.height) as f64 / 1e6
        })
        .sum();
    eprintln!(
        "decode bench: {} JPEGs, {mp:.1} MP, from {src}",
        files.len()
    );
    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Elements(files.len() as u64));
    g.bench_function("zune_full", |b| {
        b.iter(|| {
            for f in &files {
                let o = DecoderOptions::default()
                    .set_strict_mode(false)
                    .jpeg_set_out_colorspace(ColorSpace::RGB);
                let mut d = JpegDecoder::new_with_options(ZCursor::new(black_box(f)), o);
                black_box(d.decode().unwrap());
            }
        })
    });
    g.bench_function("turbo_full", |b| {
        b.iter(|| {
            for f in &files {
                black_box(decode(black_box(f), &opts).unwrap());
            }
        })
    });
    let windows: Vec<_> = files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let info = probe(f, &opts).unwrap();
            let mut rng = SampleRng::from_key(i as u64);
            choose_window(
                info.height,
                info.width,
                (0.08, 1.0),
                (0.75, 4.0 / 3.0),
                &mut rng,
            )
        })
        .collect();
    g.bench_function("turbo_window_rrc", |b| {
        b.iter(|| {
            for (f, w) in files.iter().zip(&windows) {
                black_box(decode_window(black_box(f), &opts, *w).unwrap());
            }
        })
    });
    let rrc = RandomResizedCrop {
        height: 224,
        width: 224,
        scale: (0.08, 1.0),
        ratio: (0.75, 4.0 / 3.0),
        interp: Interp::Bilinear,
        antialias: true,
        dct_downscale: false,
    };
    g.bench_function("decode_and_crop_224", |b| {
        b.iter(|| {
            for (i, f) in files.iter().enumerate() {
                let mut rng = SampleRng::from_key(i as u64);
                black_box(decode_and_crop(black_box(f), &opts, &rrc, &mut rng).unwrap());
            }
        })
    });
    g.bench_function("decode_and_crop_scaled_224_optin", |b| {
        b.iter(|| {
            for (i, f) in files.iter().enumerate() {
                let mut rng = SampleRng::from_key(i as u64);
                black_box(decode_and_crop_scaled(black_box(f), &opts, &rrc, &mut rng).unwrap());
            }
        })
    });
    g.bench_function("decode_then_crop_224", |b| {
        b.iter(|| {
            for (i, f) in files.iter().enumerate() {
                let im = decode(black_box(f), &opts).unwrap();
                let mut rng = SampleRng::from_key(i as u64);
                let w = rrc.choose(im.height, im.width, &mut rng);
                black_box(
                    stokehold::ops::resize::resize_image(&im, w, 224, 224, Interp::Bilinear, true)
                        .unwrap(),
                );
            }
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = bench_decode
}
criterion_main!(benches);
