use std::sync::Arc;

use super::StagingSlabs;
use crate::cuda::gpu_device::GpuDevice;
use crate::cuda::{EmuDevice, EmuOptions};

fn emu() -> Option<Arc<EmuDevice>> {
    crate::cuda::test_support::Emu::load()?;
    Some(EmuDevice::new(EmuOptions::default()).expect("emulated device"))
}

/// Workers on four threads at once each get their own bytes back, in ranges that don't
/// overlap.
#[test]
fn staged_bytes_from_many_threads_are_each_their_own() {
    let Some(dev) = emu() else { return };
    let slabs = StagingSlabs::new(dev, 4096, 64);
    let staged: Vec<Vec<(Vec<u8>, super::StagedBytes)>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..4u8)
            .map(|t| {
                let slabs = &slabs;
                s.spawn(move || {
                    (0..50usize)
                        .map(|k| {
                            let bytes: Vec<u8> = (0..(k * 37) % 700 + 1)
                                .map(|i| (i as u8) ^ t ^ k as u8)
                                .collect();
                            let got = slabs.stage(&bytes).unwrap().expect("room");
                            (bytes, got)
                        })
                        .collect()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    for (bytes, got) in staged.iter().flatten() {
        assert_eq!(got.as_slice(), &bytes[..]);
    }
}

/// A slab is reused once every image in it is let go, not before; past the cap, or after the
/// warm-up, nothing new is made and the caller copies the bytes itself.
#[test]
fn slabs_are_reused_only_when_free_and_bounded() {
    let Some(dev) = emu() else { return };
    let slabs = StagingSlabs::new(dev.clone(), 1000, 2);
    let allocs = || dev.counters().pinned_allocs;
    let before = allocs();
    let a = slabs.stage(&[1; 600]).unwrap().expect("first slab");
    let b = slabs
        .stage(&[2; 600])
        .unwrap()
        .expect("a second slab: the first is full");
    assert!(slabs.stage(&[3; 600]).unwrap().is_none(), "two at most");
    assert!(
        slabs.stage(&[4; 2000]).unwrap().is_none(),
        "larger than a slab"
    );
    assert_eq!((slabs.made(), allocs() - before), (2, 2));
    let first = a.as_slice().as_ptr();
    drop(a);
    // The first slab is free again: the next image lands at its start.
    let c = slabs
        .stage(&[5; 600])
        .unwrap()
        .expect("the first slab, reused");
    assert_eq!(c.as_slice().as_ptr(), first);
    assert_eq!(b.as_slice(), &[2; 600][..], "the second untouched");
    slabs.settle();
    drop((b, c));
    let d = slabs
        .stage(&[6; 900])
        .unwrap()
        .expect("a free slab, after the warm-up too");
    assert_eq!(d.as_slice(), &[6; 900][..]);
    assert_eq!(allocs() - before, 2, "nothing made after settling");
}

/// Settling with spares makes half as many slabs again as the warm-up made, and one, and
/// room for the bytes asked for besides, before it stops making them; the spares take copies
/// the warm-up's slabs have no room for, and after them nothing more is made.
#[test]
fn settling_with_spares_makes_room_ahead_then_none() {
    let Some(dev) = emu() else { return };
    let slabs = StagingSlabs::new(dev.clone(), 1000, 16);
    // The warm-up fills two slabs (two copies each: 448 bytes, aligned to 64).
    let warm: Vec<_> = (0..4)
        .map(|_| slabs.stage(&[7u8; 448]).unwrap().expect("room"))
        .collect();
    assert_eq!(slabs.made(), 2);
    let before = dev.counters().pinned_allocs;
    slabs.settle_with_spare(0);
    assert_eq!(slabs.made(), 4, "2 / 2 + 1 spares");
    assert_eq!(dev.counters().pinned_allocs, before + 2);
    // With the warm-up's slabs still in use, the spares take the next copies.
    let more: Vec<_> = (0..4)
        .map(|_| slabs.stage(&[9u8; 448]).unwrap().expect("a spare's room"))
        .collect();
    assert!(
        slabs.stage(&[1u8; 448]).unwrap().is_none(),
        "settled: no more slabs"
    );
    assert_eq!(dev.counters().pinned_allocs, before + 2);
    drop((warm, more));
    // None made: none spare, but for the bytes asked for besides (2,001: three slabs),
    // within the most slabs there may be.
    let empty = StagingSlabs::new(dev.clone(), 1000, 16);
    empty.settle_with_spare(0);
    assert_eq!(empty.made(), 0);
    let room = StagingSlabs::new(dev.clone(), 1000, 16);
    room.settle_with_spare(2001);
    assert_eq!(room.made(), 3);
    let few = StagingSlabs::new(dev.clone(), 1000, 2);
    few.settle_with_spare(5000);
    assert_eq!(few.made(), 2);
}
