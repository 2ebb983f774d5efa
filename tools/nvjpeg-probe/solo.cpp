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
