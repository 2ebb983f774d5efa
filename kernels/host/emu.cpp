// Host build of the CUDA kernels in kernels/ for the emulated device (`--device emu`,
// src/cuda/emu/), compiled by build.rs with the host's C++ compiler and linked into the
// library. Every kernel is exported as `stokehold_emu_<name>` so that no C symbol of ours
// can clash with another library's.
//
// Each "launch" runs one block of one thread per call (blockDim = 1, gridDim.x = 1), so the
// kernels' grid-stride loops cover every element and the shared-memory reduction degenerates
// to a single partial sum. The block coordinates and `__shared__` arrays are thread-local:
// several emulated streams (and several test threads) run kernels at once. Float intrinsics
// map to plain IEEE operations; build.rs passes -ffp-contract=off so nothing is fused, as on
// the device with --fmad=false.
#include <math.h>

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static thread_local

#define fused_crop_resize_normalize stokehold_emu_fused_crop_resize_normalize
#define resize_u8 stokehold_emu_resize_u8
#define convert stokehold_emu_convert
#define jitter_luma_sum stokehold_emu_jitter_luma_sum
#define jitter_step stokehold_emu_jitter_step
#define crop_fill_b1 stokehold_emu_crop_fill_b1
#define crop_fill_b2 stokehold_emu_crop_fill_b2
#define crop_fill_b4 stokehold_emu_crop_fill_b4
#define flip_b1 stokehold_emu_flip_b1
#define flip_b2 stokehold_emu_flip_b2
#define flip_b4 stokehold_emu_flip_b4
#define transpose_b1 stokehold_emu_transpose_b1
#define transpose_b2 stokehold_emu_transpose_b2
#define transpose_b4 stokehold_emu_transpose_b4

struct EmuDim3 {
    unsigned x, y, z;
};
static thread_local EmuDim3 blockIdx, threadIdx, blockDim, gridDim;

static inline void __syncthreads() {}
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
    unsigned long long old = *p;
    *p = old + v;
    return old;
}

// (The geometry kernels' names are pasted by a macro; the pasted name is rescanned, so the
// renames above reach them too.)
#include "../chain.cu"
#include "../resize.cu"
#include "../convert.cu"
#include "../color.cu"
#include "../geometry.cu"

// Sets the block the next kernel call on this thread runs as (one thread, one block along x).
extern "C" void stokehold_emu_set_block(unsigned sample, unsigned samples) {
    blockIdx = {0, sample, 0};
    gridDim = {1, samples, 1};
    threadIdx = {0, 0, 0};
    blockDim = {1, 1, 1};
}
