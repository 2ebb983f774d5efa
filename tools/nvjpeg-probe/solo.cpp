// The probe's solo mode (`probe DIR OUT --solo [--interp] --start-at T --seconds S`): one
// thread feeding the JPEG engines (RGBI, two batches in flight; a crop window an image, or
// with --interp the whole image, as nvJPEG 13.0 pads windows when it interpolates) for S
// seconds from the wall-clock instant T, printing the images it decoded. --cpu-threads N: the
// `max_cpu_threads` nvjpegDecodeBatchedInitialize is given (1 in stokehold; whether nvJPEG
// spreads its parse over more is not documented). Several of these processes started
// together tell where the engines' feeding bound lives (docs/performance.md: one thread's
// nvJPEG call takes 55-60 us an image, which caps one feeder at ~17-18k img/s on an H200, and
// more threads in one process went slower, with or without handles of their own):
//   - the processes' sum grows with their count: the bound is per process (a lock or state
//     inside nvJPEG or the CUDA runtime); feeding from more than one process passes it;
//   - the sum stays at one process's figure: the bound is the device's or the driver's (the
//     engines' submission path); no feeder arrangement passes it.
#include "probe.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

namespace {

double wall_now() {
    timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

double cpu_now() {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

}  // namespace

int solo(nvjpegHandle_t h, std::vector<Jpeg>& imgs, size_t max_px, int batch, double start_at,
         double seconds, bool whole, int cpu_threads, const char* tag) {
    const int K = 2;
    std::vector<HwSlot> slots(K);
    for (auto& s : slots) {
        NK(nvjpegJpegStateCreate(h, &s.state));
        CK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
        CK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
        s.params.resize(batch);
        for (auto& p : s.params) {
            NK(nvjpegDecodeParamsCreate(h, &p));
            NK(nvjpegDecodeParamsSetOutputFormat(p, NVJPEG_OUTPUT_RGBI));
        }
        CK(cudaMalloc((void**)&s.out, (size_t)batch * max_px * 3));
    }
    std::vector<const unsigned char*> data(batch);
    std::vector<size_t> lens(batch);
    std::vector<nvjpegImage_t> dest(batch);
    size_t next = 0;
    // One batch through each slot before the start: the states' buffers are then allocated.
    // The caller waits for the slot's last batch first (not counted as the call's time).
    auto submit = [&](HwSlot& s) {
        s.used = true;
        for (int i = 0; i < batch; i++) {
            Jpeg& j = imgs[next++ % imgs.size()];
            data[i] = j.data;
            lens[i] = j.len;
            memset(&dest[i], 0, sizeof dest[i]);
            dest[i].channel[0] = s.out + (size_t)i * max_px * 3;
            dest[i].pitch[0] = 3 * (whole ? j.w : j.roi[2]);
            if (whole)
                NK(nvjpegDecodeParamsSetROI(s.params[i], 0, 0, -1, -1));
            else
                NK(nvjpegDecodeParamsSetROI(s.params[i], j.roi[0], j.roi[1], j.roi[2], j.roi[3]));
        }
        nvjpegStatus_t st = nvjpegDecodeBatchedInitialize(h, s.state, batch, cpu_threads,
                                                          NVJPEG_OUTPUT_RGBI);
        if (st == NVJPEG_STATUS_SUCCESS)
            st = nvjpegDecodeBatchedEx(h, s.state, data.data(), lens.data(), dest.data(),
                                       s.params.data(), s.stream);
        CK(cudaEventRecord(s.done, s.stream));
        return st;
    };
    for (auto& s : slots)
        if (submit(s) != NVJPEG_STATUS_SUCCESS) {
            printf("solo %s: warm-up failed\n", tag);
            return 1;
        }
    for (auto& s : slots) CK(cudaStreamSynchronize(s.stream));
    double late = wall_now() - start_at;
    while (wall_now() < start_at) std::this_thread::sleep_for(std::chrono::microseconds(200));
    double t0 = wall_now(), c0 = cpu_now(), in_call = 0;
    long images = 0;
    int r = 0;
    while (wall_now() - t0 < seconds) {
        HwSlot& s = slots[r++ % K];
        if (s.used) CK(cudaEventSynchronize(s.done));
        double a = wall_now();
        if (submit(s) != NVJPEG_STATUS_SUCCESS) {
            printf("solo %s: a call failed\n", tag);
            return 1;
        }
        in_call += wall_now() - a;
        images += batch;
    }
    for (auto& s : slots) CK(cudaStreamSynchronize(s.stream));
    double wall = wall_now() - t0, cpu = cpu_now() - c0;
    // `late` > 0: this process was ready only after the common start (its figure then
    // overlaps the others' less).
    printf("solo %s (max_cpu_threads %d): %ld images in %.3f s = %.0f img/s; in the call %.1f us an image; thread CPU "
           "%.0f%% of the run; ready %.2f s %s the start\n",
           tag, cpu_threads, images, wall, images / wall, 1e6 * in_call / std::max(images, 1L),
           100 * cpu / wall, late > 0 ? late : -late, late > 0 ? "after" : "before");
    destroy_slots(slots);
    return 0;
}

// The solo mode with `--threads N [--own-contexts]`: N threads of this process feed the engines
// from the common instant, each with an nvJPEG handle of its own, in the device's primary
// context (as stokehold's threads would be) or, with --own-contexts, each in a CUDA context of
// its own (cuCtxCreate). Several threads in one process went slower than one, handles of their
// own or not (results-2026-11-26/run2.log); if threads in contexts of their own add up as
// processes do, the bound is the context's (the driver's lock of it), and one process can pass
// it with a context per feeding thread (memory made with cuMemCreate is mapped for the device,
// not a context, and a stream may wait for another context's event); if only processes add up,
// it is nvJPEG's or the runtime's process-wide state.
namespace {

using CUresult = int;
using CUdevice = int;
struct CUctx_st;
using CUcontext = CUctx_st*;

struct Driver {
    CUresult (*init)(unsigned) = nullptr;
    CUresult (*device_get)(CUdevice*, int) = nullptr;
    CUresult (*create_v2)(CUcontext*, unsigned, CUdevice) = nullptr;
    CUresult (*create_v4)(CUcontext*, void*, unsigned, CUdevice) = nullptr;
    CUresult (*set_current)(CUcontext) = nullptr;
    CUresult (*destroy)(CUcontext) = nullptr;
};

bool load_driver(Driver& d) {
    void* lib = libcuda("solo");
    if (!lib) return false;
    d.init = (CUresult(*)(unsigned))dlsym(lib, "cuInit");
    d.device_get = (CUresult(*)(CUdevice*, int))dlsym(lib, "cuDeviceGet");
    d.create_v2 = (CUresult(*)(CUcontext*, unsigned, CUdevice))dlsym(lib, "cuCtxCreate_v2");
    d.create_v4 = (CUresult(*)(CUcontext*, void*, unsigned, CUdevice))dlsym(lib, "cuCtxCreate_v4");
    d.set_current = (CUresult(*)(CUcontext))dlsym(lib, "cuCtxSetCurrent");
    d.destroy = (CUresult(*)(CUcontext))dlsym(lib, "cuCtxDestroy_v2");
    if (!d.init || !d.device_get || !(d.create_v2 || d.create_v4) || !d.set_current || !d.destroy) {
        fprintf(stderr, "solo: libcuda.so.1 lacks a context function\n");
        return false;
    }
    return true;
}

}  // namespace

int solo_threads(std::vector<Jpeg>& imgs, size_t max_px, int batch, double start_at, double seconds,
                 bool whole, int cpu_threads, int threads, bool own_contexts) {
    Driver drv;
    if (own_contexts && !load_driver(drv)) return 1;
    if (own_contexts && drv.init(0) != 0) {
        fprintf(stderr, "solo: cuInit failed\n");
        return 1;
    }
    std::vector<int> rc(threads, 0);
    std::vector<std::thread> th;
    for (int k = 0; k < threads; k++) {
        th.emplace_back([&, k] {
            CUcontext ctx = nullptr;
            if (own_contexts) {
                CUdevice dev = 0;
                CUresult r = drv.device_get(&dev, 0);
                if (r == 0)
                    r = drv.create_v2 ? drv.create_v2(&ctx, 0, dev) : drv.create_v4(&ctx, nullptr, 0, dev);
                if (r == 0) r = drv.set_current(ctx);
                if (r != 0) {
                    fprintf(stderr, "solo: thread %d: a context of its own: CUresult %d\n", k, r);
                    rc[k] = 1;
                    return;
                }
            } else {
                CK(cudaSetDevice(0));
            }
            nvjpegHandle_t h;
            NK(nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr,
                              whole ? NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION : 0, &h));
            std::string tag = std::string(whole ? "interpolating" : "repeated chroma") + ", thread " +
                              std::to_string(k + 1) + " of " + std::to_string(threads) +
                              (own_contexts ? ", a context of its own" : ", the primary context");
            rc[k] = solo(h, imgs, max_px, batch, start_at, seconds, whole, cpu_threads, tag.c_str());
            nvjpegDestroy(h);
            if (ctx) drv.destroy(ctx);
        });
    }
    for (auto& t : th) t.join();
    for (int r : rc)
        if (r) return r;
    return 0;
}
