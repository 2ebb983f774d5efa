//! The pools settle at the end of the warm-up so that later requests of the sizes and
//! numbers the warm-up saw allocate nothing.

use std::sync::Arc;

use super::*;
use crate::cuda::emu::{EmuDevice, EmuOptions};
use crate::cuda::gpu_device::streams;

fn device() -> Arc<dyn GpuDevice> {
    EmuDevice::new(EmuOptions::default()).expect("emulated device")
}

#[test]
fn a_settled_pool_serves_as_many_buffers_of_its_largest_size_without_allocating() {
    let dev = device();
    let pool = DevicePool::new(dev.clone());
    let what = || "a test buffer".to_string();
    // Three at once, growing (random crops): the first two are smaller than the third.
    let sizes = [1 << 20, 3 << 20, 5 << 20];
    let held: Vec<_> = sizes
        .iter()
        .map(|&n| pool.take(n, streams::KERNELS, &what).unwrap())
        .collect();
    drop(held);
    pool.settle().unwrap();
    let before = dev.counters();
    // Later batches ask for the largest size three at once, and as many as before plus the
    // spare (batches in flight vary by one).
    let largest = 5 << 20;
    let again: Vec<_> = (0..4)
        .map(|_| pool.take(largest, streams::KERNELS, &what).unwrap())
        .collect();
    let after = dev.counters();
    assert_eq!(
        after.device_allocs, before.device_allocs,
        "nothing allocated"
    );
    drop(again);
}

/// A pool of one size (the batches' outputs) makes buffers the size asked, no larger, and
/// once settled for the consumer's queue (`expect_out`) serves that many, and a short last
/// batch, without allocating.
#[test]
fn a_pool_of_one_size_makes_buffers_the_size_asked_and_settles_for_the_queue() {
    let dev = device();
    let pool = DevicePool::of_one_size(dev.clone());
    let what = || "a test output".to_string();
    let len = 3 << 20;
    let b = pool.take(len, streams::KERNELS, &what).unwrap();
    assert_eq!(b.capacity(), size_class(len).unwrap());
    drop(b);
    pool.expect_out(4);
    pool.settle().unwrap();
    let before = dev.counters();
    let mut held: Vec<_> = (0..4)
        .map(|_| pool.take(len, streams::KERNELS, &what).unwrap())
        .collect();
    drop(held.pop());
    held.push(pool.take(len / 3, streams::KERNELS, &what).unwrap());
    assert_eq!(dev.counters().device_allocs, before.device_allocs);
    assert!(held
        .iter()
        .all(|b| b.capacity() == size_class(len).unwrap()));
}

/// A pool whose high water is raised before it settles (the rebuilt chroma's, to the decode
/// areas' size) serves a request larger than the warm-up met without allocating.
#[test]
fn a_raised_high_water_serves_larger_requests_after_settling() {
    let dev = device();
    let pool = DevicePool::new(dev.clone());
    let what = || "a test buffer".to_string();
    drop(pool.take(1 << 20, streams::KERNELS, &what).unwrap());
    pool.raise_high_water(8 << 20);
    pool.settle().unwrap();
    let before = dev.counters();
    let b = pool.take(6 << 20, streams::KERNELS, &what).unwrap();
    assert_eq!(dev.counters().device_allocs, before.device_allocs);
    assert!(b.capacity() >= 8 << 20);
}

#[test]
fn a_settled_ring_has_every_slot_at_its_largest_size() {
    let dev = device();
    let mut ring = PinnedRing::new(dev.clone(), 3);
    // Only the first slot was used during the warm-up, for a small and then a larger upload.
    for n in [100 << 10, 700 << 10] {
        drop(ring.lease(n, streams::KERNELS).unwrap());
        // Back to the first slot.
        ring.next = 0;
    }
    ring.settle().unwrap();
    let before = dev.counters();
    for _ in 0..6 {
        drop(ring.lease(700 << 10, streams::KERNELS).unwrap());
    }
    assert_eq!(dev.counters().pinned_allocs, before.pinned_allocs);
}

/// Room made before settling: every slot takes uploads that much larger than the warm-up's
/// without allocating; a ring the warm-up never used gets the room alone.
#[test]
fn a_ring_settled_with_room_takes_larger_uploads_without_allocating() {
    let dev = device();
    let mut ring = PinnedRing::new(dev.clone(), 2);
    drop(ring.lease(300 << 10, streams::KERNELS).unwrap());
    ring.make_room(1 << 20);
    ring.settle().unwrap();
    let before = dev.counters();
    for _ in 0..4 {
        drop(
            ring.lease((300 << 10) + (1 << 20), streams::KERNELS)
                .unwrap(),
        );
    }
    assert_eq!(dev.counters().pinned_allocs, before.pinned_allocs);
    let mut unused = PinnedRing::new(dev.clone(), 2);
    unused.make_room(1 << 20);
    unused.settle().unwrap();
    let before = dev.counters();
    drop(unused.lease(1 << 20, streams::KERNELS).unwrap());
    drop(unused.lease(1 << 20, streams::KERNELS).unwrap());
    assert_eq!(dev.counters().pinned_allocs, before.pinned_allocs);
}

/// A pool for the JPEG engines' outputs hands out a buffer only once the host has seen its
/// last users done (the engines don't wait for their stream): during the warm-up it
/// allocates another instead, and settles with enough of them; after, the host waits for the
/// one given back first, and the pool counts it.
#[test]
fn a_pool_for_the_engines_hands_out_only_buffers_whose_work_is_done() {
    use std::time::Duration;
    let Some(emu) = crate::cuda::test_support::Emu::load()
        .map(|_| EmuDevice::new(EmuOptions::default()).expect("emulated device"))
    else {
        return;
    };
    let dev: Arc<dyn GpuDevice> = emu.clone();
    let pool = DevicePool::for_engines(dev.clone());
    let what = || "a decode area".to_string();
    let size = 1 << 20;
    // Used by a slow kernel-stream read (long enough for a loaded machine), then given back.
    let busy_until = |b: &mut DeviceBuffer| {
        emu.delay(streams::KERNELS, Duration::from_millis(300))
            .unwrap();
        let e = dev.record(streams::KERNELS, false).unwrap();
        b.used_until(e.clone());
        (b.ptr(), e)
    };
    let mut a = pool.take(size, streams::DECODE, &what).unwrap();
    let (a_ptr, _) = busy_until(&mut a);
    drop(a);
    let b = pool.take(size, streams::DECODE, &what).unwrap();
    assert_ne!(b.ptr(), a_ptr, "a buffer still read was handed out");
    assert_eq!(dev.counters().device_allocs, 2);
    assert_eq!(
        pool.host_waits(),
        0,
        "the warm-up allocates rather than wait"
    );
    drop(b);
    pool.settle().unwrap();
    // Settled with the two the warm-up needed at once and a spare.
    assert_eq!(pool.idle_count(), 3);
    dev.synchronize_all().unwrap();
    let before = dev.counters();
    let mut held: Vec<_> = (0..3)
        .map(|_| pool.take(size, streams::DECODE, &what).unwrap())
        .collect();
    // Read one after the other: the first given back is done first.
    let used: Vec<_> = held.iter_mut().map(busy_until).collect();
    drop(held);
    // All three still read: the host waits for the first, and allocates nothing.
    let c = pool.take(size, streams::DECODE, &what).unwrap();
    assert_eq!(pool.host_waits(), 1);
    assert_eq!(c.ptr(), used[0].0, "the buffer back first");
    assert!(
        dev.is_complete(&used[0].1).unwrap(),
        "handed out before its work was done"
    );
    assert!(
        !dev.is_complete(&used[2].1).unwrap(),
        "the test's reads ended too early"
    );
    assert_eq!(dev.counters().device_allocs, before.device_allocs);
    drop(c);
    dev.synchronize_all().unwrap();
}
