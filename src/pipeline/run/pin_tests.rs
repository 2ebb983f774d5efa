//! The CPU path's batches in pinned host memory (`batch_memory = "pinned"`), on the emulated
//! device: the host batches byte for byte, in memory the device pinned; dropped batches give
//! their buffers back, and after the first epoch nothing is allocated; a buffer a consumer's
//! copy still reads is not written again before the copy has run; a clear error at the start
//! without a device to pin with, or with the GPU path.

use std::time::Duration;

use super::batch_memory_support::{
    assert_refused_without_a_gpu, assert_same_batches_as_in_host_memory, cpu_spec, start_with,
};
use super::gpu_tests::{builtin, emu};
use super::*;
use crate::cuda::gpu_device::GpuDevice;
use crate::pipeline::batch::BatchOutput;
use crate::pipeline::spec::{BatchMemory, DeviceChoice};

#[test]
fn pinned_batches_are_the_host_batches_in_pinned_memory() {
    let (_d, data) = builtin();
    let Some(dev) = emu() else { return };
    assert_same_batches_as_in_host_memory(
        (&data, BatchMemory::EmuPinned),
        |spec| start_with(&spec, dev.clone()),
        "host batches pinned by emulated device",
        |what, h, o| {
            assert!(o.images("images").is_none(), "{what}: not ordinary memory");
            assert!(
                o.device_images("images").is_none(),
                "{what}: not on the device"
            );
            let t = o.pinned_images("images").expect("pinned");
            assert!(t.is_emulated(), "{what}");
            assert!(
                dev.is_pinned(t.as_ptr(), t.nbytes()),
                "{what}: pinned memory"
            );
            let h = h.images("images").unwrap();
            assert_eq!(
                (t.dtype(), t.layout(), t.shapes(), t.offsets()),
                (h.dtype, h.layout, &h.shapes[..], &h.offsets[..]),
                "{what}"
            );
            // Exact equality, not a tolerance: the same bytes, copied once.
            assert!(t.as_bytes() == h.as_bytes(), "{what}: pixels");
            assert_eq!(&t.to_host(), h, "{what}: as a host tensor");
        },
    );
}

#[test]
fn dropped_batches_give_their_pinned_buffers_back_and_nothing_is_allocated_after_warm_up() {
    let (_d, data) = builtin();
    let Some(probe) = emu() else { return };
    drop(probe);
    // Every batch of an epoch held at once: each has a buffer of its own, back when dropped.
    let mut spec = cpu_spec("resnet50-eval.toml", &data, BatchMemory::EmuPinned);
    spec.settings.epochs = Some(1);
    let mut p = Pipeline::new(spec.clone()).unwrap();
    let mut held: Vec<Batch> = p.by_ref().map(Result::unwrap).collect();
    assert_eq!(held.len(), 8);
    let back = p.idle_pinned_buffers().expect("a pinned pool");
    let ptrs: Vec<_> = held
        .iter()
        .map(|b| b.pinned_images("images").unwrap().as_ptr())
        .collect();
    let mut distinct = ptrs.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 8, "a buffer each");
    held.pop();
    assert_eq!(p.idle_pinned_buffers(), Some(back + 1), "back when dropped");
    drop(held);
    assert_eq!(p.idle_pinned_buffers(), Some(back + 8));
    drop(p);

    // A consumer a step behind (it keeps the batch before the one it reads) over four
    // epochs: the buffers of the first are reused, nothing is allocated after it.
    spec.settings.epochs = Some(4);
    let mut p = Pipeline::new(spec).unwrap();
    let mut previous = None;
    let mut batches = 0;
    for b in p.by_ref() {
        previous = Some(b.unwrap());
        batches += 1;
    }
    drop(previous);
    assert_eq!(batches, 32);
    let gpu = p.stats().gpu.expect("the pinning device's figures");
    assert!(gpu.uploads_only && gpu.pinned_only, "{gpu:?}");
    let after = gpu.after_warm_up.expect("the warm-up ended");
    assert_eq!(
        after.total(),
        0,
        "{after:?} (since the start: {:?})",
        gpu.counters
    );
    assert!(gpu.counters.pinned_allocs > 0, "the warm-up pinned");
    assert_eq!(gpu.counters.device_allocs, 0, "no device memory");
    assert!(gpu.memory.pinned > 0);
}

/// A consumer copies each batch to its GPU on a stream of its own that is slow (queued
/// behind other work), names that stream, and drops the batch at once — as
/// `.cuda(non_blocking=True)` from a framework does. Every copy still reads its own batch:
/// the pipeline writes later batches only into buffers whose copies have run.
#[test]
fn a_pinned_batch_is_not_written_again_before_the_consumer_copies_from_it_have_run() {
    let (_d, data) = builtin();
    let Some(dev) = emu() else { return };
    let mut spec = cpu_spec("resnet50-eval.toml", &data, BatchMemory::EmuPinned);
    spec.settings.epochs = Some(2);
    spec.settings.prefetch = 1;
    let expected: Vec<Vec<u8>> = {
        let mut host = spec.clone();
        host.settings.batch_memory = BatchMemory::Auto;
        Pipeline::new(host)
            .unwrap()
            .map(|b| b.unwrap().images("images").unwrap().as_bytes().to_vec())
            .collect()
    };
    let p = start_with(&spec, dev.clone());
    let stream = dev.new_stream().unwrap();
    let raw = dev.raw_stream(stream);
    let mut copies = Vec::new();
    for b in p {
        let b = b.unwrap();
        let t = b.pinned_images("images").unwrap();
        // SAFETY: a stream of this emulated device, alive as long as the device.
        unsafe { t.use_on_stream(raw).unwrap() };
        dev.delay(stream, Duration::from_millis(25)).unwrap();
        let len = t.nbytes();
        let to = dev.alloc(len).unwrap();
        // SAFETY: `to` holds `len` bytes, used by this stream alone; the source is the
        // tensor's pinned memory, which the pool keeps until this stream's work queued
        // before the tensor drops has run (the test's point).
        unsafe { dev.copy_to_device(stream, to, t.as_ptr(), len).unwrap() };
        copies.push((to, len));
        // Dropped at once, the copy still queued.
        drop(b);
    }
    assert_eq!(copies.len(), expected.len());
    for (k, ((to, len), want)) in copies.into_iter().zip(&expected).enumerate() {
        let mut got = vec![0u8; len];
        // SAFETY: `to` holds `len` bytes; copy_to_host waits for the stream's work.
        unsafe { dev.copy_to_host(stream, &mut got, to).unwrap() };
        assert!(
            &got == want,
            "batch {k}: the copy read another batch's pixels"
        );
        // SAFETY: allocated above, freed once; the stream's work has run (waited above).
        unsafe { dev.free(to) };
    }
}

/// Without a GPU `batch_memory = "pinned"` is refused at the start, naming the setting, why
/// and what to do instead; with one (a GPU machine), the CPU path's batches come out pinned.
#[test]
fn batch_memory_pinned_pins_with_the_gpu_or_is_refused_at_the_start() {
    let (_d, data) = builtin();
    let parts = [
        "batch_memory = \"pinned\"",
        "can't be pinned",
        "no GPU to pin host memory with",
        "batch_memory = \"auto\"",
    ];
    assert_refused_without_a_gpu((&data, BatchMemory::Pinned), &parts, |device, p| {
        assert_eq!(p.device().device, "cpu", "{device:?}");
        let b = p.into_iter().next().unwrap().unwrap();
        let t = b.pinned_images("images").expect("pinned");
        assert!(!t.is_emulated(), "{device:?}");
    });
}

/// Pinned host batches are the CPU path's: `device = "auto"` takes it (saying why), and the
/// GPU path is refused, naming both settings.
#[test]
fn pinned_batches_take_the_cpu_path() {
    let (_d, data) = builtin();
    let Some(_) = emu() else { return };
    let mut spec = cpu_spec("resnet50-eval.toml", &data, BatchMemory::EmuPinned);
    spec.settings.device = DeviceChoice::Auto;
    spec.settings.epochs = Some(1);
    let p = Pipeline::new(spec.clone()).unwrap();
    assert_eq!(p.device().device, "cpu");
    assert!(
        p.device()
            .reason
            .contains("the CPU path, as batch_memory = \"emu-pinned\" asks for its host batches"),
        "{}",
        p.device().reason
    );
    for b in p {
        let b = b.unwrap();
        assert!(matches!(b.outputs[0], BatchOutput::Pinned(_)));
    }
    for device in [DeviceChoice::Emu, DeviceChoice::Gpu] {
        spec.settings.device = device;
        let e = Pipeline::new(spec.clone()).err().expect("refused");
        let text = e.to_string();
        assert!(matches!(e, Error::GpuUnavailable(_)), "{e:?}");
        assert!(
            text.contains(&format!(
                "but device = \"{}\" runs the GPU path",
                device.name()
            )) && text.contains("use device = \"cpu\""),
            "{text}"
        );
    }
}
