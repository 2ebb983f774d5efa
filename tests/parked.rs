//! While its queue is full, a pipeline's threads are parked (the CPU path's and the GPU
//! path's): no wake-ups, no CPU time, so a consumer that computes has the cores to itself.
//! Counted from `/proc` (Linux), not timed. (Its own test binary: the counters are per
//! process, and another test's pipeline would add its threads' work.)

mod common;

use std::time::{Duration, Instant};

use common::*;
use stokehold::pipeline::run::threads::{
    pipeline_threads, threads_named, ThreadSnapshot, ThreadUse,
};
use stokehold::pipeline::{DeviceChoice, Pipeline, PipelineSpec};

/// Filling the queue (and every sample the readers had credits for) takes less than this
/// even on a loaded machine; past it the pipeline is not parking.
const SETTLE_LIMIT: Duration = Duration::from_secs(30);

/// What snapshots the threads counted.
type Counter = fn() -> ThreadSnapshot;

/// Starts `spec` unbounded with `prefetch` 2, takes nothing until the queue is full and the
/// threads `count` snapshots have gone quiet, then returns what they used over a further
/// second.
fn while_full(mut spec: PipelineSpec, count: Counter) -> ThreadUse {
    spec.settings.epochs = None;
    spec.settings.prefetch = 2;
    let mut p = Pipeline::new(spec).unwrap();
    let t0 = Instant::now();
    while p.ready_batches() < 2 {
        assert!(t0.elapsed() < SETTLE_LIMIT, "the queue never filled");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The workers still finish the samples the readers had credits for: wait for a quiet
    // 100 ms (a thread that polls or spins never gives one).
    let mut last = count();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = count();
        let used = now.since(&last);
        last = now;
        if used.wakeups == 0 && used.cpu < Duration::from_micros(100) {
            break;
        }
        assert!(
            t0.elapsed() < SETTLE_LIMIT,
            "the threads never went quiet with a full queue: {used:?} in the last 100 ms"
        );
    }
    let before = count();
    std::thread::sleep(Duration::from_secs(1));
    let used = count().since(&before);
    // Still a working pipeline: a batch taken is made again.
    assert_eq!(p.ready_batches(), 2);
    p.next_batch().unwrap().unwrap();
    used
}

#[cfg(target_os = "linux")]
#[test]
fn threads_are_parked_while_the_queue_is_full() {
    let (_d, data) = samples();
    let files = spec_for("resnet50-train.toml", &data, 8, 2, 1);
    let shards_dir = tempfile::tempdir().unwrap();
    common::shards::write_shards(shards_dir.path(), &[40, 40], true);
    let mut shards = common::shards::spec(&shards_dir.path().display().to_string(), 8, 2);
    shards.settings.device = DeviceChoice::Cpu;
    // The GPU path on the emulated device: its stream threads, which stand for the device
    // (they poll), are not counted.
    let mut gpu = spec_for("resnet50-train.toml", &data, 8, 2, 1);
    gpu.settings.device = DeviceChoice::Emu;
    fn host_threads() -> ThreadSnapshot {
        threads_named(|n| n.starts_with("stokehold-") && !n.starts_with("stokehold-emu"))
    }
    let cases: [(&str, PipelineSpec, Counter); 3] = [
        ("files", files, pipeline_threads),
        ("tar shards", shards, pipeline_threads),
        ("the GPU path (emulated)", gpu, host_threads),
    ];
    // One after the other: the counters are the process's.
    for (what, spec, count) in cases {
        let used = while_full(spec, count);
        // Readers, workers and the assembler at least (a shard reader's own threads too; the
        // GPU path's feeding thread).
        assert!(used.threads >= 4, "{what}: {used:?}");
        assert_eq!(
            used.wakeups, 0,
            "{what}: woken while the queue was full: {used:?}"
        );
        assert!(
            used.cpu < Duration::from_millis(1),
            "{what}: CPU time while the queue was full: {used:?}"
        );
    }
}
