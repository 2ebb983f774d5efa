use std::path::PathBuf;

use super::*;
use crate::error::SampleErrorKind;
use crate::ops::SampleContext;
use crate::pipeline::spec::{OnError, OpSpec};
use crate::value::{ValueType, Values};

#[derive(Debug)]
struct PanicsOn(usize);

impl crate::ops::Operator for PanicsOn {
    fn infer(&self, inputs: &[ValueType]) -> Result<Vec<ValueType>, String> {
        Ok(inputs.to_vec())
    }

    fn run_cpu(
        &self,
        inputs: Values,
        ctx: &mut SampleContext<'_>,
    ) -> Result<Values, SampleErrorKind> {
        assert_ne!(ctx.index, self.0, "operator bug on purpose");
        Ok(inputs)
    }
}

/// The built-in data set in a fresh folder (kept while the guard lives).
fn builtin() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let data = crate::builtin_data::ensure(&d.path().join("s")).unwrap();
    (d, data)
}

/// A shipped pipeline file pointed at `data`, on the CPU with two threads.
fn shipped(name: &str, data: &std::path::Path) -> PipelineSpec {
    let mut spec = crate::testutil::shipped_pipeline(name);
    spec.set_data(data);
    spec.settings.threads = Some(2);
    spec.settings.device = crate::pipeline::DeviceChoice::Cpu;
    spec
}

#[test]
fn a_panicking_operator_is_an_error_for_the_caller_not_a_hang() {
    let (_d, data) = builtin();
    let spec = PipelineSpec::builder()
        .batch(4)
        .threads(2)
        .op(OpSpec::new("file_reader")
            .output("jpegs")
            .arg("root", data.to_string_lossy().as_ref())
            .arg("shuffle", false))
        .op(OpSpec::new("decode").input("jpegs").output("decoded"))
        .op(OpSpec::new("flip").input("decoded").output("images"))
        .outputs(&["images"]);
    for on_error in [OnError::Skip, OnError::Replace] {
        let mut graph = Graph::build(&spec.clone().on_error(on_error)).unwrap();
        graph.nodes[1].op = Box::new(PanicsOn(6));
        let p = Pipeline::from_graph(graph).unwrap();
        let results: Vec<Result<Batch, Error>> = p.collect();
        assert!(results[0].is_ok());
        match results.last().unwrap() {
            Err(Error::WorkerPanic { path, message }) => {
                assert!(message.contains("operator bug on purpose"), "{message}");
                assert!(
                    path.to_string_lossy().contains("checks_06"),
                    "{}",
                    path.display()
                );
            }
            other => panic!("expected a worker panic, got {other:?}"),
        }
    }
}

#[test]
fn dropping_one_pipeline_leaves_another_pipelines_pools_alone() {
    let (_d, data) = builtin();
    let mut train = Pipeline::new(shipped("resnet50-train.toml", &data)).unwrap();
    while let Some(b) = train.next_batch() {
        b.unwrap();
    }
    // Every thread of `train` has finished: its pools hold what they were given back.
    let kept = train.scratch_pools().pooled_buffers();
    assert!(kept > 0, "the workers recycled into their pipeline's pools");
    let mut eval = Pipeline::new(shipped("resnet50-eval.toml", &data)).unwrap();
    assert!(!Arc::ptr_eq(train.scratch_pools(), eval.scratch_pools()));
    eval.next_batch().unwrap().unwrap();
    drop(eval);
    assert_eq!(train.scratch_pools().pooled_buffers(), kept);
}

#[test]
fn a_batch_too_big_for_memory_is_refused_with_the_figures() {
    let (_d, data) = builtin();
    let mut spec = shipped("resnet50-train.toml", &data);
    // Padded, a batch holds the full batch size whatever the data set's size.
    for op in spec.ops.iter_mut().filter(|o| o.kind == "file_reader") {
        op.args.insert("last_batch".into(), "pad".into());
    }
    spec.settings.batch = 10_000_000;
    let e = match Pipeline::new(spec) {
        Err(e) => e,
        Ok(_) => panic!("a 10-million-image batch was accepted"),
    };
    match &e {
        Error::BatchMemory {
            needed,
            available,
            samples,
            per_sample,
            buffers,
            ..
        } => {
            assert_eq!(*samples, 10_000_000);
            // One 224x224x3 f32 image and a label per sample, at least.
            assert!(*per_sample >= 224 * 224 * 3 * 4 + 8, "{per_sample}");
            assert_eq!(*buffers, 2 + memory::BUFFERS_BESIDES_PREFETCH);
            assert!(needed > available);
        }
        other => panic!("expected a memory error, got {other}"),
    }
    let text = e.to_string();
    assert!(text.contains("10000000 samples per batch"), "{text}");
    assert!(text.contains("help: lower batch to"), "{text}");
}

#[test]
fn a_batch_larger_than_an_epoch_is_sized_to_the_epoch() {
    let (_d, data) = builtin();
    let mut spec = shipped("resnet50-eval.toml", &data);
    spec.settings.batch = 100_000;
    let mut p = Pipeline::new(spec).unwrap();
    let n = p.samples_per_epoch();
    let b = p.next_batch().unwrap().unwrap();
    assert_eq!(b.len(), n, "the whole epoch in one partial batch");
    let t = b.images("images").unwrap();
    assert_eq!(
        t.nbytes(),
        n * 224 * 224 * 3 * 4,
        "no room for samples that can't come"
    );
    assert!(p.next_batch().is_none());
}

#[test]
fn a_settings_error_stops_the_run_once_instead_of_skipping_every_sample() {
    let (_d, data) = builtin();
    for on_error in [OnError::Skip, OnError::Replace, OnError::Fail] {
        let spec = PipelineSpec::builder()
            .batch(4)
            .threads(2)
            .on_error(on_error)
            .op(OpSpec::new("file_reader")
                .output("jpegs")
                .arg("root", data.to_string_lossy().as_ref()))
            .op(OpSpec::new("decode").input("jpegs").output("decoded"))
            .op(OpSpec::new("resize")
                .input("decoded")
                .output("images")
                .arg("shorter", 20_000i64))
            .outputs(&["images"]);
        let mut p = Pipeline::new(spec).unwrap();
        let results: Vec<Result<Batch, Error>> = (&mut p).collect();
        assert_eq!(results.len(), 1, "{on_error:?}: one error, no batch");
        match &results[0] {
            Err(Error::Invalid { at, message, help }) => {
                assert_eq!(at, "operator 'images'");
                assert!(message.contains("shorter = 20000"), "{message}");
                assert!(
                    help.as_deref()
                        .is_some_and(|h| h.contains("whatever its file")),
                    "{help:?}"
                );
            }
            other => panic!("{on_error:?}: expected a settings error, got {other:?}"),
        }
        let st = p.stats();
        assert_eq!((st.skipped, st.replaced), (0, 0), "no file was blamed");
    }
}

#[test]
fn an_output_size_over_the_limit_is_refused_before_running() {
    let (_d, data) = builtin();
    let mut spec = shipped("resnet50-train.toml", &data);
    let rrc = spec
        .ops
        .iter_mut()
        .find(|o| o.kind == "random_resized_crop")
        .unwrap();
    rrc.args.insert("size".into(), 32_768i64.into());
    let e = match Pipeline::new(spec) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted 32768x32768 outputs"),
    };
    // Located at the `size = …` line of the file the spec came from.
    assert!(e.contains("resnet50-train.toml:30:"), "{e}");
    assert!(e.contains("32768x32768"), "{e}");
    assert!(e.contains("every sample would fail"), "{e}");
    assert!(e.contains("help:"), "{e}");
}

/// The GPU path runs exactly the operators declared for it (`Backends::CpuAndGpu`, the
/// pipeline-file docs' "Runs on: CPU, GPU"): `decode` as its decoder, every other one as a
/// step of the fused chain after it. An operator declared for the GPU that the chain refuses
/// (or one declared for the CPU alone that it takes) fails here.
#[test]
fn the_gpu_path_runs_exactly_the_operators_declared_for_it() {
    use crate::schema::Backends;
    for schema in crate::pipeline::registry::schemas() {
        if crate::pipeline::registry::is_reader(schema.kind) {
            continue;
        }
        let mut spec = PipelineSpec::builder()
            .op(OpSpec::new("file_reader").output("jpegs").arg("root", "x"))
            .op(OpSpec::new("decode").input("jpegs").output("decoded"));
        let mut output = "decoded";
        if schema.kind != "decode" {
            let mut op = OpSpec::new(schema.kind).input("decoded").output("out");
            for a in schema.args.iter().filter(|a| a.default.is_none()) {
                let v: toml::Table = format!("v = {}", a.ty.example()).parse().unwrap();
                op = op.arg(a.name, crate::schema::from_toml(&v["v"]));
            }
            if schema.kind == "resize" {
                op = op.arg("shorter", 256);
            }
            spec = spec.op(op);
            output = "out";
        }
        let graph = Graph::build(&spec.outputs(&[output]))
            .unwrap_or_else(|e| panic!("{}: {}", schema.kind, e.message));
        let gpu_path = super::gpu_plan::GpuPlan::new(&graph, graph.spec.settings.batch).map(|_| ());
        let declared = schema.backends == Backends::CpuAndGpu;
        assert_eq!(
            gpu_path.is_ok(),
            declared,
            "'{}' is declared {:?}, and the GPU path says {gpu_path:?}",
            schema.kind,
            schema.backends
        );
    }
}

/// A flat folder has no labels: a pipeline that uses them says so as it starts (and one
/// that doesn't, or reads class folders, doesn't).
#[test]
fn a_data_set_without_labels_is_a_start_warning_when_the_labels_are_used() {
    let (_d, data) = builtin();
    let flat = tempfile::tempdir().unwrap();
    let classes = std::fs::read_dir(&data).unwrap().map(|e| e.unwrap().path());
    for (k, class) in classes.filter(|p| p.is_dir()).enumerate() {
        let file = std::fs::read_dir(class).unwrap().next().unwrap();
        std::fs::copy(file.unwrap().path(), flat.path().join(format!("{k}.jpg"))).unwrap();
    }
    let no_labels = |p: &Pipeline| {
        p.warnings()
            .iter()
            .filter(|w| matches!(w, StartWarning::Data(m) if m.contains("has no labels")))
            .count()
    };
    let p = Pipeline::new(shipped("resnet50-eval.toml", flat.path())).unwrap();
    assert_eq!(no_labels(&p), 1, "{:?}", p.warnings());
    let w = p
        .warnings()
        .iter()
        .find(|w| w.message().contains("no labels"))
        .unwrap();
    assert!(
        w.message().contains("has no class sub-folders")
            && w.message().contains("every label is -1"),
        "{w}"
    );
    let p = Pipeline::new(shipped("resnet50-eval.toml", &data)).unwrap();
    assert_eq!(no_labels(&p), 0, "{:?}", p.warnings());
    let mut images_only = shipped("resnet50-eval.toml", flat.path());
    images_only.outputs.retain(|o| o != "labels");
    images_only.ops[0].outputs.retain(|o| o != "labels");
    let p = Pipeline::new(images_only).unwrap();
    assert_eq!(no_labels(&p), 0, "{:?}", p.warnings());
}

/// A debug build of a dependent (opt-level 0) is told how to optimise stokehold.
#[test]
fn an_unoptimised_build_is_a_speed_warning_with_the_profile_to_add() {
    let w = warnings::unoptimised_build("0").unwrap();
    assert!(
        w.contains("[profile.dev.package.\"*\"] opt-level = 2"),
        "{w}"
    );
    for level in ["1", "2", "3", "s", "z"] {
        assert_eq!(warnings::unoptimised_build(level), None);
    }
    let (_d, data) = builtin();
    let p = Pipeline::new(shipped("resnet50-eval.toml", &data)).unwrap();
    let unoptimised = p
        .warnings()
        .iter()
        .any(|w| matches!(w, StartWarning::Speed(m) if m.contains("without optimisation")));
    assert_eq!(unoptimised, env!("STOKEHOLD_OPT_LEVEL") == "0");
}
