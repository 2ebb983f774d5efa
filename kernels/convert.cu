// Normalize ((x - mean) * inv_std in f32, no contraction) and cast between u8, f16 and f32.
#include "common/desc.cuh"

extern "C" __global__ void convert(const ConvertDesc* descs, u32 n) {
    u32 s = blockIdx.y;
    if (s >= n) return;
    const ConvertDesc d = descs[s];
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < d.count; i += gridDim.x * blockDim.x) {
        float v = load_elem((const void*)d.src, i, d.src_dtype);
        if (d.flags & CONV_NORMALIZE) {
            u32 ch = 0;
            if (!(d.flags & CONV_UNIFORM)) ch = (d.flags & CONV_CHW) ? i / d.plane : i % d.channels;
            v = __fmul_rn(__fsub_rn(v, d.mean[ch]), d.inv_std[ch]);
        }
        store_elem((void*)d.dst, i, d.dst_dtype, v);
    }
}
