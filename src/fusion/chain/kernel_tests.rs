//! The fused chain kernel against the CPU operators it replaces: through the device seam on
//! every device (the emulated device, and a GPU when there is one), and the kernels called
//! directly on the host (the kernels compiled by the host's C++ compiler, also with blocks of
//! real threads).

use crate::cuda::chain::on_device::run_chain;
use crate::cuda::chain::{FusedSample, JitterSample};
use crate::cuda::test_support::{
    assert_same, devices, emu_device, image_u8, run_chain_emu, run_chain_emu_threads, Devices, Emu,
    SHAPES,
};
use crate::image::{DType, Image, Layout, Pixels};
use crate::ops::cast::cast_image;
use crate::ops::color_jitter::gpu::jitter_sample;
use crate::ops::color_jitter::{apply as jitter_cpu, ColorJitter, JitterParams};
use crate::ops::flip::flip_in_place;
use crate::ops::layout::to_layout;
use crate::ops::normalize::{normalize_image, per_channel, Normalize};
use crate::ops::random_resized_crop::choose_window;
use crate::ops::window::crop_fill;
use crate::resample::{resize_u8, Interp};
use crate::rng::SampleRng;

/// The CPU chain the fused kernel replaces: resize the window, keep part of it, mirror,
/// jitter, normalize, cast, lay out.
fn fused_cpu(im: &Image, s: &FusedSample, jitter: Option<&JitterParams>) -> Image {
    let (h, w, c) = (im.height, im.width, im.channels);
    let v = resize_u8(
        im.as_u8_hwc().unwrap(),
        h,
        w,
        c,
        w,
        s.window,
        s.out_h,
        s.out_w,
        s.interp,
        s.antialias,
    )
    .unwrap();
    let mut out = Image::from_u8_hwc(s.out_h, s.out_w, c, v);
    if let Some((t, l, h, w)) = s.keep {
        out = crop_fill(&out, t as i64, l as i64, h, w, &[0.0]).unwrap();
    }
    flip_in_place(&mut out, s.flip_h, s.flip_v);
    if let Some(p) = jitter {
        let Pixels::U8(v) = &mut out.pixels else {
            unreachable!("u8 before normalize")
        };
        jitter_cpu(v, p);
    }
    if let Some((m, inv)) = s.normalize {
        let nd = if s.dtype == DType::F16 {
            DType::F16
        } else {
            DType::F32
        };
        out = normalize_image(out, &m[..c], &inv[..c], nd);
    }
    out = cast_image(&out, s.dtype);
    to_layout(&out, s.layout)
}

/// On every device of `devs` (a test's [`devices`]), the chain over `ims` through the device
/// seam gives `want`.
fn check_devices(
    devs: &Devices,
    ims: &[Image],
    samples: &[FusedSample],
    want: &[Image],
    what: &str,
) {
    for (name, dev) in devs {
        let got = run_chain(dev.as_ref(), ims, samples).expect("the chain runs");
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert_same(g, w, &format!("{what} on {name}, sample {i}"));
        }
    }
}

#[test]
fn gpu_fused_chain_matches_cpu() {
    let devs = devices();
    let norm = Normalize::new(
        &[123.675, 116.28, 103.53],
        &[58.395, 57.12, 57.375],
        DType::F32,
    )
    .unwrap();
    for c in [1, 3] {
        for (dtype, layout, normalize) in [
            (DType::F32, Layout::Chw, true),
            (DType::F16, Layout::Chw, true),
            (DType::F32, Layout::Hwc, true),
            (DType::U8, Layout::Chw, true),
            (DType::U8, Layout::Hwc, false),
            (DType::F16, Layout::Hwc, false),
        ] {
            let ims: Vec<Image> = (0..SHAPES.len() + 6)
                .map(|k| {
                    let (h, w) = SHAPES
                        .get(k)
                        .copied()
                        .unwrap_or((200 + k * 31, 150 + k * 17));
                    image_u8(h, w, c, 1000 + k as u64)
                })
                .collect();
            let samples: Vec<FusedSample> = ims
                .iter()
                .enumerate()
                .map(|(k, im)| {
                    let mut rng = SampleRng::from_key(k as u64 * 7 + c as u64);
                    let window = choose_window(
                        im.height,
                        im.width,
                        (0.08, 1.0),
                        (0.75, 4.0 / 3.0),
                        &mut rng,
                    );
                    // A gray image is normalized by one mean and std (the first channel's).
                    let (m, inv) = (per_channel(&norm.mean, c), per_channel(&norm.inv_std, c));
                    let (m, inv) = (&m[..c], &inv[..c]);
                    let mut mm = [0f32; 4];
                    let mut ii = [0f32; 4];
                    mm[..c].copy_from_slice(m);
                    ii[..c].copy_from_slice(inv);
                    FusedSample {
                        orientation: 1,
                        window,
                        out_h: 16 + k % 5,
                        out_w: 13 + k % 3,
                        keep: None,
                        jitter: None,
                        interp: if k % 4 == 3 {
                            Interp::Nearest
                        } else {
                            Interp::Bilinear
                        },
                        antialias: k % 5 != 4,
                        flip_h: rng.bernoulli(0.5),
                        flip_v: k % 3 == 0,
                        normalize: normalize.then_some((mm, ii)),
                        dtype,
                        layout,
                    }
                })
                .collect();
            let want: Vec<Image> = ims
                .iter()
                .zip(&samples)
                .map(|(im, s)| fused_cpu(im, s, None))
                .collect();
            check_devices(
                &devs,
                &ims,
                &samples,
                &want,
                &format!("fused c={c} {dtype:?} {layout:?} norm={normalize}"),
            );
        }
    }
}

fn random_sample(rng: &mut SampleRng, im: &Image, k: usize) -> FusedSample {
    let window = if k.is_multiple_of(3) {
        (0, 0, im.height, im.width)
    } else {
        choose_window(im.height, im.width, (0.08, 1.0), (0.75, 4.0 / 3.0), rng)
    };
    let dim = |rng: &mut SampleRng, n: usize| match rng.below(4) {
        0 => n,                                    // pass skipped
        1 => 1 + rng.below(8) as usize,            // strong downscale
        2 => n * 2 + rng.below(5) as usize,        // upscale
        _ => 1 + rng.below(n as u64 + 3) as usize, // anything nearby
    };
    let c = im.channels;
    let mut mean = [0f32; 4];
    let mut inv = [0f32; 4];
    for ch in 0..c {
        mean[ch] = 100.0 + 10.0 * ch as f32;
        inv[ch] = 1.0 / (50.0 + ch as f32 * 3.3);
    }
    let (dtype, layout, normalize) = match k % 5 {
        0 => (DType::U8, Layout::Hwc, false),
        1 => (DType::F32, Layout::Chw, true),
        2 => (DType::F16, Layout::Chw, true),
        3 => (DType::U8, Layout::Chw, true),
        _ => (DType::F16, Layout::Hwc, false),
    };
    FusedSample {
        orientation: 1,
        window,
        out_h: dim(rng, window.2),
        out_w: dim(rng, window.3),
        keep: None,
        jitter: None,
        interp: if rng.below(4) == 0 {
            Interp::Nearest
        } else {
            Interp::Bilinear
        },
        antialias: rng.below(5) != 0,
        flip_h: rng.bernoulli(0.5),
        flip_v: rng.bernoulli(0.3),
        normalize: normalize.then_some((mean, inv)),
        dtype,
        layout,
    }
}

#[test]
fn fused_kernel_matches_cpu_on_the_host() {
    let Some(emu) = Emu::load() else { return };
    let mut rng = SampleRng::from_key(2024);
    for round in 0..40 {
        let c = [1, 3, 4, 3][round % 4];
        let ims: Vec<Image> = (0..6)
            .map(|k| {
                let h = 1 + rng.below(if k == 0 { 3 } else { 90 }) as usize;
                let w = 1 + rng.below(if k == 1 { 3 } else { 90 }) as usize;
                image_u8(h, w, c, rng.next_u64())
            })
            .collect();
        let samples: Vec<FusedSample> = ims
            .iter()
            .enumerate()
            .map(|(k, im)| random_sample(&mut rng, im, k + round))
            .collect();
        // One batch has one dtype and layout on the device; the emulation runs any mix.
        let got = run_chain_emu(&emu, &ims, &samples);
        for (k, ((g, im), s)) in got.iter().zip(&ims).zip(&samples).enumerate() {
            assert_same(
                g,
                &fused_cpu(im, s, None),
                &format!("fused round {round} sample {k}: {s:?}"),
            );
        }
    }
}

/// Crops after the resize (`keep`) and color jitter, through the stages the GPU stage
/// launches, on the emulated device.
#[test]
fn kept_windows_and_jitter_match_cpu_on_the_host() {
    let Some(emu) = emu_device() else { return };
    let mut rng = SampleRng::from_key(77);
    let jitter = ColorJitter::new(0.4, 0.4, 0.4, 0.1).unwrap();
    for round in 0..20 {
        let ims: Vec<Image> = (0..5)
            .map(|k| {
                let h = 2 + rng.below(70) as usize;
                let w = 2 + rng.below(70) as usize;
                image_u8(h, w, 3, (round * 5 + k) as u64)
            })
            .collect();
        let mut params = Vec::new();
        let samples: Vec<FusedSample> = ims
            .iter()
            .enumerate()
            .map(|(k, im)| {
                let mut s = random_sample(&mut rng, im, k + round);
                let kh = 1 + rng.below(s.out_h as u64) as usize;
                let kw = 1 + rng.below(s.out_w as u64) as usize;
                let kt = rng.below((s.out_h - kh + 1) as u64) as usize;
                let kl = rng.below((s.out_w - kw + 1) as u64) as usize;
                s.keep = Some((kt, kl, kh, kw));
                let p = jitter.choose(&mut rng);
                // Every other sample without jitter, in a batch that has some.
                s.jitter = (k % 2 == 0).then(|| jitter_sample(&p));
                params.push((k % 2 == 0).then_some(p));
                // One device batch has one dtype and layout.
                (s.dtype, s.layout, s.normalize) = (DType::F32, Layout::Chw, samples_norm());
                s
            })
            .collect();
        let got = run_chain(emu.as_ref(), &ims, &samples).expect("chain");
        for (k, ((g, im), s)) in got.iter().zip(&ims).zip(&samples).enumerate() {
            assert_same(
                g,
                &fused_cpu(im, s, params[k].as_ref()),
                &format!("round {round} sample {k}: {s:?}"),
            );
        }
        // Without jitter the batch is one launch, and the same.
        let plain: Vec<FusedSample> = samples
            .iter()
            .map(|s| FusedSample { jitter: None, ..*s })
            .collect();
        let got = run_chain(emu.as_ref(), &ims, &plain).expect("chain");
        for (k, ((g, im), s)) in got.iter().zip(&ims).zip(&plain).enumerate() {
            assert_same(g, &fused_cpu(im, s, None), &format!("plain sample {k}"));
        }
    }
    assert_eq!(JitterSample::NONE.desc(4).unwrap().enabled, 0);
}

fn samples_norm() -> Option<([f32; 4], [f32; 4])> {
    Some((
        [123.675, 116.28, 103.53, 0.0],
        [1.0 / 58.395, 1.0 / 57.12, 1.0 / 57.375, 0.0],
    ))
}

/// The chain with kept windows and color jitter (its three-stage path) on every device.
#[test]
fn gpu_fused_chain_with_keep_and_jitter_matches_cpu() {
    let devs = devices();
    let mut rng = SampleRng::from_key(78);
    let jitter = ColorJitter::new(0.4, 0.4, 0.4, 0.1).unwrap();
    let ims: Vec<Image> = SHAPES
        .iter()
        .map(|&(h, w)| image_u8(h + 2, w + 2, 3, (h * w) as u64))
        .collect();
    let mut params = Vec::new();
    let samples: Vec<FusedSample> = ims
        .iter()
        .enumerate()
        .map(|(k, im)| {
            let mut s = random_sample(&mut rng, im, k);
            let (kh, kw) = (s.out_h.div_ceil(2), s.out_w.div_ceil(2));
            s.keep = Some((s.out_h - kh, 0, kh, kw));
            let p = jitter.choose(&mut rng);
            s.jitter = (k % 2 == 0).then(|| jitter_sample(&p));
            params.push((k % 2 == 0).then_some(p));
            (s.dtype, s.layout, s.normalize) = (DType::F16, Layout::Chw, samples_norm());
            s
        })
        .collect();
    let want: Vec<Image> = ims
        .iter()
        .zip(&samples)
        .zip(&params)
        .map(|((im, s), p)| fused_cpu(im, s, p.as_ref()))
        .collect();
    check_devices(&devs, &ims, &samples, &want, "fused with keep and jitter");
}

/// EXIF orientation read through by the chain (defect 3): the kernel on the image as stored,
/// with its orientation, equals the CPU chain on the image the CPU decoder shows (oriented
/// first), for every orientation, sampling, layout and odd size.
#[test]
fn the_chain_reads_the_stored_image_through_its_orientation_on_the_host() {
    let Some(emu) = Emu::load() else { return };
    let mut rng = SampleRng::from_key(77);
    for round in 0..24 {
        let c = [3, 1, 4][round % 3];
        let (h, w) = (1 + rng.below(60) as usize, 1 + rng.below(60) as usize);
        let stored = image_u8(h, w, c, rng.next_u64());
        for o in 1..=8u8 {
            let (px, dh, dw) = crate::decode::exif::apply_orientation(
                stored.as_u8_hwc().unwrap().to_vec(),
                h,
                w,
                c,
                o,
            );
            let shown = Image::from_u8_hwc(dh, dw, c, px);
            let plain = random_sample(&mut rng, &shown, round + o as usize);
            let want = fused_cpu(&shown, &plain, None);
            let through = FusedSample {
                orientation: o,
                ..plain
            };
            let got = run_chain_emu(&emu, std::slice::from_ref(&stored), &[through]);
            assert_same(
                &got[0],
                &want,
                &format!("round {round}, orientation {o}, {h}x{w}x{c}: {plain:?}"),
            );
        }
    }
}

/// The tiled two-pass resampler reads through the EXIF orientation too: photo-like sources
/// stored before their orientation, windows and downscales that take the shared-memory tile
/// (dense taps on both axes), every orientation, one thread per block and whole blocks of
/// threads; the kernel gives the CPU chain's bytes on the image the CPU decoder shows.
#[test]
fn the_tiled_resampler_reads_through_the_orientation_on_the_host() {
    let Some(emu) = Emu::load() else { return };
    let mut rng = SampleRng::from_key(606);
    let (h, w) = (150, 230);
    for c in [3, 1] {
        let stored = image_u8(h, w, c, 70 + c as u64);
        for o in 1..=8u8 {
            let (px, dh, dw) = crate::decode::exif::apply_orientation(
                stored.as_u8_hwc().unwrap().to_vec(),
                h,
                w,
                c,
                o,
            );
            let shown = Image::from_u8_hwc(dh, dw, c, px);
            let window = choose_window(dh, dw, (0.3, 1.0), (0.75, 4.0 / 3.0), &mut rng);
            let plain = FusedSample {
                flip_h: o % 2 == 0,
                normalize: (o % 3 == 0).then_some(([120.0; 4], [0.02; 4])),
                dtype: if o % 3 == 0 { DType::F32 } else { DType::U8 },
                layout: if o % 2 == 0 { Layout::Chw } else { Layout::Hwc },
                ..FusedSample::resize(
                    window,
                    23 + o as usize,
                    31 - o as usize,
                    Interp::Bilinear,
                    true,
                )
            };
            let want = fused_cpu(&shown, &plain, None);
            let through = FusedSample {
                orientation: o,
                ..plain
            };
            let one = run_chain_emu(&emu, std::slice::from_ref(&stored), &[through]);
            let blocks =
                run_chain_emu_threads(&emu, std::slice::from_ref(&stored), &[through], 2, 64);
            let what = format!("orientation {o}, {c} channels, window {window:?}");
            assert_same(&one[0], &want, &format!("one thread per block, {what}"));
            assert_same(&blocks[0], &want, &format!("blocks of threads, {what}"));
        }
    }
}

/// Large downscales (photo-sized sources to training and eval sizes, far beyond one chunk of
/// first-pass lines), both pass orders, kept windows, 1 to 4 channels: the tiled two-pass
/// kernel gives the CPU's bytes, run as one thread per block and as whole blocks of threads.
fn large_downscale_cases() -> (Vec<Image>, Vec<FusedSample>) {
    let mut rng = SampleRng::from_key(4096);
    // (source h, w, channels, out h, out w, window: whole or random)
    let cases = [
        (900, 1200, 3, 224, 224, false), // eval-like, both passes
        (1100, 700, 3, 7, 9, false),     // extreme: ~100x, lines span many chunks
        (640, 960, 1, 24, 300, true),    // vertical first (width shrinks less)
        (480, 520, 4, 45, 17, true),     // four channels
        (300, 2000, 3, 33, 64, false),   // wide
        (333, 257, 2, 1, 1, false),      // one output pixel
    ];
    let mut ims = Vec::new();
    let mut samples = Vec::new();
    for (k, &(h, w, c, oh, ow, random_window)) in cases.iter().enumerate() {
        let im = image_u8(h, w, c, 500 + k as u64);
        let window = if random_window {
            choose_window(h, w, (0.25, 1.0), (0.75, 4.0 / 3.0), &mut rng)
        } else {
            (0, 0, h, w)
        };
        let keep = (k % 2 == 1).then(|| (oh / 3, ow / 4, oh - oh / 3, ow - ow / 4));
        samples.push(FusedSample {
            keep,
            flip_h: k % 3 == 0,
            flip_v: k % 2 == 0,
            normalize: (k % 3 == 1).then_some(([100.0; 4], [0.02; 4])),
            dtype: if k % 3 == 1 { DType::F32 } else { DType::U8 },
            layout: if k % 2 == 0 { Layout::Chw } else { Layout::Hwc },
            ..FusedSample::resize(window, oh, ow, Interp::Bilinear, k != 3)
        });
        ims.push(im);
    }
    (ims, samples)
}

#[test]
fn large_downscales_match_cpu_on_the_host() {
    let Some(emu) = Emu::load() else { return };
    let (ims, samples) = large_downscale_cases();
    let want: Vec<Image> = ims
        .iter()
        .zip(&samples)
        .map(|(im, s)| fused_cpu(im, s, None))
        .collect();
    let one = run_chain_emu(&emu, &ims, &samples);
    // 2 blocks per sample (tiles stride over them), 48 threads: not a divisor of the tile,
    // so every block-stride loop has a partial last round.
    let blocks = run_chain_emu_threads(&emu, &ims, &samples, 2, 48);
    for (k, s) in samples.iter().enumerate() {
        assert_same(&one[k], &want[k], &format!("one thread, sample {k}: {s:?}"));
        assert_same(
            &blocks[k],
            &want[k],
            &format!("blocks of threads, sample {k}: {s:?}"),
        );
    }
}

#[test]
fn random_chains_match_cpu_with_blocks_of_threads_on_the_host() {
    let Some(emu) = Emu::load() else { return };
    let mut rng = SampleRng::from_key(99);
    for round in 0..6 {
        let c = [1, 3, 4][round % 3];
        let ims: Vec<Image> = (0..4)
            .map(|_| {
                let h = 1 + rng.below(120) as usize;
                let w = 1 + rng.below(120) as usize;
                image_u8(h, w, c, rng.next_u64())
            })
            .collect();
        let samples: Vec<FusedSample> = ims
            .iter()
            .enumerate()
            .map(|(k, im)| random_sample(&mut rng, im, k + round))
            .collect();
        let threads = [1, 7, 32, 256][round % 4];
        let got = run_chain_emu_threads(&emu, &ims, &samples, 3, threads);
        for (k, ((g, im), s)) in got.iter().zip(&ims).zip(&samples).enumerate() {
            assert_same(
                g,
                &fused_cpu(im, s, None),
                &format!("round {round} sample {k} ({threads} threads): {s:?}"),
            );
        }
    }
}

#[test]
fn launcher_tiles_are_the_kernels_tiles() {
    let src = include_str!("../../../kernels/common/resample.cuh");
    let define = |name: &str| -> usize {
        let line = src
            .lines()
            .find(|l| l.starts_with(&format!("#define {name} ")))
            .unwrap_or_else(|| panic!("no #define {name}"));
        line.split_whitespace()
            .nth(2)
            .unwrap()
            .trim_end_matches('u')
            .parse()
            .unwrap()
    };
    assert_eq!(
        crate::cuda::chain::launcher::TILE,
        (define("TILE_H"), define("TILE_W"))
    );
    assert_eq!(crate::cuda::chain::launcher::tiles(33, 64), 3 * 2);
}

/// The large downscales on every device, one batch per dtype and layout.
#[test]
fn gpu_fused_chain_large_downscales_match_cpu() {
    let devs = devices();
    let (ims, samples) = large_downscale_cases();
    for (dtype, layout) in [(DType::U8, Layout::Chw), (DType::F32, Layout::Hwc)] {
        let samples: Vec<FusedSample> = samples
            .iter()
            .map(|s| FusedSample {
                dtype,
                layout,
                normalize: (dtype == DType::F32).then_some(([100.0; 4], [0.02; 4])),
                ..*s
            })
            .collect();
        let want: Vec<Image> = ims
            .iter()
            .zip(&samples)
            .map(|(im, s)| fused_cpu(im, s, None))
            .collect();
        check_devices(
            &devs,
            &ims,
            &samples,
            &want,
            &format!("large downscales {dtype:?} {layout:?}"),
        );
    }
}
