// Crop/pad with fill, flip and layout change, for 1-, 2- and 4-byte elements (u8, f16, f32).
// Grid: x over the output elements of a sample, y over samples.
#include "common/desc.cuh"

template <typename T>
__device__ __forceinline__ u64 elem_index(bool chw, u32 h, u32 w, u32 c, u32 y, u32 x, u32 ch) {
    return chw ? ((u64)ch * h + y) * w + x : ((u64)y * w + x) * c + ch;
}

// Output element e of d in the output layout (the same layout as the source) -> (y, x, ch).
// 32-bit divisions when the sample has fewer than 2^32 elements (always, within the decode
// limits; a 64-bit division costs several times a 32-bit one), 64-bit ones otherwise.
__device__ __forceinline__ void split(bool chw, u32 h, u32 w, u32 c, u64 e, u32& y, u32& x,
                                      u32& ch) {
    if ((u64)h * w * c <= 0xffffffffull) {
        u32 e32 = (u32)e;
        if (chw) {
            u32 plane = h * w;
            ch = e32 / plane;
            u32 r = e32 - ch * plane;
            y = r / w;
            x = r - y * w;
        } else {
            u32 p = e32 / c;
            ch = e32 - p * c;
            y = p / w;
            x = p - y * w;
        }
        return;
    }
    if (chw) {
        u64 plane = (u64)h * w;
        ch = (u32)(e / plane);
        u64 r = e - (u64)ch * plane;
        y = (u32)(r / w);
        x = (u32)(r - (u64)y * w);
    } else {
        u64 p = e / c;
        ch = (u32)(e - p * c);
        y = (u32)(p / w);
        x = (u32)(p - (u64)y * w);
    }
}

template <typename T>
__device__ void crop_fill_body(const GeomDesc* descs, u32 n) {
    u32 s = blockIdx.y;
    if (s >= n) return;
    const GeomDesc d = descs[s];
    bool chw = (d.flags & GEOM_CHW) != 0;
    u64 total = (u64)d.out_h * d.out_w * d.channels;
    for (u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (u64)gridDim.x * blockDim.x) {
        u32 y, x, ch;
        split(chw, d.out_h, d.out_w, d.channels, e, y, x, ch);
        long long sy = (long long)d.top + y;
        long long sx = (long long)d.left + x;
        T v;
        if (sy < 0 || sx < 0 || sy >= d.src_h || sx >= d.src_w) {
            v = (T)d.fill[ch < 4 ? ch : 0];
        } else {
            v = ((const T*)d.src)[elem_index<T>(chw, d.src_h, d.src_w, d.channels, (u32)sy, (u32)sx, ch)];
        }
        ((T*)d.dst)[e] = v;
    }
}

template <typename T>
__device__ void flip_body(const GeomDesc* descs, u32 n) {
    u32 s = blockIdx.y;
    if (s >= n) return;
    const GeomDesc d = descs[s];
    bool chw = (d.flags & GEOM_CHW) != 0;
    u64 total = (u64)d.out_h * d.out_w * d.channels;
    for (u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (u64)gridDim.x * blockDim.x) {
        u32 y, x, ch;
        split(chw, d.out_h, d.out_w, d.channels, e, y, x, ch);
        u32 sy = (d.flags & GEOM_FLIP_V) ? d.src_h - 1 - y : y;
        u32 sx = (d.flags & GEOM_FLIP_H) ? d.src_w - 1 - x : x;
        ((T*)d.dst)[e] = ((const T*)d.src)[elem_index<T>(chw, d.src_h, d.src_w, d.channels, sy, sx, ch)];
    }
}

// Layout change: GEOM_TO_CHW set = HWC source to CHW output, else CHW source to HWC output.
template <typename T>
__device__ void transpose_body(const GeomDesc* descs, u32 n) {
    u32 s = blockIdx.y;
    if (s >= n) return;
    const GeomDesc d = descs[s];
    bool to_chw = (d.flags & GEOM_TO_CHW) != 0;
    u64 total = (u64)d.out_h * d.out_w * d.channels;
    for (u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (u64)gridDim.x * blockDim.x) {
        u32 y, x, ch;
        split(to_chw, d.out_h, d.out_w, d.channels, e, y, x, ch);
        ((T*)d.dst)[e] = ((const T*)d.src)[elem_index<T>(!to_chw, d.src_h, d.src_w, d.channels, y, x, ch)];
    }
}

#define GEOM_KERNELS(SUFFIX, T)                                                               \
    extern "C" __global__ void crop_fill_##SUFFIX(const GeomDesc* d, u32 n) {                 \
        crop_fill_body<T>(d, n);                                                              \
    }                                                                                         \
    extern "C" __global__ void flip_##SUFFIX(const GeomDesc* d, u32 n) { flip_body<T>(d, n); } \
    extern "C" __global__ void transpose_##SUFFIX(const GeomDesc* d, u32 n) {                 \
        transpose_body<T>(d, n);                                                              \
    }

GEOM_KERNELS(b1, u8)
GEOM_KERNELS(b2, u16)
GEOM_KERNELS(b4, u32)
