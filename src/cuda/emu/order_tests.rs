//! The check of stream order: unordered conflicting accesses fault, naming both; accesses
//! ordered by a stream, an event or a host wait don't; the record stays as small as the work
//! in flight.

use std::time::Duration;

use super::*;
use crate::cuda::gpu_device::streams;

fn dev() -> Option<Arc<EmuDevice>> {
    crate::cuda::test_support::Emu::load()?;
    Some(EmuDevice::new(EmuOptions::default()).unwrap())
}

/// Waits for everything queued on `stream`; the device's fault, if any.
fn finish(d: &EmuDevice, stream: StreamId) -> Result<(), String> {
    let ev = d.record(stream, false).map_err(|e| e.to_string())?;
    d.synchronize(&ev).map_err(|e| e.to_string())
}

#[test]
fn a_read_on_another_stream_without_an_event_faults_naming_both() {
    let Some(d) = dev() else { return };
    let (a, b) = (d.alloc(64).unwrap(), d.alloc(64).unwrap());
    // The write is slow to run, so the emulation's threads would even get it "right"
    // (the read runs first); a GPU may not.
    d.delay(streams::DECODE, Duration::from_millis(30)).unwrap();
    // SAFETY: live allocations of 64 bytes.
    unsafe {
        d.zero(streams::DECODE, a, 64).unwrap();
        d.copy_on_device(streams::KERNELS, b, a, 64).unwrap();
    }
    let e = finish(&d, streams::DECODE)
        .and_then(|()| finish(&d, streams::KERNELS))
        .expect_err("an unordered write and read");
    assert!(e.contains("stream order"), "{e}");
    assert!(
        e.contains("a memset") && e.contains("a copy's source"),
        "{e}"
    );
}

#[test]
fn events_host_waits_and_concurrent_reads_are_ordered_enough() {
    let Some(d) = dev() else { return };
    let (a, b, c) = (
        d.alloc(64).unwrap(),
        d.alloc(64).unwrap(),
        d.alloc(64).unwrap(),
    );
    // SAFETY: live allocations of 64 bytes each, waited for before the end.
    unsafe {
        // Ordered by an event.
        d.zero(streams::DECODE, a, 64).unwrap();
        let written = d.record(streams::DECODE, false).unwrap();
        d.wait(streams::KERNELS, &written).unwrap();
        d.copy_on_device(streams::KERNELS, b, a, 64).unwrap();
        // Two streams reading at once.
        d.copy_on_device(streams::DECODE, c, a, 64).unwrap();
        finish(&d, streams::KERNELS).unwrap();
        finish(&d, streams::DECODE).unwrap();
        // Ordered by the host's waits just above.
        d.zero(streams::KERNELS, a, 64).unwrap();
        finish(&d, streams::KERNELS).unwrap();
        d.copy_on_device(streams::DECODE, c, a, 64).unwrap();
    }
    finish(&d, streams::DECODE).unwrap();
}

#[test]
fn a_write_over_part_of_an_earlier_one_supersedes_only_those_bytes() {
    let Some(d) = dev() else { return };
    let a = d.alloc(64).unwrap();
    // SAFETY: a live allocation of 64 bytes; every range lies in it.
    unsafe {
        d.zero(streams::DECODE, a, 64).unwrap();
        let ev = d.record(streams::DECODE, false).unwrap();
        d.wait(streams::KERNELS, &ev).unwrap();
        d.zero(streams::KERNELS, a + 16, 16).unwrap();
        // Bytes 0..16 were last written on the decode stream itself: in order.
        d.zero(streams::DECODE, a, 16).unwrap();
    }
    finish(&d, streams::DECODE).unwrap();
    finish(&d, streams::KERNELS).unwrap();
    // SAFETY: as above. Bytes 20..24 were written on the kernel stream, which the decode
    // stream never waited for (the host did, but this comes after it: see below).
    unsafe {
        d.zero(streams::KERNELS, a + 16, 16).unwrap();
        d.zero(streams::DECODE, a + 20, 4).unwrap();
    }
    let e = finish(&d, streams::DECODE)
        .and_then(|()| finish(&d, streams::KERNELS))
        .expect_err("bytes 20..24 written by two streams unordered");
    assert!(e.contains("stream order"), "{e}");
}

#[test]
fn the_record_stays_as_small_as_the_work_in_flight() {
    let Some(d) = dev() else { return };
    let (a, b) = (d.alloc(4096).unwrap(), d.alloc(4096).unwrap());
    for _ in 0..200 {
        // SAFETY: live allocations of 4096 bytes; each stream waits for the other's work.
        unsafe {
            d.zero(streams::DECODE, a, 4096).unwrap();
            let written = d.record(streams::DECODE, false).unwrap();
            d.wait(streams::KERNELS, &written).unwrap();
            for k in 0..8u64 {
                d.copy_on_device(streams::KERNELS, b + 512 * k, a + 512 * k, 512)
                    .unwrap();
            }
            let read = d.record(streams::KERNELS, false).unwrap();
            d.wait(streams::DECODE, &read).unwrap();
        }
    }
    finish(&d, streams::DECODE).unwrap();
    finish(&d, streams::KERNELS).unwrap();
    let on_record = d.memory.touches_on_record();
    assert!(on_record <= 17, "{on_record} accesses on record");
}

/// The JPEG engines write their outputs when nvJPEG is called (as measured on H100s:
/// `docs/gpu.md`): an event their stream waits for does not order them after a kernel still
/// reading the output; a host wait for it does.
#[test]
fn the_jpeg_engines_write_after_host_waits_only() {
    use crate::decode::{JpegHeader, Limits};
    use crate::testutil::{encode_jpeg, pattern_rgb, whole_image_job, Sub};

    let (h, w) = (32, 48);
    let jpeg = encode_jpeg(&pattern_rgb(h, w), h, w, 3, 90, Sub::S420);
    let header = JpegHeader::read(&jpeg, &Limits::default()).unwrap();
    let len = h * w * 3;
    // A slow kernel-stream read of an area (an earlier batch's chain), then a decode into
    // it after a wait for that read: on the device (as a stream-ordered pool has it) or on
    // the host. A fault is sticky, so each way gets a device of its own.
    let decode_after_read = |host_waits: bool| -> Option<Result<(), String>> {
        let d = dev()?;
        let (area, copy) = (d.alloc(len).unwrap(), d.alloc(len).unwrap());
        d.delay(streams::KERNELS, Duration::from_millis(30))
            .unwrap();
        // SAFETY: live allocations of `len` bytes.
        unsafe { d.copy_on_device(streams::KERNELS, copy, area, len).unwrap() };
        let read = d.record(streams::KERNELS, false).unwrap();
        if host_waits {
            d.synchronize(&read).unwrap();
        } else {
            d.wait(streams::DECODE, &read).unwrap();
        }
        let job = whole_image_job((&jpeg, &header), area);
        // SAFETY: `area` holds the whole image; the bytes outlive the waits below.
        let r = unsafe { d.submit_decode(streams::DECODE, &[job]).unwrap() };
        assert!(r[0].is_ok(), "{:?}", r[0]);
        Some(finish(&d, streams::DECODE).and_then(|()| finish(&d, streams::KERNELS)))
    };
    let Some(device_wait) = decode_after_read(false) else {
        return;
    };
    let e = device_wait.expect_err("the engines wrote with only a device-side wait before them");
    assert!(
        e.contains("stream order") && e.contains("a decode output"),
        "{e}"
    );
    decode_after_read(true).unwrap().unwrap();
}
