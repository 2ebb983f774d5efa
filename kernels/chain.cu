// The fused chain (src/cuda/chain/), launched once per batch: grid.x strides over the output
// tiles of a sample (common/resample.cuh), grid.y over samples.
#include "common/resample.cuh"

extern "C" __global__ void fused_crop_resize_normalize(const FusedDesc* descs, const i32* taps,
                                                       u32 n) {
    RESAMPLE_SCRATCH(scratch);
    u32 s = blockIdx.y;
    if (s >= n) return;
    const FusedDesc d = descs[s];
    resample_sample(d, taps, scratch);
}
