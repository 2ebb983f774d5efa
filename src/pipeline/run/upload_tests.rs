//! The CPU path's batches handed out on the device (`batch_memory`), on the emulated device:
//! the same batches as in host memory, byte for byte; nothing allocated after the first
//! epoch; a clear error at the start when there is no device to upload to.

use std::sync::Arc;

use super::batch_memory_support::{
    assert_refused_without_a_gpu, assert_same_batches_as_in_host_memory, cpu_spec,
};
use super::gpu_tests::{builtin, emu, emu_pipeline, images_of, nothing_allocated_after_warm_up};
use super::*;
use crate::cuda::gpu_device::GpuDevice;
use crate::pipeline::batch::BatchOutput;
use crate::pipeline::spec::{BatchMemory, DeviceChoice};

#[test]
fn uploaded_batches_are_the_host_batches_byte_for_byte() {
    let (_d, data) = builtin();
    let Some(_) = emu() else { return };
    assert_same_batches_as_in_host_memory(
        (&data, BatchMemory::Emu),
        |spec| Pipeline::new(spec).unwrap(),
        "batches uploaded to emulated device",
        |what, h, u| {
            assert!(
                matches!(h.outputs[0], BatchOutput::Images(_)),
                "{what}: host"
            );
            let t = u.device_images("images").expect("on the device");
            assert!(t.is_emulated(), "{what}");
            assert_eq!(t.shape().map(|s| s[0]), Some(h.samples.len()), "{what}");
            // `images_of` downloads (waiting for the copy); exact equality, not a tolerance.
            assert_eq!(images_of(h), images_of(u), "{what}: pixels");
        },
    );
}

#[test]
fn the_upload_allocates_nothing_after_the_first_epoch() {
    let (_d, data) = builtin();
    let Some(probe) = emu() else { return };
    // A consumer that reads each batch on a stream of its own (as a framework does, through
    // DLPack) and drops it: release events on that stream come back with each buffer.
    let mut spec = cpu_spec("resnet50-train.toml", &data, BatchMemory::Emu);
    spec.settings.epochs = Some(4);
    drop(probe);
    let mut p = Pipeline::new(spec).unwrap();
    let dev: Arc<dyn GpuDevice> = p.gpu_device().expect("the upload's device");
    let raw = dev.raw_stream(dev.new_stream().unwrap());
    let mut batches = 0;
    for b in p.by_ref() {
        let b = b.unwrap();
        let t = b.device_images("images").unwrap().clone();
        // SAFETY: a stream of this emulated device, alive as long as the device.
        unsafe { t.use_on_stream(raw).unwrap() };
        batches += 1;
    }
    assert_eq!(batches, 32);
    let gpu = nothing_allocated_after_warm_up(&p, "the upload");
    assert!(gpu.uploads_only && !gpu.pinned_only, "{gpu:?}");
    assert!(
        gpu.counters.pinned_allocs > 0,
        "the staging slots are pinned"
    );
}

/// Without a GPU `batch_memory = "gpu"` is refused at the start, naming the setting and why;
/// with one (a GPU machine), the CPU path's batches come out on it.
#[test]
fn batch_memory_gpu_uploads_to_the_gpu_or_is_refused_at_the_start() {
    let (_d, data) = builtin();
    let parts = [
        "batch_memory = \"gpu\"",
        "can't be uploaded",
        "batch_memory = \"auto\"",
    ];
    assert_refused_without_a_gpu((&data, BatchMemory::Gpu), &parts, |device, p| {
        let b = p.into_iter().next().unwrap().unwrap();
        let t = b.device_images("images").expect("on the GPU");
        assert!(!t.is_emulated() && t.wait().is_ok(), "{device:?}");
    });
}

#[test]
fn on_the_gpu_path_batch_memory_changes_nothing() {
    let (_d, data) = builtin();
    let Some(dev) = emu() else { return };
    let mut spec = cpu_spec("resnet50-eval.toml", &data, BatchMemory::Emu);
    spec.settings.device = DeviceChoice::Emu;
    spec.settings.epochs = Some(1);
    let p = emu_pipeline(&spec, dev).unwrap();
    assert_eq!(p.device().device, "emu");
    assert!(
        !p.device().reason.contains("uploaded"),
        "{}",
        p.device().reason
    );
    for b in p {
        assert!(b.unwrap().device_images("images").is_some());
    }
}
