//! `upsampling = "nearest"` (chroma repeated over each block, as the JPEG engines write it):
//! the CPU path honours it, and the GPU path gives its pixels bit for bit on the emulated
//! device, with nothing rebuilt and no margin decoded around regions.

use super::gpu_tests::{builtin, builtin_and_shared, corpus, emu, images_of, on, run, shipped};
use crate::decode::Upsampling;
use crate::pipeline::compare::{compare, CompareOptions, Decoder};
use crate::pipeline::spec::{DeviceChoice, PipelineSpec};
use crate::schema::ArgValue;

/// `spec` with its decoder repeating chroma.
pub(super) fn nearest(mut spec: PipelineSpec) -> PipelineSpec {
    for op in spec.ops.iter_mut().filter(|op| op.kind == "decode") {
        let name = Upsampling::Nearest.name().to_string();
        op.args.insert("upsampling".into(), ArgValue::Str(name));
    }
    spec
}

#[test]
fn nearest_chroma_gives_the_cpu_batches_bit_for_bit_on_the_emulated_device() {
    if emu().is_none() {
        return;
    }
    // Every subsampling, progressive or not (`corpus`), and the built-in set's saturated
    // synthetic images, where the rebuilt fancy chroma is not exact (50 dB): equal here.
    let corpus = corpus();
    let (_d, builtin) = builtin();
    for data in [corpus.path(), builtin.as_path()] {
        for name in ["resnet50-train.toml", "resnet50-eval.toml"] {
            let mut spec = nearest(shipped(name, data));
            spec.settings.batch = 8;
            let options = CompareOptions {
                devices: [DeviceChoice::Cpu, DeviceChoice::Emu],
                ..CompareOptions::default()
            };
            let c = compare(&spec, &options).expect("both devices run");
            let what = format!("{name} on {}", data.display());
            assert_eq!(c.decoders, [Decoder::Cpu, Decoder::Cpu], "{what}");
            assert!(c.samples >= 8 && c.within_tolerance(), "{what}: {c}");
            for d in c.outputs.iter().chain(&c.decode) {
                assert_eq!(d.max_abs, 0.0, "{what}: {} differs\n{c}", d.name);
            }
        }
    }
}

#[test]
fn nearest_chroma_is_not_the_fancy_chroma_on_the_cpu() {
    let corpus = corpus();
    // The eval pipeline's centre crops: the same samples and windows both ways.
    let mut spec = shipped("resnet50-eval.toml", corpus.path());
    spec.settings.batch = 4;
    let fancy = run(&on(&spec, DeviceChoice::Cpu));
    let repeated = run(&on(&nearest(spec), DeviceChoice::Cpu));
    assert_eq!(fancy.len(), repeated.len());
    let mut differ = 0;
    for (f, r) in fancy.iter().zip(&repeated) {
        let (f, r) = (f.as_ref().unwrap(), r.as_ref().unwrap());
        assert_eq!(f.samples, r.samples);
        let (a, b) = (images_of(f), images_of(r));
        assert_eq!(a.shapes, b.shapes);
        differ += usize::from(a.data != b.data);
    }
    assert!(
        differ > 0,
        "every batch the same with fancy and repeated chroma"
    );
}

#[test]
fn an_unknown_upsampling_is_an_error_naming_the_choices() {
    let corpus = corpus();
    let mut spec = shipped("resnet50-eval.toml", corpus.path());
    for op in spec.ops.iter_mut().filter(|op| op.kind == "decode") {
        op.args
            .insert("upsampling".into(), ArgValue::Str("bilinear".into()));
    }
    let Err(e) = super::Pipeline::new(spec) else {
        panic!("upsampling = \"bilinear\" accepted");
    };
    let e = e.to_string();
    assert!(
        e.contains("upsampling") && e.contains("fancy") && e.contains("nearest"),
        "{e}"
    );
}

/// On a real device (a GPU machine: `scripts/gpu-check.sh`), with the JPEG engines' own
/// repeated chroma: the CPU path's samples and parameters, and pixels within `compare`'s
/// tolerance for nvJPEG (40 dB; its IDCT is not the CPU's). Skips visibly without a GPU
/// (fails under `STOKEHOLD_REQUIRE_GPU=1`).
#[test]
fn gpu_nearest_chroma_on_a_real_device_matches_the_cpu() {
    if crate::cuda::test_support::real_device().is_none() {
        return;
    }
    let (_d, folders) = builtin_and_shared(&["imagenet-400"]);
    for data in &folders {
        for name in ["resnet50-train.toml", "resnet50-eval.toml"] {
            let options = CompareOptions {
                devices: [DeviceChoice::Cpu, DeviceChoice::Gpu],
                ..CompareOptions::default()
            };
            let c = compare(&nearest(shipped(name, data)), &options).expect("both devices run");
            let what = format!("{name} on {}", data.display());
            let min = c.decode.as_ref().map_or(f64::NAN, |d| d.min_psnr());
            eprintln!("nearest chroma, {what}: decoded min {min:.1} dB");
            assert!(c.within_tolerance(), "{what}: {c}");
        }
    }
}

/// Images at most 4 pixels wide with their chroma halved across: libjpeg repeats their
/// chroma even when asked to interpolate it (its fancy upsampling needs 3 stored samples), so
/// with `upsampling = "fancy"` the GPU path decodes them on the CPU (`narrow-chroma`):
/// neither nvJPEG's interpolation nor the rebuilt chroma would give those pixels. The
/// emulated device then gives the CPU batches within `compare`'s tolerance (the rebuilt
/// chroma of the wider ones); those go to the engines.
#[test]
fn narrow_images_keep_libjpegs_repeated_chroma_on_the_gpu_path() {
    use crate::testutil::{encode_jpeg_opts, pattern_rgb, JpegOpts, Sub};
    if emu().is_none() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    for sub in [Sub::S420, Sub::S422, Sub::S444] {
        for w in 1..=6 {
            let o = JpegOpts {
                quality: 90,
                sub,
                progressive: false,
                exif_tiff: None,
            };
            let bytes = encode_jpeg_opts(&pattern_rgb(40, w), 40, w, 3, &o);
            std::fs::write(d.path().join(format!("{sub:?}-{w}.jpg")), bytes).unwrap();
        }
    }
    let mut spec = shipped("resnet50-eval.toml", d.path());
    spec.settings.batch = 6;
    let options = CompareOptions {
        devices: [DeviceChoice::Cpu, DeviceChoice::Emu],
        ..CompareOptions::default()
    };
    let c = compare(&spec, &options).expect("both devices run");
    // Without the route, the narrow ones came out at 28-36 dB (decoded) and 7-28 dB (images).
    assert!(c.samples == 18 && c.within_tolerance(), "{c}");
    let mut p = super::Pipeline::new(on(&spec, DeviceChoice::Emu)).unwrap();
    for b in &mut p {
        b.unwrap();
    }
    let sources = p.stats().gpu.expect("GPU figures").sources;
    // Widths 1 to 4 in 4:2:0 and 4:2:2.
    assert_eq!(
        sources.get("cpu-decoder:narrow-chroma"),
        Some(&8),
        "{sources:?}"
    );
    assert_eq!(
        sources.get("device-decoder:hardware"),
        Some(&10),
        "{sources:?}"
    );
}
