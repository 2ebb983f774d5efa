//! The kernels of `kernels/` built for the host (`kernels/host/emu.cpp`, compiled by
//! `build.rs` and linked into stokehold), and their launch on an emulated stream: every
//! address a launch will touch is checked against the emulated memory first.

use crate::cuda::desc::{ChromaDesc, FusedDesc, JitterDesc};
use crate::cuda::gpu_device::KernelArg;
use crate::cuda::kernel::Kernel;
use crate::image::DType;

use super::memory::{Access, Kind};
use super::order::Use;

/// Why the emulation is missing from this build, or `None` when it is built in.
pub fn unavailable() -> Option<&'static str> {
    if cfg!(stokehold_emu) {
        None
    } else {
        Some(
            option_env!("STOKEHOLD_EMU_UNAVAILABLE").unwrap_or(
                "the host C++ build of the kernels did not run when stokehold was built",
            ),
        )
    }
}

#[cfg(stokehold_emu)]
mod ffi {
    use crate::cuda::desc::{ChromaDesc, FusedDesc, JitterDesc};

    extern "C" {
        pub fn stokehold_emu_set_block(sample: u32, samples: u32);
        pub fn stokehold_emu_launch_chain(
            d: *const FusedDesc,
            t: *const i32,
            n: u32,
            grid_x: u32,
            threads: u32,
        ) -> i32;
        pub fn stokehold_emu_launch_chroma_guess(
            d: *const ChromaDesc,
            n: u32,
            grid_x: u32,
            threads: u32,
        ) -> i32;
        pub fn stokehold_emu_fused_crop_resize_normalize(
            d: *const FusedDesc,
            t: *const i32,
            n: u32,
        );
        pub fn stokehold_emu_jitter_luma_sum(d: *const JitterDesc, n: u32, step: u32, s: *mut u64);
        pub fn stokehold_emu_jitter_step(d: *const JitterDesc, n: u32, step: u32, s: *const u64);
        pub fn stokehold_emu_chroma_resolve(d: *const ChromaDesc, n: u32);
        pub fn stokehold_emu_chroma_guess(d: *const ChromaDesc, n: u32);
        pub fn stokehold_emu_chroma_upsample(d: *const ChromaDesc, n: u32);
    }
}

/// A function of the host build, for the tests that call it directly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostFn {
    /// The kernel, `stokehold_emu_<entry>`, with the C parameters of its entry point.
    Kernel(Kernel),
    /// `stokehold_emu_set_block(u32 sample, u32 samples)`: the block the next direct call on
    /// this thread runs as.
    SetBlock,
    /// `stokehold_emu_launch_chain(const FusedDesc*, const i32* taps, u32 n, u32 grid_x,
    /// u32 threads) -> int`: the chain kernel as whole blocks of real threads.
    LaunchChain,
    /// `stokehold_emu_launch_chroma_guess(const ChromaDesc*, u32 n, u32 grid_x, u32 threads)
    /// -> int`: the chroma guess as whole blocks of real threads.
    LaunchChromaGuess,
}

/// The address of `f` in the host build; `None` when the emulation is not built.
pub fn symbol(f: HostFn) -> Option<usize> {
    #[cfg(stokehold_emu)]
    {
        use ffi::*;
        let addr = match f {
            HostFn::SetBlock => stokehold_emu_set_block as *const (),
            HostFn::LaunchChain => stokehold_emu_launch_chain as *const (),
            HostFn::LaunchChromaGuess => stokehold_emu_launch_chroma_guess as *const (),
            HostFn::Kernel(k) => match k {
                Kernel::Chain => stokehold_emu_fused_crop_resize_normalize as *const (),
                Kernel::JitterLumaSum => stokehold_emu_jitter_luma_sum as *const (),
                Kernel::JitterStep => stokehold_emu_jitter_step as *const (),
                Kernel::ChromaResolve => stokehold_emu_chroma_resolve as *const (),
                Kernel::ChromaGuess => stokehold_emu_chroma_guess as *const (),
                Kernel::ChromaUpsample => stokehold_emu_chroma_upsample as *const (),
            },
        };
        Some(addr as usize)
    }
    #[cfg(not(stokehold_emu))]
    {
        let _ = f;
        None
    }
}

/// A launch whose arguments and descriptors have been checked: what [`Checked::run`] calls.
pub(crate) struct Checked {
    kernel: Kernel,
    args: Vec<KernelArg>,
    samples: u32,
}

fn ptr_at(args: &[KernelArg], i: usize) -> Result<u64, String> {
    match args.get(i) {
        Some(KernelArg::Ptr(p)) => Ok(*p),
        other => Err(format!("argument {i} should be a pointer, got {other:?}")),
    }
}

fn u32_at(args: &[KernelArg], i: usize) -> Result<u32, String> {
    match args.get(i) {
        Some(KernelArg::U32(v)) => Ok(*v),
        other => Err(format!("argument {i} should be a u32, got {other:?}")),
    }
}

/// Reads `n` descriptors of type `T` at `ptr` (checked to lie in device memory).
fn read_descs<T: crate::cuda::desc::Pod + Default>(
    mem: &Access<'_>,
    ptr: u64,
    n: usize,
) -> Result<Vec<T>, String> {
    let bytes = n
        .checked_mul(std::mem::size_of::<T>())
        .ok_or("descriptor count overflows")?;
    mem.check((ptr, bytes), Kind::Device, Use::Read, "the descriptors")?;
    if !ptr.is_multiple_of(std::mem::align_of::<T>() as u64) {
        return Err(format!("misaligned descriptors at {ptr:#x}"));
    }
    let mut out = vec![T::default(); n];
    // SAFETY: `ptr..ptr+bytes` lies in a mapped device allocation (checked above, and it
    // stays mapped while `mem` is held), suitably aligned; `T: Pod` has no invalid bit
    // patterns; `out` holds exactly `bytes` bytes and does not overlap device memory.
    unsafe {
        std::ptr::copy_nonoverlapping(ptr as *const u8, out.as_mut_ptr().cast::<u8>(), bytes)
    };
    Ok(out)
}

/// Bytes an axis of `n` outputs takes in the tap table (i32 entries).
fn axis_entries(nearest: bool, n: u32, ksize: u32) -> u64 {
    if nearest {
        u64::from(n)
    } else {
        2 * u64::from(n) + u64::from(n) * u64::from(ksize)
    }
}

/// Checks a chain descriptor's source, output and tap tables.
fn check_fused(
    mem: &Access<'_>,
    d: &FusedDesc,
    table: u64,
    table_room: usize,
) -> Result<(), String> {
    use crate::cuda::desc::fused_flags as f;
    let ch = u64::from(d.channels);
    if !(1..=4).contains(&d.channels) || d.src_h == 0 || d.src_w == 0 {
        return Err(format!("bad descriptor {d:?}"));
    }
    let src_len = u64::from(d.src_pitch) * u64::from(d.src_h - 1) + u64::from(d.src_w) * ch;
    mem.check(
        (d.src, src_len as usize),
        Kind::Device,
        Use::Read,
        "a chain source",
    )?;
    let dtype = match d.out_dtype {
        0 => DType::U8,
        1 => DType::F16,
        _ => DType::F32,
    };
    let out_len = u64::from(d.out_h) * u64::from(d.out_w) * ch * dtype.size() as u64;
    mem.check(
        (d.dst, out_len as usize),
        Kind::Device,
        Use::Write,
        "a chain output",
    )?;
    let nearest = d.flags & f::NEAREST != 0;
    let mut need = 0u64;
    if nearest || d.flags & f::H_PASS != 0 {
        need = need.max(u64::from(d.h_off) + axis_entries(nearest, d.out_w, d.h_ksize));
    }
    if nearest || d.flags & f::V_PASS != 0 {
        need = need.max(u64::from(d.v_off) + axis_entries(nearest, d.out_h, d.v_ksize));
    }
    if need * 4 > table_room as u64 {
        return Err(format!(
            "illegal address: taps up to entry {need} of a table of {} bytes at {table:#x}",
            table_room
        ));
    }
    mem.check(
        (table, need as usize * 4),
        Kind::Device,
        Use::Read,
        "the tap table",
    )
}

/// Checks a chroma descriptor's source, output and scratch.
fn check_chroma(mem: &Access<'_>, d: &ChromaDesc) -> Result<(), String> {
    let ok_sampling = matches!((d.sx, d.sy), (1 | 2, 1 | 2));
    if d.width == 0
        || d.height == 0
        || !ok_sampling
        || d.pitch < 3 * d.width
        || d.x0 + d.width > d.image_w
        || d.y0 + d.height > d.image_h
    {
        return Err(format!("bad chroma descriptor {d:?}"));
    }
    let len = d.pitch as usize * (d.height as usize - 1) + 3 * d.width as usize;
    mem.check((d.src, len), Kind::Device, Use::Read, "a chroma source")?;
    mem.check((d.dst, len), Kind::Device, Use::Write, "a chroma output")?;
    mem.check(
        (d.planes, d.plane_bytes()),
        Kind::Device,
        Use::Write,
        "chroma planes",
    )?;
    Ok(())
}

/// Checks `kernel`'s arguments and every address its descriptors hold, under `mem`.
pub(crate) fn check(
    mem: &Access<'_>,
    kernel: Kernel,
    samples: u32,
    args: &[KernelArg],
) -> Result<Checked, String> {
    match kernel {
        Kernel::Chain => {
            let (descs, table, n) = (ptr_at(args, 0)?, ptr_at(args, 1)?, u32_at(args, 2)?);
            if n != samples || args.len() != 3 {
                return Err(format!(
                    "chain launch of {samples} samples with arguments {args:?}"
                ));
            }
            let room = mem.room(table, Kind::Device);
            for d in read_descs::<FusedDesc>(mem, descs, n as usize)? {
                check_fused(mem, &d, table, room)?;
            }
        }
        Kernel::JitterLumaSum | Kernel::JitterStep => {
            let (descs, n, step, sums) = (
                ptr_at(args, 0)?,
                u32_at(args, 1)?,
                u32_at(args, 2)?,
                ptr_at(args, 3)?,
            );
            if n != samples || step > 3 || args.len() != 4 {
                return Err(format!(
                    "jitter launch of {samples} samples with arguments {args:?}"
                ));
            }
            // The sums are the first step's output and the later steps' input.
            let sums_use = match kernel {
                Kernel::JitterLumaSum => Use::Write,
                _ => Use::Read,
            };
            mem.check(
                (sums, 8 * n as usize),
                Kind::Device,
                sums_use,
                "the luma sums",
            )?;
            for d in read_descs::<JitterDesc>(mem, descs, n as usize)? {
                let pixels = (d.data, 3 * d.pixels as usize);
                mem.check(pixels, Kind::Device, Use::Write, "jitter pixels")?;
            }
        }
        Kernel::ChromaResolve | Kernel::ChromaGuess | Kernel::ChromaUpsample => {
            let (descs, n) = (ptr_at(args, 0)?, u32_at(args, 1)?);
            if n != samples || args.len() != 2 {
                return Err(format!(
                    "chroma launch of {samples} samples with arguments {args:?}"
                ));
            }
            for d in read_descs::<ChromaDesc>(mem, descs, n as usize)? {
                check_chroma(mem, &d)?;
            }
        }
    }
    Ok(Checked {
        kernel,
        args: args.to_vec(),
        samples,
    })
}

impl Checked {
    /// Runs the launch on this thread (one host thread per sample at a time, samples spread
    /// over `threads` threads), while the caller holds the memory access it was checked under.
    #[cfg(stokehold_emu)]
    pub(crate) fn run(&self, _held: &Access<'_>, threads: usize) {
        let n = self.samples;
        let threads = (threads.max(1) as u32).min(n.max(1));
        let a = &self.args;
        let p = |i: usize| match a[i] {
            KernelArg::Ptr(p) => p,
            KernelArg::U32(v) => u64::from(v),
        };
        let u = |i: usize| p(i) as u32;
        let one = |s: u32| {
            // SAFETY: `check` verified the arguments against the kernel's C signature and that
            // every address the descriptors hold lies in memory mapped for the sizes they
            // state; the caller holds `_held`, so that memory stays mapped while this runs.
            // Each sample writes only its own output (the chain) or its own pixels and sum
            // (jitter), so samples on different threads never write the same bytes. The
            // block coordinates are thread-local in the emulation.
            unsafe {
                ffi::stokehold_emu_set_block(s, n);
                match self.kernel {
                    Kernel::Chain => ffi::stokehold_emu_fused_crop_resize_normalize(
                        p(0) as *const FusedDesc,
                        p(1) as *const i32,
                        u(2),
                    ),
                    Kernel::JitterLumaSum => ffi::stokehold_emu_jitter_luma_sum(
                        p(0) as *const JitterDesc,
                        u(1),
                        u(2),
                        p(3) as *mut u64,
                    ),
                    Kernel::JitterStep => ffi::stokehold_emu_jitter_step(
                        p(0) as *const JitterDesc,
                        u(1),
                        u(2),
                        p(3) as *const u64,
                    ),
                    Kernel::ChromaResolve => {
                        ffi::stokehold_emu_chroma_resolve(p(0) as *const ChromaDesc, u(1))
                    }
                    Kernel::ChromaGuess => {
                        ffi::stokehold_emu_chroma_guess(p(0) as *const ChromaDesc, u(1))
                    }
                    Kernel::ChromaUpsample => {
                        ffi::stokehold_emu_chroma_upsample(p(0) as *const ChromaDesc, u(1))
                    }
                }
            }
        };
        if threads <= 1 {
            (0..n).for_each(one);
            return;
        }
        std::thread::scope(|scope| {
            for t in 0..threads {
                let one = &one;
                scope.spawn(move || (t..n).step_by(threads as usize).for_each(one));
            }
        });
    }

    /// Without the host build there is nothing to run (an emulated device is never made).
    #[cfg(not(stokehold_emu))]
    pub(crate) fn run(&self, _held: &Access<'_>, _threads: usize) {
        let _ = (self.kernel, &self.args, self.samples);
        unreachable!("no emulated device exists without the host build of the kernels")
    }
}
