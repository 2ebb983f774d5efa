//! The whole ResNet-50 training pipeline (read → decode → random_resized_crop 224 → flip →
//! normalize → f32 CHW) over the built-in sample set on one CPU thread; throughput in
//! images per second (one iteration = one epoch).
//!
//! `cargo bench --bench pipeline`

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use stokehold::pipeline::{DeviceChoice, OpSpec, Pipeline, PipelineSpec};

mod common;

fn spec(data: &str) -> PipelineSpec {
    PipelineSpec::builder()
        .batch(16)
        .seed(7)
        .threads(1)
        .epochs(1)
        .device(DeviceChoice::Cpu)
        .op(OpSpec::new("file_reader")
            .output("jpegs")
            .output("labels")
            .arg("root", data))
        .op(OpSpec::new("decode").input("jpegs").output("decoded"))
        .op(OpSpec::new("random_resized_crop")
            .input("decoded")
            .output("cropped")
            .arg("size", 224))
        .op(OpSpec::new("flip")
            .input("cropped")
            .output("flipped")
            .arg("horizontal", 0.5))
        .op(OpSpec::new("normalize")
            .input("flipped")
            .output("normalized")
            .arg("mean", [123.675, 116.28, 103.53])
            .arg("std", [58.395, 57.12, 57.375]))
        .op(OpSpec::new("layout")
            .input("normalized")
            .output("images")
            .arg("layout", "CHW"))
        .outputs(&["images", "labels"])
}

fn run_epoch(data: &str) -> usize {
    let pipeline = Pipeline::new(spec(data)).expect("pipeline");
    pipeline.map(|b| b.expect("batch").len()).sum()
}

fn bench_pipeline(c: &mut Criterion) {
    let dir = common::samples_dir();
    let data = dir.to_string_lossy().into_owned();
    let n = run_epoch(&data);
    let mut g = c.benchmark_group("pipeline");
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("resnet50_train_samples_1thread", |b| {
        b.iter(|| run_epoch(&data))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = bench_pipeline
}
criterion_main!(benches);
