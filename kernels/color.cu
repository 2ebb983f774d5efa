// Color jitter (brightness, contrast, saturation, hue) of u8 HWC RGB images, in place,
// bit-exact with src/ops/color_jitter: every float operation is an explicit round-to-nearest
// intrinsic, so no multiply-add is ever contracted into an FMA.
//
// The host launches, for each step k = 0..3: `jitter_luma_sum` (only when some sample applies
// contrast at step k: the contrast mean depends on the image as it is at that step), then
// `jitter_step`. Grid: x over pixels, y over samples.
#include "common/desc.cuh"

#define ADJ_BRIGHTNESS 0u
#define ADJ_CONTRAST 1u
#define ADJ_SATURATION 2u
#define ADJ_HUE 3u

__device__ __forceinline__ u32 adj_at(const JitterDesc& d, u32 step) { return (d.order >> (8 * step)) & 255u; }

__device__ __forceinline__ u8 luma(u8 r, u8 g, u8 b) {
    return (u8)(((u32)r * 19595u + (u32)g * 38470u + (u32)b * 7471u + 0x8000u) >> 16);
}

// Pillow's blend: a + alpha * (b - a) in f32, clipped, truncated.
__device__ __forceinline__ u8 blend(u8 a, u8 b, float alpha) {
    float dlt = (float)((int)b - (int)a);
    float t = __fadd_rn((float)a, __fmul_rn(alpha, dlt));
    if (t <= 0.0f) return 0;
    if (t >= 255.0f) return 255;
    return (u8)t;
}

__device__ __forceinline__ void rgb_to_hsv(u8 r, u8 g, u8 b, u8& H, u8& S, u8& V) {
    u8 maxc = r > g ? r : g;
    maxc = maxc > b ? maxc : b;
    u8 minc = r < g ? r : g;
    minc = minc < b ? minc : b;
    V = maxc;
    if (maxc == minc) {
        H = 0;
        S = 0;
        return;
    }
    float cr = (float)(maxc - minc);
    float s = __fdiv_rn(cr, (float)maxc);
    float rc = __fdiv_rn((float)(maxc - r), cr);
    float gc = __fdiv_rn((float)(maxc - g), cr);
    float bc = __fdiv_rn((float)(maxc - b), cr);
    float h;
    if (r == maxc) {
        h = __fsub_rn(bc, gc);
    } else if (g == maxc) {
        h = (float)__dsub_rn(__dadd_rn(2.0, (double)rc), (double)bc);
    } else {
        h = (float)__dsub_rn(__dadd_rn(4.0, (double)gc), (double)rc);
    }
    double y = __dadd_rn(__ddiv_rn((double)h, 6.0), 1.0);
    h = (float)(y >= 1.0 ? __dsub_rn(y, 1.0) : y);
    H = clip8((i32)__dmul_rn((double)h, 255.0));
    S = clip8((i32)__dmul_rn((double)s, 255.0));
}

// C round (half away from zero) of x in [0, 255], clamped.
__device__ __forceinline__ u8 round_half_away(double x) {
    i32 i = (i32)x;
    return clip8(__dsub_rn(x, (double)i) >= 0.5 ? i + 1 : i);
}

__device__ __forceinline__ void hsv_to_rgb(u8 H, u8 S, u8 V, u8& r, u8& g, u8& b) {
    if (S == 0) {
        r = g = b = V;
        return;
    }
    double x = __ddiv_rn(__dmul_rn((double)H, 6.0), 255.0);
    i32 i = (i32)x;
    float f = (float)__dsub_rn(x, (double)i);
    float fs = (float)__ddiv_rn((double)S, 255.0);
    double vf = (double)V;
    u8 p = round_half_away(__dmul_rn(vf, __dsub_rn(1.0, (double)fs)));
    u8 q = round_half_away(__dmul_rn(vf, __dsub_rn(1.0, (double)__fmul_rn(fs, f))));
    u8 t = round_half_away(
        __dmul_rn(vf, __dsub_rn(1.0, __dmul_rn((double)fs, __dsub_rn(1.0, (double)f)))));
    switch (i % 6) {
        case 0: r = V; g = t; b = p; break;
        case 1: r = q; g = V; b = p; break;
        case 2: r = p; g = V; b = t; break;
        case 3: r = p; g = q; b = V; break;
        case 4: r = t; g = p; b = V; break;
        default: r = V; g = p; b = q; break;
    }
}

// Sum of luma over the image of every sample that applies contrast at `step`, into sums[s]
// (zeroed by the host before the launch). Block size must be 256.
extern "C" __global__ void jitter_luma_sum(const JitterDesc* descs, u32 n, u32 step, u64* sums) {
    __shared__ u64 part[256];
    u32 s = blockIdx.y;
    if (s >= n) return;
    const JitterDesc d = descs[s];
    bool active = adj_at(d, step) == ADJ_CONTRAST && (d.enabled & (1u << ADJ_CONTRAST));
    if (!active) return;  // uniform across the block: no thread reaches the barrier
    const u8* px = (const u8*)d.data;
    u64 acc = 0;
    for (u32 p = blockIdx.x * blockDim.x + threadIdx.x; p < d.pixels; p += gridDim.x * blockDim.x)
        acc += luma(px[3 * (u64)p], px[3 * (u64)p + 1], px[3 * (u64)p + 2]);
    part[threadIdx.x] = acc;
    __syncthreads();
    for (u32 w = blockDim.x / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0 && part[0] != 0) atomicAdd(&sums[s], part[0]);
}

extern "C" __global__ void jitter_step(const JitterDesc* descs, u32 n, u32 step, const u64* sums) {
    u32 s = blockIdx.y;
    if (s >= n) return;
    const JitterDesc d = descs[s];
    u32 adj = adj_at(d, step);
    if (adj > 3 || !(d.enabled & (1u << adj))) return;
    u8* px = (u8*)d.data;
    u8 mean = 0;
    if (adj == ADJ_CONTRAST && d.pixels > 0) {
        u64 np = d.pixels;
        mean = (u8)((2 * sums[s] + np) / (2 * np));
    }
    for (u32 p = blockIdx.x * blockDim.x + threadIdx.x; p < d.pixels; p += gridDim.x * blockDim.x) {
        u8* q = px + 3 * (u64)p;
        u8 r = q[0], g = q[1], b = q[2];
        if (adj == ADJ_BRIGHTNESS) {
            r = blend(0, r, d.brightness);
            g = blend(0, g, d.brightness);
            b = blend(0, b, d.brightness);
        } else if (adj == ADJ_CONTRAST) {
            r = blend(mean, r, d.contrast);
            g = blend(mean, g, d.contrast);
            b = blend(mean, b, d.contrast);
        } else if (adj == ADJ_SATURATION) {
            u8 l = luma(r, g, b);
            r = blend(l, r, d.saturation);
            g = blend(l, g, d.saturation);
            b = blend(l, b, d.saturation);
        } else {
            u8 H, S, V;
            rgb_to_hsv(r, g, b, H, S, V);
            hsv_to_rgb((u8)((H + d.hue_shift) & 255u), S, V, r, g, b);
        }
        q[0] = r;
        q[1] = g;
        q[2] = b;
    }
}
