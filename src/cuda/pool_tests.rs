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
