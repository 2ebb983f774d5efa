// The fused chain (src/cuda/chain.rs), launched once per batch: grid.x covers output pixels,
// grid.y samples.
#include "common/resample.cuh"

extern "C" __global__ void fused_crop_resize_normalize(const FusedDesc* descs, const i32* taps,
                                                       u32 n) {
    u32 s = blockIdx.y;
    if (s >= n) return;
    const FusedDesc d = descs[s];
    u32 pixels = d.out_h * d.out_w;
    for (u32 p = blockIdx.x * blockDim.x + threadIdx.x; p < pixels; p += gridDim.x * blockDim.x)
        fused_pixel(d, taps, p);
}
