//! Test support for the CPU path's batches handed to a device (`batch_memory`), shared by
//! `upload_tests` (on the device) and `pin_tests` (in pinned host memory): the pipelines they
//! run, the comparison with the batches in ordinary memory, and the refusal without a GPU.

use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::cuda::gpu_device::GpuDevice;
use crate::pipeline::spec::{BatchMemory, DeviceChoice};

/// A shipped pipeline file on the CPU path over `data`, batches of 8, two threads.
pub(super) fn cpu_spec(name: &str, data: &Path, memory: BatchMemory) -> PipelineSpec {
    let mut spec = crate::testutil::shipped_pipeline(name);
    spec.set_data(data);
    spec.settings.threads = Some(2);
    spec.settings.batch = 8;
    spec.settings.device = DeviceChoice::Cpu;
    spec.settings.batch_memory = memory;
    spec
}

/// `spec` started with `dev` as its device (one the test can also reach).
pub(super) fn start_with(spec: &PipelineSpec, dev: Arc<dyn GpuDevice>) -> Pipeline {
    let graph = Graph::build(spec).unwrap();
    let start = crate::reader::schedule::Position::start(spec.settings.seed, spec.settings.batch);
    Pipeline::start_on(graph, start, Some(dev)).unwrap()
}

/// Both shipped ResNet-50 pipelines over `data` for two epochs, in ordinary memory and with
/// `memory`, started by `start`: the second runs the CPU path, its device report contains
/// `reason`, and it gives the same batches (epochs, indexes, samples, labels); each pair
/// goes to `same_images(what, host, other)` for the images.
pub(super) fn assert_same_batches_as_in_host_memory(
    (data, memory): (&Path, BatchMemory),
    start: impl Fn(PipelineSpec) -> Pipeline,
    reason: &str,
    same_images: impl Fn(&str, &Batch, &Batch),
) {
    for name in ["resnet50-train.toml", "resnet50-eval.toml"] {
        let mut host = cpu_spec(name, data, BatchMemory::Auto);
        host.settings.epochs = Some(2);
        let mut other = host.clone();
        other.settings.batch_memory = memory;
        let host: Vec<Batch> = Pipeline::new(host).unwrap().map(Result::unwrap).collect();
        let p = start(other);
        assert_eq!(p.device().device, "cpu", "{name}: the CPU path runs");
        let report = &p.device().reason;
        assert!(report.contains(reason), "{name}: {report}");
        let other: Vec<Batch> = p.map(Result::unwrap).collect();
        assert_eq!(host.len(), other.len(), "{name}: batches");
        assert!(host.len() >= 16, "{name}: two epochs of 8 batches");
        for (h, o) in host.iter().zip(&other) {
            let what = format!("{name}: epoch {} batch {}", h.epoch, h.index);
            assert_eq!((h.epoch, h.index), (o.epoch, o.index), "{what}");
            let index = |b: &Batch| b.samples.iter().map(|s| s.index).collect::<Vec<_>>();
            assert_eq!(index(h), index(o), "{what}: samples");
            assert_eq!(h.labels("labels"), o.labels("labels"), "{what}: labels");
            same_images(&what, h, o);
        }
    }
}

/// `memory`, which needs a GPU, on the CPU path with `device = "cpu"` and `"auto"`: without
/// a GPU, refused at the start with an error that contains each of `parts`; with one (a GPU
/// machine), the pipeline goes to `on_a_gpu`.
pub(super) fn assert_refused_without_a_gpu(
    (data, memory): (&Path, BatchMemory),
    parts: &[&str],
    on_a_gpu: impl Fn(DeviceChoice, Pipeline),
) {
    for device in [DeviceChoice::Cpu, DeviceChoice::Auto] {
        let mut spec = cpu_spec("resnet50-eval.toml", data, memory);
        spec.settings.device = device;
        if crate::cuda::probe(0).is_ok() {
            on_a_gpu(device, Pipeline::new(spec).unwrap());
            continue;
        }
        let e = Pipeline::new(spec).err().expect("refused");
        let text = e.to_string();
        assert!(matches!(e, Error::GpuUnavailable(_)), "{device:?}: {e:?}");
        for part in parts {
            assert!(text.contains(part), "{device:?}: {part:?} in {text}");
        }
    }
}
