//! Once its pools hold the working set, a pipeline allocates next to nothing a sample: file
//! buffers, headers, operator values and outputs are reused or held in place, so what is left
//! is a batch's own handful. Counted by this binary's allocator, not timed. (Its own test
//! binary, one test: the count is the process's, and another test's work would add to it.)

mod common;

use std::path::Path;

use common::*;
use stokehold::cli::heap::{Counter, CountingAllocator};
use stokehold::pipeline::{DeviceChoice, Pipeline, PipelineSpec};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const FILES: usize = 256;
const BATCH: usize = 128;
/// Epochs taken before counting at least (the CPU path's pools settle in the first), and at
/// most, waiting for the GPU path's own warm-up to end (its device pools' sizes settled).
const WARM_EPOCHS: usize = 2;
const MAX_WARM_EPOCHS: usize = 40;
const COUNTED_EPOCHS: usize = 3;

/// Allocations a batch and a sample over the counted epochs of `spec` (every batch dropped
/// before the next is asked for, as a training loop does).
fn allocations(mut spec: PipelineSpec) -> (f64, f64) {
    // Epochs without end: the counted ones are replaced by others read ahead, as in training.
    spec.settings.epochs = None;
    let per_epoch = FILES / BATCH;
    let mut p = Pipeline::new(spec).unwrap();
    let warm = |p: &Pipeline| p.stats().gpu.is_none_or(|g| g.after_warm_up.is_some());
    let mut epochs = 0;
    while epochs < WARM_EPOCHS || !warm(&p) {
        assert!(
            epochs < MAX_WARM_EPOCHS,
            "the pipeline's warm-up never ended"
        );
        for _ in 0..per_epoch {
            drop(p.next_batch().unwrap().unwrap());
        }
        epochs += 1;
    }
    let counter = Counter::start().expect("the counting allocator is this binary's");
    let before = counter.read();
    let mut images = 0;
    for _ in 0..COUNTED_EPOCHS * per_epoch {
        images += p.next_batch().unwrap().unwrap().len();
    }
    let n = (counter.read() - before) as f64;
    assert_eq!(images, COUNTED_EPOCHS * FILES, "every sample delivered");
    (n / (COUNTED_EPOCHS * per_epoch) as f64, n / images as f64)
}

fn photos(dir: &Path) {
    for i in 0..FILES {
        let (w, h) = (400 + (i as u16 % 7) * 16, 300 + (i as u16 % 5) * 12);
        write_jpeg(&dir.join(format!("img_{i:03}.jpg")), w, h, i as u8);
    }
}

#[test]
fn a_pipeline_allocates_next_to_nothing_a_sample_in_the_steady_state() {
    // The emulated device's time rather than its pixels: its own work (memory checks, its
    // stand-in for nvJPEG) is not the pipeline's. Set before any thread runs.
    std::env::set_var("STOKEHOLD_EMU_MODEL", "h100");
    let d = tempfile::tempdir().unwrap();
    photos(d.path());
    let cpu = spec_for("resnet50-train.toml", d.path(), BATCH, 2, 1);
    let mut gpu = spec_for("resnet50-train.toml", d.path(), BATCH, 2, 1);
    gpu.settings.device = DeviceChoice::Emu;
    // Before: 15 a sample on the CPU path (file buffers and their reference counts, paths,
    // header tables, operator values, libjpeg's box), 23 on the GPU path. Now a batch's own
    // (its sample records, labels, messages) and, on the GPU path, a sample's boxed
    // preparation.
    for (what, spec, most) in [("CPU path", cpu, 1.5), ("GPU path (emulated)", gpu, 5.0)] {
        let (a_batch, a_sample) = allocations(spec);
        eprintln!("{what}: {a_batch:.1} allocations a batch of {BATCH}, {a_sample:.2} a sample");
        assert!(
            a_sample <= most,
            "{what}: {a_sample:.2} allocations a sample ({a_batch:.1} a batch of {BATCH}) in the \
             steady state, more than {most}"
        );
    }
}
