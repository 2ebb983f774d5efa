// Fixed-width types and element conversions shared by every kernel. No system headers, so
// the same source compiles under nvcc and NVRTC (which ships no <stdint.h> everywhere).
#pragma once

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;

// Element types, as `DType` on the Rust side.
#define DT_U8 0u
#define DT_F16 1u
#define DT_F32 2u

// Pillow's fixed-point precision (`PRECISION_BITS` in src/resample/taps.rs).
#define PRECISION_BITS 22
#define HALF_ONE (1 << (PRECISION_BITS - 1))

__device__ __forceinline__ u8 clip8_shift(i32 ss) {
    i32 v = ss >> PRECISION_BITS;
    return (u8)(v < 0 ? 0 : (v > 255 ? 255 : v));
}

__device__ __forceinline__ u8 clip8(i32 v) { return (u8)(v < 0 ? 0 : (v > 255 ? 255 : v)); }

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// f32 -> f16, round to nearest even (as half::f16::from_f32).
__device__ __forceinline__ u16 f32_to_f16_bits(float x) {
    u16 r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(x));
    return r;
}
#else
// Host build of the kernels (kernels/host/emu.cpp, the emulated device): the same conversions through the compiler's
// IEEE half type (round to nearest even, as cvt.rn). GCC 12 knows _Float16 in C++ only on
// x86; every AArch64 compiler has __fp16 (IEEE binary16).
#include <string.h>
#if defined(__aarch64__)
typedef __fp16 emu_half;
#else
typedef _Float16 emu_half;
#endif
__device__ __forceinline__ u16 f32_to_f16_bits(float x) {
    emu_half h = (emu_half)x;
    u16 r;
    memcpy(&r, &h, 2);
    return r;
}
#endif

// f32 -> u8 as `cast::f32_to_u8`: round half to even, saturate, NaN -> 0.
__device__ __forceinline__ u8 f32_to_u8(float x) {
    if (x != x) return 0;
    float r = rintf(x);
    if (r <= 0.0f) return 0;
    if (r >= 255.0f) return 255;
    return (u8)r;
}

__device__ __forceinline__ void store_elem(void* base, u64 i, u32 dtype, float v) {
    if (dtype == DT_U8) {
        ((u8*)base)[i] = f32_to_u8(v);
    } else if (dtype == DT_F16) {
        ((u16*)base)[i] = f32_to_f16_bits(v);
    } else {
        ((float*)base)[i] = v;
    }
}
