//! The GPU stage's decode on the emulated device, which has nvJPEG's shape (submit, then
//! finish at the batch's fence): ROIs padded as nvJPEG before 13.3 pads them and exact ones
//! give the CPU's batches, and images the decoder fails on at the fence are decoded again on
//! the CPU.

use super::gpu_tests::{
    assert_same_runs, builtin, corpus, corpus_spec, emu, emu_pipeline, on, run, shipped,
};
use crate::cuda::gpu_device::GpuDevice;
use crate::cuda::{EmuDevice, EmuOptions};
use crate::decode::{JpegHeader, Limits};
use crate::nvjpeg::Roi;
use crate::pipeline::spec::DeviceChoice;

#[test]
fn padded_and_exact_rois_both_give_the_cpu_batches() {
    let Some(padded) = emu() else { return };
    let exact = EmuDevice::new(EmuOptions {
        exact_roi: true,
        ..EmuOptions::default()
    })
    .unwrap();
    // The plans differ: a ROI inside the image is decoded with an MCU around it by default,
    // and the region is read from inside that.
    let jpeg = crate::testutil::encode_jpeg_opts(
        &crate::testutil::pattern_rgb(64, 96),
        64,
        96,
        3,
        &crate::testutil::JpegOpts {
            quality: 90,
            sub: crate::testutil::Sub::S420,
            progressive: false,
            exif_tiff: None,
        },
    );
    let header = JpegHeader::read(&jpeg, &Limits::default()).unwrap();
    let roi = Some(Roi {
        x: 40,
        y: 24,
        width: 20,
        height: 10,
    });
    let p = padded.plan_decode(&header, roi).unwrap();
    assert_eq!((p.width, p.height), (20 + 2 * 16, 10 + 2 * 16), "{p:?}");
    assert_eq!((p.window.x, p.window.y), (16, 16), "{p:?}");
    let e = exact.plan_decode(&header, roi).unwrap();
    assert_eq!((e.width, e.height, e.window.x, e.window.y), (20, 10, 0, 0));
    // Every orientation, random crops: the same batches as the CPU either way.
    let d = corpus();
    let spec = corpus_spec(d.path(), 5);
    let cpu = run(&on(&spec, DeviceChoice::Cpu));
    for (dev, what) in [(padded, "padded ROIs"), (exact, "exact ROIs")] {
        let mut p = emu_pipeline(&spec, dev).unwrap();
        let got: Vec<_> = p.by_ref().collect();
        assert_same_runs(&cpu, &got, what);
        // Decoded by the device as planned, none sent back to the CPU.
        let gpu = p.stats().gpu.expect("GPU figures");
        assert!(
            gpu.sources.get("device-decoder:hardware") > Some(&0),
            "{what}"
        );
        assert_eq!(gpu.sources.get("device-decoder-failed"), None, "{what}");
    }
}

#[test]
fn images_the_decoder_fails_on_at_the_fence_are_decoded_again_on_the_cpu() {
    let (_d, data) = builtin();
    let Some(dev) = emu() else { return };
    for name in ["resnet50-train.toml", "resnet50-eval.toml"] {
        let mut spec = shipped(name, &data);
        spec.settings.batch = 8;
        spec.settings.epochs = Some(1);
        let cpu = run(&on(&spec, DeviceChoice::Cpu));
        dev.fail_decodes(5);
        let mut p = emu_pipeline(&spec, dev.clone()).unwrap();
        // Nothing failed yet: the hook takes the first five images the device decodes.
        let got: Vec<_> = p.by_ref().collect();
        assert_same_runs(&cpu, &got, name);
        let gpu = p.stats().gpu.expect("GPU figures");
        assert_eq!(
            gpu.sources.get("device-decoder-failed").copied(),
            Some(5),
            "{name}: {:?}",
            gpu.sources
        );
    }
}
