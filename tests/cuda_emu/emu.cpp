// Host emulation of the CUDA kernels in kernels/, for tests on machines without a GPU
// (src/cuda/test_support.rs builds this with g++ into a shared library and calls the kernels).
//
// Each "launch" runs one block of one thread per call (blockDim = 1, gridDim.x = 1), so the
// kernels' grid-stride loops cover every element and the shared-memory reduction degenerates
// to a single partial sum. Float intrinsics map to plain IEEE operations; build with
// -ffp-contract=off so nothing is fused, as on the device with --fmad=false.
#include <math.h>

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static

struct EmuDim3 {
    unsigned x, y, z;
};
static EmuDim3 blockIdx, threadIdx, blockDim, gridDim;

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

#include "../../kernels/chain.cu"
#include "../../kernels/resize.cu"
#include "../../kernels/geometry.cu"
#include "../../kernels/convert.cu"
#include "../../kernels/color.cu"

// Sets the block the next kernel call runs as (one thread, one block along x).
extern "C" void emu_set_block(unsigned sample, unsigned samples) {
    blockIdx = {0, sample, 0};
    gridDim = {1, samples, 1};
    threadIdx = {0, 0, 0};
    blockDim = {1, 1, 1};
}
