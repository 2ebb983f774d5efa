//! The kernels of `kernels/` compiled for the host (`tests/cuda_emu/emu.cpp`, g++) and run
//! against the CPU reference, so their arithmetic is checked on machines without a GPU. A
//! "launch" here is one single-thread block per sample; the grid-stride loops then cover
//! everything. What this cannot check: the CUDA intrinsics and PTX conversions themselves
//! (mapped to IEEE host operations), and the multi-thread reduction (see `parity.rs`).
//! Skips when no C++ compiler (`$CXX`, else `g++`) can be run.

use std::path::Path;
use std::process::Command;

use super::batch::pixels_from_bytes;
use super::desc::{conv_flags, dtype, geom_flags, ConvertDesc, FusedDesc, GeomDesc, JitterDesc};
use super::fused::{build_desc, FusedSample, SourceDims};
use super::parity::{assert_same, fused_cpu, image_u8, in_any};
use crate::image::{DType, Image, Layout};
use crate::ops::cast::cast_image;
use crate::ops::color_jitter::{apply as jitter_cpu, cuda::jitter_desc, ColorJitter, JitterParams};
use crate::ops::crop::{crop_fill, cuda::fill_bits};
use crate::ops::flip::flip_in_place;
use crate::ops::layout::to_layout;
use crate::ops::normalize::Normalize;
use crate::ops::random_resized_crop::choose_window;
use crate::ops::resize::Interp;
use crate::rng::SampleRng;

type SetBlock = unsafe extern "C" fn(u32, u32);
type FusedKernel = unsafe extern "C" fn(*const FusedDesc, *const i32, u32);
type GeomKernel = unsafe extern "C" fn(*const GeomDesc, u32);
type ConvertKernel = unsafe extern "C" fn(*const ConvertDesc, u32);
type JitterKernel = unsafe extern "C" fn(*const JitterDesc, u32, u32, *mut u64);

struct Emu {
    lib: libloading::Library,
    _dir: tempfile::TempDir,
}

impl Emu {
    fn load() -> Option<Emu> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cuda_emu/emu.cpp");
        if !src.is_file() {
            eprintln!("skipped: {} not found", src.display());
            return None;
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let lib = dir.path().join("libstokehold_emu.so");
        let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".to_string());
        let status = Command::new(&cxx)
            .args([
                "-O1",
                "-shared",
                "-fPIC",
                "-ffp-contract=off",
                "-std=c++17",
                "-o",
            ])
            .arg(&lib)
            .arg(&src)
            .status();
        match status {
            Err(e) => {
                eprintln!("skipped: no C++ compiler ({cxx}: {e})");
                None
            }
            Ok(s) => {
                assert!(
                    s.success(),
                    "{cxx} failed to build the kernel emulation ({s})"
                );
                // SAFETY: the library was just built from our own source; loading it runs no
                // initialisers beyond the C++ runtime's.
                let lib = unsafe { libloading::Library::new(&lib) }.expect("load emulation");
                Some(Emu { lib, _dir: dir })
            }
        }
    }

    fn sym<T: Copy>(&self, name: &str) -> T {
        // SAFETY: every name is an `extern "C"` function of emu.cpp with the signature `T`
        // given at the call site (the kernels' C parameter lists).
        unsafe { *self.lib.get::<T>(name.as_bytes()).expect(name) }
    }

    /// Runs `f` once per sample as block (0, s).
    fn per_sample(&self, n: usize, mut f: impl FnMut()) {
        let set: SetBlock = self.sym("emu_set_block");
        for s in 0..n {
            // SAFETY: sets plain globals of the emulation.
            unsafe { set(s as u32, n as u32) };
            f();
        }
    }
}

/// A zeroed, 8-byte aligned output buffer of `bytes` bytes.
fn out_buf(bytes: usize) -> Vec<u64> {
    vec![0u64; bytes.div_ceil(8).max(1)]
}

fn bytes_of(buf: &[u64], n: usize) -> Vec<u8> {
    buf.iter().flat_map(|w| w.to_ne_bytes()).take(n).collect()
}

fn image_from(buf: &[u64], h: usize, w: usize, c: usize, dt: DType, layout: Layout) -> Image {
    Image {
        height: h,
        width: w,
        channels: c,
        layout,
        pixels: pixels_from_bytes(&bytes_of(buf, h * w * c * dt.size()), dt),
    }
}

fn run_fused(emu: &Emu, entry: &str, ims: &[Image], samples: &[FusedSample]) -> Vec<Image> {
    let kernel: FusedKernel = emu.sym(entry);
    let mut table = Vec::new();
    let mut outs: Vec<Vec<u64>> = Vec::new();
    let mut descs = Vec::new();
    for (im, s) in ims.iter().zip(samples) {
        let dims = SourceDims {
            height: im.height,
            width: im.width,
            channels: im.channels,
            pitch: im.width * im.channels,
        };
        let mut d = build_desc(dims, s, &mut table).expect("descriptor");
        let out = out_buf(s.out_h * s.out_w * im.channels * s.dtype.size());
        d.src = im.as_u8_hwc().unwrap().as_ptr() as u64;
        d.dst = out.as_ptr() as u64;
        outs.push(out);
        descs.push(d);
    }
    table.push(0);
    emu.per_sample(descs.len(), || {
        // SAFETY: the descriptors point at the live input images and output buffers sized
        // for them; the table holds their taps.
        unsafe { kernel(descs.as_ptr(), table.as_ptr(), descs.len() as u32) }
    });
    outs.iter()
        .zip(ims.iter().zip(samples))
        .map(|(o, (im, s))| {
            let (dt, layout) = if entry == "resize_u8" {
                (DType::U8, Layout::Hwc)
            } else {
                (s.dtype, s.layout)
            };
            image_from(o, s.out_h, s.out_w, im.channels, dt, layout)
        })
        .collect()
}

fn random_sample(rng: &mut SampleRng, im: &Image, k: usize) -> FusedSample {
    let window = if k % 3 == 0 {
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
        window,
        out_h: dim(rng, window.2),
        out_w: dim(rng, window.3),
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
fn fused_and_resize_kernels_match_cpu_on_the_host() {
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
        let mut samples: Vec<FusedSample> = ims
            .iter()
            .enumerate()
            .map(|(k, im)| random_sample(&mut rng, im, k + round))
            .collect();
        // One batch has one dtype and layout on the device; the emulation runs any mix.
        let got = run_fused(&emu, "fused_crop_resize_normalize", &ims, &samples);
        for (k, ((g, im), s)) in got.iter().zip(&ims).zip(&samples).enumerate() {
            assert_same(
                g,
                &fused_cpu(im, s),
                &format!("fused round {round} sample {k}: {s:?}"),
            );
        }
        for s in &mut samples {
            (s.flip_h, s.flip_v, s.normalize, s.dtype, s.layout) =
                (false, false, None, DType::U8, Layout::Hwc);
        }
        let got = run_fused(&emu, "resize_u8", &ims, &samples);
        for (k, ((g, im), s)) in got.iter().zip(&ims).zip(&samples).enumerate() {
            assert_same(
                g,
                &fused_cpu(im, s),
                &format!("resize round {round} sample {k}: {s:?}"),
            );
        }
    }
}

#[test]
fn geometry_kernels_match_cpu_on_the_host() {
    let Some(emu) = Emu::load() else { return };
    for dt in [DType::U8, DType::F16, DType::F32] {
        let suffix = ["b1", "b2", "", "b4"][dt.size() - 1];
        let crop: GeomKernel = emu.sym(&format!("crop_fill_{suffix}"));
        let flip: GeomKernel = emu.sym(&format!("flip_{suffix}"));
        let transpose: GeomKernel = emu.sym(&format!("transpose_{suffix}"));
        for layout in [Layout::Hwc, Layout::Chw] {
            for (h, w, c) in [(1, 1, 1), (5, 9, 3), (8, 3, 1), (7, 7, 4)] {
                let im = in_any(&image_u8(h, w, c, (h * w + c) as u64), dt, layout);
                let src = im.pixels.as_bytes().as_ptr() as u64;
                let chw = if layout == Layout::Chw {
                    geom_flags::CHW
                } else {
                    0
                };
                let base = GeomDesc {
                    src,
                    src_h: h as u32,
                    src_w: w as u32,
                    out_h: h as u32,
                    out_w: w as u32,
                    channels: c as u32,
                    ..GeomDesc::default()
                };
                let run = |k: GeomKernel, mut d: GeomDesc| -> Vec<u64> {
                    let out = out_buf((d.out_h * d.out_w * d.channels) as usize * dt.size());
                    d.dst = out.as_ptr() as u64;
                    emu.per_sample(1, || {
                        // SAFETY: `d` points at the live image and an output sized for it.
                        unsafe { k(&d, 1) }
                    });
                    out
                };
                // Crop windows inside, across the edges and fully outside.
                for (top, left, oh, ow) in [
                    (0i64, 0i64, h, w),
                    (-2, 1, h + 3, 2),
                    (3, -4, 2, w + 5),
                    (50, 50, 2, 2),
                ] {
                    let fill = [7.6, -2.5, 300.0, 1.5];
                    let mut d = base;
                    (d.top, d.left, d.out_h, d.out_w, d.flags) =
                        (top as i32, left as i32, oh as u32, ow as u32, chw);
                    d.fill = fill.map(|v| fill_bits(v, dt));
                    let out = run(crop, d);
                    let want = crop_fill(&im, top, left, oh, ow, &fill[..c]).unwrap();
                    assert_same(&image_from(&out, oh, ow, c, dt, layout), &want, "crop");
                }
                for (fh, fv) in [(true, false), (false, true), (true, true)] {
                    let mut d = base;
                    d.flags = chw
                        | if fh { geom_flags::FLIP_H } else { 0 }
                        | if fv { geom_flags::FLIP_V } else { 0 };
                    let mut want = im.clone();
                    flip_in_place(&mut want, fh, fv);
                    assert_same(
                        &image_from(&run(flip, d), h, w, c, dt, layout),
                        &want,
                        "flip",
                    );
                }
                let to = if layout == Layout::Hwc {
                    Layout::Chw
                } else {
                    Layout::Hwc
                };
                let mut d = base;
                d.flags = if to == Layout::Chw {
                    geom_flags::TO_CHW
                } else {
                    0
                };
                assert_same(
                    &image_from(&run(transpose, d), h, w, c, dt, to),
                    &to_layout(&im, to),
                    "layout",
                );
            }
        }
    }
}

#[test]
fn convert_kernel_matches_cpu_on_the_host() {
    let Some(emu) = Emu::load() else { return };
    let convert: ConvertKernel = emu.sym("convert");
    let norm = Normalize::new(
        &[123.675, 116.28, 103.53],
        &[58.395, 57.12, 57.375],
        DType::F32,
    )
    .unwrap();
    for from in [DType::U8, DType::F16, DType::F32] {
        for layout in [Layout::Hwc, Layout::Chw] {
            let base = image_u8(13, 11, 3, 5);
            // Values with ties and out-of-range for the float sources.
            let im = if from == DType::U8 {
                base
            } else {
                let mut f = in_any(&base, DType::F32, Layout::Hwc);
                if let crate::image::Pixels::F32(v) = &mut f.pixels {
                    for (i, x) in v.iter_mut().enumerate() {
                        *x = *x * 1.25 - 30.0 + if i % 7 == 0 { 0.5 } else { 0.0 };
                    }
                }
                in_any(&f, from, layout)
            };
            let im = to_layout(&im, layout);
            for to in [DType::U8, DType::F16, DType::F32] {
                for normalize in [false, true] {
                    let mut d = ConvertDesc {
                        src: im.pixels.as_bytes().as_ptr() as u64,
                        count: (13 * 11 * 3) as u32,
                        channels: 3,
                        plane: 13 * 11,
                        flags: if layout == Layout::Chw {
                            conv_flags::CHW
                        } else {
                            0
                        },
                        src_dtype: dtype::code(from),
                        dst_dtype: dtype::code(to),
                        ..ConvertDesc::default()
                    };
                    let want = if normalize {
                        d.flags |= conv_flags::NORMALIZE;
                        d.mean[..3].copy_from_slice(&norm.mean);
                        d.inv_std[..3].copy_from_slice(&norm.inv_std);
                        cast_image(&norm.apply(im.clone()).unwrap(), to)
                    } else {
                        cast_image(&im, to)
                    };
                    let out = out_buf(13 * 11 * 3 * to.size());
                    d.dst = out.as_ptr() as u64;
                    emu.per_sample(1, || {
                        // SAFETY: `d` points at the live image and an output sized for it.
                        unsafe { convert(&d, 1) }
                    });
                    let got = image_from(&out, 13, 11, 3, to, layout);
                    assert_same(
                        &got,
                        &want,
                        &format!("convert {from:?}->{to:?} {layout:?} norm={normalize}"),
                    );
                }
            }
        }
    }
}

fn run_jitter(emu: &Emu, images: &mut [Vec<u8>], params: &[JitterParams]) {
    let reduce: JitterKernel = emu.sym("jitter_luma_sum");
    let step: JitterKernel = emu.sym("jitter_step");
    let descs: Vec<JitterDesc> = images
        .iter_mut()
        .zip(params)
        .map(|(im, p)| {
            let mut d = jitter_desc(im.len() / 3, p).unwrap();
            d.data = im.as_mut_ptr() as u64;
            d
        })
        .collect();
    let mut sums = vec![0u64; descs.len()];
    let n = descs.len() as u32;
    for k in 0..4 {
        emu.per_sample(descs.len(), || {
            // SAFETY: the descriptors point at the live images; `sums` has one entry each.
            unsafe { reduce(descs.as_ptr(), n, k, sums.as_mut_ptr()) }
        });
        emu.per_sample(descs.len(), || {
            // SAFETY: as above.
            unsafe { step(descs.as_ptr(), n, k, sums.as_mut_ptr()) }
        });
    }
}

#[test]
fn color_jitter_kernels_match_cpu_on_the_host() {
    let Some(emu) = Emu::load() else { return };
    for (b, c, s, h) in [
        (0.4, 0.4, 0.4, 0.1),
        (0.0, 0.9, 0.0, 0.0),
        (2.0, 0.5, 1.5, 0.5),
        (0.0, 0.0, 0.0, 0.3),
    ] {
        let op = ColorJitter::new(b, c, s, h).unwrap();
        let ims: Vec<Image> = (0..16)
            .map(|k| image_u8(1 + k * 5 % 37, 1 + k * 11 % 41, 3, k as u64))
            .collect();
        let params: Vec<_> = (0..ims.len())
            .map(|k| op.choose(&mut SampleRng::from_key(k as u64 + 7)))
            .collect();
        let mut got: Vec<Vec<u8>> = ims
            .iter()
            .map(|im| im.as_u8_hwc().unwrap().to_vec())
            .collect();
        run_jitter(&emu, &mut got, &params);
        for (k, ((g, im), p)) in got.iter().zip(&ims).zip(&params).enumerate() {
            let mut want = im.as_u8_hwc().unwrap().to_vec();
            jitter_cpu(&mut want, p);
            assert!(g == &want, "jitter {b} {c} {s} {h}, sample {k} ({p:?})");
        }
    }
}

/// Hue and saturation over every 24-bit colour, against the CPU's tables.
#[test]
fn hue_and_saturation_match_cpu_for_every_colour() {
    let Some(emu) = Emu::load() else { return };
    let all: Vec<u8> = (0u32..1 << 24)
        .flat_map(|v| [(v >> 16) as u8, (v >> 8) as u8, v as u8])
        .collect();
    for (sat, hue) in [
        (None, Some(-0.5)),
        (None, Some(0.1337)),
        (Some(1.7), None),
        (Some(0.3), Some(0.45)),
    ] {
        let p = JitterParams {
            order: [3, 2, 0, 1],
            brightness: None,
            contrast: None,
            saturation: sat,
            hue,
        };
        let mut got = vec![all.clone()];
        run_jitter(&emu, &mut got, std::slice::from_ref(&p));
        let mut want = all.clone();
        jitter_cpu(&mut want, &p);
        if let Some(i) = got[0].iter().zip(&want).position(|(a, b)| a != b) {
            let px = i / 3;
            panic!(
                "{p:?}: colour {:06x} gives {:?}, cpu {:?}",
                px,
                &got[0][px * 3..px * 3 + 3],
                &want[px * 3..px * 3 + 3]
            );
        }
    }
}
