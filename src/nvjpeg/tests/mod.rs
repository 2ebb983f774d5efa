//! nvJPEG layer tests. Host-only ones (loader errors, status names, the fallback
//! classifier, the ROI/orientation mapping) run everywhere; library tests run when
//! `STOKEHOLD_NVJPEG` points at a libnvjpeg; GPU tests skip (`testutil::skip`: "skipped: no
//! nvJPEG / no GPU") when there is no driver, GPU or library.
//!
//! By subject: the library loader and status codes (here), the decoder's bookkeeping and its
//! support checks on other threads against a fake nvJPEG (`bookkeeping`, `checks`), the CPU/GPU routing
//! (`routing`), orientation and ROI mapping with the output checks (`roi`), and decoding on
//! a GPU (`gpu`).

mod bookkeeping;
mod checks;
mod fake;
mod gpu;
mod roi;
mod routing;

use std::path::PathBuf;
use std::sync::Arc;

use super::fallback::{classify, facts, FallbackReason, GpuRoute, Route, Subsampling};
use super::result::{check, status_name, Nvjpeg, NvjpegError};
use super::safe::{
    Allocators, BackendPreference, BatchDecoder, CudaGpuContext, DecoderConfig, DeviceOutput,
    EncodedImage, GpuContext, Handle, Roi,
};
use super::testcuda::Cuda;
use super::*;
use crate::decode::{self, exif, DecodeError, DecodeOptions, Limits};
use crate::testutil::skip::{skip, Need};
use crate::testutil::{
    encode_jpeg, encode_jpeg_opts, exif_orientation_tiff, pattern_rgb, shared_data, JpegOpts, Sub,
};

fn fixture(sub: Sub, progressive: bool) -> Vec<u8> {
    let (h, w) = (37, 53);
    encode_jpeg_opts(
        &pattern_rgb(h, w),
        h,
        w,
        3,
        &JpegOpts {
            quality: 90,
            sub,
            progressive,
            exif_tiff: None,
        },
    )
}

fn crop(px: &[u8], w: usize, c: usize, r: Roi) -> Vec<u8> {
    let mut out = Vec::with_capacity(r.width * r.height * c);
    for y in r.y..r.y + r.height {
        out.extend_from_slice(&px[(y * w + r.x) * c..(y * w + r.x + r.width) * c]);
    }
    out
}

#[test]
fn bindgen_loader_on_a_missing_library_is_an_error() {
    // SAFETY: the file does not exist, so nothing is loaded.
    let r = unsafe { sys::NvjpegLib::new("libnvjpeg-stokehold-missing.so.99") };
    assert!(r.is_err());
}

#[test]
fn loader_lists_every_candidate_tried() {
    let cands = [
        PathBuf::from("libnvjpeg-stokehold-missing.so.99"),
        PathBuf::from("/nonexistent/dir/libnvjpeg.so.13"),
    ];
    match Nvjpeg::load_from(&cands) {
        Err(NvjpegError::LibraryNotFound { name, tried }) => {
            assert!(name.contains("nvJPEG"));
            assert_eq!(tried.len(), 2);
            assert_eq!(tried[0], "libnvjpeg-stokehold-missing.so.99");
            assert!(
                tried[1].starts_with("/nonexistent/dir/libnvjpeg.so.13 ("),
                "{tried:?}"
            );
            let e: crate::Error = NvjpegError::LibraryNotFound { name, tried }.into();
            assert!(matches!(e, crate::Error::LibraryNotFound { .. }));
            assert!(e
                .to_string()
                .contains("not found (tried: libnvjpeg-stokehold-missing"));
        }
        other => panic!("expected LibraryNotFound, got {other:?}"),
    }
}

#[test]
fn default_candidates_start_with_the_sonames() {
    let c = result::candidates();
    let names: Vec<String> = c.iter().map(|p| p.display().to_string()).collect();
    let start = usize::from(std::env::var_os("STOKEHOLD_NVJPEG").is_some_and(|v| !v.is_empty()));
    assert_eq!(
        &names[start..start + 3],
        &["libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so"]
    );
}

#[test]
fn probe_without_a_library_is_an_error_not_a_panic() {
    if Nvjpeg::load().is_ok() {
        skip(Need::NoGpu, "an nvJPEG library is loadable here");
        return;
    }
    // The library is looked for before the context is touched.
    let ctx = fake::FakeGpu::new(1, &Arc::new(fake::Log::default()));
    match GpuJpegDecoder::probe(ctx) {
        Err(crate::Error::LibraryNotFound { tried, .. }) => assert!(tried.len() >= 3),
        other => panic!("expected LibraryNotFound, got {other:?}"),
    }
}

#[test]
fn status_codes_are_named() {
    assert_eq!(status_name(0), "NVJPEG_STATUS_SUCCESS");
    assert_eq!(status_name(3), "NVJPEG_STATUS_BAD_JPEG");
    assert_eq!(status_name(4), "NVJPEG_STATUS_JPEG_NOT_SUPPORTED");
    assert_eq!(status_name(7), "NVJPEG_STATUS_ARCH_MISMATCH");
    assert_eq!(status_name(9), "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED");
    assert_eq!(status_name(10), "NVJPEG_STATUS_INCOMPLETE_BITSTREAM");
    assert_eq!(status_name(11), "NVJPEG_STATUS_UNKNOWN");
    assert_eq!(status_name(u32::MAX), "NVJPEG_STATUS_UNKNOWN");
    assert!(check("nvjpegDecode", sys::NVJPEG_STATUS_SUCCESS).is_ok());
    let e = check("nvjpegDecode", sys::NVJPEG_STATUS_BAD_JPEG).unwrap_err();
    assert_eq!(e.status(), Some(3));
    assert_eq!(
        e.to_string(),
        "nvjpegDecode failed: NVJPEG_STATUS_BAD_JPEG (3)"
    );
    let ce: crate::Error = e.into();
    assert_eq!(
        ce.to_string(),
        "nvJPEG: nvjpegDecode failed: NVJPEG_STATUS_BAD_JPEG (3)"
    );
}

/// The library named by `STOKEHOLD_NVJPEG`, or `None` (skip).
fn env_library() -> Option<Nvjpeg> {
    let Some(p) = std::env::var_os("STOKEHOLD_NVJPEG").filter(|v| !v.is_empty()) else {
        skip(Need::Gpu, "STOKEHOLD_NVJPEG not set");
        return None;
    };
    Some(Nvjpeg::load_from(&[PathBuf::from(p)]).expect("STOKEHOLD_NVJPEG must load"))
}

#[test]
fn library_from_env_loads_with_every_symbol() {
    let Some(lib) = env_library() else { return };
    assert_eq!(lib.missing_symbols(), Vec::<&str>::new());
    let (major, minor, patch) = lib.version().expect("nvjpegGetProperty needs no GPU");
    eprintln!("nvJPEG {major}.{minor}.{patch} from {}", lib.path());
    assert!(major >= 12, "major version {major}");
    assert!(minor >= 0 && patch >= 0);
}

#[test]
fn handle_without_a_gpu_is_a_named_error() {
    let Some(lib) = env_library() else { return };
    if Cuda::open().is_some() {
        skip(
            Need::NoGpu,
            "a GPU is present (this checks the no-GPU error)",
        );
        return;
    }
    let lib = Arc::new(lib);
    // A context whose binding succeeds (there is no real one here), so that nvJPEG itself
    // meets the missing GPU. Handles are created with our allocators (nvjpegCreateExV2).
    let ctx: Arc<dyn GpuContext> = fake::FakeGpu::new(1, &Arc::new(fake::Log::default()));
    for backend in [sys::NVJPEG_BACKEND_DEFAULT, sys::NVJPEG_BACKEND_HARDWARE] {
        match Handle::new(lib.clone(), backend, Allocators::new(ctx.clone()), true) {
            Err(e @ NvjpegError::Status { .. }) => {
                eprintln!("backend {backend}: {e}");
                assert!(e
                    .to_string()
                    .contains("nvjpegCreateExV2 failed: NVJPEG_STATUS_"));
            }
            other => panic!("expected a status error without a GPU, got {other:?}"),
        }
    }
    let config = DecoderConfig {
        max_batch: 8,
        backend: BackendPreference::Auto,
        ..DecoderConfig::default()
    };
    match BatchDecoder::new(lib, ctx.clone(), config) {
        Err(NvjpegError::Status { call, .. }) => assert_eq!(call, "nvjpegCreateExV2"),
        other => panic!("expected a status error without a GPU, got {other:?}"),
    }
    // The GPU stage's entry point: the library loads (from $STOKEHOLD_NVJPEG), the GPU is
    // missing, and that is an error to fall back on.
    match GpuJpegDecoder::probe(ctx) {
        Err(crate::Error::Nvjpeg(m)) => assert!(m.contains("NVJPEG_STATUS_"), "{m}"),
        other => panic!("expected Error::Nvjpeg without a GPU, got {other:?}"),
    }
}

#[test]
fn the_library_is_opened_once_and_never_closed() {
    let Some(p) = std::env::var_os("STOKEHOLD_NVJPEG").filter(|v| !v.is_empty()) else {
        // Without a library: every attempt is the same error, none a panic, none remembered.
        let (a, b) = (Nvjpeg::shared(), Nvjpeg::shared());
        if let (Err(a), Err(b)) = (&a, &b) {
            assert_eq!(a, b);
        }
        skip(
            Need::Gpu,
            "STOKEHOLD_NVJPEG not set (the once-per-process half)",
        );
        return;
    };
    let a = Nvjpeg::shared().expect("STOKEHOLD_NVJPEG must load");
    let b = Nvjpeg::shared().unwrap();
    assert!(Arc::ptr_eq(&a, &b), "one library per process");
    assert!(a.version().is_ok());
    // A library loaded on its own and dropped stays mapped (no dlclose).
    let path = PathBuf::from(&p);
    let own = Nvjpeg::load_from(std::slice::from_ref(&path)).unwrap();
    drop(own);
    drop((a, b));
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    assert!(maps.contains(&name), "{name} was unloaded");
}
