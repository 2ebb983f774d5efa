//! The emulated device behaves as a device: stream order, events across streams, poisoned
//! and checked memory, sticky faults, a memory cap.

use std::time::{Duration, Instant};

use super::*;
use crate::cuda::gpu_device::streams;

fn dev(memory: Option<usize>) -> Option<Arc<EmuDevice>> {
    crate::cuda::test_support::Emu::load()?;
    Some(
        EmuDevice::new(EmuOptions {
            memory,
            ..EmuOptions::default()
        })
        .unwrap(),
    )
}

/// Uploads `bytes` through pinned memory into a new allocation, waiting for it.
fn upload(d: &EmuDevice, bytes: &[u8]) -> DevicePtr {
    let ptr = d.alloc(bytes.len()).unwrap();
    let mut host = d.alloc_pinned(bytes.len()).unwrap();
    host.as_mut_slice().copy_from_slice(bytes);
    // SAFETY: `host` and `ptr` hold `bytes.len()` bytes; waited for below.
    unsafe {
        d.copy_to_device(streams::DECODE, ptr, host.as_ptr(), bytes.len())
            .unwrap()
    };
    d.synchronize(&d.record(streams::DECODE, false).unwrap())
        .unwrap();
    ptr
}

fn read(d: &EmuDevice, ptr: DevicePtr, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    // SAFETY: `ptr` holds at least `n` bytes in these tests.
    unsafe { d.copy_to_host(streams::KERNELS, &mut v, ptr).unwrap() };
    v
}

#[test]
fn work_runs_in_stream_order_after_the_events_it_waits_for() {
    let Some(d) = dev(None) else { return };
    let a = upload(&d, &[1; 64]);
    let b = d.alloc(64).unwrap();
    // The decode stream is slow; the kernel stream copies after it, ordered by an event.
    d.delay(streams::DECODE, Duration::from_millis(200))
        .unwrap();
    let mut host = d.alloc_pinned(64).unwrap();
    host.as_mut_slice().fill(7);
    // SAFETY: live allocations of 64 bytes; `host` lives until the end.
    unsafe {
        d.copy_to_device(streams::DECODE, a, host.as_ptr(), 64)
            .unwrap()
    };
    let written = d.record(streams::DECODE, true).unwrap();
    assert!(
        !d.is_complete(&written).unwrap(),
        "queued work is asynchronous"
    );
    d.wait(streams::KERNELS, &written).unwrap();
    // SAFETY: as above.
    unsafe { d.copy_on_device(streams::KERNELS, b, a, 64).unwrap() };
    assert_eq!(read(&d, b, 64), vec![7; 64]);
    assert!(d.is_complete(&written).unwrap());
    let start = d.record(streams::KERNELS, true).unwrap();
    d.delay(streams::KERNELS, Duration::from_millis(20))
        .unwrap();
    let end = d.record(streams::KERNELS, true).unwrap();
    d.synchronize(&end).unwrap();
    assert!(d.elapsed(&start, &end).unwrap() >= Duration::from_millis(20));
    // SAFETY: nothing uses them any more.
    unsafe {
        d.free(a);
        d.free(b);
    }
    assert_eq!(d.memory().device, 0);
}

#[test]
fn freed_memory_is_poisoned_and_an_address_outside_every_allocation_is_a_sticky_fault() {
    let Some(d) = dev(None) else { return };
    let a = upload(&d, &[3; 100]);
    let b = d.alloc(100).unwrap();
    // A copy queued behind a slow stream reads memory freed meanwhile: it reads poison.
    d.delay(streams::KERNELS, Duration::from_millis(100))
        .unwrap();
    // SAFETY: a deliberate lifetime bug on the emulated device, which keeps freed memory
    // mapped (poisoned): the copy reads poison, nothing worse.
    unsafe {
        d.copy_on_device(streams::KERNELS, b, a, 100).unwrap();
        d.free(a);
    }
    assert_eq!(read(&d, b, 100), vec![memory::POISON; 100]);
    // A kernel whose descriptors point outside device memory faults the device: every later
    // call fails, and waiting on its events returns instead of hanging.
    let bogus = [crate::cuda::desc::JitterDesc {
        data: 16,
        pixels: 10,
        ..Default::default()
    }];
    let descs = upload(&d, crate::cuda::desc::as_bytes(&bogus));
    let sums = d.alloc(8).unwrap();
    let args = [
        KernelArg::Ptr(descs),
        KernelArg::U32(1),
        KernelArg::U32(0),
        KernelArg::Ptr(sums),
    ];
    let grid = Grid {
        blocks: 1,
        samples: 1,
    };
    // SAFETY: the emulation checks every address before running (this one fails the check).
    unsafe {
        d.launch(streams::KERNELS, Kernel::JitterStep, grid, &args)
            .unwrap()
    };
    let after = d.record(streams::KERNELS, false);
    let t0 = Instant::now();
    let err = match after {
        Ok(e) => d.synchronize(&e).unwrap_err(),
        Err(e) => e,
    };
    assert!(err.to_string().contains("illegal address"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert!(d.alloc(8).is_err(), "sticky");
    assert!(d.record(streams::DECODE, false).is_err(), "sticky");
}

#[test]
fn a_memory_cap_makes_allocations_fail_with_the_bytes_asked_for() {
    let Some(d) = dev(Some(1000)) else { return };
    let a = d.alloc(600).unwrap();
    match d.alloc(600) {
        Err(Error::DeviceOutOfMemory { bytes, detail, .. }) => {
            assert_eq!(bytes, 600);
            assert!(detail.contains("600 of 1000"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    // SAFETY: unused.
    unsafe { d.free(a) };
    let b = d.alloc(600).unwrap();
    // SAFETY: unused.
    unsafe { d.free(b) };
    assert_eq!(d.memory().device_peak, 600);
}

#[test]
fn options_are_read_from_the_environment_variables() {
    let with = |pairs: &'static [(&'static str, &'static str)]| {
        EmuOptions::from_lookup(move |n| {
            pairs
                .iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| v.to_string())
        })
    };
    assert_eq!(with(&[]).unwrap(), EmuOptions::default());
    let o = with(&[
        ("STOKEHOLD_EMU_MEMORY", "64M"),
        ("STOKEHOLD_EMU_LOSE_AFTER", "12"),
    ])
    .unwrap();
    assert_eq!(
        (o.memory, o.lose_after_launches),
        (Some(64 << 20), Some(12))
    );
    assert_eq!(
        with(&[("STOKEHOLD_EMU_MEMORY", "2G")]).unwrap().memory,
        Some(2 << 30)
    );
    let o = with(&[
        ("STOKEHOLD_EMU_LAUNCH_DELAY_MS", "25"),
        ("STOKEHOLD_EMU_EXACT_ROI", "1"),
        ("STOKEHOLD_EMU_INTERPOLATE", "1"),
    ])
    .unwrap();
    assert_eq!(o.launch_delay, Some(Duration::from_millis(25)));
    assert!(o.exact_roi && !EmuOptions::default().exact_roi);
    assert!(o.interpolate && !EmuOptions::default().interpolate);
    let e = with(&[("STOKEHOLD_EMU_LOSE_AFTER", "12k")]).unwrap_err();
    assert!(
        e.to_string().contains("STOKEHOLD_EMU_LOSE_AFTER=12k"),
        "{e}"
    );
}

/// The emulated decoder has nvJPEG's shape: routing and the ROI region at submission (the
/// header passed in, not read again), what it refuses said when the call returns, chroma
/// repeated over each block as the JPEG engines write it, a lost device an error for the
/// whole call.
#[test]
fn decodes_are_submitted_as_the_jpeg_engines_take_them() {
    use crate::decode::{decode_window, ColorMode, DecodeOptions, JpegHeader, Limits, Upsampling};
    use crate::nvjpeg::{DeviceOutput, FallbackReason, NvjpegError, Roi};
    use crate::testutil::{encode_jpeg, encode_rgb_stored_jpeg, pattern_rgb, RgbMark, Sub};

    let Some(d) = dev(None) else { return };
    let (h, w) = (64, 96);
    let good = encode_jpeg(&pattern_rgb(h, w), h, w, 3, 90, Sub::S420);
    let rgb = encode_rgb_stored_jpeg(&pattern_rgb(h, w), h, w, RgbMark::Adobe);
    let header = |b: &[u8]| JpegHeader::read(b, &Limits::default()).unwrap();
    let (hg, hr) = (header(&good), header(&rgb));
    let roi = Some(Roi {
        x: 40,
        y: 24,
        width: 20,
        height: 10,
    });
    let region = d.region_to_decode(&hg, roi, true).unwrap();
    let room = region.width * region.height * 3;
    let out: Vec<DevicePtr> = (0..4).map(|_| d.alloc(room).unwrap()).collect();
    let output = |k: usize, len: usize| DeviceOutput {
        ptr: out[k],
        pitch: region.width * 3,
        len,
    };
    let bytes = good.clone();
    let later = DecodeJob {
        engines_checked: false,
        pinned: false,
        bytes: &good,
        header: &hg,
        roi,
        rebuilt: true,
        out: output(3, room),
    };
    let r = {
        let jobs = [
            DecodeJob {
                engines_checked: false,
                pinned: false,
                bytes: &bytes,
                header: &hg,
                roi,
                rebuilt: true,
                out: output(0, room),
            },
            DecodeJob {
                engines_checked: false,
                pinned: false,
                bytes: &rgb,
                header: &hr,
                roi: None,
                rebuilt: true,
                out: output(1, room),
            },
            DecodeJob {
                engines_checked: false,
                pinned: false,
                bytes: &good,
                header: &hg,
                roi,
                rebuilt: true,
                out: output(2, room / 2),
            },
            later,
        ];
        // SAFETY: every output is a live allocation of `room` bytes, and every job's bytes
        // stay as they are, until the event waited for below.
        unsafe { d.submit_decode(streams::DECODE, &jobs).unwrap() }
    };
    d.synchronize(&d.record(streams::DECODE, false).unwrap())
        .unwrap();
    let info = r[0].as_ref().unwrap();
    assert_eq!(
        (info.width, info.height, info.window),
        (region.width, region.height, region.window)
    );
    assert!(
        matches!(
            &r[1],
            Err(NvjpegError::CpuFallback(FallbackReason::RgbStored))
        ),
        "{:?}",
        r[1]
    );
    assert!(
        matches!(&r[2], Err(NvjpegError::InvalidArgument(_))),
        "{:?}",
        r[2]
    );
    assert!(r[3].is_ok());
    // The region asked for, inside the padded output, is the CPU decoder's with chroma
    // repeated (the engines' way).
    let opts = DecodeOptions {
        color: ColorMode::Rgb,
        apply_exif: false,
        upsampling: Upsampling::Nearest,
        ..DecodeOptions::default()
    };
    let (wy, wx) = (region.window.y, region.window.x);
    let px = read(&d, out[0], room);
    let want = decode_window(&good, &opts, (24, 40, 10, 20)).unwrap();
    let want = want.as_u8_hwc().unwrap();
    for y in 0..10 {
        let at = ((wy + y) * region.width + wx) * 3;
        assert_eq!(&px[at..at + 60], &want[y * 60..(y + 1) * 60], "row {y}");
    }

    // A refusal: said at once, for the CPU to decode.
    d.fail_decodes(1);
    // SAFETY: as above.
    let r = unsafe { d.submit_decode(streams::DECODE, &[later]).unwrap() };
    assert!(
        matches!(
            &r[0],
            Err(NvjpegError::CpuFallback(FallbackReason::NvjpegFailed(_)))
        ),
        "{:?}",
        r[0]
    );

    // A lost device fails the call, not an image.
    d.lose();
    // SAFETY: as above.
    let lost = unsafe { d.submit_decode(streams::DECODE, &[later]) };
    assert!(lost.is_err());
}
