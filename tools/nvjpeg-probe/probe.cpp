// nvJPEG probe: measures what the GPU path's timing model needs, on the GPU machine, without
// stokehold: the JPEG engines' batched throughput for each output format and upsampling flag,
// with 1..K batches in flight; the host cost of each call; the CUDA hybrid decoder's rate on T
// host threads; and it dumps the planes of a few images (YUV and RGB, whole and ROI) so that
// the planar-YUV layout can be checked against our CPU decoder on a machine without a GPU.
//
//   probe DIR OUT [--batch B] [--images N] [--quick] [--v2 | --contend] [--blocking-sync]
//   probe DIR OUT --solo [--interp] --start-at UNIX_SECONDS --seconds S [--batch B] [--cpu-threads N]
//         [--threads N [--own-contexts]]
//
// --v2: several submitting threads (each with its own states, streams and handle), the CPU
// share of the time spent in the submit calls, and nvJPEG's allocator variants (its own,
// its memory pools, stream-ordered V2 allocators), counting device allocations.
//
// --contend: the batched hardware call's time (wall and CPU) while a spinning kernel keeps one
// stream or every SM busy (contend.cpp): what the call waits for beside other GPU work.
// --blocking-sync: the CUDA context's host waits sleep instead of spinning
// (cudaDeviceScheduleBlockingSync), so that a call's CPU time is its own work, not its waits.
//
// --solo: one thread feeding the engines from a given wall-clock instant for S seconds
// (solo.cpp); several processes started together show whether the feeding bound is the
// process's or the device's. --interp: nvJPEG interpolating chroma. --threads N: N feeding
// threads in this one process, each with a handle of its own; --own-contexts: each in a CUDA
// context of its own (whether the bound is the context's or the process's).
//
// Plain C++ against the CUDA runtime and nvJPEG (no kernels): built on the development
// machine by tools/nvjpeg-probe/build.sh, run on the GPU machine with its own libraries.
#include "probe.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <mutex>
#include <time.h>
#include <utility>

#include <random>
#include <string>
#include <thread>
#include <vector>

static std::vector<std::pair<void*, size_t>>& g_pin_sizes() {
    static std::vector<std::pair<void*, size_t>> v;
    return v;
}

using Clock = std::chrono::steady_clock;
static double secs(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

static std::vector<unsigned char> read_file(const std::string& p) {
    std::vector<unsigned char> v;
    FILE* f = fopen(p.c_str(), "rb");
    if (!f) return v;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    v.resize(n);
    if (fread(v.data(), 1, n, f) != (size_t)n) v.clear();
    fclose(f);
    return v;
}

// Random window as torchvision's RandomResizedCrop draws it (area 0.08..1, ratio 3/4..4/3).
static void draw_roi(std::mt19937& rng, int W, int H, int* r) {
    std::uniform_real_distribution<double> area(0.08, 1.0), lr(std::log(3.0 / 4), std::log(4.0 / 3));
    for (int t = 0; t < 10; t++) {
        double a = area(rng) * W * H, ar = std::exp(lr(rng));
        int w = (int)std::lround(std::sqrt(a * ar)), h = (int)std::lround(std::sqrt(a / ar));
        if (w > 0 && h > 0 && w <= W && h <= H) {
            r[0] = std::uniform_int_distribution<int>(0, W - w)(rng);
            r[1] = std::uniform_int_distribution<int>(0, H - h)(rng);
            r[2] = w;
            r[3] = h;
            return;
        }
    }
    r[0] = 0; r[1] = 0; r[2] = W; r[3] = H;
}

static const char* fmt_name(nvjpegOutputFormat_t f) {
    switch (f) {
        case NVJPEG_OUTPUT_YUV: return "YUV";
        case NVJPEG_OUTPUT_RGBI: return "RGBI";
        case NVJPEG_OUTPUT_RGB: return "RGB";
        case NVJPEG_OUTPUT_NV12: return "NV12";
        default: return "?";
    }
}

// Output buffer layout for one image: planar formats get 3 planes of w*h (over-allocated for
// chroma), interleaved one of 3*w*h.
static void set_dest(nvjpegImage_t& d, unsigned char* base, int w, int h, nvjpegOutputFormat_t f) {
    memset(&d, 0, sizeof d);
    if (f == NVJPEG_OUTPUT_RGBI) {
        d.channel[0] = base;
        d.pitch[0] = 3 * w;
    } else {
        for (int c = 0; c < 3; c++) {
            d.channel[c] = base + (size_t)c * w * h;
            d.pitch[c] = w;
        }
    }
}

static double thread_cpu() {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

// Counted allocators: stream-ordered device memory (cudaMallocAsync on the stream nvJPEG
// names) and a caching pinned allocator that never frees (blocks reused by size).
static std::atomic<long> g_dev_allocs{0}, g_dev_frees{0}, g_pin_allocs{0};
static int dev_malloc_v2(void*, void** p, size_t n, cudaStream_t s) {
    g_dev_allocs++;
    return cudaMallocAsync(p, n, s) == cudaSuccess ? 0 : 1;
}
static int dev_free_v2(void*, void* p, size_t, cudaStream_t s) {
    g_dev_frees++;
    return cudaFreeAsync(p, s) == cudaSuccess ? 0 : 1;
}
static std::mutex g_pin_mu;
static std::vector<std::pair<size_t, void*>> g_pin_free;
static int pin_malloc_v2(void*, void** p, size_t n, cudaStream_t) {
    std::lock_guard<std::mutex> g(g_pin_mu);
    for (size_t i = 0; i < g_pin_free.size(); i++)
        if (g_pin_free[i].first >= n && g_pin_free[i].first <= 2 * n + 65536) {
            *p = g_pin_free[i].second;
            g_pin_free.erase(g_pin_free.begin() + i);
            return 0;
        }
    g_pin_allocs++;
    size_t cap = n + 65536;
    if (cudaHostAlloc(p, cap, 0) != cudaSuccess) return 1;
    g_pin_sizes().push_back({*p, cap});
    return 0;
}
static int pin_free_v2(void*, void* p, size_t, cudaStream_t s) {
    // Reused only after the stream's work: a real allocator records an event; the probe
    // synchronises the stream (counted, rare).
    cudaStreamSynchronize(s);
    std::lock_guard<std::mutex> g(g_pin_mu);
    for (auto& e : g_pin_sizes())
        if (e.first == p) g_pin_free.push_back({e.second, p});
    return 0;
}

enum Alloc { A_DEFAULT, A_POOLS, A_ASYNC };
static const char* alloc_name(Alloc a) {
    return a == A_DEFAULT ? "default" : a == A_POOLS ? "pools" : "async";
}
static nvjpegHandle_t make_hw(Alloc a, unsigned flags) {
    nvjpegHandle_t h;
    if (a == A_ASYNC) {
        nvjpegDevAllocatorV2_t d{dev_malloc_v2, dev_free_v2, nullptr};
        nvjpegPinnedAllocatorV2_t pa{pin_malloc_v2, pin_free_v2, nullptr};
        NK(nvjpegCreateExV2(NVJPEG_BACKEND_HARDWARE, &d, &pa, flags, &h));
    } else {
        NK(nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr,
                          flags | (a == A_POOLS ? NVJPEG_FLAGS_ENABLE_MEMORY_POOLS : 0), &h));
    }
    return h;
}

struct HwResult {
    double imgs_per_s, submit_us_per_img, wall;
    long images;
};

// Engines: `rounds` batches of `batch` images from `imgs` (cycled), K slots in flight.
static HwResult run_hw(nvjpegHandle_t h, std::vector<Jpeg>& imgs, int batch, int K, int rounds,
                       nvjpegOutputFormat_t fmt, bool roi, size_t max_px) {
    std::vector<HwSlot> slots(K);
    for (auto& s : slots) {
        NK(nvjpegJpegStateCreate(h, &s.state));
        CK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
        CK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming | cudaEventBlockingSync));
        s.params.resize(batch);
        for (auto& p : s.params) NK(nvjpegDecodeParamsCreate(h, &p));
        CK(cudaMalloc((void**)&s.out, (size_t)batch * max_px * 3));
    }
    std::vector<const unsigned char*> data(batch);
    std::vector<size_t> lens(batch);
    std::vector<nvjpegImage_t> dest(batch);
    size_t next = 0;
    double submit = 0;
    long images = 0;
    int failed = 0;
    Clock::time_point t0 = Clock::now();
    for (int r = 0; r < rounds + K; r++) {
        if (r == K) {  // the first K batches warm up every slot
            for (auto& s : slots) CK(cudaStreamSynchronize(s.stream));
            t0 = Clock::now();
            submit = 0;
            images = 0;
        }
        HwSlot& s = slots[r % K];
        if (s.used) CK(cudaEventSynchronize(s.done));
        s.used = true;
        auto a = Clock::now();
        for (int i = 0; i < batch; i++) {
            Jpeg& j = imgs[next++ % imgs.size()];
            data[i] = j.data;
            lens[i] = j.len;
            int w = roi ? j.roi[2] : j.w, hh = roi ? j.roi[3] : j.h;
            set_dest(dest[i], s.out + (size_t)i * max_px * 3, w, hh, fmt);
            NK(nvjpegDecodeParamsSetOutputFormat(s.params[i], fmt));
            if (roi)
                NK(nvjpegDecodeParamsSetROI(s.params[i], j.roi[0], j.roi[1], j.roi[2], j.roi[3]));
            else
                NK(nvjpegDecodeParamsSetROI(s.params[i], 0, 0, -1, -1));
        }
        nvjpegStatus_t st = nvjpegDecodeBatchedInitialize(h, s.state, batch, 1, fmt);
        if (st == NVJPEG_STATUS_SUCCESS)
            st = nvjpegDecodeBatchedEx(h, s.state, data.data(), lens.data(), dest.data(),
                                       s.params.data(), s.stream);
        if (st != NVJPEG_STATUS_SUCCESS) {
            failed = st;
            break;
        }
        CK(cudaEventRecord(s.done, s.stream));
        submit += secs(a, Clock::now());
        images += batch;
    }
    for (auto& s : slots) CK(cudaStreamSynchronize(s.stream));
    double wall = secs(t0, Clock::now());
    destroy_slots(slots);
    if (failed) {
        printf("  (failed: nvjpeg status %d)\n", failed);
        return {0, 0, wall, 0};
    }
    return {images / wall, 1e6 * submit / images, wall, images};
}

// The CUDA hybrid decoder (decoupled phases), T host threads, each with its own states,
// buffers and stream, two images in flight per thread.
static double run_hybrid(nvjpegHandle_t h, std::vector<Jpeg>& imgs, int T, int per_thread,
                         nvjpegOutputFormat_t fmt, bool roi, size_t max_px, double* host_us) {
    std::atomic<long> host_ns{0};
    std::atomic<long> failures{0};
    auto worker = [&](int t) {
        nvjpegJpegDecoder_t dec[2];
        NK(nvjpegDecoderCreate(h, NVJPEG_BACKEND_HYBRID, &dec[0]));
        NK(nvjpegDecoderCreate(h, NVJPEG_BACKEND_GPU_HYBRID, &dec[1]));
        struct Buf {
            nvjpegJpegState_t st[2];
            nvjpegBufferPinned_t pin;
            nvjpegBufferDevice_t devb;
            nvjpegJpegStream_t js;
            nvjpegDecodeParams_t p;
            cudaEvent_t ev;
            unsigned char* out;
            bool used = false;
        } b[2];
        cudaStream_t st;
        CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
        for (auto& x : b) {
            for (int k = 0; k < 2; k++) NK(nvjpegDecoderStateCreate(h, dec[k], &x.st[k]));
            NK(nvjpegBufferPinnedCreate(h, nullptr, &x.pin));
            NK(nvjpegBufferDeviceCreate(h, nullptr, &x.devb));
            NK(nvjpegJpegStreamCreate(h, &x.js));
            NK(nvjpegDecodeParamsCreate(h, &x.p));
            CK(cudaEventCreateWithFlags(&x.ev, cudaEventDisableTiming | cudaEventBlockingSync));
            CK(cudaMalloc((void**)&x.out, max_px * 3));
        }
        long ns = 0;
        for (int i = 0; i < per_thread; i++) {
            Jpeg& j = imgs[(size_t)(t * 7919 + i) % imgs.size()];
            Buf& x = b[i & 1];
            if (x.used) CK(cudaEventSynchronize(x.ev));
            x.used = true;
            auto a = Clock::now();
            int which = (long)j.w * j.h >= 1000000 ? 1 : 0;
            NK(nvjpegDecodeParamsSetOutputFormat(x.p, fmt));
            if (roi)
                NK(nvjpegDecodeParamsSetROI(x.p, j.roi[0], j.roi[1], j.roi[2], j.roi[3]));
            else
                NK(nvjpegDecodeParamsSetROI(x.p, 0, 0, -1, -1));
            nvjpegImage_t d;
            int w = roi ? j.roi[2] : j.w, hh = roi ? j.roi[3] : j.h;
            set_dest(d, x.out, w, hh, fmt);
            nvjpegStatus_t r = nvjpegJpegStreamParse(h, j.data, j.len, 0, 0, x.js);
            if (!r) r = nvjpegStateAttachPinnedBuffer(x.st[which], x.pin);
            if (!r) r = nvjpegStateAttachDeviceBuffer(x.st[which], x.devb);
            if (!r) r = nvjpegDecodeJpegHost(h, dec[which], x.st[which], x.p, x.js);
            if (!r) r = nvjpegDecodeJpegTransferToDevice(h, dec[which], x.st[which], x.js, st);
            if (!r) r = nvjpegDecodeJpegDevice(h, dec[which], x.st[which], &d, st);
            if (r) failures++;
            CK(cudaEventRecord(x.ev, st));
            ns += (long)(secs(a, Clock::now()) * 1e9);
        }
        CK(cudaStreamSynchronize(st));
        host_ns += ns;
        for (auto& x : b) {
            for (int k = 0; k < 2; k++) nvjpegJpegStateDestroy(x.st[k]);
            nvjpegBufferPinnedDestroy(x.pin);
            nvjpegBufferDeviceDestroy(x.devb);
            nvjpegJpegStreamDestroy(x.js);
            nvjpegDecodeParamsDestroy(x.p);
            cudaEventDestroy(x.ev);
            cudaFree(x.out);
        }
        cudaStreamDestroy(st);
        nvjpegDecoderDestroy(dec[0]);
        nvjpegDecoderDestroy(dec[1]);
    };
    // Warm-up on one thread, then the timed run.
    worker(0);
    host_ns = 0;
    auto t0 = Clock::now();
    std::vector<std::thread> th;
    for (int t = 0; t < T; t++) th.emplace_back(worker, t);
    for (auto& x : th) x.join();
    double wall = secs(t0, Clock::now());
    *host_us = host_ns.load() / 1e3 / ((double)T * per_thread);
    if (failures) printf("  (%ld hybrid decodes failed)\n", failures.load());
    return T * per_thread / wall;
}

// T threads, each submitting its own share with K slots of its own; one handle per thread
// (own_handle) or one shared. Returns images/s; cpu_frac = CPU time in submits / wall time
// in submits (1: the call computes; near 0: it waits).
static double run_hw_mt(std::vector<nvjpegHandle_t>& hs, std::vector<Jpeg>& imgs, int batch, int K,
                        int T, int batches_per_thread, nvjpegOutputFormat_t fmt, size_t max_px,
                        double* submit_us, double* cpu_frac) {
    std::atomic<long> sub_ns{0}, cpu_ns{0};
    std::atomic<int> failed{0};
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    auto worker = [&](int t) {
        nvjpegHandle_t h = hs[t % hs.size()];
        std::vector<HwSlot> slots(K);
        for (auto& s : slots) {
            NK(nvjpegJpegStateCreate(h, &s.state));
            CK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
            CK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming | cudaEventBlockingSync));
            s.params.resize(batch);
            for (auto& p : s.params) NK(nvjpegDecodeParamsCreate(h, &p));
            CK(cudaMalloc((void**)&s.out, (size_t)batch * max_px * 3));
        }
        std::vector<const unsigned char*> data(batch);
        std::vector<size_t> lens(batch);
        std::vector<nvjpegImage_t> dest(batch);
        size_t next = (size_t)t * 977;
        long my_sub = 0, my_cpu = 0;
        for (int r = 0; r < batches_per_thread + K; r++) {
            if (r == K) {
                for (auto& s : slots) CK(cudaStreamSynchronize(s.stream));
                ready++;
                while (!go) std::this_thread::yield();
                my_sub = my_cpu = 0;
            }
            HwSlot& s = slots[r % K];
            if (s.used) CK(cudaEventSynchronize(s.done));
            s.used = true;
            auto a = Clock::now();
            double c0 = thread_cpu();
            for (int i = 0; i < batch; i++) {
                Jpeg& j = imgs[next++ % imgs.size()];
                data[i] = j.data;
                lens[i] = j.len;
                set_dest(dest[i], s.out + (size_t)i * max_px * 3, j.roi[2], j.roi[3], fmt);
                NK(nvjpegDecodeParamsSetOutputFormat(s.params[i], fmt));
                NK(nvjpegDecodeParamsSetROI(s.params[i], j.roi[0], j.roi[1], j.roi[2], j.roi[3]));
            }
            nvjpegStatus_t st = nvjpegDecodeBatchedInitialize(h, s.state, batch, 1, fmt);
            if (!st)
                st = nvjpegDecodeBatchedEx(h, s.state, data.data(), lens.data(), dest.data(),
                                           s.params.data(), s.stream);
            if (st) {
                failed = st;
                break;
            }
            CK(cudaEventRecord(s.done, s.stream));
            my_cpu += (long)((thread_cpu() - c0) * 1e9);
            my_sub += (long)(secs(a, Clock::now()) * 1e9);
        }
        for (auto& s : slots) CK(cudaStreamSynchronize(s.stream));
        sub_ns += my_sub;
        cpu_ns += my_cpu;
        destroy_slots(slots);
    };
    std::vector<std::thread> th;
    for (int t = 0; t < T; t++) th.emplace_back(worker, t);
    while (ready < T && !failed) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    auto t0 = Clock::now();
    go = true;
    for (auto& x : th) x.join();
    double wall = secs(t0, Clock::now());
    if (failed) {
        printf("  (failed: nvjpeg status %d)\n", failed.load());
        return 0;
    }
    long n = (long)T * batches_per_thread * batch;
    *submit_us = sub_ns / 1e3 / n;
    *cpu_frac = sub_ns ? (double)cpu_ns / sub_ns : 0;
    return n / wall;
}

static void dump(nvjpegHandle_t hw, const Jpeg& j, const std::string& dir, nvjpegOutputFormat_t fmt,
                 const int* roi, const char* tag) {
    nvjpegJpegState_t st;
    NK(nvjpegJpegStateCreate(hw, &st));
    nvjpegDecodeParams_t p;
    NK(nvjpegDecodeParamsCreate(hw, &p));
    NK(nvjpegDecodeParamsSetOutputFormat(p, fmt));
    int w = j.w, h = j.h;
    if (roi) {
        NK(nvjpegDecodeParamsSetROI(p, roi[0], roi[1], roi[2], roi[3]));
        w = roi[2];
        h = roi[3];
    } else {
        NK(nvjpegDecodeParamsSetROI(p, 0, 0, -1, -1));
    }
    // Generous planes: pitch = w + 64, and the buffer poisoned so unwritten bytes show.
    int pitch = (fmt == NVJPEG_OUTPUT_RGBI ? 3 * w : w) + 64;
    size_t plane = (size_t)pitch * (h + 16);
    unsigned char* out;
    CK(cudaMalloc((void**)&out, plane * 3));
    CK(cudaMemset(out, 0xA5, plane * 3));
    nvjpegImage_t d;
    memset(&d, 0, sizeof d);
    int planes = fmt == NVJPEG_OUTPUT_RGBI ? 1 : 3;
    for (int c = 0; c < planes; c++) {
        d.channel[c] = out + c * plane;
        d.pitch[c] = pitch;
    }
    const unsigned char* data = j.data;
    size_t len = j.len;
    nvjpegStatus_t s = nvjpegDecodeBatchedInitialize(hw, st, 1, 1, fmt);
    if (!s) s = nvjpegDecodeBatchedEx(hw, st, &data, &len, &d, &p, 0);
    CK(cudaDeviceSynchronize());
    std::vector<unsigned char> host(plane * 3);
    CK(cudaMemcpy(host.data(), out, plane * 3, cudaMemcpyDeviceToHost));
    std::string base = dir + "/" + j.name + "." + tag;
    FILE* f = fopen((base + ".bin").c_str(), "wb");
    fwrite(host.data(), 1, host.size(), f);
    fclose(f);
    f = fopen((base + ".txt").c_str(), "w");
    fprintf(f, "status %d fmt %s image %dx%d css %d roi %d %d %d %d pitch %d plane_rows %d planes %d\n",
            (int)s, fmt_name(fmt), j.w, j.h, (int)j.css, roi ? roi[0] : 0, roi ? roi[1] : 0, w, h,
            pitch, h + 16, planes);
    fclose(f);
    cudaFree(out);
    nvjpegDecodeParamsDestroy(p);
    nvjpegJpegStateDestroy(st);
}

int main(int argc, char** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: probe DIR OUT [--batch B] [--images N] [--quick] [--v2 | --contend] [--blocking-sync]\n"
                        "       probe DIR OUT --solo [--interp] --start-at UNIX_SECONDS --seconds S [--batch B] [--cpu-threads N]\n"
                        "             [--threads N [--own-contexts]]\n");
        return 2;
    }
    std::string dir = argv[1], out = argv[2];
    int batch = 256;
    size_t want = 0;
    bool quick = false, v2 = false, contention = false, blocking_sync = false;
    bool solo_mode = false, interp = false;
    double start_at = 0, seconds = 3;
    int cpu_threads = 1, threads = 1;
    bool own_contexts = false;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        if (!strcmp(argv[i], "--v2")) v2 = true;
        if (!strcmp(argv[i], "--contend")) contention = true;
        if (!strcmp(argv[i], "--blocking-sync")) blocking_sync = true;
        if (!strcmp(argv[i], "--solo")) solo_mode = true;
        if (!strcmp(argv[i], "--interp")) interp = true;
        if (i + 1 < argc && !strcmp(argv[i], "--start-at")) start_at = atof(argv[i + 1]);
        if (i + 1 < argc && !strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        if (i + 1 < argc && !strcmp(argv[i], "--cpu-threads")) cpu_threads = atoi(argv[i + 1]);
        if (i + 1 < argc && !strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--own-contexts")) own_contexts = true;
        if (i + 1 < argc && !strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
        if (i + 1 < argc && !strcmp(argv[i], "--images")) want = atol(argv[i + 1]);
    }
    std::vector<std::string> names;
    if (DIR* d = opendir(dir.c_str())) {
        while (dirent* e = readdir(d)) {
            std::string n = e->d_name;
            if (n.size() > 4 && (n.substr(n.size() - 4) == ".jpg" || n.substr(n.size() - 5) == ".jpeg" ||
                                 n.substr(n.size() - 5) == ".JPEG"))
                names.push_back(n);
        }
        closedir(d);
    }
    std::sort(names.begin(), names.end());
    std::vector<std::vector<unsigned char>> files;
    size_t total = 0;
    for (auto& n : names) {
        files.push_back(read_file(dir + "/" + n));
        total += files.back().size();
    }
    // Before the context exists: its host waits sleep rather than spin.
    if (blocking_sync) CK(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
    unsigned char* pinned;
    CK(cudaMallocHost((void**)&pinned, total));
    nvjpegHandle_t hw, hyb;
    NK(nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, 0, &hw));
    nvjpegHandle_t hw_interp;
    NK(nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION,
                      &hw_interp));
    NK(nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT, nullptr, nullptr, 0, &hyb));
    unsigned engines = 0, cores = 0;
    NK(nvjpegGetHardwareDecoderInfo(hw, &engines, &cores));
    int ver[3];
    nvjpegGetProperty(MAJOR_VERSION, &ver[0]);
    nvjpegGetProperty(MINOR_VERSION, &ver[1]);
    nvjpegGetProperty(PATCH_LEVEL, &ver[2]);
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("probe: %s, nvJPEG %d.%d.%d, %u engines x %u cores, %zu files %.1f MB\n", prop.name, ver[0],
           ver[1], ver[2], engines, cores, names.size(), total / 1e6);

    // Parse every file once: dimensions, sampling, hardware support (timed per image).
    std::vector<Jpeg> all, hwok;
    std::mt19937 rng(1);
    nvjpegJpegStream_t js;
    NK(nvjpegJpegStreamCreate(hw, &js));
    nvjpegDecodeParams_t chk;
    NK(nvjpegDecodeParamsCreate(hw, &chk));
    NK(nvjpegDecodeParamsSetOutputFormat(chk, NVJPEG_OUTPUT_YUV));
    size_t at = 0, max_px = 0;
    double t_header = 0, t_supported = 0, t_parse_full = 0;
    int unsupported = 0;
    for (size_t i = 0; i < files.size(); i++) {
        memcpy(pinned + at, files[i].data(), files[i].size());
        Jpeg j{names[i], pinned + at, files[i].size(), 0, 0, 0, NVJPEG_CSS_UNKNOWN, {0, 0, 0, 0}};
        at += files[i].size();
        auto a = Clock::now();
        if (nvjpegJpegStreamParseHeader(hw, j.data, j.len, js) != NVJPEG_STATUS_SUCCESS) {
            unsupported++;
            continue;
        }
        auto b = Clock::now();
        unsigned w, h, c;
        nvjpegJpegStreamGetFrameDimensions(js, &w, &h);
        nvjpegJpegStreamGetComponentsNum(js, &c);
        nvjpegJpegStreamGetChromaSubsampling(js, &j.css);
        j.w = w;
        j.h = h;
        j.comps = c;
        draw_roi(rng, j.w, j.h, j.roi);
        int ok = 0;
        auto c0 = Clock::now();
        nvjpegStatus_t s = nvjpegDecodeBatchedSupportedEx(hw, js, chk, &ok);
        auto c1 = Clock::now();
        nvjpegJpegStreamParse(hw, j.data, j.len, 0, 0, js);
        auto c2 = Clock::now();
        t_header += secs(a, b);
        t_supported += secs(c0, c1);
        t_parse_full += secs(c1, c2);
        max_px = std::max(max_px, (size_t)j.w * j.h);
        all.push_back(j);
        // is_supported: 0 means supported.
        if (s == NVJPEG_STATUS_SUCCESS && ok == 0 && j.comps == 3)
            hwok.push_back(j);
        else
            unsupported++;
    }
    double n = (double)all.size();
    printf("host per image: parse header %.2f us, batched supported check %.2f us, full stream parse %.2f us; "
           "%zu of %zu taken by the engines (3 components)\n",
           1e6 * t_header / n, 1e6 * t_supported / n, 1e6 * t_parse_full / n, hwok.size(), all.size());
    double mp = 0;
    for (auto& j : hwok) mp += (double)j.w * j.h / 1e6;
    printf("mean image %.3f MP\n", mp / hwok.size());
    if (want == 0) want = 4000;
    if (solo_mode && (threads > 1 || own_contexts))
        return solo_threads(hwok, max_px, batch, start_at, seconds, interp, cpu_threads, std::max(threads, 1),
                            own_contexts);
    if (solo_mode)
        return solo(interp ? hw_interp : hw, hwok, max_px, batch, start_at, seconds, interp, cpu_threads,
                    interp ? "interpolating" : "repeated chroma");
    if (contention) return contend(hw, hw_interp, hwok, max_px, std::min(batch, 64));
    if (v2) {
        printf("\n%-5s %-8s %-6s %2s %2s %6s %10s %10s %8s %8s\n", "fmt", "alloc", "handle", "T", "K",
               "batch", "img/s", "submit/img", "cpu%", "allocs");
        struct C2 { nvjpegOutputFormat_t f; Alloc a; bool own; int T; int K; int b; unsigned flags; };
        std::vector<C2> c2;
        for (nvjpegOutputFormat_t f : {NVJPEG_OUTPUT_RGBI, NVJPEG_OUTPUT_YUV})
            for (Alloc a : {A_DEFAULT, A_POOLS, A_ASYNC})
                for (int T : {1, 2, 4}) c2.push_back({f, a, true, T, 2, batch, 0});
        c2.push_back({NVJPEG_OUTPUT_RGBI, A_DEFAULT, false, 4, 2, batch, 0});
        c2.push_back({NVJPEG_OUTPUT_RGBI, A_DEFAULT, true, 8, 2, batch, 0});
        c2.push_back({NVJPEG_OUTPUT_RGBI, A_DEFAULT, true, 2, 2, 64, 0});
        c2.push_back({NVJPEG_OUTPUT_RGBI, A_DEFAULT, true, 4, 2, 64, 0});
        c2.push_back({NVJPEG_OUTPUT_RGBI, A_DEFAULT, true, 2, 2, 128, 0});
        c2.push_back({NVJPEG_OUTPUT_RGBI, A_DEFAULT, true, 1, 2, batch, NVJPEG_FLAGS_HW_DECODE_NO_PIPELINE});
        c2.push_back({NVJPEG_OUTPUT_RGBI, A_DEFAULT, true, 2, 2, batch, NVJPEG_FLAGS_HW_DECODE_NO_PIPELINE});
        c2.push_back({NVJPEG_OUTPUT_RGBI, A_ASYNC, true, 2, 2, batch, NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION});
        c2.push_back({NVJPEG_OUTPUT_NV12, A_ASYNC, true, 2, 2, batch, 0});
        for (auto& c : c2) {
            if (quick && (c.a != A_DEFAULT || c.flags || c.b != batch || !c.own)) continue;
            std::vector<nvjpegHandle_t> hs;
            for (int t = 0; t < (c.own ? c.T : 1); t++) hs.push_back(make_hw(c.a, c.flags));
            long a0 = g_dev_allocs;
            double sub = 0, frac = 0;
            int per = std::max(3, (int)(want / ((size_t)c.b * c.T)));
            double r = run_hw_mt(hs, hwok, c.b, c.K, c.T, per, c.f, max_px, &sub, &frac);
            char tag[64];
            snprintf(tag, sizeof tag, "%s%s%s", fmt_name(c.f),
                     c.flags & NVJPEG_FLAGS_HW_DECODE_NO_PIPELINE ? "+nopipe" : "",
                     c.flags & NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION ? "+interp" : "");
            printf("%-12s %-8s %-6s %2d %2d %6d %10.0f %10.1f %7.0f%% %8ld\n", tag, alloc_name(c.a),
                   c.own ? "own" : "shared", c.T, c.K, c.b, r, sub, 100 * frac, (long)(g_dev_allocs - a0));
            fflush(stdout);
            for (auto h : hs) nvjpegDestroy(h);
        }
        if (quick) return 0;
        // Small dumps: three images (one per sampling kind), an odd ROI, YUV and RGBI, plus
        // RGBI with interpolation: enough to check the planes' layout and nvJPEG's colour
        // conversion against our decoder.
        std::string dd = out + "/dumps";
        std::string mk = "mkdir -p '" + dd + "'";
        if (system(mk.c_str()) != 0) return 1;
        std::vector<int> seen(16, 0);
        int taken = 0;
        for (auto& j : hwok) {
            int k = (int)j.css + 1;
            if (k < 0 || k >= 16 || seen[k] >= 1 || taken >= 4) continue;
            seen[k]++;
            taken++;
            int roi[4] = {std::min(j.w - 8, 37), std::min(j.h - 8, 23), std::min(j.w - 37, 101),
                          std::min(j.h - 23, 77)};
            dump(hw, j, dd, NVJPEG_OUTPUT_YUV, nullptr, "yuv");
            dump(hw, j, dd, NVJPEG_OUTPUT_YUV, roi, "yuv-roi");
            dump(hw, j, dd, NVJPEG_OUTPUT_RGBI, nullptr, "rgbi");
            dump(hw, j, dd, NVJPEG_OUTPUT_RGBI, roi, "rgbi-roi");
            dump(hw_interp, j, dd, NVJPEG_OUTPUT_RGBI, nullptr, "rgbi-interp");
        }
        printf("dumps in %s\n", dd.c_str());
        return 0;
    }
    printf("\n%-5s %-7s %-5s %2s %6s  %10s %12s\n", "fmt", "interp", "roi", "K", "batch", "img/s",
           "submit us/img");
    struct Cfg { nvjpegOutputFormat_t f; bool interp; bool roi; int K; int b; };
    std::vector<Cfg> cfgs;
    if (quick) {
        cfgs.push_back({NVJPEG_OUTPUT_RGBI, true, true, 1, batch});
        cfgs.push_back({NVJPEG_OUTPUT_RGBI, true, true, 3, batch});
        cfgs.push_back({NVJPEG_OUTPUT_RGBI, false, true, 3, batch});
        cfgs.push_back({NVJPEG_OUTPUT_YUV, false, true, 1, batch});
        cfgs.push_back({NVJPEG_OUTPUT_YUV, false, true, 3, batch});
        cfgs.push_back({NVJPEG_OUTPUT_YUV, false, false, 3, batch});
    } else {
        for (nvjpegOutputFormat_t f : {NVJPEG_OUTPUT_RGBI, NVJPEG_OUTPUT_YUV})
            for (bool interp : {false, true})
                for (bool roi : {false, true})
                    for (int K : {1, 3}) cfgs.push_back({f, interp, roi, K, batch});
        for (int b : {32, 64, 128, 512}) cfgs.push_back({NVJPEG_OUTPUT_YUV, false, true, 3, b});
        cfgs.push_back({NVJPEG_OUTPUT_YUV, false, true, 2, batch});
        cfgs.push_back({NVJPEG_OUTPUT_YUV, false, true, 6, batch});
        cfgs.push_back({NVJPEG_OUTPUT_NV12, false, true, 3, batch});
    }
    for (auto& c : cfgs) {
        HwResult r = run_hw(c.interp ? hw_interp : hw, hwok, c.b, c.K, std::max(4, (int)(want / c.b)), c.f,
                            c.roi, max_px);
        printf("%-5s %-7s %-5s %2d %6d  %10.0f %12.2f\n", fmt_name(c.f), c.interp ? "on" : "off",
               c.roi ? "crop" : "whole", c.K, c.b, r.imgs_per_s, r.submit_us_per_img);
        fflush(stdout);
    }

    printf("\nCUDA hybrid decoder (decoupled phases), images/s and host us per image:\n");
    for (int T : quick ? std::vector<int>{16} : std::vector<int>{1, 4, 8, 16}) {
        double host_us = 0;
        double rate = run_hybrid(hyb, hwok, T, 200, NVJPEG_OUTPUT_YUV, true, max_px, &host_us);
        printf("  threads %2d  YUV crop  %8.0f img/s   host %.1f us/img\n", T, rate, host_us);
        fflush(stdout);
    }
    if (!quick) {
        double host_us = 0;
        double rate = run_hybrid(hyb, hwok, 8, 200, NVJPEG_OUTPUT_RGBI, true, max_px, &host_us);
        printf("  threads  8  RGBI crop %8.0f img/s   host %.1f us/img\n", rate, host_us);
    }

    if (quick) return 0;
    // Dumps: the first images of each sampling kind, YUV and RGBI, whole and with an odd ROI.
    std::string dd = out + "/dumps";
    std::string mk = "mkdir -p '" + dd + "'";
    if (system(mk.c_str()) != 0) return 1;
    std::vector<int> seen(16, 0);
    for (auto& j : hwok) {
        int k = (int)j.css + 1;
        if (k < 0 || k >= 16 || seen[k] >= 2) continue;
        seen[k]++;
        int roi[4] = {std::min(j.w - 8, 37), std::min(j.h - 8, 23), std::min(j.w - 37, 101),
                      std::min(j.h - 23, 77)};
        for (nvjpegOutputFormat_t f : {NVJPEG_OUTPUT_YUV, NVJPEG_OUTPUT_RGBI}) {
            dump(hw, j, dd, f, nullptr, f == NVJPEG_OUTPUT_YUV ? "yuv" : "rgbi");
            dump(hw, j, dd, f, roi, f == NVJPEG_OUTPUT_YUV ? "yuv-roi" : "rgbi-roi");
        }
        dump(hw_interp, j, dd, NVJPEG_OUTPUT_RGBI, nullptr, "rgbi-interp");
    }
    printf("dumps in %s\n", dd.c_str());
    return 0;
}
