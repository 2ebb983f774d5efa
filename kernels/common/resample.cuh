// Pillow-exact resampling for the fused chain (chain.cu).
//
// Coordinates are those of the source as displayed: a source stored before its EXIF
// orientation is read through it (`src_px`), so the decoded image needs no rotation pass.
//
// Pillow's bilinear resize is two separable passes with the intermediate image rounded and
// clipped to u8: `clip8((2^21 + sum pixel * weight) >> 22)` after each pass. Integer sums do not
// depend on summation order, and the tap tables are computed on the host by the Rust functions
// the CPU path uses, so every byte matches the CPU reference.
//
// A block produces one TILE_H x TILE_W tile of a sample's resampled output. With both passes,
// the first-pass values the tile needs (source rows, or columns when the vertical pass comes
// first, each resampled along the other axis and rounded to u8) are computed once into shared
// memory, CHUNK lines at a time, and the second pass accumulates them into per-output sums in
// shared memory: taps_v + taps_h reads per output, not taps_v x taps_h (when those lines are
// sparse, a shrink without antialias, the tile is computed per pixel). Every phase is a loop
// over the block's threads with `__syncthreads()` between phases, so the code is right for any
// block size, one thread included (the host emulation, kernels/host/emu.cpp, runs both).
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

// Stores resampled pixel (ry, rx), channel ch, value b of sample d: flip, normalize, convert
// and write in the output layout.
__device__ __forceinline__ void store_resampled(const FusedDesc& d, u32 ry, u32 rx, u32 ch, u8 b) {
    u32 oy = (d.flags & FUSED_FLIP_V) ? d.out_h - 1 - ry : ry;
    u32 ox = (d.flags & FUSED_FLIP_H) ? d.out_w - 1 - rx : rx;
    u64 pix = (u64)oy * d.out_w + ox;
    u64 plane = (u64)d.out_h * d.out_w;
    u64 i = (d.flags & FUSED_CHW) ? ch * plane + pix : pix * d.channels + ch;
    if (d.out_dtype == DT_U8 && !(d.flags & FUSED_NORMALIZE)) {
        ((u8*)d.dst)[i] = b;
        return;
    }
    float v = (float)b;
    if (d.flags & FUSED_NORMALIZE) v = __fmul_rn(__fsub_rn(v, d.mean[ch]), d.inv_std[ch]);
    store_elem((void*)d.dst, i, d.out_dtype, v);
}

// Tile of the resampled output one block produces, and first-pass lines held at once.
#define TILE_H 16u
#define TILE_W 32u
#define CHUNK 32u
// Longest first-pass line a tile needs: TILE_W columns (rows first) or TILE_H rows.
#define TILE_LINE (TILE_W > TILE_H ? TILE_W : TILE_H)

// Shared memory of one block: first-pass values and second-pass sums.
struct ResampleScratch {
    u8 lines[CHUNK * TILE_LINE * 4];
    i32 sums[TILE_H * TILE_W * 4];
};

// Declares the block's ResampleScratch `name` in a kernel (the host emulation,
// kernels/host/emu.cpp, defines its own: one per block, shared by the block's threads).
#ifndef RESAMPLE_SCRATCH
#define RESAMPLE_SCRATCH(name) __shared__ ResampleScratch name
#endif

// Tiles of a sample's output.
__device__ __forceinline__ u32 tiles_of(const FusedDesc& d) {
    return ((d.out_h + TILE_H - 1) / TILE_H) * ((d.out_w + TILE_W - 1) / TILE_W);
}

// One tile, by the whole block: rows ty0.., columns tx0.. of the resampled output.
__device__ void resample_tile(const FusedDesc& d, const i32* table, ResampleScratch& sh,
                              u32 ty0, u32 tx0) {
    const u32 th = d.out_h - ty0 < TILE_H ? d.out_h - ty0 : TILE_H;
    const u32 tw = d.out_w - tx0 < TILE_W ? d.out_w - tx0 : TILE_W;
    const u32 c = d.channels;
    const u32 nthreads = blockDim.x;
    const bool two_pass = !(d.flags & FUSED_NEAREST) && (d.flags & FUSED_H_PASS) &&
                          (d.flags & FUSED_V_PASS);
    const u8* src = (const u8*)d.src;
    const Taps1 h = taps_at(table, d.h_off, d.out_w, d.h_ksize);
    const Taps1 v = taps_at(table, d.v_off, d.out_h, d.v_ksize);
    // The second pass runs along x when the vertical pass comes first, else along y; its taps
    // name the first-pass lines (source columns or rows) the tile needs: [lo, hi).
    const bool vf = (d.flags & FUSED_VERTICAL_FIRST) != 0;
    const Taps1& second = vf ? h : v;
    const u32 base = vf ? tx0 : ty0;
    const u32 n2 = vf ? tw : th;
    const u32 line_len = vf ? th : tw;  // first-pass values per line, per channel
    i32 lo = 0;
    i32 hi = 0;
    bool tiled = false;
    if (two_pass) {
        lo = second.start[base];
        hi = lo;
        for (u32 k = 0; k < n2; ++k) {
            i32 s = second.start[base + k];
            i32 e = s + second.len[base + k];
            lo = s < lo ? s : lo;
            hi = e > hi ? e : hi;
        }
        // Through the tile: every line of [lo, hi) once, then the second pass. Per pixel: the
        // first pass again for every second-pass tap. The tile wins unless the lines are
        // sparse (a shrink without antialias: two taps per output, far apart).
        const u64 k1 = vf ? v.ksize : h.ksize;
        const u64 k2 = second.ksize;
        const u64 through_tile = (u64)(hi - lo) * line_len * k1 + (u64)th * tw * k2;
        tiled = through_tile <= (u64)th * tw * k1 * k2;
    }
    if (!tiled) {
        // One pass, none, or sparse lines: each output computes its taps itself; no shared
        // memory, no barrier (the choice is the same for the whole block).
        for (u32 i = threadIdx.x; i < th * tw; i += nthreads) {
            u32 ty = i / tw;
            u32 tx = i - ty * tw;
            for (u32 ch = 0; ch < c; ++ch)
                store_resampled(d, ty0 + ty, tx0 + tx, ch,
                                resample_pixel(d, table, ty0 + ty, tx0 + tx, ch));
        }
        return;
    }
    const u32 outs = th * tw * c;
    for (u32 i = threadIdx.x; i < outs; i += nthreads) sh.sums[i] = HALF_ONE;
    for (i32 c0 = lo; c0 < hi; c0 += (i32)CHUNK) {
        const u32 cn = (u32)(hi - c0) < CHUNK ? (u32)(hi - c0) : CHUNK;
        __syncthreads();  // the lines of the last chunk are consumed (and the sums set)
        for (u32 i = threadIdx.x; i < cn * line_len * c; i += nthreads) {
            u32 line = i / (line_len * c);
            u32 r = i - line * line_len * c;
            u32 k = r / c;
            u32 ch = r - k * c;
            sh.lines[line * TILE_LINE * 4 + k * c + ch] =
                vf ? vval(d, src, v, (u32)c0 + line, ty0 + k, ch)
                   : hval(d, src, h, (u32)c0 + line, tx0 + k, ch);
        }
        __syncthreads();  // the chunk's lines are written
        for (u32 i = threadIdx.x; i < outs; i += nthreads) {
            u32 p = i / c;
            u32 ch = i - p * c;
            u32 ty = p / tw;
            u32 tx = p - ty * tw;
            u32 o2 = vf ? tx : ty;  // along the second pass
            u32 o1 = vf ? ty : tx;  // along the first-pass line
            i32 s = second.start[base + o2];
            i32 n = second.len[base + o2];
            const i32* w = second.weights + (u64)(base + o2) * second.ksize;
            i32 j0 = c0 > s ? c0 - s : 0;
            i32 end = c0 + (i32)cn < s + n ? c0 + (i32)cn : s + n;
            i32 acc = sh.sums[i];
            for (i32 j = j0; s + j < end; ++j)
                acc += (i32)sh.lines[(u32)(s + j - c0) * TILE_LINE * 4 + o1 * c + ch] * w[j];
            sh.sums[i] = acc;
        }
    }
    __syncthreads();  // every sum is complete
    for (u32 i = threadIdx.x; i < outs; i += nthreads) {
        u32 p = i / c;
        u32 ch = i - p * c;
        u32 ty = p / tw;
        store_resampled(d, ty0 + ty, tx0 + (p - ty * tw), ch, clip8_shift(sh.sums[i]));
    }
    __syncthreads();  // the sums may be reused by the next tile
}

// Every tile of sample d handled by this block (tiles stride over grid.x).
__device__ void resample_sample(const FusedDesc& d, const i32* table, ResampleScratch& sh) {
    const u32 tiles_x = (d.out_w + TILE_W - 1) / TILE_W;
    const u32 tiles = tiles_of(d);
    for (u32 t = blockIdx.x; t < tiles; t += gridDim.x) {
        u32 ty = t / tiles_x;
        resample_tile(d, table, sh, ty * TILE_H, (t - ty * tiles_x) * TILE_W);
    }
}
