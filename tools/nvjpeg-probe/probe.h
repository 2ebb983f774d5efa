// Shared by the probe's files (probe.cpp, contend.cpp): error checks and one parsed JPEG.
#pragma once
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nvjpeg.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CK(x)                                                                          \
    do {                                                                               \
        cudaError_t e_ = (x);                                                          \
        if (e_ != cudaSuccess) {                                                       \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)
#define NK(x)                                                                          \
    do {                                                                               \
        nvjpegStatus_t s_ = (x);                                                       \
        if (s_ != NVJPEG_STATUS_SUCCESS) {                                             \
            fprintf(stderr, "%s:%d %s: nvjpeg status %d\n", __FILE__, __LINE__, #x, (int)s_); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

// The CUDA driver (libcuda.so.1), opened at run time for the few driver calls the runtime
// lacks (the probe links only the runtime); `who` names the mode in the error. nullptr if
// absent.
inline void* libcuda(const char* who) {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) fprintf(stderr, "%s: libcuda.so.1 not loaded: %s\n", who, dlerror());
    return lib;
}

// One batch in flight on the engines: its nvJPEG state, stream, completion event, per-image
// decode parameters and output buffer.
struct HwSlot {
    nvjpegJpegState_t state;
    cudaStream_t stream;
    cudaEvent_t done;
    std::vector<nvjpegDecodeParams_t> params;
    unsigned char* out;
    bool used = false;
};

// Releases what each slot holds (its stream must have finished).
inline void destroy_slots(std::vector<HwSlot>& slots) {
    for (auto& s : slots) {
        for (auto& p : s.params) nvjpegDecodeParamsDestroy(p);
        nvjpegJpegStateDestroy(s.state);
        cudaEventDestroy(s.done);
        cudaStreamDestroy(s.stream);
        cudaFree(s.out);
    }
    slots.clear();
}

struct Jpeg {
    std::string name;
    const unsigned char* data;  // in the pinned block
    size_t len;
    int w, h, comps;
    nvjpegChromaSubsampling_t css;
    int roi[4];  // x, y, w, h: a RandomResizedCrop-like window
};

// The contention mode (contend.cpp): nvJPEG's batched hardware call timed while a kernel
// keeps one stream or the whole device busy. Returns the process's exit code.
int contend(nvjpegHandle_t hw, nvjpegHandle_t hw_interp, std::vector<Jpeg>& imgs, size_t max_px,
            int batch);

// The solo mode (solo.cpp): one thread feeding the engines for `seconds` from the wall-clock
// instant `start_at`, so that several processes can run side by side; `whole`: whole images,
// not their crop windows; `cpu_threads`: nvjpegDecodeBatchedInitialize's max_cpu_threads.
// Returns the exit code.
int solo(nvjpegHandle_t h, std::vector<Jpeg>& imgs, size_t max_px, int batch, double start_at,
         double seconds, bool whole, int cpu_threads, const char* tag);

// The solo mode with several threads (solo.cpp): `threads` threads, each with an nvJPEG handle
// of its own, in the primary context or each in a context of its own (`own_contexts`).
int solo_threads(std::vector<Jpeg>& imgs, size_t max_px, int batch, double start_at, double seconds,
                 bool whole, int cpu_threads, int threads, bool own_contexts);
