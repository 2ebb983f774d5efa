//! The chroma rebuild (`kernels/chroma.cu`) against the CPU path's decoder: from what the
//! JPEG engines write (chroma repeated over each block: our decoder with
//! [`Upsampling::Nearest`], which gives the engines' bytes exactly), the kernels must give
//! libjpeg's fancy upsampling — exactly wherever a block has a pixel none of whose channels
//! was clamped, and close elsewhere. Runs on the kernels built for the host; `gpu_` tests in
//! `pipeline::run` run the same kernels on a real device.

use crate::cuda::desc::ChromaDesc;
use crate::cuda::emu::kernels::HostFn;
use crate::cuda::kernel::Kernel;
use crate::cuda::test_support::Emu;
use crate::decode::{decode_window, ColorMode, DecodeOptions, JpegHeader, Limits, Upsampling};
use crate::testutil::{encode_jpeg, pattern_rgb, Sub};

type ChromaKernel = unsafe extern "C" fn(*const ChromaDesc, u32);

/// The descriptor of region (x0, y0, w, h) of a `image_w` × `image_h` image subsampled
/// (sx, sy): `nearest` in, `out` out (both 3 × w × h bytes), planes still to be pointed at.
fn region_desc(
    nearest: &[u8],
    out: &mut [u8],
    (x0, y0, w, h): (usize, usize, usize, usize),
    (image_w, image_h): (usize, usize),
    (sx, sy): (usize, usize),
) -> ChromaDesc {
    ChromaDesc {
        src: nearest.as_ptr() as u64,
        dst: out.as_mut_ptr() as u64,
        planes: 0,
        pitch: (3 * w) as u32,
        width: w as u32,
        height: h as u32,
        x0: x0 as u32,
        y0: y0 as u32,
        image_w: image_w as u32,
        image_h: image_h as u32,
        sx: sx as u32,
        sy: sy as u32,
        reserved: 0,
    }
}

/// Runs the three chroma kernels over one region: `nearest` is the engines' output of the
/// region (x0, y0, w, h) of a `image_w` × `image_h` image subsampled (sx, sy).
#[allow(clippy::too_many_arguments)]
pub(crate) fn rebuild_on_host(
    emu: &Emu,
    nearest: &[u8],
    (x0, y0, w, h): (usize, usize, usize, usize),
    (image_w, image_h): (usize, usize),
    (sx, sy): (usize, usize),
) -> Vec<u8> {
    let mut out = vec![0u8; nearest.len()];
    let mut d = region_desc(
        nearest,
        &mut out,
        (x0, y0, w, h),
        (image_w, image_h),
        (sx, sy),
    );
    let mut planes = vec![0u8; d.plane_bytes()];
    d.planes = planes.as_mut_ptr() as u64;
    for kernel in [
        Kernel::ChromaResolve,
        Kernel::ChromaGuess,
        Kernel::ChromaUpsample,
    ] {
        let k: ChromaKernel = emu.kernel(kernel);
        // SAFETY: the descriptor points at `nearest` (pitch × h bytes), `out` (as many) and
        // `planes` (`plane_bytes`), all live for the call; one sample.
        emu.per_sample(1, || unsafe { k(&d, 1) });
    }
    out
}

fn opts(upsampling: Upsampling) -> DecodeOptions {
    DecodeOptions {
        color: ColorMode::Rgb,
        apply_exif: false,
        upsampling,
        ..DecodeOptions::default()
    }
}

/// (values differing, max abs difference) of two byte slices.
fn diff(a: &[u8], b: &[u8]) -> (usize, u8) {
    a.iter()
        .zip(b)
        .filter(|(x, y)| x != y)
        .fold((0, 0), |(n, m), (x, y)| (n + 1, m.max(x.abs_diff(*y))))
}

/// Rebuilds every region of `jpg` in `regions` and compares with the fancy decode.
fn check(
    emu: &Emu,
    jpg: &[u8],
    regions: &[(usize, usize, usize, usize)],
    what: &str,
) -> (usize, u8) {
    let hd = JpegHeader::read(jpg, &Limits::default()).unwrap();
    let c = &hd.frame.components;
    let (sx, sy) = (usize::from(c[0].h / c[1].h), usize::from(c[0].v / c[1].v));
    let (iw, ih) = (hd.width(), hd.height());
    let mut total = (0, 0u8);
    for &(x0, y0, w, h) in regions {
        let near = decode_window(jpg, &opts(Upsampling::Nearest), (y0, x0, h, w)).unwrap();
        let fancy = decode_window(jpg, &opts(Upsampling::Fancy), (y0, x0, h, w)).unwrap();
        let got = rebuild_on_host(
            emu,
            near.as_u8_hwc().unwrap(),
            (x0, y0, w, h),
            (iw, ih),
            (sx, sy),
        );
        // Compare away from the region's own borders unless they are the image's: the
        // caller decodes a margin there.
        let (cx0, cy0) = (
            if x0 == 0 { 0 } else { 2 * sx },
            if y0 == 0 { 0 } else { 2 * sy },
        );
        let cx1 = if x0 + w == iw { w } else { w - 2 * sx };
        let cy1 = if y0 + h == ih { h } else { h - 2 * sy };
        let want = fancy.as_u8_hwc().unwrap();
        for y in cy0..cy1 {
            let (a, b) = (3 * (y * w + cx0), 3 * (y * w + cx1));
            let (n, m) = diff(&got[a..b], &want[a..b]);
            if n > 0 && total.0 == 0 {
                eprintln!(
                    "{what}: region {:?}: row {y} differs ({n} values, max {m})",
                    (x0, y0, w, h)
                );
            }
            total = (total.0 + n, total.1.max(m));
        }
    }
    total
}

/// Regions of a `w` × `h` image: the whole image, its corners, and windows at odd offsets.
fn regions(w: usize, h: usize) -> Vec<(usize, usize, usize, usize)> {
    let mut v = vec![(0, 0, w, h)];
    for &(x0, y0) in &[
        (0, 0),
        (1, 1),
        (7, 3),
        (w / 3, h / 4),
        (w / 2 + 1, h / 2 + 1),
    ] {
        for &(rw, rh) in &[(w - x0, h - y0), ((w - x0) / 2 + 1, (h - y0) / 2 + 1)] {
            if rw > 8 && rh > 8 {
                v.push((x0, y0, rw, rh));
            }
        }
    }
    v
}

#[test]
fn the_rebuilt_chroma_is_libjpegs_fancy_upsampling() {
    let Some(emu) = Emu::load() else { return };
    // Smooth colours and no clamped channels: every block resolves exactly.
    for (h, w) in [(64usize, 96usize), (37, 53), (16, 17)] {
        let src: Vec<u8> = (0..h * w * 3)
            .map(|i| {
                let (p, c) = (i / 3, i % 3);
                (40 + ((p % w) * 150 / w + (p / w) * 60 / h + 23 * c) % 170) as u8
            })
            .collect();
        for sub in [Sub::S420, Sub::S422, Sub::S440] {
            let jpg = encode_jpeg(&src, h, w, 3, 90, sub);
            let (n, m) = check(&emu, &jpg, &regions(w, h), &format!("{sub:?} {w}x{h}"));
            assert_eq!((n, m), (0, 0), "{sub:?} {w}x{h}: values differing, max");
        }
    }
}

#[test]
fn clamped_blocks_stay_close() {
    let Some(emu) = Emu::load() else { return };
    // Saturated colours: every channel reaches 0 or 255 somewhere.
    let (h, w) = (48usize, 80usize);
    let src = pattern_rgb(h, w);
    for sub in [Sub::S420, Sub::S422] {
        let jpg = encode_jpeg(&src, h, w, 3, 95, sub);
        let (n, m) = check(&emu, &jpg, &regions(w, h), &format!("{sub:?}"));
        eprintln!("{sub:?}: {n} values differ, max {m}");
        assert!(n * 100 < h * w * 3, "{sub:?}: {n} values differ");
    }
}

/// Every subsampled photo of imagenet-400, whole: exact in all but a small fraction of
/// values (blocks whose every pixel has a clamped channel), never far.
#[test]
fn photos_rebuild_close_to_the_cpu_decoder() {
    let Some(emu) = Emu::load() else { return };
    let Some(data) = crate::testutil::skip::shared_data() else {
        return;
    };
    let Some(dir) = crate::testutil::skip::shared_folder(&data, "imagenet-400") else {
        return;
    };
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let (mut images, mut values, mut differing, mut worst) = (0, 0usize, 0usize, f64::INFINITY);
    for path in files {
        let jpg = std::fs::read(&path).unwrap();
        let Ok(hd) = JpegHeader::read(&jpg, &Limits::default()) else {
            continue;
        };
        let c = &hd.frame.components;
        if c.len() != 3 || hd.progressive() || (c[0].h, c[0].v) == (c[1].h, c[1].v) {
            continue;
        }
        let (sx, sy) = (usize::from(c[0].h / c[1].h), usize::from(c[0].v / c[1].v));
        let (w, h) = (hd.width(), hd.height());
        let near = decode_window(&jpg, &opts(Upsampling::Nearest), (0, 0, h, w)).unwrap();
        let fancy = decode_window(&jpg, &opts(Upsampling::Fancy), (0, 0, h, w)).unwrap();
        let got = rebuild_on_host(
            &emu,
            near.as_u8_hwc().unwrap(),
            (0, 0, w, h),
            (w, h),
            (sx, sy),
        );
        let want = fancy.as_u8_hwc().unwrap();
        let (n, m) = diff(&got, want);
        let sq: f64 = got
            .iter()
            .zip(want)
            .map(|(a, b)| (f64::from(*a) - f64::from(*b)).powi(2))
            .sum();
        let db = if sq == 0.0 {
            f64::INFINITY
        } else {
            10.0 * (255.0f64.powi(2) * got.len() as f64 / sq).log10()
        };
        if db < 50.0 {
            eprintln!("{}: {n} values differ, max {m}, {db:.1} dB", path.display());
        }
        images += 1;
        values += got.len();
        differing += n;
        worst = worst.min(db);
    }
    eprintln!(
        "chroma rebuild on {images} subsampled photos: {differing} of {values} values differ \
         ({:.2e}), worst {worst:.1} dB",
        differing as f64 / values.max(1) as f64
    );
    assert!(worst >= 50.0, "worst photo {worst:.1} dB");
    assert!(
        differing * 500 < values.max(1),
        "{differing} of {values} values differ"
    );
}

/// The engines' nearest output of a `w` × `h` 4:2:0 image whose chroma blocks are plain colours
/// (exact), black or white (a thread places them at once), or strong colours at luma near
/// black or white, every pixel clamped in two channels or three (blocks only a wide search
/// places).
fn saturated_nearest(w: usize, h: usize, seed: u64) -> Vec<u8> {
    let mut state = seed;
    let mut next = move |n: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) % n) as i32
    };
    // libjpeg's integer conversion (jdcolor.c), as kernels/chroma.cu has it.
    let rgb = |y: i32, cb: i32, cr: i32| {
        let r = (91881 * (cr - 128) + 32768) >> 16;
        let g = (-22554 * (cb - 128) + 32768 - 46802 * (cr - 128)) >> 16;
        let b = (116130 * (cb - 128) + 32768) >> 16;
        [y + r, y + g, y + b].map(|v| v.clamp(0, 255) as u8)
    };
    let (cols, rows) = (w.div_ceil(2), h.div_ceil(2));
    let mut out = vec![0u8; 3 * w * h];
    for by in 0..rows {
        for bx in 0..cols {
            // Hard blocks few: the emulation's barriers are slow.
            let kind = [0, 2, 2, 1, 1, 1, 1, 1][next(8) as usize];
            let hard = kind == 0;
            let (cb, cr) = if hard {
                let far = |v: i32| if v < 40 { v } else { 215 + v % 41 };
                (far(next(80)), far(next(80)))
            } else if kind == 2 {
                (128, 128)
            } else {
                (96 + next(64), 96 + next(64))
            };
            let bright = next(2) == 0;
            for y in 2 * by..(2 * by + 2).min(h) {
                for x in 2 * bx..(2 * bx + 2).min(w) {
                    let luma = match (hard, bright) {
                        (false, _) if kind == 2 => 255 * i32::from(bright),
                        (false, _) => 64 + next(128),
                        (true, true) => 235 + next(21),
                        (true, false) => next(21),
                    };
                    out[3 * (y * w + x)..][..3].copy_from_slice(&rgb(luma, cb, cr));
                }
            }
        }
    }
    out
}

type GuessLaunch = unsafe extern "C" fn(*const ChromaDesc, u32, u32, u32) -> i32;

/// The chroma guess's search, split over the threads of a block where a block is hard to
/// place, gives each block the chroma that one thread searching alone gives it.
#[test]
fn the_guess_is_the_same_on_a_whole_block_of_threads() {
    let Some(emu) = Emu::load() else { return };
    let (w, h) = (35usize, 22usize);
    let nearest = saturated_nearest(w, h, 7);
    let mut out = vec![0u8; nearest.len()];
    let mut d = region_desc(&nearest, &mut out, (0, 0, w, h), (w, h), (2, 2));
    let mut resolved = vec![0u8; d.plane_bytes()];
    d.planes = resolved.as_mut_ptr() as u64;
    let resolve: ChromaKernel = emu.kernel(Kernel::ChromaResolve);
    // SAFETY: the descriptor points at `nearest`, `out` and `resolved`, sized for it.
    emu.per_sample(1, || unsafe { resolve(&d, 1) });
    let guess_with = |grid_x: u32, threads: u32| {
        let mut planes = resolved.clone();
        let mut d = d;
        d.planes = planes.as_mut_ptr() as u64;
        if threads == 1 {
            let guess: ChromaKernel = emu.kernel(Kernel::ChromaGuess);
            // SAFETY: as above, with planes of its own.
            emu.per_sample(1, || unsafe { guess(&d, 1) });
        } else {
            let launch: GuessLaunch = emu.sym(HostFn::LaunchChromaGuess);
            // SAFETY: as above; the launcher returns when every block's threads are done.
            let rc = unsafe { launch(&d, 1, grid_x, threads) };
            assert_eq!(rc, 0, "emu_launch_chroma_guess({grid_x}, {threads})");
        }
        planes
    };
    let alone = guess_with(1, 1);
    let blocks = alone.len() / 3;
    let states = &alone[2 * blocks..];
    let count = |s: u8| states.iter().filter(|&&v| v == s).count();
    eprintln!(
        "{blocks} chroma blocks: {} exact, {} guessed by a thread, {} by the whole block",
        count(1),
        count(2),
        count(3)
    );
    assert_eq!(count(0), 0, "a block left unguessed");
    assert!(count(1) > 0 && count(2) > 0, "exact and easy blocks");
    assert!(count(3) >= 10, "blocks hard enough for the whole block");
    for (grid_x, threads) in [(1, 256), (2, 64), (7, 32), (1, 5)] {
        // Which blocks a thread settles alone does not depend on the launch either.
        let together = guess_with(grid_x, threads);
        assert!(
            together == alone,
            "{grid_x} blocks of {threads} threads: another chroma or state"
        );
    }
}

/// `chroma_guess` keeps a scratch slot per thread: the launch's block size must fit it.
#[test]
fn the_guess_scratch_holds_a_launch_block() {
    let source = include_str!("../../kernels/chroma.cu");
    let want = format!("#define GUESS_THREADS {}", crate::cuda::kernel::BLOCK);
    assert!(source.contains(&want), "kernels/chroma.cu lacks `{want}`");
}
