//! The pinned pool on the emulated device: buffers come back when dropped and are reused;
//! one that a consumer's stream still reads is not handed out before that stream's work has
//! run; a settled pool serves its largest size without allocating.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::cuda::emu::{EmuDevice, EmuOptions};

fn device() -> Arc<EmuDevice> {
    EmuDevice::new(EmuOptions::default()).expect("emulated device")
}

fn what() -> String {
    "a test batch".to_string()
}

#[test]
fn a_dropped_buffer_comes_back_and_is_reused() {
    let dev = device();
    let pool = PinnedPool::new(dev.clone()).unwrap();
    pool.reserve(2, 1 << 20, &what).unwrap();
    let before = dev.counters().pinned_allocs;
    assert_eq!(pool.back(), 2);
    let mut a = pool.take(1 << 20, &what).unwrap();
    a.as_mut_slice().fill(7);
    let b = pool.take(900 << 10, &what).unwrap();
    assert_eq!(pool.back(), 0);
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    drop(a);
    drop(b);
    assert_eq!(pool.back(), 2, "both back on the list");
    let again: Vec<_> = (0..2).map(|_| pool.take(1 << 20, &what).unwrap()).collect();
    let mut ptrs: Vec<_> = again.iter().map(|b| b.as_ptr()).collect();
    ptrs.sort();
    let mut had = vec![pa, pb];
    had.sort();
    assert_eq!(ptrs, had, "the same memory");
    assert_eq!(dev.counters().pinned_allocs, before, "nothing allocated");
    // A third at once is new memory.
    let third = pool.take(1 << 20, &what).unwrap();
    assert_eq!(dev.counters().pinned_allocs, before + 1);
    drop((again, third));
}

#[test]
fn a_buffer_a_consumer_stream_still_reads_waits_for_that_work() {
    let dev = device();
    let pool = PinnedPool::new(dev.clone()).unwrap();
    pool.reserve(2, 4096, &what).unwrap();
    let consumer = dev.new_stream().unwrap();
    let mut busy = pool.take(4096, &what).unwrap();
    let busy_ptr = busy.as_ptr();
    // The consumer's copy of it is queued behind 300 ms of other work; it drops the buffer
    // at once, with the release event recorded on its stream.
    dev.delay(consumer, Duration::from_millis(300)).unwrap();
    let release = dev.record(consumer, false).unwrap();
    busy.used_until(release.clone());
    drop(busy);
    // The other buffer is free: handed out at once, the busy one is not.
    let t0 = std::time::Instant::now();
    let free = pool.take(4096, &what).unwrap();
    assert_ne!(free.as_ptr(), busy_ptr);
    assert!(
        t0.elapsed() < Duration::from_millis(250),
        "{:?}",
        t0.elapsed()
    );
    assert!(!dev.is_complete(&release).unwrap());
    // With only the busy one left, taking it waits for the consumer's work.
    let again = pool.take(4096, &what).unwrap();
    assert_eq!(again.as_ptr(), busy_ptr);
    assert!(
        dev.is_complete(&release).unwrap(),
        "handed out after its release"
    );
    drop((free, again));
}

#[test]
fn a_settled_pool_serves_its_largest_size_without_allocating() {
    let dev = device();
    let pool = PinnedPool::new(dev.clone()).unwrap();
    pool.reserve(3, 100 << 10, &what).unwrap();
    // A larger batch met during the warm-up.
    drop(pool.take(700 << 10, &what).unwrap());
    pool.settle().unwrap();
    let before = dev.counters().pinned_allocs;
    for _ in 0..3 {
        let held: Vec<_> = (0..3)
            .map(|_| pool.take(700 << 10, &what).unwrap())
            .collect();
        drop(held);
    }
    assert_eq!(dev.counters().pinned_allocs, before, "nothing allocated");
}
