// Host emulation of the CUDA kernels in kernels/, for tests on machines without a GPU
// (src/cuda/test_support.rs builds this with g++ into a shared library and calls the kernels).
//
// Two ways to run a kernel:
// - `emu_set_block` then a direct call: one block of one thread (blockDim = 1, gridDim.x = 1),
//   so the grid- and block-stride loops cover every element and the shared-memory reduction
//   degenerates to a single partial sum;
// - `emu_launch_resample`: whole blocks of real threads (one host thread per CUDA thread, a
//   pthread barrier as `__syncthreads`, `__shared__` variables shared by the block's threads,
//   blocks one after another), so a missing barrier between the resampler's shared-memory
//   phases shows up as wrong pixels.
// Float intrinsics map to plain IEEE operations; build with -ffp-contract=off so nothing is
// fused, as on the device with --fmad=false.
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static

struct EmuDim3 {
    unsigned x, y, z;
};
static EmuDim3 blockIdx, blockDim, gridDim;
static thread_local EmuDim3 threadIdx;

// The barrier of the block being run by `emu_launch_resample`; null for one-thread launches.
static pthread_barrier_t* emu_barrier = nullptr;

static inline void __syncthreads() {
    if (emu_barrier) pthread_barrier_wait(emu_barrier);
}
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

typedef void (*EmuResampleKernel)(const FusedDesc*, const i32*, u32);

// Runs resampling kernel `entry` ("fused_crop_resize_normalize" or "resize_u8") over `n`
// samples as a grid of `grid_x` x n blocks of `threads` threads each. Returns 0, or -1 for an
// unknown entry or a bad size.
extern "C" int emu_launch_resample(const char* entry, const FusedDesc* descs, const i32* taps,
                                   unsigned n, unsigned grid_x, unsigned threads) {
    EmuResampleKernel kernel = nullptr;
    if (strcmp(entry, "fused_crop_resize_normalize") == 0) kernel = fused_crop_resize_normalize;
    if (strcmp(entry, "resize_u8") == 0) kernel = resize_u8;
    if (!kernel || threads == 0 || grid_x == 0) return -1;
    gridDim = {grid_x, n, 1};
    blockDim = {threads, 1, 1};
    pthread_barrier_t barrier;
    for (unsigned s = 0; s < n; ++s) {
        for (unsigned bx = 0; bx < grid_x; ++bx) {
            blockIdx = {bx, s, 0};
            pthread_barrier_init(&barrier, nullptr, threads);
            emu_barrier = &barrier;
            std::vector<std::thread> pool;
            for (unsigned t = 1; t < threads; ++t)
                pool.emplace_back([=] {
                    threadIdx = {t, 0, 0};
                    kernel(descs, taps, n);
                });
            threadIdx = {0, 0, 0};
            kernel(descs, taps, n);
            for (auto& th : pool) th.join();
            emu_barrier = nullptr;
            pthread_barrier_destroy(&barrier);
        }
    }
    blockDim = {1, 1, 1};
    return 0;
}
