//! CPU operators on one 500×375 RGB image (ImageNet's typical size), one thread: resize to
//! 224×224, random_resized_crop to 224, flip, normalize to f32, color_jitter.
//!
//! `cargo bench --bench ops`

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use stokehold::image::{DType, Image};
use stokehold::ops::color_jitter::{self, ColorJitter};
use stokehold::ops::flip::flip_in_place;
use stokehold::ops::normalize::Normalize;
use stokehold::ops::random_resized_crop::choose_window;
use stokehold::ops::resize::{resize_image, Interp};
use stokehold::rng::SampleRng;

fn photo(h: usize, w: usize) -> Image {
    let mut v = Vec::with_capacity(h * w * 3);
    for y in 0..h {
        for x in 0..w {
            let (fy, fx) = (y as f64, x as f64);
            v.push((128.0 + 100.0 * (fx / 14.0).sin()) as u8);
            v.push((128.0 + 100.0 * (fy / 12.0).cos()) as u8);
            v.push(((x * 7 + y * 13) % 256) as u8);
        }
    }
    Image::from_u8_hwc(h, w, 3, v)
}

fn bench_ops(c: &mut Criterion) {
    let (h, w) = (375, 500);
    let im = photo(h, w);
    let small = resize_image(&im, (0, 0, h, w), 224, 224, Interp::Bilinear, true).unwrap();
    let mut g = c.benchmark_group("ops");
    g.bench_function("resize_500x375_to_224_bilinear_aa", |b| {
        b.iter(|| {
            black_box(
                resize_image(
                    black_box(&im),
                    (0, 0, h, w),
                    224,
                    224,
                    Interp::Bilinear,
                    true,
                )
                .unwrap(),
            )
        })
    });
    let mut key = 0u64;
    g.bench_function("random_resized_crop_224", |b| {
        b.iter(|| {
            key += 1;
            let mut rng = SampleRng::from_key(key);
            let win = choose_window(h, w, (0.08, 1.0), (0.75, 4.0 / 3.0), &mut rng);
            black_box(resize_image(black_box(&im), win, 224, 224, Interp::Bilinear, true).unwrap())
        })
    });
    g.bench_function("flip_224", |b| {
        b.iter_batched_ref(
            || small.clone(),
            |x| flip_in_place(x, true, false),
            BatchSize::SmallInput,
        )
    });
    let norm = Normalize::new(
        &[123.675, 116.28, 103.53],
        &[58.395, 57.12, 57.375],
        DType::F32,
    )
    .unwrap();
    g.bench_function("normalize_224_f32", |b| {
        b.iter_batched(
            || small.clone(),
            |x| black_box(norm.apply(x).unwrap()),
            BatchSize::SmallInput,
        )
    });
    let jitter = ColorJitter::new(0.4, 0.4, 0.4, 0.1).unwrap();
    let params = jitter.choose(&mut SampleRng::from_key(3));
    g.bench_function("color_jitter_224", |b| {
        b.iter_batched(
            || small.as_u8_hwc().unwrap().to_vec(),
            |mut px| {
                color_jitter::apply(&mut px, &params);
                black_box(px)
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench_ops
}
criterion_main!(benches);
