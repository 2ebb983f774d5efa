//! The batch decoder's bookkeeping against a fake nvJPEG (`fake.rs`): the context bound
//! before every call, encoded bytes kept until the GPU has read them, a slot per image in
//! flight on the decoupled path, nothing reported decoded before its fence, failures at
//! synchronisation sent to the CPU and a lost context fatal, nvJPEG's memory from our caches
//! and reused, ROIs padded on affected versions, the header read once by the caller.

use super::super::safe::{
    decode_region, DecoderConfig, EncodedImage, DEVICE_PADDING, PINNED_PADDING,
};
use super::fake::{self, checksum, FakeGpu, Log};
use super::*;
use crate::decode::JpegHeader;

/// A baseline (engine-routed) or progressive (decoupled) JPEG of size `h` × `w`; the size
/// makes each one's bytes, and so its checksum, different.
pub(super) fn jpeg(h: usize, w: usize, progressive: bool) -> Vec<u8> {
    encode_jpeg_opts(
        &pattern_rgb(h, w),
        h,
        w,
        3,
        &JpegOpts {
            quality: 85,
            sub: Sub::S420,
            progressive,
            exif_tiff: None,
        },
    )
}

pub(super) fn header(bytes: &[u8]) -> JpegHeader {
    JpegHeader::read(bytes, &Limits::default()).expect("a readable header")
}

/// Output buffers (host memory standing for device memory) sized by the decoder's region,
/// with their row pitch.
pub(super) fn outputs(
    dec: &BatchDecoder,
    headers: &[JpegHeader],
    rois: &[Option<Roi>],
) -> Vec<(Vec<u8>, usize)> {
    headers
        .iter()
        .zip(rois)
        .map(|(h, r)| match dec.region_to_decode(h, *r, false) {
            Ok(p) => (vec![0u8; p.width * p.height * 3], p.width * 3),
            Err(_) => (vec![0u8; 3], 3),
        })
        .collect()
}

pub(super) fn encoded<'a>(
    bytes: &'a [Vec<u8>],
    headers: &'a [JpegHeader],
    rois: &[Option<Roi>],
    outs: &mut [(Vec<u8>, usize)],
) -> Vec<EncodedImage<'a>> {
    bytes
        .iter()
        .zip(headers)
        .zip(rois)
        .zip(outs.iter_mut())
        .map(|(((b, h), r), (o, pitch))| EncodedImage {
            engines_checked: false,
            pinned: false,
            bytes: b,
            header: h,
            roi: *r,
            chroma_margin: false,
            output: DeviceOutput {
                ptr: o.as_mut_ptr() as u64,
                pitch: *pitch,
                len: o.len(),
            },
        })
        .collect()
}

/// The first three bytes of each output (what the fake writes).
fn firsts(outs: &[(Vec<u8>, usize)]) -> Vec<[u8; 3]> {
    outs.iter().map(|(o, _)| [o[0], o[1], o[2]]).collect()
}

pub(super) fn decoder(
    log: &Arc<Log>,
    gpu: &Arc<FakeGpu>,
    hardware: bool,
    config: DecoderConfig,
) -> BatchDecoder {
    log.lock().hardware = hardware;
    let lib = fake::library(log, (13, 0, 0));
    BatchDecoder::new(lib, gpu.clone(), config).expect("a decoder on the fake")
}

pub(super) fn small_config() -> DecoderConfig {
    DecoderConfig {
        max_batch: 16,
        ring_depth: 2,
        decoupled_slots: 3,
        preallocate: (64, 48),
        ..DecoderConfig::default()
    }
}

/// Per image: the decoder's answer, the first three output bytes, the expected byte.
type RoundTrip = (Vec<Result<DecodedInfo, NvjpegError>>, Vec<[u8; 3]>, Vec<u8>);

/// Submits `bytes` (whole images), lets the caller's copies go, and finishes.
fn round_trip(dec: &mut BatchDecoder, bytes: Vec<Vec<u8>>) -> RoundTrip {
    let sums: Vec<u8> = bytes.iter().map(|b| checksum(b)).collect();
    let headers: Vec<JpegHeader> = bytes.iter().map(|b| header(b)).collect();
    let rois = vec![None; bytes.len()];
    let mut outs = outputs(dec, &headers, &rois);
    let mut bytes = bytes;
    let submitted = {
        let images = encoded(&bytes, &headers, &rois, &mut outs);
        // SAFETY: the fake runs on host memory; the outputs live until `finish` below.
        unsafe { dec.submit(std::ptr::null_mut(), &images) }.expect("submitted")
    };
    // The caller's encoded bytes are overwritten as soon as submit returns.
    for b in &mut bytes {
        b.fill(0x11);
    }
    let results = dec.finish(submitted).expect("finished");
    (results, firsts(&outs), sums)
}

#[test]
fn the_decoder_binds_its_context_before_every_call_on_any_thread() {
    let log = Arc::new(Log::default());
    let gpu = FakeGpu::new(7, &log);
    let mut dec = decoder(&log, &gpu, true, small_config());
    let creating = log.lock().calls.len();
    assert!(creating > 0);
    std::thread::spawn(move || {
        assert_eq!(fake::current_context(), 0, "a fresh thread has no context");
        let (results, _, _) = round_trip(&mut dec, vec![jpeg(16, 24, false), jpeg(17, 24, true)]);
        assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
        // Another thread binds another context: the decoder puts its own back.
        FakeGpu::new(99, &Arc::new(Log::default())).bind().unwrap();
        let _ = dec.get_image_info(b"\xff\xd8");
        drop(dec);
    })
    .join()
    .unwrap();
    let st = log.lock();
    let wrong: Vec<_> = st.calls.iter().filter(|c| c.context != 7).collect();
    assert!(
        wrong.is_empty(),
        "calls without the decoder's context: {wrong:?}"
    );
    let names: Vec<&str> = st.calls.iter().map(|c| c.name).collect();
    for needed in [
        "nvjpegCreateExV2",
        "nvjpegDecodeBatchedEx",
        "nvjpegDecodeJpegHost",
        "nvjpegGetImageInfo",
        "nvjpegDestroy",
    ] {
        assert!(names.contains(&needed), "{needed} was called");
    }
    assert!(st.violations.is_empty(), "{:?}", st.violations);
}

#[test]
fn encoded_bytes_are_staged_in_pinned_memory_until_the_fence() {
    let log = Arc::new(Log::default());
    let gpu = FakeGpu::new(1, &log);
    let mut dec = decoder(&log, &gpu, true, small_config());
    for round in 0..5 {
        let bytes: Vec<Vec<u8>> = (0..6).map(|k| jpeg(16 + k, 20 + round, false)).collect();
        let (results, outs, sums) = round_trip(&mut dec, bytes);
        for (k, (r, o)) in results.iter().zip(&outs).enumerate() {
            let info = r.as_ref().unwrap_or_else(|e| panic!("image {k}: {e}"));
            assert_eq!(info.route, GpuRoute::Hardware);
            assert_eq!(
                *o, [sums[k]; 3],
                "round {round} image {k}: the GPU read its bytes"
            );
        }
    }
    let st = log.lock();
    assert!(st.violations.is_empty(), "{:?}", st.violations);
    assert_eq!(st.batched_data.len(), 30);
    for &p in &st.batched_data {
        assert!(
            gpu.is_pinned(p),
            "nvjpegDecodeBatchedEx read {p:#x}, not the pinned ring"
        );
    }
}

#[test]
fn the_caller_s_bytes_are_not_what_the_gpu_reads() {
    // The same check from the other side: with the ring, overwriting the caller's copies
    // right after submit changes nothing (`round_trip` does that), and the batched call
    // never sees the caller's addresses.
    let log = Arc::new(Log::default());
    let gpu = FakeGpu::new(1, &log);
    let mut dec = decoder(&log, &gpu, true, small_config());
    let bytes = vec![jpeg(20, 20, false), jpeg(21, 20, false)];
    let caller: Vec<usize> = bytes.iter().map(|b| b.as_ptr() as usize).collect();
    let (results, ..) = round_trip(&mut dec, bytes);
    assert!(results.iter().all(|r| r.is_ok()));
    let st = log.lock();
    assert!(st.batched_data.iter().all(|p| !caller.contains(p)));
}

#[test]
fn decoupled_images_each_take_a_slot_and_wait_for_its_last_use() {
    let log = Arc::new(Log::default());
    let gpu = FakeGpu::new(1, &log);
    // No engines: everything goes the decoupled way, 10 images through 3 slots.
    let mut dec = decoder(&log, &gpu, false, small_config());
    assert!(!dec.has_hardware());
    let bytes: Vec<Vec<u8>> = (0..10).map(|k| jpeg(12 + k, 16, k % 2 == 0)).collect();
    let (results, outs, sums) = round_trip(&mut dec, bytes);
    for (k, (r, o)) in results.iter().zip(&outs).enumerate() {
        assert_eq!(r.as_ref().expect("decoded").route, GpuRoute::Hybrid);
        assert_eq!(
            *o, [sums[k]; 3],
            "image {k}: its own pinned buffer and state"
        );
    }
    let st = log.lock();
    assert!(st.violations.is_empty(), "{:?}", st.violations);
    // Reusing a slot (7 times) waited for its last image; finishing waited once more.
    assert!(st.waits >= 8, "{} waits", st.waits);
}

#[test]
fn reuse_without_waiting_would_be_caught() {
    // The fake must see the hazards the slots and the ring avoid. With waits that don't
    // wait (the GPU far behind), one decoupled slot, and a ring of one: the second image's
    // host phase finds the first's transfer still queued, and the second batch overwrites
    // the first's staged bytes before the GPU read them.
    let log = Arc::new(Log::default());
    let gpu = FakeGpu::new(1, &log);
    let mut dec = decoder(
        &log,
        &gpu,
        true,
        DecoderConfig {
            decoupled_slots: 1,
            ring_depth: 1,
            ..small_config()
        },
    );
    log.lock().ignore_waits = true;
    let bytes = vec![jpeg(12, 12, true), jpeg(13, 12, true)];
    let headers: Vec<JpegHeader> = bytes.iter().map(|b| header(b)).collect();
    let mut outs = outputs(&dec, &headers, &[None, None]);
    let images = encoded(&bytes, &headers, &[None, None], &mut outs);
    // SAFETY: the fake runs on host memory; the outputs live until the end.
    let first = unsafe { dec.submit(std::ptr::null_mut(), &images) }.unwrap();
    let engines = vec![jpeg(14, 12, false)];
    let h2 = vec![header(&engines[0])];
    let mut outs2 = outputs(&dec, &h2, &[None]);
    let images2 = encoded(&engines, &h2, &[None], &mut outs2);
    // SAFETY: as above.
    let second = unsafe { dec.submit(std::ptr::null_mut(), &images2) }.unwrap();
    let mut st = log.lock();
    assert!(
        st.violations
            .iter()
            .any(|v| v.contains("nvjpegDecodeJpegHost")),
        "{:?}",
        st.violations
    );
    st.ignore_waits = false;
    drop(st);
    let _ = (dec.finish(first), dec.finish(second));
    drop(dec);
    drop(outs);
    drop(outs2);
}

#[test]
fn submitted_images_are_not_decoded_until_finish() {
    let log = Arc::new(Log::default());
    let gpu = FakeGpu::new(1, &log);
    let mut dec = decoder(&log, &gpu, true, small_config());
    let bytes = vec![jpeg(16, 16, false), jpeg(16, 18, true)];
    let headers: Vec<JpegHeader> = bytes.iter().map(|b| header(b)).collect();
    let rois = [None, None];
    let mut outs = outputs(&dec, &headers, &rois);
    let images = encoded(&bytes, &headers, &rois, &mut outs);
    // SAFETY: the fake runs on host memory; the outputs live until `finish`.
    let s = unsafe { dec.submit(std::ptr::null_mut(), &images) }.unwrap();
    assert!(!s.is_done().unwrap(), "queued, not run");
    assert!(
        firsts(&outs).iter().all(|o| *o == [0, 0, 0]),
        "nothing written yet"
    );
    let results = dec.finish(s).unwrap();
    assert!(results.iter().all(|r| r.is_ok()));
    assert!(firsts(&outs)
        .iter()
        .zip(&bytes)
        .all(|(o, b)| *o == [checksum(b); 3]));
}

#[test]
fn an_error_at_synchronisation_sends_the_batch_to_the_cpu() {
    let log = Arc::new(Log::default());
    let gpu = FakeGpu::new(1, &log);
    let mut dec = decoder(&log, &gpu, true, small_config());
    let bytes = vec![jpeg(16, 16, false), jpeg(16, 18, true)];
    let mut all = bytes.clone();
    all.push(b"not a jpeg at all".to_vec());
    let mut headers: Vec<JpegHeader> = bytes.iter().map(|b| header(b)).collect();
    headers.push(header(&bytes[0]));
    let rois = [None, None, None];
    let mut outs = outputs(&dec, &headers, &rois);
    let mut images = encoded(&all, &headers, &rois, &mut outs);
    images[2].output.ptr = 0; // an output that can't hold it: refused on the host
                              // The batch's GPU work fails (out of resources: not a lost context).
    log.lock().fail_from_now(701);
    // SAFETY: as above.
    let s = unsafe { dec.submit(std::ptr::null_mut(), &images) }.unwrap();
    let results = dec.finish(s).unwrap();
    log.lock().failing_work = None;
    for r in &results[..2] {
        match r {
            Err(NvjpegError::CpuFallback(FallbackReason::NvjpegFailed(m))) => {
                assert!(m.contains("CUDA error 701"), "{m}")
            }
            other => panic!("expected a CPU fallback, got {other:?}"),
        }
    }
    assert!(matches!(&results[2], Err(NvjpegError::InvalidArgument(_))));
    // The decoder goes on with the next batch.
    let (again, ..) = round_trip(&mut dec, vec![jpeg(20, 20, false)]);
    assert!(again[0].is_ok());
}

#[test]
fn a_lost_context_fails_the_pipeline_not_a_sample() {
    let log = Arc::new(Log::default());
    let gpu = FakeGpu::new(1, &log);
    let mut dec = decoder(&log, &gpu, true, small_config());
    let bytes = vec![jpeg(16, 16, false)];
    let headers = vec![header(&bytes[0])];
    let mut outs = outputs(&dec, &headers, &[None]);
    let images = encoded(&bytes, &headers, &[None], &mut outs);
    log.lock().fail_from_now(700); // CUDA_ERROR_ILLEGAL_ADDRESS: sticky
                                   // SAFETY: as above.
    let s = unsafe { dec.submit(std::ptr::null_mut(), &images) }.unwrap();
    let e = dec.finish(s).unwrap_err();
    assert!(e.is_fatal(), "{e}");
    assert!(e.to_string().contains("the CUDA context is lost"), "{e}");
    let pipeline_error: crate::Error = e.into();
    assert!(matches!(pipeline_error, crate::Error::Cuda(_)));
    assert!(crate::nvjpeg::cuda_error_is_fatal(719));
    assert!(
        !crate::nvjpeg::cuda_error_is_fatal(2),
        "out of memory is not sticky"
    );
}

#[test]
fn nvjpeg_memory_comes_from_our_caches_and_is_reused() {
    let log = Arc::new(Log::default());
    let gpu = FakeGpu::new(1, &log);
    let config = small_config();
    let mut dec = decoder(&log, &gpu, true, config);
    {
        let st = log.lock();
        // Both handles (engines and default) got our allocators; paddings set on each.
        assert_eq!(st.handles_with_allocators, 2);
        assert!(st.paddings.contains(&("pinned", PINNED_PADDING)));
        assert!(st.paddings.contains(&("device", DEVICE_PADDING)));
        // One preallocated engine state per ring slot.
        assert_eq!(st.preallocated, vec![(16, 64, 48); config.ring_depth]);
    }
    let mut allocs_after_warmup = 0;
    for round in 0..24 {
        // Images of varying sizes (a cycle of four batches): the decoupled path's pinned and
        // device buffers grow through our allocator, the ring's blocks too.
        let c = round % 4;
        let bytes: Vec<Vec<u8>> = (0..5)
            .map(|k| jpeg(10 + 7 * c + k, 12 + 5 * ((c + k) % 4), k % 2 == 1))
            .collect();
        let (results, ..) = round_trip(&mut dec, bytes);
        assert!(results.iter().all(|r| r.is_ok()));
        if round == 11 {
            allocs_after_warmup = gpu.alloc_counts().0;
        }
    }
    let (allocs, frees) = gpu.alloc_counts();
    assert_eq!(frees, 0, "no memory goes back to CUDA during the run");
    assert_eq!(
        allocs, allocs_after_warmup,
        "once every size was seen, every request is served by a block of the caches"
    );
    let (device, pinned) = dec.memory_stats();
    assert!(pinned.reused > 0, "{pinned:?}");
    assert!(device.allocated > 0, "{device:?}");
    assert!(log.lock().violations.is_empty());
    drop(dec);
    let (allocs, frees) = gpu.alloc_counts();
    assert_eq!(
        allocs, frees,
        "everything freed when the decoder goes, not before"
    );
}

#[test]
fn a_failed_batched_call_goes_the_decoupled_way() {
    let log = Arc::new(Log::default());
    let gpu = FakeGpu::new(1, &log);
    let mut dec = decoder(&log, &gpu, true, small_config());
    log.lock().fail_batched = true;
    let (results, outs, sums) =
        round_trip(&mut dec, vec![jpeg(16, 16, false), jpeg(16, 20, false)]);
    for (k, r) in results.iter().enumerate() {
        assert_eq!(r.as_ref().unwrap().route, GpuRoute::Hybrid);
        assert_eq!(outs[k], [sums[k]; 3]);
    }
}

#[test]
fn the_caller_s_header_decides_the_route() {
    let log = Arc::new(Log::default());
    let gpu = FakeGpu::new(1, &log);
    let mut dec = decoder(&log, &gpu, true, small_config());
    let baseline = jpeg(16, 16, false);
    let progressive = jpeg(16, 16, true);
    // The baseline bytes with the progressive file's header: the header is what is read.
    let headers = vec![header(&progressive)];
    let bytes = vec![baseline];
    let mut outs = outputs(&dec, &headers, &[None]);
    let images = encoded(&bytes, &headers, &[None], &mut outs);
    // SAFETY: as above.
    let results = unsafe { dec.decode(std::ptr::null_mut(), &images) }.unwrap();
    assert_eq!(results[0].as_ref().unwrap().route, GpuRoute::Hybrid);
    // A CMYK-like header refuses the image whatever the bytes.
    let gray_as_rgb = {
        let mut h = header(&bytes[0]);
        (h.jfif, h.adobe_transform) = (false, Some(0));
        h
    };
    let headers = vec![gray_as_rgb];
    let images = encoded(&bytes, &headers, &[None], &mut outs);
    // SAFETY: as above.
    let results = unsafe { dec.decode(std::ptr::null_mut(), &images) }.unwrap();
    assert!(
        matches!(
            &results[0],
            Err(NvjpegError::CpuFallback(FallbackReason::RgbStored))
        ),
        "{:?}",
        results[0]
    );
}

#[test]
fn rois_of_subsampled_chroma_are_padded_by_an_mcu() {
    // A 4:2:0 image: 16x16 MCUs.
    let bytes = jpeg(100, 120, false);
    let h = header(&bytes);
    let roi = Roi {
        x: 40,
        y: 30,
        width: 50,
        height: 20,
    };
    let padded = decode_region(&h, Some(roi), true).unwrap();
    assert_eq!(
        padded.decode,
        Some(Roi {
            x: 24,
            y: 14,
            width: 82,
            height: 52
        })
    );
    assert_eq!((padded.width, padded.height), (82, 52));
    assert_eq!(
        padded.window,
        Roi {
            x: 16,
            y: 16,
            width: 50,
            height: 20
        }
    );
    // Clamped at the edges; a region that grows to the whole image is the whole image.
    let corner = decode_region(
        &h,
        Some(Roi {
            x: 0,
            y: 0,
            width: 10,
            height: 10,
        }),
        true,
    )
    .unwrap();
    assert_eq!(
        corner.decode,
        Some(Roi {
            x: 0,
            y: 0,
            width: 26,
            height: 26
        })
    );
    assert_eq!(
        corner.window,
        Roi {
            x: 0,
            y: 0,
            width: 10,
            height: 10
        }
    );
    let most = decode_region(
        &h,
        Some(Roi {
            x: 5,
            y: 5,
            width: 110,
            height: 90,
        }),
        true,
    )
    .unwrap();
    assert_eq!((most.decode, most.width, most.height), (None, 120, 100));
    assert_eq!(
        most.window,
        Roi {
            x: 5,
            y: 5,
            width: 110,
            height: 90
        }
    );
    // Unpadded: the ROI itself.
    let plain = decode_region(&h, Some(roi), false).unwrap();
    assert_eq!(
        (plain.decode, plain.window.x, plain.window.y),
        (Some(roi), 0, 0)
    );
    // Outside or empty: refused.
    assert!(decode_region(
        &h,
        Some(Roi {
            x: 100,
            y: 0,
            width: 21,
            height: 1
        }),
        true
    )
    .is_err());
    assert!(decode_region(
        &h,
        Some(Roi {
            x: 0,
            y: 0,
            width: 0,
            height: 1
        }),
        false
    )
    .is_err());

    // nvJPEG interpolates chroma (the default): the ROI boundary bug of 13.0 (the fake's
    // version) pads the region by an MCU, and nvJPEG gets the padded region.
    let log = Arc::new(Log::default());
    let gpu = FakeGpu::new(1, &log);
    let mut dec = decoder(&log, &gpu, true, small_config());
    assert!(dec.pads_roi() && dec.interpolated());
    // Repeated chroma (`upsampling = "nearest"`) is padded there too.
    let repeated = DecoderConfig {
        interpolate: false,
        ..small_config()
    };
    let near = decoder(&log, &FakeGpu::new(3, &log), true, repeated);
    assert!(near.pads_roi() && !near.interpolated());
    assert_eq!(near.region_to_decode(&h, Some(roi), false).unwrap(), padded);
    assert_eq!(dec.region_to_decode(&h, Some(roi), false).unwrap(), padded);
    let headers = vec![h.clone()];
    let bytes = vec![bytes];
    let mut outs = outputs(&dec, &headers, &[Some(roi)]);
    let images = encoded(&bytes, &headers, &[Some(roi)], &mut outs);
    // SAFETY: as above.
    let results = unsafe { dec.decode(std::ptr::null_mut(), &images) }.unwrap();
    let info = results[0].as_ref().unwrap();
    assert_eq!(
        (info.width, info.height, info.window),
        (82, 52, padded.window)
    );
    assert_eq!(log.lock().rois.last(), Some(&(24, 14, 82, 52)));
    let log13 = Arc::new(Log::default());
    log13.lock().hardware = true;
    let fixed = BatchDecoder::new(
        fake::library(&log13, (13, 3, 2)),
        FakeGpu::new(2, &log13),
        small_config(),
    )
    .unwrap();
    // 13.3 has no such bug, and interpolated chroma needs no margin: the region as asked.
    assert!(!fixed.pads_roi() && fixed.interpolated());
    assert_eq!(
        fixed.region_to_decode(&h, Some(roi), false).unwrap(),
        decode_region(&h, Some(roi), false).unwrap()
    );
}

#[test]
fn dropping_the_decoder_waits_for_its_work_first() {
    let log = Arc::new(Log::default());
    let gpu = FakeGpu::new(1, &log);
    let mut dec = decoder(&log, &gpu, true, small_config());
    let bytes = vec![jpeg(16, 16, false), jpeg(16, 16, true)];
    let headers: Vec<JpegHeader> = bytes.iter().map(|b| header(b)).collect();
    let mut outs = outputs(&dec, &headers, &[None, None]);
    let images = encoded(&bytes, &headers, &[None, None], &mut outs);
    // SAFETY: as above; the outputs outlive the decoder.
    let s = unsafe { dec.submit(std::ptr::null_mut(), &images) }.unwrap();
    drop(s); // never finished
    drop(dec);
    let st = log.lock();
    assert!(
        st.violations.is_empty(),
        "destroyed with work queued: {:?}",
        st.violations
    );
    assert!(firsts(&outs)
        .iter()
        .zip(&bytes)
        .all(|(o, b)| *o == [checksum(b); 3]));
}

#[test]
fn no_pinned_memory_for_the_staging_sends_the_batch_to_the_cpu() {
    let log = Arc::new(Log::default());
    let gpu = FakeGpu::new(1, &log);
    let mut dec = decoder(&log, &gpu, true, small_config());
    gpu.refuse_pinned
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let bytes = vec![jpeg(16, 16, false), jpeg(16, 18, true)];
    let headers: Vec<JpegHeader> = bytes.iter().map(|b| header(b)).collect();
    let mut outs = outputs(&dec, &headers, &[None, None]);
    let images = encoded(&bytes, &headers, &[None, None], &mut outs);
    // SAFETY: as above.
    let results = unsafe { dec.decode(std::ptr::null_mut(), &images) }.expect("not fatal");
    for r in &results {
        match r {
            Err(NvjpegError::CpuFallback(FallbackReason::NvjpegFailed(m))) => {
                assert!(m.starts_with("staging:"), "{m}")
            }
            other => panic!("expected a CPU fallback, got {other:?}"),
        }
    }
    // With memory again, the next batch goes to the GPU.
    gpu.refuse_pinned
        .store(false, std::sync::atomic::Ordering::Relaxed);
    let (again, ..) = round_trip(&mut dec, vec![jpeg(20, 20, false)]);
    assert!(again[0].is_ok());
}

/// Counters read on one thread before a baseline read on another count nothing since it,
/// rather than wrapping (`Pipeline::stats` during the warm-up's end).
#[test]
fn counters_read_before_their_baseline_count_nothing_since_it() {
    use crate::nvjpeg::safe::CountersSnapshot;
    let earlier = CountersSnapshot {
        device_allocs: 3,
        events_created: 5,
        ..CountersSnapshot::default()
    };
    let stale = CountersSnapshot {
        device_allocs: 2,
        events_created: 7,
        ..CountersSnapshot::default()
    };
    let d = stale.since(&earlier);
    assert_eq!((d.device_allocs, d.events_created, d.total()), (0, 2, 2));
}
