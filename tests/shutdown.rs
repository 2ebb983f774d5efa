//! Dropping a pipeline mid-epoch returns promptly and leaves no thread behind.
//! (Its own test binary: thread counts are per process.)

mod common;

use std::time::{Duration, Instant};

use common::*;
use stokehold::pipeline::Pipeline;

/// Threads of this process whose name marks them as the pipeline's.
fn pipeline_threads() -> usize {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    dir.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("stokehold-"))
        .count()
}

#[test]
fn dropping_mid_epoch_is_prompt_and_leaks_no_thread() {
    let (_d, data) = samples();
    let before = thread_count();
    assert_eq!(pipeline_threads(), 0);
    for _ in 0..3 {
        let mut p = Pipeline::new(spec_for("resnet50-train.toml", &data, 4, 3, 100)).unwrap();
        p.next_batch().unwrap().unwrap();
        // A thread names itself once it first runs; on a loaded machine a worker may not
        // have run yet when the first batch (made by the others) arrives.
        let named = Instant::now();
        while pipeline_threads() < 5 && named.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let named_threads = pipeline_threads();
        assert!(named_threads >= 5, "{named_threads} pipeline threads");
        let t0 = Instant::now();
        drop(p);
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "drop took {:?}",
            t0.elapsed()
        );
    }
    assert_eq!(pipeline_threads(), 0);
    if let (Some(b), Some(a)) = (before, thread_count()) {
        assert!(a <= b, "threads before {b}, after {a}");
    }
}
