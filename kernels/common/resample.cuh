// Pillow-exact resampling of one output pixel, shared by chain.cu and resize.cu.
//
// Coordinates are those of the source as displayed: a source stored before its EXIF
// orientation is read through it (`src_px`), so the decoded image needs no rotation pass.
//
// Pillow's bilinear resize is two separable passes with the intermediate image rounded and
// clipped to u8. Here one thread produces one output pixel and recomputes, for each tap of
// the second pass, the first-pass value it needs (`hval` / `vval`) with the same integer
// arithmetic and the same u8 rounding: `clip8((2^21 + sum pixel * weight) >> 22)`. Integer sums
// do not depend on summation order, and the tap tables are computed on the host by the Rust
// functions the CPU path uses, so every byte matches the CPU reference.
#pragma once
#include "desc.cuh"

// Channel `ch` of the displayed pixel (y, x): the source is stored before its EXIF
// orientation, so the pixel is fetched where the orientation puts it (the inverse of
// `crate::decode::exif::apply_orientation`; `nvjpeg::stored_coords` on the host).
__device__ __forceinline__ u8 src_px(const FusedDesc& d, const u8* src, u32 y, u32 x, u32 ch) {
    u32 sy = y, sx = x;
    switch (d.orientation) {
        case 2: sx = d.src_w - 1 - x; break;
        case 3: sy = d.src_h - 1 - y; sx = d.src_w - 1 - x; break;
        case 4: sy = d.src_h - 1 - y; break;
        case 5: sy = x; sx = y; break;
        case 6: sy = d.src_h - 1 - x; sx = y; break;
        case 7: sy = d.src_h - 1 - x; sx = d.src_w - 1 - y; break;
        case 8: sy = x; sx = d.src_w - 1 - y; break;
        default: break;
    }
    return src[(u64)sy * d.src_pitch + (u64)sx * d.channels + ch];
}

struct Taps1 {
    const i32* start;
    const i32* len;
    const i32* weights;
    u32 ksize;
};

__device__ __forceinline__ Taps1 taps_at(const i32* table, u32 off, u32 n, u32 ksize) {
    Taps1 t;
    t.start = table + off;
    t.len = table + off + n;
    t.weights = table + off + 2 * n;
    t.ksize = ksize;
    return t;
}

// First pass along a row: horizontal value of (displayed) source row `row` at output
// column `x`.
__device__ __forceinline__ u8 hval(const FusedDesc& d, const u8* src, const Taps1& h,
                                    u32 row, u32 x, u32 ch) {
    if (!(d.flags & FUSED_H_PASS)) return src_px(d, src, row, d.win_left + x, ch);
    i32 s = h.start[x];
    i32 n = h.len[x];
    const i32* w = h.weights + (u64)x * h.ksize;
    i32 acc = HALF_ONE;
    for (i32 j = 0; j < n; ++j) acc += (i32)src_px(d, src, row, (u32)(s + j), ch) * w[j];
    return clip8_shift(acc);
}

// First pass along a column: vertical value of source column `col` at output row `y`.
__device__ __forceinline__ u8 vval(const FusedDesc& d, const u8* src, const Taps1& v,
                                    u32 col, u32 y, u32 ch) {
    if (!(d.flags & FUSED_V_PASS)) return src_px(d, src, d.win_top + y, col, ch);
    i32 s = v.start[y];
    i32 n = v.len[y];
    const i32* w = v.weights + (u64)y * v.ksize;
    i32 acc = HALF_ONE;
    for (i32 j = 0; j < n; ++j) acc += (i32)src_px(d, src, (u32)(s + j), col, ch) * w[j];
    return clip8_shift(acc);
}

// The resampled (not yet flipped) pixel (y, x), channel ch.
__device__ __forceinline__ u8 resample_pixel(const FusedDesc& d, const i32* table, u32 y, u32 x,
                                              u32 ch) {
    const u8* src = (const u8*)d.src;
    if (d.flags & FUSED_NEAREST) {
        u32 sx = (u32)table[d.h_off + x];
        u32 sy = (u32)table[d.v_off + y];
        return src_px(d, src, sy, sx, ch);
    }
    bool hp = (d.flags & FUSED_H_PASS) != 0;
    bool vp = (d.flags & FUSED_V_PASS) != 0;
    Taps1 h = taps_at(table, d.h_off, d.out_w, d.h_ksize);
    Taps1 v = taps_at(table, d.v_off, d.out_h, d.v_ksize);
    if (hp && vp) {
        i32 acc = HALF_ONE;
        if (d.flags & FUSED_VERTICAL_FIRST) {
            i32 s = h.start[x];
            i32 n = h.len[x];
            const i32* w = h.weights + (u64)x * h.ksize;
            for (i32 j = 0; j < n; ++j) acc += (i32)vval(d, src, v, (u32)(s + j), y, ch) * w[j];
        } else {
            i32 s = v.start[y];
            i32 n = v.len[y];
            const i32* w = v.weights + (u64)y * v.ksize;
            for (i32 j = 0; j < n; ++j) acc += (i32)hval(d, src, h, (u32)(s + j), x, ch) * w[j];
        }
        return clip8_shift(acc);
    }
    if (hp) return hval(d, src, h, d.win_top + y, x, ch);
    if (vp) return vval(d, src, v, d.win_left + x, y, ch);
    return src_px(d, src, d.win_top + y, d.win_left + x, ch);
}

// Output pixel `pix` (row-major in the output) of sample `d`: flip, resample, normalize,
// convert and store in the output layout.
__device__ __forceinline__ void fused_pixel(const FusedDesc& d, const i32* table, u32 pix) {
    u32 oy = pix / d.out_w;
    u32 ox = pix - oy * d.out_w;
    u32 ry = (d.flags & FUSED_FLIP_V) ? d.out_h - 1 - oy : oy;
    u32 rx = (d.flags & FUSED_FLIP_H) ? d.out_w - 1 - ox : ox;
    u64 plane = (u64)d.out_h * d.out_w;
    for (u32 ch = 0; ch < d.channels; ++ch) {
        u8 b = resample_pixel(d, table, ry, rx, ch);
        u64 i = (d.flags & FUSED_CHW) ? ch * plane + pix : (u64)pix * d.channels + ch;
        if (d.out_dtype == DT_U8 && !(d.flags & FUSED_NORMALIZE)) {
            ((u8*)d.dst)[i] = b;
            continue;
        }
        float v = (float)b;
        if (d.flags & FUSED_NORMALIZE) v = __fmul_rn(__fsub_rn(v, d.mean[ch]), d.inv_std[ch]);
        store_elem((void*)d.dst, i, d.out_dtype, v);
    }
}
