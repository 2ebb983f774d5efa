//! Test-only access to the CUDA driver (`libcuda.so.1`, loaded at run time): make the
//! primary context current, allocate device memory, copy it back. Just enough for the
//! nvJPEG tests to run on a GPU machine before `src/cuda` is joined in; returns `None`
//! wherever there is no driver or no GPU.

use std::ffi::c_void;

type CuResult = i32;

/// The driver functions the tests need, and the primary context of device 0.
pub struct Cuda {
    _lib: libloading::Library,
    mem_alloc: unsafe extern "C" fn(*mut u64, usize) -> CuResult,
    mem_free: unsafe extern "C" fn(u64) -> CuResult,
    memcpy_dtoh: unsafe extern "C" fn(*mut c_void, u64, usize) -> CuResult,
    ctx_sync: unsafe extern "C" fn() -> CuResult,
}

/// A device allocation, freed on drop.
pub struct DevBuf<'a> {
    cuda: &'a Cuda,
    /// Device address.
    pub ptr: u64,
    /// Bytes.
    pub len: usize,
}

impl Drop for DevBuf<'_> {
    fn drop(&mut self) {
        // SAFETY: allocated by `alloc`, freed once; the tests synchronise before dropping.
        unsafe { (self.cuda.mem_free)(self.ptr) };
    }
}

impl Cuda {
    /// Opens the driver, initialises it and makes device 0's primary context current on
    /// this thread; `None` (with the reason printed) when any step fails.
    pub fn open() -> Option<Cuda> {
        // SAFETY: libcuda's initialisers only set up the driver; the symbols are typed per
        // the CUDA driver API (cuda.h, `_v2` entry points, 64-bit CUdeviceptr).
        unsafe {
            let lib = match libloading::Library::new("libcuda.so.1") {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("no CUDA driver: {e}");
                    return None;
                }
            };
            macro_rules! sym {
                ($name:literal, $ty:ty) => {
                    match lib.get::<$ty>($name) {
                        Ok(s) => *s,
                        Err(e) => {
                            eprintln!("CUDA driver lacks a symbol: {e}");
                            return None;
                        }
                    }
                };
            }
            let init = sym!(b"cuInit\0", unsafe extern "C" fn(u32) -> CuResult);
            let device_get = sym!(
                b"cuDeviceGet\0",
                unsafe extern "C" fn(*mut i32, i32) -> CuResult
            );
            let retain = sym!(
                b"cuDevicePrimaryCtxRetain\0",
                unsafe extern "C" fn(*mut *mut c_void, i32) -> CuResult
            );
            let set_current = sym!(
                b"cuCtxSetCurrent\0",
                unsafe extern "C" fn(*mut c_void) -> CuResult
            );
            let mem_alloc = sym!(
                b"cuMemAlloc_v2\0",
                unsafe extern "C" fn(*mut u64, usize) -> CuResult
            );
            let mem_free = sym!(b"cuMemFree_v2\0", unsafe extern "C" fn(u64) -> CuResult);
            let memcpy_dtoh = sym!(
                b"cuMemcpyDtoH_v2\0",
                unsafe extern "C" fn(*mut c_void, u64, usize) -> CuResult
            );
            let ctx_sync = sym!(b"cuCtxSynchronize\0", unsafe extern "C" fn() -> CuResult);
            let r = init(0);
            if r != 0 {
                eprintln!("cuInit failed: CUresult {r} (no GPU?)");
                return None;
            }
            let mut dev = 0;
            let mut ctx = std::ptr::null_mut();
            if device_get(&mut dev, 0) != 0 || retain(&mut ctx, dev) != 0 || set_current(ctx) != 0 {
                eprintln!("could not make device 0's primary context current");
                return None;
            }
            Some(Cuda {
                _lib: lib,
                mem_alloc,
                mem_free,
                memcpy_dtoh,
                ctx_sync,
            })
        }
    }

    /// Allocates `len` bytes of device memory.
    pub fn alloc(&self, len: usize) -> Result<DevBuf<'_>, String> {
        let mut ptr = 0u64;
        // SAFETY: `ptr` is a valid out-pointer; the context is current.
        let r = unsafe { (self.mem_alloc)(&mut ptr, len.max(1)) };
        if r != 0 {
            return Err(format!("cuMemAlloc({len}) failed: CUresult {r}"));
        }
        Ok(DevBuf {
            cuda: self,
            ptr,
            len,
        })
    }

    /// Waits for all work in the context.
    pub fn sync(&self) -> Result<(), String> {
        // SAFETY: no arguments; the context is current.
        let r = unsafe { (self.ctx_sync)() };
        if r != 0 {
            return Err(format!("cuCtxSynchronize failed: CUresult {r}"));
        }
        Ok(())
    }

    /// Copies a whole buffer to the host (synchronous).
    pub fn download(&self, buf: &DevBuf<'_>) -> Result<Vec<u8>, String> {
        let mut out = vec![0u8; buf.len];
        // SAFETY: `out` has `buf.len` bytes; `buf` is a live allocation of that size.
        let r = unsafe { (self.memcpy_dtoh)(out.as_mut_ptr().cast(), buf.ptr, buf.len) };
        if r != 0 {
            return Err(format!("cuMemcpyDtoH failed: CUresult {r}"));
        }
        Ok(out)
    }
}
