//! Kernel modules: the embedded sources of `kernels/`, NVRTC compilation to a cubin for the
//! device's architecture, an on-disk cubin cache, and a per-device cache of loaded modules.
//!
//! Why cubins: a PTX from a newer NVRTC than the driver's CUDA version would not load
//! (`CUDA_ERROR_UNSUPPORTED_PTX_VERSION`); a cubin for `sm_XX` is final machine code and loads
//! on any driver that supports the device. A PTX built by `nvcc` at build time (if nvcc was
//! found) is only a fallback when NVRTC is missing or fails.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::{result as nvrtc_result, sys as nvrtc_sys, Ptx};

use super::kernel::{Kernel, KernelModule};
use crate::error::Error;

mod generated {
    include!(concat!(env!("OUT_DIR"), "/kernels.rs"));
}

impl KernelModule {
    /// Its row of the sources `build.rs` embedded.
    fn embedded(self) -> Option<&'static (&'static str, &'static str, Option<&'static str>)> {
        generated::KERNEL_SOURCES
            .iter()
            .find(|(stem, _, _)| *stem == self.stem())
    }

    /// The self-contained CUDA source (includes inlined by `build.rs`).
    pub fn source(self) -> Result<&'static str, Error> {
        self.embedded().map(|e| e.1).ok_or_else(|| {
            Error::Cuda(format!("kernel source {}.cu was not embedded", self.stem()))
        })
    }

    /// The PTX `nvcc` produced at build time, when it was found.
    pub fn prebuilt_ptx(self) -> Option<&'static str> {
        self.embedded().and_then(|e| e.2)
    }
}

/// A real GPU architecture, `sm_<major><minor>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Arch {
    /// Major compute capability.
    pub major: i32,
    /// Minor compute capability.
    pub minor: i32,
}

impl Arch {
    /// From a compute capability.
    pub fn from_cc((major, minor): (i32, i32)) -> Arch {
        Arch { major, minor }
    }

    /// `sm_XY`.
    pub fn sm(self) -> String {
        format!("sm_{}{}", self.major, self.minor)
    }
}

/// The NVRTC version (major, minor); an error when NVRTC cannot be loaded.
pub fn nvrtc_version() -> Result<(i32, i32), Error> {
    if !super::nvrtc_present() {
        return Err(Error::Cuda("NVRTC library (libnvrtc.so) not found".into()));
    }
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: the library is present (checked above); nvrtcVersion writes two ints through
    // valid pointers to locals.
    unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| Error::Cuda(format!("nvrtcVersion: {e:?}")))?;
    Ok((major, minor))
}

/// The options every kernel is compiled with: the architecture and no FMA contraction
/// (the CPU reference never fuses a multiply and an add).
pub fn nvrtc_options(arch: Arch) -> Vec<String> {
    vec![
        format!("--gpu-architecture={}", arch.sm()),
        "--fmad=false".to_string(),
        "--std=c++17".to_string(),
    ]
}

/// Compiles `module` with NVRTC to a cubin for `arch`. Errors carry the NVRTC log.
pub fn compile_cubin(module: KernelModule, arch: Arch) -> Result<Vec<u8>, Error> {
    let src = module.source()?;
    if !super::nvrtc_present() {
        return Err(Error::Cuda("NVRTC library (libnvrtc.so) not found".into()));
    }
    let csrc = CString::new(src).map_err(|_| Error::Cuda("kernel source contains NUL".into()))?;
    let name = CString::new(format!("{}.cu", module.stem())).unwrap_or_default();
    let prog = nvrtc_result::create_program(&csrc, Some(&name))
        .map_err(|e| Error::Cuda(format!("nvrtcCreateProgram({}): {e:?}", module.stem())))?;
    let guard = ProgramGuard(prog);
    let opts = nvrtc_options(arch);
    // SAFETY: `prog` was created above and is destroyed only by `guard` when this function
    // returns; the options are valid strings.
    let compiled = unsafe { nvrtc_result::compile_program(guard.0, &opts) };
    if let Err(e) = compiled {
        // SAFETY: `prog` is alive (guard); the log is NUL-terminated by NVRTC.
        let log = unsafe { nvrtc_result::get_program_log(guard.0) }
            .map(|v| {
                // SAFETY: `v` is a NUL-terminated C string owned by the Vec.
                unsafe { CStr::from_ptr(v.as_ptr()) }
                    .to_string_lossy()
                    .into_owned()
            })
            .unwrap_or_default();
        return Err(Error::Cuda(format!(
            "NVRTC failed on {}.cu for {} ({e:?}):\n{log}",
            module.stem(),
            arch.sm()
        )));
    }
    let mut size = 0usize;
    // SAFETY: `prog` compiled successfully; NVRTC writes the size through a valid pointer.
    unsafe { nvrtc_sys::nvrtcGetCUBINSize(guard.0, &mut size) }
        .result()
        .map_err(|e| Error::Cuda(format!("nvrtcGetCUBINSize: {e:?}")))?;
    if size == 0 {
        return Err(Error::Cuda(format!(
            "NVRTC produced no cubin for {} ({})",
            module.stem(),
            arch.sm()
        )));
    }
    let mut cubin = vec![0u8; size];
    // SAFETY: `cubin` has exactly the `size` bytes NVRTC reported for this program.
    unsafe { nvrtc_sys::nvrtcGetCUBIN(guard.0, cubin.as_mut_ptr().cast::<c_char>()) }
        .result()
        .map_err(|e| Error::Cuda(format!("nvrtcGetCUBIN: {e:?}")))?;
    Ok(cubin)
}

struct ProgramGuard(nvrtc_sys::nvrtcProgram);

impl Drop for ProgramGuard {
    fn drop(&mut self) {
        // SAFETY: the program was created by `create_program` and is destroyed only here.
        // A failure only leaks the program; it is ignored (Drop must not panic).
        let _ = unsafe { nvrtc_result::destroy_program(self.0) };
    }
}

/// FNV-1a, stable across Rust versions (the cache key must not change with the toolchain).
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The on-disk cubin cache folder: `$STOKEHOLD_KERNEL_CACHE`, else
/// `$XDG_CACHE_HOME/stokehold/kernels`, else `$HOME/.cache/stokehold/kernels`.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("STOKEHOLD_KERNEL_CACHE") {
        return Some(PathBuf::from(p));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("stokehold").join("kernels"))
}

/// The cache file of a module in `dir`: named by a hash of the source, options, arch and
/// NVRTC version.
pub fn cache_path(
    dir: &Path,
    module: KernelModule,
    arch: Arch,
    nvrtc: (i32, i32),
) -> Option<PathBuf> {
    let src = module.source().ok()?;
    let opts = nvrtc_options(arch).join(" ");
    let ver = format!("{}.{}", nvrtc.0, nvrtc.1);
    let h = fnv1a(&[src.as_bytes(), opts.as_bytes(), ver.as_bytes()]);
    Some(dir.join(format!("{}-{}-{h:016x}.cubin", module.stem(), arch.sm())))
}

/// A cubin for `module` on `arch`: from the disk cache ([`cache_dir`]), else compiled and
/// stored (a cache that cannot be written is not an error).
pub fn cubin(module: KernelModule, arch: Arch) -> Result<Vec<u8>, Error> {
    cubin_cached_in(cache_dir().as_deref(), module, arch)
}

/// [`cubin`] with an explicit cache folder (`None`: no disk cache).
pub fn cubin_cached_in(
    dir: Option<&Path>,
    module: KernelModule,
    arch: Arch,
) -> Result<Vec<u8>, Error> {
    cached_or_compiled(dir, module, arch).map(|(bin, _)| bin)
}

/// The cubin, and the cache file it was read from (`None` when just compiled).
fn cached_or_compiled(
    dir: Option<&Path>,
    module: KernelModule,
    arch: Arch,
) -> Result<(Vec<u8>, Option<PathBuf>), Error> {
    let version = nvrtc_version()?;
    let path = dir.and_then(|d| cache_path(d, module, arch, version));
    if let Some(p) = &path {
        if let Ok(bytes) = std::fs::read(p) {
            if !bytes.is_empty() {
                return Ok((bytes, path));
            }
        }
    }
    let bin = compile_cubin(module, arch)?;
    if let Some(p) = &path {
        store(p, &bin);
    }
    Ok((bin, None))
}

/// Writes a cache file (then renames it, so a concurrent reader never sees half a file);
/// failures only cost the cache.
fn store(path: &Path, bin: &[u8]) {
    if let Some(dir) = path.parent() {
        if std::fs::create_dir_all(dir).is_ok() {
            let tmp = path.with_extension(format!("tmp{}", std::process::id()));
            if std::fs::write(&tmp, bin).is_ok() && std::fs::rename(&tmp, path).is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
        }
    }
}

/// Loads `module` for `arch` with `load` (the driver's module load, in practice), its cubin
/// from the cache folder `dir` when there. A cached cubin that `load` refuses (a truncated or
/// corrupt file, one written by another toolchain) is deleted, compiled again and stored,
/// once: a bad cache file costs one compilation, never every later run.
pub fn load_cached_in<T>(
    dir: Option<&Path>,
    module: KernelModule,
    arch: Arch,
    mut load: impl FnMut(Vec<u8>) -> Result<T, Error>,
) -> Result<T, Error> {
    let (bin, from_cache) = cached_or_compiled(dir, module, arch)?;
    match (load(bin), from_cache) {
        (Ok(m), _) => Ok(m),
        (Err(e), Some(path)) => {
            tracing::warn!(
                "cached {}.cu cubin {} does not load ({e}); deleting it and compiling again",
                module.stem(),
                path.display()
            );
            let _ = std::fs::remove_file(&path);
            let bin = compile_cubin(module, arch)?;
            store(&path, &bin);
            load(bin)
        }
        (Err(e), None) => Err(e),
    }
}

/// Modules loaded into one context: those the GPU stage launches when the device opens
/// ([`super::RealDevice::new`]), so that no NVRTC compilation or module load ever happens in
/// the middle of a run.
pub struct ModuleCache {
    ctx: Arc<CudaContext>,
    arch: Arch,
    modules: Mutex<HashMap<KernelModule, Arc<CudaModule>>>,
    functions: Mutex<HashMap<Kernel, CudaFunction>>,
    /// Set once the device is open: a module loaded after it is a kernel the device was not
    /// told the stage launches (it still loads, and says so).
    sealed: AtomicBool,
}

impl ModuleCache {
    /// An empty cache for `ctx`, compiling for `arch`.
    pub fn new(ctx: Arc<CudaContext>, arch: Arch) -> ModuleCache {
        ModuleCache {
            ctx,
            arch,
            modules: Mutex::new(HashMap::new()),
            functions: Mutex::new(HashMap::new()),
            sealed: AtomicBool::new(false),
        }
    }

    /// The modules loaded, by file stem, sorted.
    pub fn loaded(&self) -> Vec<&'static str> {
        let map = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        let mut stems: Vec<&'static str> = map.keys().map(|m| m.stem()).collect();
        stems.sort_unstable();
        stems
    }

    /// Marks the modules loaded so far as all the stage launches.
    pub fn seal(&self) {
        self.sealed.store(true, Ordering::Relaxed);
    }

    /// The architecture modules are compiled for.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// The loaded module, compiling it if it was not loaded yet (NVRTC cubin, through the
    /// disk cache; nvcc PTX as a fallback).
    pub fn module(&self, module: KernelModule) -> Result<Arc<CudaModule>, Error> {
        let mut map = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = map.get(&module) {
            return Ok(m.clone());
        }
        if self.sealed.load(Ordering::Relaxed) {
            tracing::warn!(
                "kernel module {}.cu loaded in the middle of a run: the device was opened \
                 without it (RealDevice::with_upsampling's kernels)",
                module.stem()
            );
        }
        let load_cubin = |bin: Vec<u8>| {
            self.ctx
                .load_module(Ptx::from_binary(bin))
                .map_err(|e| super::cuda_err(&format!("load {}.cu cubin", module.stem()), e))
        };
        let loaded = match load_cached_in(cache_dir().as_deref(), module, self.arch, load_cubin) {
            Ok(m) => Ok(m),
            Err(e) => match module.prebuilt_ptx() {
                Some(ptx) => self.ctx.load_module(Ptx::from_src(ptx)).map_err(|le| {
                    Error::Cuda(format!(
                        "{e}; and the nvcc PTX of {}.cu failed to load: {le}",
                        module.stem()
                    ))
                }),
                None => Err(e),
            },
        }?;
        map.insert(module, loaded.clone());
        Ok(loaded)
    }

    /// `kernel`, loading its module if it was not loaded yet.
    pub fn function(&self, kernel: Kernel) -> Result<CudaFunction, Error> {
        if let Some(f) = self
            .functions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&kernel)
        {
            return Ok(f.clone());
        }
        let name = kernel.entry();
        let m = self.module(kernel.module())?;
        let f = m
            .load_function(name)
            .map_err(|e| super::cuda_err(&format!("kernel {name}"), e))?;
        self.functions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(kernel, f.clone());
        Ok(f)
    }
}
