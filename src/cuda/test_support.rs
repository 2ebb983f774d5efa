//! Helpers shared by the GPU parity tests and the host emulation of the kernels in the
//! operator folders (compiled for tests only): the devices to run on (the emulated device,
//! and device 0 when there is one), test images, image comparison, and the kernels built for
//! the host (`kernels/host/emu.cpp`) called directly.
//!
//! Parity tests run the fused chain through the device seam ([`devices`]: the emulated
//! device, always in CI, and the real device 0, which is skipped visibly — `testutil::skip`:
//! "skipped: no CUDA driver" — when it can't open; `STOKEHOLD_REQUIRE_GPU=1` makes that a
//! failure, on a GPU machine). Their names start with `gpu_`, which is how
//! `scripts/gpu-check.sh` picks them. u8 outputs must match the CPU bit for bit; float
//! outputs within 1e-3 (relative above 1).
//!
//! The direct emulation is the kernels built for the host by `build.rs` (the emulated
//! device's kernels, [`crate::cuda::emu::kernels`]); it runs one single-thread block per
//! sample, so the grid-stride loops cover everything; the chain kernel also runs as
//! whole blocks of real threads ([`run_chain_emu_threads`]: a host thread per CUDA thread,
//! a barrier per `__syncthreads`, one shared scratch per block), which checks the phases of
//! their shared-memory tiles. What it cannot check: the CUDA intrinsics and PTX conversions
//! themselves (mapped to IEEE host operations), and the jitter kernels' multi-thread
//! reduction. Without a working C++ compiler at build time the emulation tests skip visibly
//! (they fail under `STOKEHOLD_REQUIRE_EMU=1`).
#![allow(dead_code)]

use std::sync::Arc;

use super::chain::{build_desc, FusedSample, SourceDims};
use super::desc::{FusedDesc, JitterDesc};
use super::emu::kernels::{symbol, HostFn};
use super::kernel::Kernel;
use super::{EmuDevice, EmuOptions, GpuDevice, RealDevice};
use crate::image::{DType, Image, Layout, Pixels};
use crate::rng::SampleRng;
use crate::testutil::skip::{skip, Need};

/// Device 0, or `None` after saying why the test is skipped (a failure instead under
/// `STOKEHOLD_REQUIRE_GPU=1`).
pub(crate) fn real_device() -> Option<Arc<RealDevice>> {
    match RealDevice::new(0, 8) {
        Ok(d) => {
            eprintln!("GPU: {:?}", d.describe());
            Some(d)
        }
        Err(e) => {
            if std::env::var("STOKEHOLD_REQUIRE_GPU").as_deref() == Ok("1") {
                panic!("STOKEHOLD_REQUIRE_GPU=1 but no GPU: {e}");
            }
            skip(Need::Gpu, format!("no CUDA driver ({e})"));
            None
        }
    }
}

/// The emulated device, or `None` after saying why the test is skipped.
pub(crate) fn emu_device() -> Option<Arc<EmuDevice>> {
    Emu::load()?;
    Some(EmuDevice::new(EmuOptions::default()).expect("emulated device"))
}

/// Devices by name.
pub(crate) type Devices = [(&'static str, Arc<dyn GpuDevice>)];

/// Every device a parity test runs on, named: the emulated device, then device 0 (each
/// skipped visibly when missing).
pub(crate) fn devices() -> Vec<(&'static str, Arc<dyn GpuDevice>)> {
    let mut v: Vec<(&'static str, Arc<dyn GpuDevice>)> = Vec::new();
    if let Some(d) = emu_device() {
        v.push(("emu", d));
    }
    if let Some(d) = real_device() {
        v.push(("gpu", d));
    }
    v
}

/// Deterministic noise with some smooth structure.
pub(crate) fn image_u8(h: usize, w: usize, c: usize, seed: u64) -> Image {
    let mut rng = SampleRng::from_key(seed);
    let data = (0..h * w * c)
        .map(|i| {
            let smooth = ((i / c) % w * 255 / w.max(1)) as u64;
            ((smooth + rng.below(64)) % 256) as u8
        })
        .collect();
    Image::from_u8_hwc(h, w, c, data)
}

/// Odd shapes: 1×1, single rows and columns, odd widths, larger.
pub(crate) const SHAPES: &[(usize, usize)] = &[
    (1, 1),
    (1, 7),
    (9, 1),
    (5, 9),
    (17, 33),
    (64, 47),
    (120, 90),
];

/// A u8 image's values in any dtype and layout (exact).
pub(crate) fn in_any(im: &Image, dtype: DType, layout: Layout) -> Image {
    crate::testutil::widen(im, dtype, layout)
}

/// `got` equals `want`: same shape, u8 bit for bit, floats within 1e-3 (relative above 1).
pub(crate) fn assert_same(got: &Image, want: &Image, what: &str) {
    assert_eq!(
        (got.height, got.width, got.channels, got.layout, got.dtype()),
        (
            want.height,
            want.width,
            want.channels,
            want.layout,
            want.dtype()
        ),
        "{what}: shape"
    );
    match (&got.pixels, &want.pixels) {
        (Pixels::U8(a), Pixels::U8(b)) => {
            if let Some(i) = a.iter().zip(b).position(|(x, y)| x != y) {
                panic!(
                    "{what}: u8 differs at element {i}: gpu {} cpu {}",
                    a[i], b[i]
                );
            }
        }
        _ => {
            let (a, b) = (
                crate::testutil::to_f32s(got),
                crate::testutil::to_f32s(want),
            );
            for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                // Equal values first: equal infinities differ by NaN.
                let ok = x == y
                    || (x.is_nan() && y.is_nan())
                    || (x - y).abs() <= 1e-3 * y.abs().max(1.0);
                assert!(ok, "{what}: element {i}: gpu {x} cpu {y}");
            }
        }
    }
}

type SetBlock = unsafe extern "C" fn(u32, u32);

/// The kernels of `kernels/` built for the host (`kernels/host/emu.cpp`, compiled by
/// `build.rs` and linked into stokehold: the emulated device's kernels).
pub(crate) struct Emu(());

impl Emu {
    /// The built-in emulation, or `None` after saying why the test is skipped (a failure
    /// instead with `STOKEHOLD_REQUIRE_EMU=1`, as `scripts/test.sh` sets).
    pub(crate) fn load() -> Option<Emu> {
        match crate::cuda::emu::kernels::unavailable() {
            None => Some(Emu(())),
            Some(why) => {
                if std::env::var("STOKEHOLD_REQUIRE_EMU").as_deref() == Ok("1") {
                    panic!("STOKEHOLD_REQUIRE_EMU=1 but {why}");
                }
                skip(
                    Need::Emu,
                    format!("no kernel emulation in this build ({why})"),
                );
                None
            }
        }
    }

    /// The function `f` of emu.cpp, typed as `T` by the caller.
    pub(crate) fn sym<T: Copy>(&self, f: HostFn) -> T {
        let addr = symbol(f).unwrap_or_else(|| panic!("{f:?}"));
        assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<usize>());
        // SAFETY: `addr` is the address of the `extern "C"` function `f` of emu.cpp, and
        // `T` is the function pointer type of its C parameter list, given at the call site
        // (same size as an address, checked above).
        unsafe { std::mem::transmute_copy::<usize, T>(&addr) }
    }

    /// The host build of `kernel`, typed as `T` (its C parameter list) by the caller.
    pub(crate) fn kernel<T: Copy>(&self, kernel: Kernel) -> T {
        self.sym(HostFn::Kernel(kernel))
    }

    /// Runs `f` once per sample as block (0, s), on this thread.
    pub(crate) fn per_sample(&self, n: usize, mut f: impl FnMut()) {
        let set: SetBlock = self.sym(HostFn::SetBlock);
        for s in 0..n {
            // SAFETY: sets thread-local globals of the emulation.
            unsafe { set(s as u32, n as u32) };
            f();
        }
    }
}

/// A zeroed, 8-byte aligned output buffer of `bytes` bytes.
pub(crate) fn out_buf(bytes: usize) -> Vec<u64> {
    vec![0u64; bytes.div_ceil(8).max(1)]
}

fn bytes_of(buf: &[u64], n: usize) -> Vec<u8> {
    buf.iter().flat_map(|w| w.to_ne_bytes()).take(n).collect()
}

/// The image an emulated kernel wrote into `buf`.
pub(crate) fn image_from(
    buf: &[u64],
    h: usize,
    w: usize,
    c: usize,
    dt: DType,
    layout: Layout,
) -> Image {
    Image {
        height: h,
        width: w,
        channels: c,
        layout,
        pixels: Pixels::from_bytes(&bytes_of(buf, h * w * c * dt.size()), dt),
    }
}

type ChainKernel = unsafe extern "C" fn(*const FusedDesc, *const i32, u32);
type JitterKernel = unsafe extern "C" fn(*const JitterDesc, u32, u32, *mut u64);

/// Descriptors (pointing at `ims` and at the returned output buffers) and the tap table of
/// one emulated chain launch.
fn chain_launch(
    ims: &[Image],
    samples: &[FusedSample],
) -> (Vec<FusedDesc>, Vec<i32>, Vec<Vec<u64>>) {
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
        let (h, w) = s.output_size();
        let out = out_buf(h * w * im.channels * s.dtype.size());
        d.src = im.as_u8_hwc().unwrap().as_ptr() as u64;
        d.dst = out.as_ptr() as u64;
        outs.push(out);
        descs.push(d);
    }
    table.push(0);
    (descs, table, outs)
}

/// The images an emulated chain launch wrote.
fn chain_outputs(outs: &[Vec<u64>], ims: &[Image], samples: &[FusedSample]) -> Vec<Image> {
    outs.iter()
        .zip(ims.iter().zip(samples))
        .map(|(o, (im, s))| {
            let (h, w) = s.output_size();
            image_from(o, h, w, im.channels, s.dtype, s.layout)
        })
        .collect()
}

/// Runs the chain kernel on the host over u8 HWC images, one single-thread block per sample
/// (any mix of dtypes and layouts, unlike a device batch).
pub(crate) fn run_chain_emu(emu: &Emu, ims: &[Image], samples: &[FusedSample]) -> Vec<Image> {
    let kernel: ChainKernel = emu.kernel(Kernel::Chain);
    let (descs, table, outs) = chain_launch(ims, samples);
    emu.per_sample(descs.len(), || {
        // SAFETY: the descriptors point at the live input images and output buffers sized
        // for them; the table holds their taps.
        unsafe { kernel(descs.as_ptr(), table.as_ptr(), descs.len() as u32) }
    });
    chain_outputs(&outs, ims, samples)
}

type ChainLaunch = unsafe extern "C" fn(*const FusedDesc, *const i32, u32, u32, u32) -> i32;

/// [`run_chain_emu`] with `grid_x` blocks per sample of `threads` real threads each, as a
/// device launch runs the kernel (tiles striding over the blocks, phases separated by
/// barriers).
pub(crate) fn run_chain_emu_threads(
    emu: &Emu,
    ims: &[Image],
    samples: &[FusedSample],
    grid_x: u32,
    threads: u32,
) -> Vec<Image> {
    let launch: ChainLaunch = emu.sym(HostFn::LaunchChain);
    let (descs, table, outs) = chain_launch(ims, samples);
    // SAFETY: as in `run_chain_emu`; the launcher runs the chain kernel over the same
    // descriptors and returns only when every block's threads have finished.
    let rc = unsafe {
        launch(
            descs.as_ptr(),
            table.as_ptr(),
            descs.len() as u32,
            grid_x,
            threads,
        )
    };
    assert_eq!(rc, 0, "emu_launch_chain({grid_x}, {threads})");
    chain_outputs(&outs, ims, samples)
}

/// Runs the jitter kernels on the host over HWC RGB images in place, `descs[i]` (data
/// address filled in here) for `images[i]`.
pub(crate) fn run_jitter_emu(emu: &Emu, images: &mut [Vec<u8>], mut descs: Vec<JitterDesc>) {
    let reduce: JitterKernel = emu.kernel(Kernel::JitterLumaSum);
    let step: JitterKernel = emu.kernel(Kernel::JitterStep);
    for (d, im) in descs.iter_mut().zip(images.iter_mut()) {
        d.data = im.as_mut_ptr() as u64;
    }
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
