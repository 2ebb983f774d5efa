// Standalone resize of u8 HWC images (the `resize` and `random_resized_crop` operators):
// the fused kernel's resampler with no flip, no normalization and u8 HWC output.
#include "common/resample.cuh"

extern "C" __global__ void resize_u8(const FusedDesc* descs, const i32* taps, u32 n) {
    RESAMPLE_SCRATCH(scratch);
    u32 s = blockIdx.y;
    if (s >= n) return;
    FusedDesc d = descs[s];
    d.flags &= ~(FUSED_FLIP_H | FUSED_FLIP_V | FUSED_NORMALIZE | FUSED_CHW);
    d.out_dtype = DT_U8;
    resample_sample(d, taps, scratch);
}
