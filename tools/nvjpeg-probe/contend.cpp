// The probe's contention mode (`probe DIR OUT --contend`): what nvJPEG's batched hardware call
// waits for when other work keeps the GPU busy. On an H200 the call took 55-60 us an image
// alone but 250-285 beside a training loop or our own kernels, its thread busy all along
// (docs/performance.md); the cause decides the cure:
//   - it waits for every stream's work (a device-wide synchronisation): fewer, larger calls;
//   - it waits for the legacy default stream (PyTorch's): a training loop on its own stream;
//   - nvJPEG's own kernels wait for SMs and the call waits for them: nothing a caller can
//     queue differently; more decoders beside the engines.
// Each row launches a kernel that spins for SPIN_MS on one stream (one block, or every SM
// full), then times the call (wall and the thread's CPU) and the decode's completion (an
// event on the decode stream), five rounds, medians. The kernel comes from PTX through the
// driver API (libcuda.so.1, loaded at run time): no CUDA compiler needed to build the probe.
#include "probe.h"

#include <time.h>

#include <algorithm>
#include <chrono>

namespace {

using CUresult = int;
struct CUmod_st;
struct CUfunc_st;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using LoadData = CUresult (*)(CUmodule*, const void*);
using GetFunction = CUresult (*)(CUfunction*, CUmodule, const char*);
using Launch = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, cudaStream_t, void**, void**);

// Spins until `spin_ns` of the GPU's global timer have passed.
const char* kSpinPtx = R"(
.version 7.0
.target sm_70
.address_size 64
.visible .entry spin(.param .u64 spin_ns)
{
    .reg .pred %p<2>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [spin_ns];
    mov.u64 %rd2, %globaltimer;
SPIN:
    mov.u64 %rd3, %globaltimer;
    sub.s64 %rd4, %rd3, %rd2;
    setp.lt.u64 %p1, %rd4, %rd1;
    @%p1 bra SPIN;
    ret;
}
)";

constexpr double SPIN_MS = 20.0;
constexpr int ROUNDS = 5;

struct Spin {
    Launch launch = nullptr;
    CUfunction f = nullptr;
    int sms = 0;
};

double wall_now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double cpu_now() {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

bool load_spin(Spin& s) {
    void* lib = libcuda("contend");
    if (!lib) return false;
    auto load = reinterpret_cast<LoadData>(dlsym(lib, "cuModuleLoadData"));
    auto get = reinterpret_cast<GetFunction>(dlsym(lib, "cuModuleGetFunction"));
    s.launch = reinterpret_cast<Launch>(dlsym(lib, "cuLaunchKernel"));
    if (!load || !get || !s.launch) {
        fprintf(stderr, "contend: the driver lacks cuModuleLoadData/cuModuleGetFunction/cuLaunchKernel\n");
        return false;
    }
    CUmodule m = nullptr;
    if (CUresult r = load(&m, kSpinPtx)) {
        fprintf(stderr, "contend: cuModuleLoadData of the spin kernel: CUresult %d\n", r);
        return false;
    }
    if (CUresult r = get(&s.f, m, "spin")) {
        fprintf(stderr, "contend: cuModuleGetFunction(spin): CUresult %d\n", r);
        return false;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    s.sms = prop.multiProcessorCount;
    return true;
}

// One block of 32 threads, or two blocks of 1024 on every SM (every thread slot of a Hopper SM).
bool spin_on(const Spin& s, cudaStream_t stream, bool every_sm) {
    unsigned long long ns = (unsigned long long)(SPIN_MS * 1e6);
    void* args[] = {&ns};
    unsigned blocks = every_sm ? 2 * s.sms : 1, threads = every_sm ? 1024 : 32;
    CUresult r = s.launch(s.f, blocks, 1, 1, threads, 1, 1, 0, stream, args, nullptr);
    if (r) fprintf(stderr, "contend: cuLaunchKernel: CUresult %d\n", r);
    return r == 0;
}

struct Times {
    double call_ms, cpu_ms, done_ms;
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

struct Decoder {
    nvjpegHandle_t h;
    nvjpegJpegState_t state;
    std::vector<nvjpegDecodeParams_t> params;
    unsigned char* out;
    size_t max_px;
    int batch;
    size_t next = 0;
};

// One batched hardware call of `d.batch` images on `stream`: its wall and CPU time, and the
// time until an event recorded after it on `stream` completes.
Times decode_once(Decoder& d, std::vector<Jpeg>& imgs, cudaStream_t stream, cudaEvent_t ev) {
    std::vector<const unsigned char*> data(d.batch);
    std::vector<size_t> lens(d.batch);
    std::vector<nvjpegImage_t> dest(d.batch);
    for (int i = 0; i < d.batch; i++) {
        Jpeg& j = imgs[d.next++ % imgs.size()];
        data[i] = j.data;
        lens[i] = j.len;
        dest[i] = nvjpegImage_t{};
        dest[i].channel[0] = d.out + (size_t)i * d.max_px * 3;
        dest[i].pitch[0] = 3 * j.w;
    }
    double t0 = wall_now(), c0 = cpu_now();
    NK(nvjpegDecodeBatchedInitialize(d.h, d.state, d.batch, 1, NVJPEG_OUTPUT_RGBI));
    NK(nvjpegDecodeBatchedEx(d.h, d.state, data.data(), lens.data(), dest.data(), d.params.data(), stream));
    double t1 = wall_now(), c1 = cpu_now();
    CK(cudaEventRecord(ev, stream));
    CK(cudaEventSynchronize(ev));
    double t2 = wall_now();
    return {1e3 * (t1 - t0), 1e3 * (c1 - c0), 1e3 * (t2 - t0)};
}

}  // namespace

int contend(nvjpegHandle_t hw, nvjpegHandle_t hw_interp, std::vector<Jpeg>& imgs, size_t max_px, int batch) {
    Spin spin;
    if (imgs.empty() || !load_spin(spin)) return 1;
    int lo = 0, hi = 0;
    CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    cudaStream_t decode, top, side, blocking;
    CK(cudaStreamCreateWithFlags(&decode, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithPriority(&top, cudaStreamNonBlocking, hi));
    CK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    CK(cudaStreamCreate(&blocking));
    cudaEvent_t ev;
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    struct Row {
        const char* name;
        cudaStream_t spin_stream;  // where the kernel spins (unused without one)
        bool spins, every_sm;
        bool top_priority;  // the decode on the stream of the greatest priority
    };
    const Row rows[] = {
        {"alone", nullptr, false, false, false},
        {"side stream, 1 block", side, true, false, false},
        {"side stream, every SM", side, true, true, false},
        {"side stream, every SM; decode at top priority", side, true, true, true},
        {"legacy default stream, 1 block", nullptr, true, false, false},
        {"a blocking stream, 1 block", blocking, true, false, false},
        {"the decode's own stream, 1 block", decode, true, false, false},
    };
    printf("\ncontention: %d images a call (RGBI, whole images), a kernel spinning %.0f ms launched just "
           "before it; %d SMs; medians of %d rounds, ms\n",
           batch, SPIN_MS, spin.sms, ROUNDS);
    printf("%-48s %-7s %9s %9s %9s\n", "spinning on", "chroma", "call", "call CPU", "done");
    for (bool interp : {false, true}) {
        Decoder d{interp ? hw_interp : hw, nullptr, std::vector<nvjpegDecodeParams_t>(batch), nullptr, max_px,
                  batch};
        NK(nvjpegJpegStateCreate(d.h, &d.state));
        for (auto& p : d.params) {
            NK(nvjpegDecodeParamsCreate(d.h, &p));
            NK(nvjpegDecodeParamsSetOutputFormat(p, NVJPEG_OUTPUT_RGBI));
            NK(nvjpegDecodeParamsSetROI(p, 0, 0, -1, -1));
        }
        CK(cudaMalloc((void**)&d.out, (size_t)batch * max_px * 3));
        decode_once(d, imgs, decode, ev);  // warm-up: nvJPEG's buffers
        decode_once(d, imgs, top, ev);
        double alone = 0;
        for (const Row& r : rows) {
            std::vector<double> call, cpu, done;
            for (int k = 0; k < ROUNDS; k++) {
                CK(cudaDeviceSynchronize());
                if (r.spins && !spin_on(spin, r.spin_stream, r.every_sm)) return 1;
                Times t = decode_once(d, imgs, r.top_priority ? top : decode, ev);
                call.push_back(t.call_ms);
                cpu.push_back(t.cpu_ms);
                done.push_back(t.done_ms);
            }
            CK(cudaDeviceSynchronize());
            double c = median(call);
            if (!r.spins) alone = c;
            const char* verdict = !r.spins ? ""
                                  : c > alone + SPIN_MS / 2 ? "  <- the call waited for the kernel"
                                  : c > 2 * alone + 1 ? "  <- the call slowed"
                                                       : "";
            printf("%-48s %-7s %9.2f %9.2f %9.2f%s\n", r.name, interp ? "interp" : "nearest", c, median(cpu),
                   median(done), verdict);
            fflush(stdout);
        }
        for (auto& p : d.params) nvjpegDecodeParamsDestroy(p);
        nvjpegJpegStateDestroy(d.state);
        CK(cudaFree(d.out));
    }
    CK(cudaEventDestroy(ev));
    for (cudaStream_t s : {decode, top, side, blocking}) CK(cudaStreamDestroy(s));
    printf("reading: 'call' near %.0f ms on the side stream with 1 block = a device-wide wait; only with every SM "
           "= nvJPEG's kernels waiting for SMs; only on the legacy stream = a legacy-stream synchronisation\n",
           SPIN_MS);
    return 0;
}
