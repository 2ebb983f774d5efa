//! Damaged files on the GPU path: whichever decoder a file is routed to, the emulated device
//! skips the samples the CPU path skips, with the same causes, and gives the others' pixels
//! (bit for bit with repeated chroma). The JPEG engines report no error per image, so a
//! file libjpeg refuses must never reach them.

use super::gpu_tests::{assert_same_runs, emu, on, run, shipped};
use super::upsampling_tests::nearest;
use crate::pipeline::spec::DeviceChoice;
use crate::testutil::{encode_jpeg_opts, pattern_rgb, JpegOpts, Sub};

/// Deterministic damage: `n` variants of `clean`, each with one to three bits flipped in its
/// first `reach` bytes (the header, and for these small files the start of the data).
fn flipped(clean: &[u8], n: usize, reach: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut state = seed;
    let mut next = move || {
        // splitmix64: a fixed sequence, no dependency.
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    (0..n)
        .map(|_| {
            let mut b = clean.to_vec();
            for _ in 0..1 + next() % 3 {
                let at = 2 + (next() as usize) % (reach.min(b.len()) - 2);
                b[at] ^= 1 << (next() % 8);
            }
            b
        })
        .collect()
}

/// 240 damaged JPEGs: 60 variants each of a 4:2:0, 4:2:2, 4:4:4 and progressive 4:2:0 photo
/// of 64x48.
fn damaged_folder() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for (k, (sub, progressive)) in [
        (Sub::S420, false),
        (Sub::S422, false),
        (Sub::S444, false),
        (Sub::S420, true),
    ]
    .into_iter()
    .enumerate()
    {
        let o = JpegOpts {
            quality: 90,
            sub,
            progressive,
            exif_tiff: None,
        };
        let clean = encode_jpeg_opts(&pattern_rgb(48, 64), 48, 64, 3, &o);
        for (i, bad) in flipped(&clean, 60, 700, k as u64).iter().enumerate() {
            std::fs::write(d.path().join(format!("d{k}-{i:02}.jpg")), bad).unwrap();
        }
    }
    d
}

#[test]
fn damaged_headers_get_the_cpu_verdicts_and_pixels_on_the_emulated_device() {
    if emu().is_none() {
        return;
    }
    let d = damaged_folder();
    let mut spec = nearest(shipped("resnet50-train.toml", d.path()));
    spec.settings.batch = 16;
    let cpu = run(&on(&spec, DeviceChoice::Cpu));
    let skipped: usize = cpu
        .iter()
        .map(|b| b.as_ref().map_or(0, |b| b.skipped.len()))
        .sum();
    // Damage of every kind: some files refused, most decoded.
    assert!((10..200).contains(&skipped), "{skipped} of 240 skipped");
    assert_same_runs(&cpu, &run(&on(&spec, DeviceChoice::Emu)), "damaged headers");
}

/// On a real device (a GPU machine: `scripts/gpu-check.sh`): the same damaged files through
/// nvJPEG give the CPU path's samples, parameters and skips (what libjpeg refuses never
/// reaches the JPEG engines, which report no error per image). Pixels are not compared:
/// damage inside a scan decodes differently on the engines.
#[test]
fn gpu_damaged_headers_get_the_cpu_verdicts_on_a_real_device() {
    use crate::pipeline::Batch;
    if crate::cuda::test_support::real_device().is_none() {
        return;
    }
    let d = damaged_folder();
    let mut spec = nearest(shipped("resnet50-train.toml", d.path()));
    spec.settings.batch = 16;
    let cpu = run(&on(&spec, DeviceChoice::Cpu));
    let gpu = run(&on(&spec, DeviceChoice::Gpu));
    assert_eq!(cpu.len(), gpu.len());
    let skips = |b: &Batch| -> Vec<String> { b.skipped.iter().map(|s| s.to_string()).collect() };
    for (k, (c, g)) in cpu.iter().zip(&gpu).enumerate() {
        let (c, g) = (c.as_ref().unwrap(), g.as_ref().unwrap());
        assert_eq!(c.samples, g.samples, "batch {k}: samples and parameters");
        assert_eq!(skips(c), skips(g), "batch {k}: skips");
    }
}
