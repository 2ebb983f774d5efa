// Host build of the CUDA kernels in kernels/ for the emulated device (`--device emu`,
// src/cuda/emu/), compiled by build.rs with the host's C++ compiler (-pthread) and linked
// into the library. Every kernel is exported as `stokehold_emu_<name>` so that no C symbol of
// ours can clash with another library's.
//
// Two ways to run a kernel:
// - `stokehold_emu_set_block`, then a direct call: one block of one thread (blockDim = 1,
//   gridDim.x = 1), so the kernels' grid- and block-stride loops cover every element and the
//   shared-memory reduction degenerates to a single partial sum. This is how the emulated
//   device runs every launch: several emulated streams (and several test threads) run
//   kernels at once, so the block coordinates, the barrier and the shared memory are
//   thread-local.
// - `stokehold_emu_launch_chain` and `stokehold_emu_launch_chroma_guess`: whole blocks of
//   real threads (one host thread per CUDA thread, a pthread barrier as `__syncthreads`, one
//   scratch shared by the block's threads, blocks one after another), so that a missing
//   barrier between shared-memory phases shows up as wrong results. Only the dedicated tests
//   use them: a host thread per CUDA thread costs far more than the kernel's work.
// Float intrinsics map to plain IEEE operations; build.rs passes -ffp-contract=off so nothing
// is fused, as on the device with --fmad=false.
#include <math.h>
#include <pthread.h>

#include <memory>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static thread_local

#define fused_crop_resize_normalize stokehold_emu_fused_crop_resize_normalize
#define jitter_luma_sum stokehold_emu_jitter_luma_sum
#define jitter_step stokehold_emu_jitter_step
#define chroma_resolve stokehold_emu_chroma_resolve
#define chroma_guess stokehold_emu_chroma_guess
#define chroma_upsample stokehold_emu_chroma_upsample

struct EmuDim3 {
    unsigned x, y, z;
};
static thread_local EmuDim3 blockIdx, threadIdx, blockDim, gridDim;

// The barrier of the block this thread runs in a whole-block launch; null otherwise.
static thread_local pthread_barrier_t* emu_barrier = nullptr;

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

// The resampler's shared scratch (RESAMPLE_SCRATCH in common/resample.cuh): the
// block's own in a whole-block launch, this thread's otherwise.
struct ResampleScratch;
static thread_local ResampleScratch* emu_block_scratch = nullptr;
static ResampleScratch& emu_resample_scratch();
#define RESAMPLE_SCRATCH(name) ResampleScratch& name = emu_resample_scratch()
// The same for the chroma guess's scratch (kernels/chroma.cu).
struct GuessScratch;
static thread_local GuessScratch* emu_block_guess = nullptr;
static GuessScratch& emu_guess_scratch();
#define GUESS_SCRATCH(name) GuessScratch& name = emu_guess_scratch()

#include "../chain.cu"
#include "../color.cu"
#include "../chroma.cu"

static ResampleScratch& emu_resample_scratch() {
    static thread_local ResampleScratch own;
    return emu_block_scratch ? *emu_block_scratch : own;
}

static GuessScratch& emu_guess_scratch() {
    static thread_local GuessScratch own;
    return emu_block_guess ? *emu_block_guess : own;
}

// Sets the block the next kernel call on this thread runs as (one thread, one block along x).
extern "C" void stokehold_emu_set_block(unsigned sample, unsigned samples) {
    blockIdx = {0, sample, 0};
    gridDim = {1, samples, 1};
    threadIdx = {0, 0, 0};
    blockDim = {1, 1, 1};
}

// Runs `kernel` over `n` samples as a grid of `grid_x` x n blocks of `threads` threads each,
// one block after another, each block's threads sharing one barrier and one scratch of each
// kind. Returns 0, or -1 for a bad size.
template <typename Kernel>
static int emu_launch_blocks(unsigned n, unsigned grid_x, unsigned threads, Kernel kernel) {
    if (threads == 0 || threads > 1024 || grid_x == 0) return -1;
    std::unique_ptr<ResampleScratch> resample(new ResampleScratch);
    std::unique_ptr<GuessScratch> guess(new GuessScratch);
    for (unsigned s = 0; s < n; ++s) {
        for (unsigned bx = 0; bx < grid_x; ++bx) {
            pthread_barrier_t barrier;
            pthread_barrier_init(&barrier, nullptr, threads);
            auto run = [&, s, bx](unsigned t) {
                blockIdx = {bx, s, 0};
                gridDim = {grid_x, n, 1};
                blockDim = {threads, 1, 1};
                threadIdx = {t, 0, 0};
                emu_barrier = &barrier;
                emu_block_scratch = resample.get();
                emu_block_guess = guess.get();
                kernel();
                emu_barrier = nullptr;
                emu_block_scratch = nullptr;
                emu_block_guess = nullptr;
                blockDim = {1, 1, 1};
            };
            std::vector<std::thread> pool;
            for (unsigned t = 1; t < threads; ++t) pool.emplace_back(run, t);
            run(0);
            for (auto& th : pool) th.join();
            pthread_barrier_destroy(&barrier);
        }
    }
    return 0;
}

// The chain kernel over `n` samples in whole blocks (emu_launch_blocks).
extern "C" int stokehold_emu_launch_chain(const FusedDesc* descs, const i32* taps, unsigned n,
                                          unsigned grid_x, unsigned threads) {
    return emu_launch_blocks(n, grid_x, threads,
                             [=] { fused_crop_resize_normalize(descs, taps, n); });
}

// The chroma guess over `n` samples in whole blocks (emu_launch_blocks); `threads` at most
// GUESS_THREADS.
extern "C" int stokehold_emu_launch_chroma_guess(const ChromaDesc* descs, unsigned n,
                                                 unsigned grid_x, unsigned threads) {
    if (threads > GUESS_THREADS) return -1;
    return emu_launch_blocks(n, grid_x, threads, [=] { chroma_guess(descs, n); });
}
