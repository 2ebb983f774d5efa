//! The comparison: two runs on the CPU agree exactly; perturbed batches are caught by the
//! rule that applies (exact, or PSNR when one device decodes with nvJPEG).

use super::*;
use crate::image::Pixels;
use crate::ops::OpParams;
use crate::pipeline::batch::BatchOutput;
use crate::pipeline::file;

fn shipped(name: &str, batch: usize) -> PipelineSpec {
    let dir = tempfile::tempdir().unwrap();
    let data = crate::builtin_data::ensure(&dir.path().join("data")).unwrap();
    let path = crate::testutil::source_file(name);
    let mut spec = file::load(&path).unwrap().spec;
    spec.set_data(&data);
    spec.settings.batch = batch;
    spec.settings.threads = Some(2);
    // The data folder must outlive the test's pipelines.
    std::mem::forget(dir);
    spec
}

fn cpu(device: &str) -> DeviceReport {
    DeviceReport {
        device: if device == "gpu" { "gpu" } else { "cpu" },
        reason: format!("device = \"{device}\""),
    }
}

#[test]
fn epochs_past_the_first_are_compared_too() {
    // The GPU path's pools settle after the first epoch: a second one compares the settled
    // path (on the emulated device here, on a GPU in `scripts/gpu-check.sh`).
    let spec = shipped("pipelines/resnet50-train.toml", 8);
    let run = |epochs| {
        let options = CompareOptions {
            devices: [DeviceChoice::Cpu, DeviceChoice::Emu],
            epochs,
            ..CompareOptions::default()
        };
        compare(&spec, &options).unwrap()
    };
    let (one, two) = (run(1), run(2));
    assert!(one.within_tolerance() && two.within_tolerance(), "{two}");
    assert_eq!(
        (two.samples, two.batches),
        (2 * one.samples, 2 * one.batches)
    );
}

/// One batch of the train pipeline, run twice on the CPU.
fn two_runs() -> (Batch, Batch, Vec<String>) {
    let spec = shipped("pipelines/resnet50-train.toml", 6);
    let take = || {
        let mut p = Pipeline::new(spec.clone().device(DeviceChoice::Cpu)).unwrap();
        p.next_batch().unwrap().unwrap()
    };
    (take(), take(), spec.outputs.clone())
}

fn images_mut(b: &mut Batch) -> &mut Pixels {
    match &mut b.outputs[0] {
        BatchOutput::Images(t) => &mut t.data,
        BatchOutput::Labels(_) | BatchOutput::Device(_) | BatchOutput::Pinned(_) => {
            panic!("host images first")
        }
    }
}

#[test]
fn cpu_against_cpu_is_exact_on_both_shipped_pipelines() {
    for name in [
        "pipelines/resnet50-train.toml",
        "pipelines/resnet50-eval.toml",
    ] {
        let spec = shipped(name, 8);
        let c = compare(
            &spec,
            &CompareOptions {
                devices: [DeviceChoice::Cpu, DeviceChoice::Cpu],
                ..CompareOptions::default()
            },
        )
        .unwrap();
        assert!(c.within_tolerance(), "{name}:\n{c}");
        assert!(c.samples > 0 && c.decoders[0] == c.decoders[1]);
        for d in c.outputs.iter().chain(&c.decode) {
            assert_eq!(
                (d.max_abs, d.shape_mismatches),
                (0.0, 0),
                "{name}: {}",
                d.name
            );
        }
        let decoded = c.decode.as_ref().expect("the decoder's images compared");
        assert_eq!(decoded.psnr.len(), c.samples);
        assert_eq!(decoded.min_psnr(), f64::INFINITY);
        let report = c.to_string();
        assert!(report.contains("within tolerance"), "{report}");
        assert!(report.contains("decoded"), "{report}");
    }
}

#[test]
fn differences_beyond_rounding_are_caught() {
    let (a, b, names) = two_runs();
    let fresh = || Comparison::new([cpu("cpu"), cpu("emu")], &names, Tolerance::default());
    let mut c = fresh();
    c.add_batch(&a, &b);
    assert!(c.within_tolerance(), "{c}");

    // Float outputs: within 1e-3 passes, 0.01 fails.
    for (delta, ok) in [(5e-4f32, true), (0.01, false)] {
        let mut b2 = b.clone();
        if let Pixels::F32(v) = images_mut(&mut b2) {
            v[17] += delta;
        }
        let mut c = fresh();
        c.add_batch(&a, &b2);
        assert_eq!(c.within_tolerance(), ok, "delta {delta}:\n{c}");
        assert!((c.outputs[0].max_abs - f64::from(delta)).abs() < 1e-6);
    }
    // Labels must be equal.
    let mut b2 = b.clone();
    if let BatchOutput::Labels(l) = &mut b2.outputs[1] {
        l[0] += 1;
    }
    let mut c = fresh();
    c.add_batch(&a, &b2);
    assert!(!c.within_tolerance());
    assert!(c.problems()[0].contains("'labels'"), "{:?}", c.problems());
    // Random parameters must match sample by sample.
    let mut b2 = b.clone();
    let crop = b2.samples[2]
        .params
        .iter_mut()
        .find_map(|(_, p)| match p {
            OpParams::Crop(c) => Some(c),
            _ => None,
        })
        .expect("a crop");
    crop.left += 1;
    let mut c = fresh();
    c.add_batch(&a, &b2);
    assert_eq!(c.params_differ, vec![a.samples[2].path.to_path_buf()]);
    assert!(
        c.to_string().contains("FAIL: random parameters differ"),
        "{c}"
    );
    // Another sample in a place, or a different skip.
    let mut b2 = b.clone();
    b2.samples.swap(0, 1);
    let mut c = fresh();
    c.add_batch(&a, &b2);
    assert_eq!(c.order_differs, 2);
    assert!(!c.within_tolerance());
    let mut c = fresh();
    c.add_batch(&a, &b);
    c.skipped[1].insert("bad.jpg".into());
    assert!(c
        .problems()
        .iter()
        .any(|p| p.contains("different samples skipped")));
}

#[test]
fn decoded_images_are_held_to_one_level_or_to_40_db() {
    let spec = decode_only(&shipped("pipelines/resnet50-train.toml", 4)).unwrap();
    let mut p = Pipeline::new(spec.clone().device(DeviceChoice::Cpu)).unwrap();
    let a = p.next_batch().unwrap().unwrap();
    let perturbed = |step: u8, every: usize| {
        let mut b = a.clone();
        if let Pixels::U8(v) = images_mut(&mut b) {
            for (i, x) in v.iter_mut().enumerate() {
                if i % every == 0 {
                    *x = x.saturating_add(step);
                }
            }
        }
        b
    };
    // Same decoder: ±1 passes, 2 fails.
    for (step, ok) in [(1u8, true), (2, false)] {
        let mut c = Comparison::new(
            [cpu("cpu"), cpu("emu")],
            &spec.outputs,
            Tolerance::default(),
        );
        c.add_decoded(&a, &perturbed(step, 7));
        c.samples = a.len();
        assert_eq!(c.within_tolerance(), ok, "step {step}:\n{c}");
    }
    // nvJPEG on one side: small noise everywhere passes (> 40 dB), large noise fails.
    for (step, every, ok) in [(2u8, 3, true), (40, 2, false)] {
        let mut c = Comparison::new(
            [cpu("cpu"), cpu("gpu")],
            &spec.outputs,
            Tolerance::default(),
        );
        assert_ne!(c.decoders[0], c.decoders[1]);
        c.add_decoded(&a, &perturbed(step, every));
        c.samples = a.len();
        let d = c.decode.as_ref().unwrap();
        assert_eq!(d.psnr.len(), a.len());
        assert_eq!(c.within_tolerance(), ok, "step {step} every {every}:\n{c}");
    }
}

#[test]
fn the_decoder_part_keeps_the_reader_and_every_dangling_edge() {
    let spec = shipped("pipelines/resnet50-eval.toml", 4);
    let d = decode_only(&spec).unwrap();
    let kinds: Vec<&str> = d.ops.iter().map(|o| o.kind.as_str()).collect();
    assert_eq!(kinds, ["file_reader", "decode"]);
    assert_eq!(d.outputs, ["decoded", "labels"]);
    assert_eq!(d.settings, spec.settings);
    let no_decoder = PipelineSpec {
        ops: spec
            .ops
            .iter()
            .filter(|o| o.kind != "decode")
            .cloned()
            .collect(),
        ..spec
    };
    assert!(decode_only(&no_decoder).is_none());
}

#[test]
fn psnr_and_median() {
    assert_eq!(psnr(0.0, 10, 255.0), f64::INFINITY);
    // One level everywhere: 20 log10(255) ≈ 48.13 dB.
    assert!((psnr(100.0, 100, 255.0) - 48.1308).abs() < 1e-3);
    assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    assert_eq!(median(&[f64::INFINITY, f64::INFINITY]), f64::INFINITY);
    assert_eq!(median(&[]), f64::INFINITY);
}

/// `cpu,emu` on `spec`: within the tolerance of the emulated device (chroma rebuilt), with
/// every output and the decoded images compared (device batches downloaded), and the same
/// parameters and skips.
fn cpu_against_emu(spec: &PipelineSpec, max_batches: Option<usize>, what: &str) -> Comparison {
    let c = compare(
        spec,
        &CompareOptions {
            devices: [DeviceChoice::Cpu, DeviceChoice::Emu],
            max_batches,
            ..CompareOptions::default()
        },
    )
    .unwrap();
    assert!(c.within_tolerance(), "{what}:\n{c}");
    assert_eq!(c.devices[1].device, "emu", "{what}");
    assert!(c.samples > 0, "{what}:\n{c}");
    assert_eq!(c.decoders, [Decoder::Cpu, Decoder::Rebuilt], "{what}");
    for d in c.outputs.iter().chain(&c.decode) {
        assert_eq!(d.shape_mismatches, 0, "{what}: {}", d.name);
    }
    let decoded = c.decode.as_ref().expect("the decoder's images compared");
    assert_eq!(decoded.psnr.len(), c.samples, "{what}");
    assert!(
        c.notes.is_empty(),
        "{what}: nothing differs on purpose:\n{c}"
    );
    c
}

#[test]
fn an_approximation_on_one_path_only_is_said_to_differ_on_purpose() {
    if crate::cuda::test_support::Emu::load().is_none() {
        return;
    }
    let spec = shipped("pipelines/resnet50-train-dct.toml", 8);
    let run = |devices| {
        let options = CompareOptions {
            devices,
            max_batches: Some(1),
            ..CompareOptions::default()
        };
        compare(&spec, &options).unwrap()
    };
    let c = run([DeviceChoice::Cpu, DeviceChoice::Emu]);
    assert_eq!(c.notes.len(), 1, "{c}");
    let note = &c.notes[0];
    assert!(
        note.contains("random_resized_crop 'cropped'") && note.contains("dct_downscale = true"),
        "{note}"
    );
    assert!(c.to_string().contains(&format!("note: {note}")), "{c}");
    // Both devices on the CPU path make the same approximation.
    assert!(run([DeviceChoice::Cpu, DeviceChoice::Cpu]).notes.is_empty());
}

#[test]
fn cpu_against_emu_is_within_tolerance_on_both_shipped_pipelines() {
    if crate::cuda::test_support::Emu::load().is_none() {
        return;
    }
    for name in [
        "pipelines/resnet50-train.toml",
        "pipelines/resnet50-eval.toml",
    ] {
        let c = cpu_against_emu(&shipped(name, 8), None, name);
        assert!(c.batches > 1, "{name}: every batch of the epoch");
    }
}

#[test]
fn cpu_against_emu_is_within_tolerance_on_the_shared_data() {
    let Some(shared) = crate::testutil::shared_data() else {
        return;
    };
    if crate::cuda::test_support::Emu::load().is_none() {
        return;
    }
    for (folder, batches) in [("imagenet-400", Some(2)), ("jpeg-edge", None)] {
        let Some(data) = crate::testutil::skip::shared_folder(&shared, folder) else {
            continue;
        };
        for name in [
            "pipelines/resnet50-train.toml",
            "pipelines/resnet50-eval.toml",
        ] {
            let path = crate::testutil::source_file(name);
            let mut spec = file::load(&path).unwrap().spec;
            spec.set_data(&data);
            spec.settings.batch = 32;
            spec.settings.threads = Some(2);
            let what = format!("{name} on {folder}");
            let c = cpu_against_emu(&spec, batches, &what);
            if folder == "jpeg-edge" {
                // The 12-bit and the truncated file, on both devices.
                assert_eq!(c.skipped[1].len(), 2, "{what}:\n{c}");
            }
        }
    }
}
