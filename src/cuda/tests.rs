//! Tests of the CUDA layer that run without a GPU: every kernel compiles under NVRTC, and the
//! descriptor layouts match the C headers. GPU parity tests are in the operator folders (`gpu_*`).

use super::desc::*;
use super::kernel::{Kernel, KernelModule};
use super::module::{
    cache_path, compile_cubin, cubin_cached_in, load_cached_in, nvrtc_version, Arch,
};
use std::mem::{offset_of, size_of};

/// NVRTC present, or: fail when `STOKEHOLD_REQUIRE_NVRTC=1` (CI), else skip with a message.
fn nvrtc_or_skip() -> bool {
    if super::nvrtc_present() {
        return true;
    }
    if std::env::var("STOKEHOLD_REQUIRE_NVRTC").as_deref() == Ok("1") {
        panic!(
            "STOKEHOLD_REQUIRE_NVRTC=1 but libnvrtc.so was not found; install the wheel \
             nvidia-cuda-nvrtc==13.0.88 and put its nvidia/cu13/lib on LD_LIBRARY_PATH \
             (scripts/test.sh does this)"
        );
    }
    crate::testutil::skip::skip(
        crate::testutil::skip::Need::Nvrtc,
        "NVRTC not found (set LD_LIBRARY_PATH to the nvidia-cuda-nvrtc wheel's lib)",
    );
    false
}

#[test]
fn every_kernel_compiles_with_nvrtc_for_sm80_and_sm90() {
    if !nvrtc_or_skip() {
        return;
    }
    let version = nvrtc_version().expect("nvrtc version");
    eprintln!("NVRTC {}.{}", version.0, version.1);
    for arch in [Arch { major: 8, minor: 0 }, Arch { major: 9, minor: 0 }] {
        for m in KernelModule::ALL {
            let cubin = compile_cubin(m, arch).unwrap_or_else(|e| panic!("{e}"));
            // An ELF cubin that names every entry point.
            assert_eq!(&cubin[..4], b"\x7fELF", "{} for {}", m.stem(), arch.sm());
            for entry in m.kernels().map(Kernel::entry) {
                assert!(
                    cubin.windows(entry.len()).any(|w| w == entry.as_bytes()),
                    "{} has no {entry} for {}",
                    m.stem(),
                    arch.sm()
                );
            }
        }
    }
}

#[test]
fn cubins_are_cached_on_disk_by_source_arch_and_version() {
    if !nvrtc_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let arch = Arch { major: 9, minor: 0 };
    let first = cubin_cached_in(Some(dir.path()), KernelModule::Color, arch).unwrap();
    let path = cache_path(
        dir.path(),
        KernelModule::Color,
        arch,
        nvrtc_version().unwrap(),
    )
    .unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), first);
    // A second call reads the file: prove it by replacing its contents.
    std::fs::write(&path, b"cached").unwrap();
    assert_eq!(
        cubin_cached_in(Some(dir.path()), KernelModule::Color, arch).unwrap(),
        b"cached"
    );
    // Another architecture is another file.
    let other = cache_path(
        dir.path(),
        KernelModule::Color,
        Arch { major: 8, minor: 0 },
        (13, 0),
    )
    .unwrap();
    assert_ne!(other, path);
}

#[test]
fn nvrtc_reports_kernel_errors_with_the_log() {
    if !nvrtc_or_skip() {
        return;
    }
    // A bad architecture is rejected with an error, not a panic.
    let e = compile_cubin(KernelModule::Color, Arch { major: 1, minor: 0 }).unwrap_err();
    assert!(e.to_string().contains("NVRTC failed"), "{e}");
}

#[test]
fn every_module_is_embedded_and_self_contained() {
    for m in KernelModule::ALL {
        let src = m.source().unwrap();
        assert!(
            !src.contains("#include \""),
            "{} still includes a header",
            m.stem()
        );
        for entry in m.kernels().map(Kernel::entry) {
            assert!(src.contains(entry), "{} lacks {entry}", m.stem());
        }
    }
}

/// The kernel table names every `extern "C" __global__` entry of `kernels/*.cu` under its
/// module, and no other (a kernel nothing launches is dead code); the host build renames
/// every one of them; every `kernels/*.cu` is a module of the table.
#[test]
fn the_kernel_table_is_every_entry_of_the_sources() {
    let emu = include_str!("../../kernels/host/emu.cpp");
    for m in KernelModule::ALL {
        let src = m.source().unwrap();
        let mut entries: Vec<&str> = src
            .split("extern \"C\" __global__ void ")
            .skip(1)
            .map(|rest| rest.split('(').next().unwrap().trim())
            .collect();
        entries.sort_unstable();
        let mut table: Vec<&str> = m.kernels().map(Kernel::entry).collect();
        table.sort_unstable();
        assert_eq!(entries, table, "{}.cu", m.stem());
        for entry in table {
            let rename = format!("#define {entry} stokehold_emu_{entry}\n");
            assert!(emu.contains(&rename), "emu.cpp lacks `{rename}`");
        }
    }
    // And every source is a module of the table.
    let dir = crate::testutil::source_file("kernels");
    let mut stems: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".cu").map(str::to_string))
        .collect();
    stems.sort_unstable();
    let mut modules: Vec<&str> = KernelModule::ALL.iter().map(|m| m.stem()).collect();
    modules.sort_unstable();
    assert_eq!(stems, modules);
}

#[test]
fn probe_without_a_driver_is_an_error_not_a_panic() {
    match super::probe(0) {
        Ok(info) => eprintln!("GPU found: {info:?}"),
        Err(e) => assert!(matches!(e, crate::Error::GpuUnavailable(_)), "{e}"),
    }
    // A device that cannot exist.
    assert!(super::probe(1 << 20).is_err());
}

/// The offsets of `kernels/common/desc.cuh`, field by field.
#[test]
fn descriptor_layouts_match_the_c_header() {
    let header = include_str!("../../kernels/common/desc.cuh");
    for (name, size) in [
        ("FusedDesc", size_of::<FusedDesc>()),
        ("JitterDesc", size_of::<JitterDesc>()),
        ("ChromaDesc", size_of::<ChromaDesc>()),
    ] {
        let assert = format!("static_assert(sizeof({name}) == {size},");
        assert!(header.contains(&assert), "desc.cuh lacks `{assert}`");
    }
    let fused = [
        (offset_of!(FusedDesc, src), 0),
        (offset_of!(FusedDesc, dst), 8),
        (offset_of!(FusedDesc, src_pitch), 16),
        (offset_of!(FusedDesc, src_h), 20),
        (offset_of!(FusedDesc, src_w), 24),
        (offset_of!(FusedDesc, channels), 28),
        (offset_of!(FusedDesc, win_top), 32),
        (offset_of!(FusedDesc, win_left), 36),
        (offset_of!(FusedDesc, win_h), 40),
        (offset_of!(FusedDesc, win_w), 44),
        (offset_of!(FusedDesc, out_h), 48),
        (offset_of!(FusedDesc, out_w), 52),
        (offset_of!(FusedDesc, flags), 56),
        (offset_of!(FusedDesc, out_dtype), 60),
        (offset_of!(FusedDesc, h_off), 64),
        (offset_of!(FusedDesc, h_ksize), 68),
        (offset_of!(FusedDesc, v_off), 72),
        (offset_of!(FusedDesc, v_ksize), 76),
        (offset_of!(FusedDesc, mean), 80),
        (offset_of!(FusedDesc, inv_std), 96),
        (offset_of!(FusedDesc, orientation), 112),
        (offset_of!(FusedDesc, reserved), 116),
    ];
    let jit = [
        (offset_of!(JitterDesc, data), 0),
        (offset_of!(JitterDesc, pixels), 8),
        (offset_of!(JitterDesc, order), 12),
        (offset_of!(JitterDesc, enabled), 16),
        (offset_of!(JitterDesc, brightness), 20),
        (offset_of!(JitterDesc, contrast), 24),
        (offset_of!(JitterDesc, saturation), 28),
        (offset_of!(JitterDesc, hue_shift), 32),
        (offset_of!(JitterDesc, reserved), 36),
    ];
    let chroma = [
        (offset_of!(ChromaDesc, src), 0),
        (offset_of!(ChromaDesc, dst), 8),
        (offset_of!(ChromaDesc, planes), 16),
        (offset_of!(ChromaDesc, pitch), 24),
        (offset_of!(ChromaDesc, width), 28),
        (offset_of!(ChromaDesc, height), 32),
        (offset_of!(ChromaDesc, x0), 36),
        (offset_of!(ChromaDesc, y0), 40),
        (offset_of!(ChromaDesc, image_w), 44),
        (offset_of!(ChromaDesc, image_h), 48),
        (offset_of!(ChromaDesc, sx), 52),
        (offset_of!(ChromaDesc, sy), 56),
        (offset_of!(ChromaDesc, reserved), 60),
    ];
    for (i, (got, want)) in fused.iter().chain(&jit).chain(&chroma).enumerate() {
        assert_eq!(got, want, "field #{i}");
    }
    // The flag values are the header's #defines.
    for (name, v) in [
        ("FUSED_FLIP_H", fused_flags::FLIP_H),
        ("FUSED_FLIP_V", fused_flags::FLIP_V),
        ("FUSED_VERTICAL_FIRST", fused_flags::VERTICAL_FIRST),
        ("FUSED_H_PASS", fused_flags::H_PASS),
        ("FUSED_V_PASS", fused_flags::V_PASS),
        ("FUSED_NEAREST", fused_flags::NEAREST),
        ("FUSED_NORMALIZE", fused_flags::NORMALIZE),
        ("FUSED_CHW", fused_flags::CHW),
    ] {
        let def = format!("#define {name} {v}u");
        assert!(header.contains(&def), "desc.cuh lacks `{def}`");
    }
    let types = include_str!("../../kernels/common/types.cuh");
    for (name, v) in [
        ("DT_U8", dtype::U8),
        ("DT_F16", dtype::F16),
        ("DT_F32", dtype::F32),
    ] {
        assert!(types.contains(&format!("#define {name} {v}u")), "{name}");
    }
}

/// A loader standing in for the driver's module load: it takes ELF images only.
fn elf_only(calls: &mut Vec<Vec<u8>>, bin: Vec<u8>) -> Result<usize, crate::Error> {
    calls.push(bin.clone());
    if bin.starts_with(b"\x7fELF") {
        Ok(bin.len())
    } else {
        Err(crate::Error::Cuda(
            "CUDA_ERROR_INVALID_IMAGE: device kernel image is invalid".into(),
        ))
    }
}

#[test]
fn a_corrupt_cached_cubin_is_deleted_and_compiled_again_once() {
    if !nvrtc_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let arch = Arch { major: 9, minor: 0 };
    let m = KernelModule::Color;
    let path = cache_path(dir.path(), m, arch, nvrtc_version().unwrap()).unwrap();
    std::fs::write(&path, b"half a cubin, cut off by a full disk").unwrap();
    let mut calls = Vec::new();
    let loaded = load_cached_in(Some(dir.path()), m, arch, |b| elf_only(&mut calls, b));
    assert!(loaded.is_ok(), "{loaded:?}");
    assert_eq!(calls.len(), 2, "the cached file, then a fresh compilation");
    assert_eq!(calls[0], b"half a cubin, cut off by a full disk");
    let fresh = std::fs::read(&path).expect("the new cubin is cached");
    assert!(fresh.starts_with(b"\x7fELF"));
    assert_eq!(fresh, calls[1]);
    // The next load takes the good file at once.
    calls.clear();
    assert!(load_cached_in(Some(dir.path()), m, arch, |b| elf_only(&mut calls, b)).is_ok());
    assert_eq!(calls.len(), 1);
}

#[test]
fn a_cubin_the_driver_refuses_is_compiled_again_only_once() {
    if !nvrtc_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let arch = Arch { major: 9, minor: 0 };
    let m = KernelModule::Color;
    let path = cache_path(dir.path(), m, arch, nvrtc_version().unwrap()).unwrap();
    std::fs::write(&path, b"garbage").unwrap();
    let mut tries = 0;
    let r: Result<(), _> = load_cached_in(Some(dir.path()), m, arch, |_| {
        tries += 1;
        Err(crate::Error::Cuda("CUDA_ERROR_NO_BINARY_FOR_GPU".into()))
    });
    let e = r.unwrap_err().to_string();
    assert!(e.contains("CUDA_ERROR_NO_BINARY_FOR_GPU"), "{e}");
    assert_eq!(tries, 2, "the cached file and one recompilation, no loop");
    // A freshly compiled cubin that fails to load is not retried (nothing cached to blame).
    let fresh = tempfile::tempdir().unwrap();
    let mut tries = 0;
    let r: Result<(), _> = load_cached_in(Some(fresh.path()), m, arch, |_| {
        tries += 1;
        Err(crate::Error::Cuda("refused".into()))
    });
    assert!(r.is_err());
    assert_eq!(tries, 1);
}

/// A device opened for a pipeline compiles and loads the modules of the kernels its chain
/// launches, and the chroma rebuild's only where its decoder repeats chroma for a pipeline
/// that wants it interpolated.
#[test]
fn gpu_a_device_loads_only_the_modules_its_pipeline_launches() {
    use crate::cuda::GpuDevice;
    use crate::decode::Upsampling;
    if crate::cuda::test_support::real_device().is_none() {
        return;
    }
    let jitter = [Kernel::Chain, Kernel::JitterLumaSum, Kernel::JitterStep];
    for (upsampling, kernels) in [
        (Upsampling::Nearest, &[Kernel::Chain][..]),
        (Upsampling::Nearest, &jitter[..]),
        (Upsampling::Fancy, &[Kernel::Chain][..]),
    ] {
        let dev = super::RealDevice::with_upsampling(0, 8, upsampling, kernels).unwrap();
        let mut want = vec!["chain"];
        if kernels.len() > 1 {
            want.push("color");
        }
        // Rebuilt where the decoder repeats chroma for a "fancy" pipeline: asked to
        // (`STOKEHOLD_CHROMA_REBUILD=1`), or nvJPEG refused to interpolate.
        if upsampling == Upsampling::Fancy && !dev.decodes_fancy_chroma() {
            want.push("chroma");
        }
        want.sort_unstable();
        assert_eq!(dev.loaded_modules(), want, "{upsampling:?} {kernels:?}");
    }
}

#[test]
fn gpu_a_threads_own_current_context_is_put_back() {
    // A DLPack export or a batch dropped on a framework's thread binds our context for the
    // call and puts the thread's own back: there, another device's (a context of its own
    // here, as on one GPU there is no other device).
    use crate::cuda::gpu_device::{streams, GpuDevice};
    use crate::decode::Upsampling;
    use cudarc::driver::{result as cu, sys};
    if crate::cuda::test_support::real_device().is_none() {
        return;
    }
    std::thread::spawn(move || {
        let ordinal = cu::device::get(0).unwrap();
        // SAFETY: a device handle from the driver; no creation parameters. The new context
        // becomes current on this thread and is destroyed below, after its last use.
        let theirs = unsafe { cu::ctx::create_v4(std::ptr::null_mut(), 0, ordinal) }.unwrap();
        let still_theirs = |after: &str| {
            assert_eq!(
                cu::ctx::get_current().unwrap(),
                Some(theirs),
                "{after} left the device's own context current on the caller's thread"
            );
        };
        still_theirs("creating it");
        let dev = super::RealDevice::with_upsampling(0, 8, Upsampling::Nearest, &[Kernel::Chain])
            .unwrap();
        still_theirs("opening the device");
        let ev = dev.record(streams::KERNELS, false).unwrap();
        dev.wait(streams::KERNELS, &ev).unwrap();
        still_theirs("recording and waiting");
        drop((ev, dev));
        still_theirs("dropping the device (nvJPEG's teardown included)");
        // SAFETY: created above, current on this thread only, no work queued in it.
        assert_eq!(
            unsafe { sys::cuCtxDestroy_v2(theirs) },
            sys::CUresult::CUDA_SUCCESS
        );
    })
    .join()
    .unwrap();
}
