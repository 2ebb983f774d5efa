// Fancy chroma upsampling rebuilt from the JPEG engines' output.
//
// The engines are fast only when they upsample chroma by repetition ("nearest": every pixel of
// a chroma block gets the block's Cb/Cr); libjpeg, Pillow and the CPU path interpolate
// ("fancy" upsampling, jdsample.c). Asking nvJPEG to interpolate costs 3x its host time, so
// the engines write nearest RGB and these kernels turn it into libjpeg's fancy RGB:
//
// 1. chroma_resolve: a block's Cb/Cr from one of its pixels. With libjpeg's integer
//    YCbCr->RGB (jdcolor.c, which the engines use too), (R-B, R-G) of a pixel depends on the
//    chroma alone and (Cb, Cr) -> (R-B, R-G) is one-to-one over all 65536 pairs, so any pixel
//    none of whose channels was clamped to 0 or 255 gives the block's chroma exactly.
// 2. chroma_guess: blocks where every pixel has a clamped channel (highlights, deep shadows)
//    take the chroma nearest to their resolved neighbours' among those that reproduce every
//    pixel of the block (a clamped channel allows a range of luma); rarely exact. A thread
//    searches a block's nearest candidates alone; the few blocks that needs more (up to
//    65536 candidates) are searched by the whole block of threads, so no thread holds the
//    kernel for long.
// 3. chroma_upsample: each pixel's luma from its RGB and its block's chroma, the chroma
//    upsampled as libjpeg does (h2v2, h2v1, h1v2, edges replicated at the image's borders),
//    converted back with libjpeg's tables.
//
// A sample is a region the engines decoded (x0, y0 inside the stored image); the caller pads
// it so that the window it reads has its neighbouring chroma blocks inside the region.
#include "common/desc.cuh"

// libjpeg's YCbCr -> RGB terms (jdcolor.c, SCALEBITS 16, ONE_HALF 1 << 15).
__device__ __forceinline__ i32 cr_to_r(i32 cr) { return (91881 * (cr - 128) + 32768) >> 16; }
__device__ __forceinline__ i32 cb_to_b(i32 cb) { return (116130 * (cb - 128) + 32768) >> 16; }
__device__ __forceinline__ i32 cbcr_to_g(i32 cb, i32 cr) {
    return (-22554 * (cb - 128) + 32768 - 46802 * (cr - 128)) >> 16;
}
__device__ __forceinline__ u8 clamp_u8(i32 v) { return (u8)(v < 0 ? 0 : (v > 255 ? 255 : v)); }

// Chroma blocks the region covers, and the first one's place in the image's chroma grid.
struct ChromaGrid {
    u32 bx0, by0, cols, rows;
};
__device__ __forceinline__ ChromaGrid grid_of(const ChromaDesc& d) {
    ChromaGrid g;
    g.bx0 = d.x0 / d.sx;
    g.by0 = d.y0 / d.sy;
    g.cols = (d.x0 + d.width - 1) / d.sx - g.bx0 + 1;
    g.rows = (d.y0 + d.height - 1) / d.sy - g.by0 + 1;
    return g;
}

// The pixels [xa, xb) x [ya, yb) of chroma block (bx, by) that lie in the region, in stored
// coordinates (an edge block is cut by the region's window).
struct ChromaBlock {
    u32 xa, xb, ya, yb;
};
__device__ __forceinline__ ChromaBlock block_pixels(const ChromaDesc& d, u32 bx, u32 by) {
    ChromaBlock p;
    p.xa = bx * d.sx > d.x0 ? bx * d.sx : d.x0;
    p.xb = (bx + 1) * d.sx < d.x0 + d.width ? (bx + 1) * d.sx : d.x0 + d.width;
    p.ya = by * d.sy > d.y0 ? by * d.sy : d.y0;
    p.yb = (by + 1) * d.sy < d.y0 + d.height ? (by + 1) * d.sy : d.y0 + d.height;
    return p;
}

// The exact (Cb, Cr) of an unclamped pixel, or false when its channels don't come from any
// (not the engines' nearest output).
__device__ __forceinline__ bool invert_pixel(i32 r, i32 g, i32 b, u8* cb_out, u8* cr_out) {
    const i32 d1 = r - b;  // 1.402 c - 1.772 a   (a = Cb - 128, c = Cr - 128)
    const i32 d2 = r - g;  // 2.11614 c + 0.34414 a
    // The linear system's solution, then the integer neighbours that reproduce it exactly.
    const float det = -4.2322768f;
    const float a = (2.11614f * (float)d1 - 1.402f * (float)d2) / det;
    const float c = (-1.772f * (float)d2 - 0.34414f * (float)d1) / det;
    const i32 a0 = (i32)floorf(a + 0.5f) + 128;
    const i32 c0 = (i32)floorf(c + 0.5f) + 128;
    for (i32 da = -1; da <= 1; ++da) {
        for (i32 dc = -1; dc <= 1; ++dc) {
            const i32 cb = a0 + da, cr = c0 + dc;
            if (cb < 0 || cb > 255 || cr < 0 || cr > 255) continue;
            const i32 rr = cr_to_r(cr);
            if (rr - cb_to_b(cb) == d1 && rr - cbcr_to_g(cb, cr) == d2) {
                *cb_out = (u8)cb;
                *cr_out = (u8)cr;
                return true;
            }
        }
    }
    return false;
}

__device__ __forceinline__ bool unclamped(u8 v) { return v != 0 && v != 255; }

// Pass 1: every block with an unclamped pixel gets its exact chroma (state 1); the others
// are marked for pass 2 (state 0).
extern "C" __global__ void chroma_resolve(const ChromaDesc* descs, u32 n) {
    const u32 s = blockIdx.y;
    if (s >= n) return;
    const ChromaDesc d = descs[s];
    const ChromaGrid g = grid_of(d);
    const u32 blocks = g.cols * g.rows;
    u8* cb_plane = (u8*)d.planes;
    u8* cr_plane = cb_plane + blocks;
    u8* state = cr_plane + blocks;
    const u8* src = (const u8*)d.src;
    for (u32 k = blockIdx.x * blockDim.x + threadIdx.x; k < blocks; k += gridDim.x * blockDim.x) {
        const u32 bx = g.bx0 + k % g.cols, by = g.by0 + k / g.cols;
        // The block's pixels inside the region (stored coordinates, then region-relative).
        const ChromaBlock blk = block_pixels(d, bx, by);
        const u32 xa = blk.xa, xb = blk.xb, ya = blk.ya, yb = blk.yb;
        u8 found = 0, cb = 128, cr = 128;
        for (u32 y = ya; y < yb && !found; ++y) {
            for (u32 x = xa; x < xb && !found; ++x) {
                const u8* p = src + (u64)(y - d.y0) * d.pitch + (u64)(x - d.x0) * 3;
                if (unclamped(p[0]) && unclamped(p[1]) && unclamped(p[2]) &&
                    invert_pixel(p[0], p[1], p[2], &cb, &cr))
                    found = 1;
            }
        }
        cb_plane[k] = cb;
        cr_plane[k] = cr;
        state[k] = found;
    }
}

// The luma range [*lo, *hi] that reproduces pixel (r, g, b) with chroma (cb, cr) through
// libjpeg's conversion and the clamp to 0..255; empty (*lo > *hi) when none does.
__device__ __forceinline__ void luma_range(i32 r, i32 g, i32 b, i32 cb, i32 cr, i32* lo, i32* hi) {
    const i32 t[3] = {cr_to_r(cr), cbcr_to_g(cb, cr), cb_to_b(cb)};
    const i32 v[3] = {r, g, b};
    i32 l = 0, h = 255;
    for (u32 c = 0; c < 3; ++c) {
        if (v[c] == 0) {
            h = h < -t[c] ? h : -t[c];
        } else if (v[c] == 255) {
            l = l > 255 - t[c] ? l : 255 - t[c];
        } else {
            l = l > v[c] - t[c] ? l : v[c] - t[c];
            h = h < v[c] - t[c] ? h : v[c] - t[c];
        }
    }
    *lo = l;
    *hi = h;
}

// Whether chroma (cb, cr) reproduces every pixel of the block [xa, xb) x [ya, yb).
__device__ __forceinline__ bool chroma_fits(const ChromaDesc& d, const u8* src, u32 xa, u32 xb,
                                            u32 ya, u32 yb, i32 cb, i32 cr) {
    if (cb < 0 || cb > 255 || cr < 0 || cr > 255) return false;
    for (u32 y = ya; y < yb; ++y) {
        for (u32 x = xa; x < xb; ++x) {
            const u8* p = src + (u64)(y - d.y0) * d.pitch + (u64)(x - d.x0) * 3;
            i32 lo, hi;
            luma_range(p[0], p[1], p[2], cb, cr, &lo, &hi);
            if (lo > hi) return false;
        }
    }
    return true;
}

// Pass 2 picks, for a block none of whose pixels is unclamped, the chroma pair that
// reproduces all its pixels and ranks lowest: first the pairs on the block's line (where a
// pixel has two unclamped channels, their difference depends on the chroma alone and fixes
// one of Cb, Cr for each value of the other: 256 lines of a few pairs, the true pair among
// them), then the pairs in square rings around the target (the mean of its resolved
// neighbours), the nearer ring first; within those, the nearer to the target (Euclidean),
// then the earlier in a plain scan (`key`). A rank packs these so that one comparison
// orders candidates: the result does not depend on the order they are tried in, nor on how
// many threads try them.
#define NO_GUESS (~(u64)0)
__device__ __forceinline__ u64 guess_rank(u32 level, i32 dist, i32 key) {
    return ((u64)level << 40) | ((u64)dist << 20) | (u64)key;  // dist < 2^18, key < 2^19
}
__device__ __forceinline__ i32 rank_dist(u64 rank) { return (i32)((rank >> 20) & 0xFFFFF); }
__device__ __forceinline__ u32 rank_level(u64 rank) { return (u32)(rank >> 40); }

// The block being guessed: its pixels, the target chroma and its line (pair < 0: none).
struct Guess {
    u32 xa, xb, ya, yb;
    i32 tcb, tcr, pair, diff;
};

__device__ __forceinline__ Guess guess_setup(const ChromaDesc& d, const ChromaGrid& g,
                                             const u8* src, const u8* cb_plane,
                                             const u8* cr_plane, const u8* state, u32 k) {
    Guess q;
    const u32 i = k % g.cols, j = k / g.cols;
    i32 sum_cb = 0, sum_cr = 0, count = 0;
    for (i32 dj = -1; dj <= 1; ++dj) {
        for (i32 di = -1; di <= 1; ++di) {
            const i32 ni = (i32)i + di, nj = (i32)j + dj;
            if (ni < 0 || nj < 0 || ni >= (i32)g.cols || nj >= (i32)g.rows) continue;
            const u32 m = (u32)nj * g.cols + (u32)ni;
            if (state[m] != 1) continue;  // pass 1's exact blocks only: guessed in any order
            sum_cb += cb_plane[m];
            sum_cr += cr_plane[m];
            ++count;
        }
    }
    q.tcb = count ? (sum_cb + count / 2) / count : 128;
    q.tcr = count ? (sum_cr + count / 2) / count : 128;
    const ChromaBlock blk = block_pixels(d, g.bx0 + i, g.by0 + j);
    q.xa = blk.xa;
    q.xb = blk.xb;
    q.ya = blk.ya;
    q.yb = blk.yb;
    // A pixel with two unclamped channels, if any: which pair (0: R,B; 1: R,G; 2: G,B).
    q.pair = -1;
    q.diff = 0;
    for (u32 y = q.ya; y < q.yb && q.pair < 0; ++y) {
        for (u32 x = q.xa; x < q.xb && q.pair < 0; ++x) {
            const u8* p = src + (u64)(y - d.y0) * d.pitch + (u64)(x - d.x0) * 3;
            if (unclamped(p[0]) && unclamped(p[2])) {
                q.pair = 0;
                q.diff = (i32)p[0] - (i32)p[2];
            } else if (unclamped(p[0]) && unclamped(p[1])) {
                q.pair = 1;
                q.diff = (i32)p[0] - (i32)p[1];
            } else if (unclamped(p[1]) && unclamped(p[2])) {
                q.pair = 2;
                q.diff = (i32)p[1] - (i32)p[2];
            }
        }
    }
    return q;
}

// Keeps (cb, cr) of `rank` in *best when it ranks lower and fits.
__device__ __forceinline__ void consider(const ChromaDesc& d, const u8* src, const Guess& q,
                                         i32 cb, i32 cr, u64 rank, u64* best) {
    if (rank >= *best) return;
    if (!chroma_fits(d, src, q.xa, q.xb, q.ya, q.yb, cb, cr)) return;
    *best = rank;
}

// The pairs of the line at step s: the line's values outward from the target's (Cb for pairs
// 0 and 2, Cr for 1), step 0 the target's own, then +1, -1, +2, ...
__device__ __forceinline__ i32 line_offset(i32 s) { return (s & 1) ? (s + 1) / 2 : -(s / 2); }
#define LINE_STEPS 512

__device__ __forceinline__ void line_step(const ChromaDesc& d, const u8* src, const Guess& q,
                                          i32 s, u64* best) {
    const i32 v = (q.pair == 1 ? q.tcr : q.tcb) + line_offset(s);
    if (v < 0 || v > 255) return;
    if (q.pair == 0) {
        // R - B = cr_to_r(cr) - cb_to_b(cb): for each cb, the cr near the solution.
        const float c = (float)(q.diff + cb_to_b(v)) / 1.402f + 128.0f;
        const i32 c0 = (i32)floorf(c + 0.5f);
        for (i32 cr = c0 - 1; cr <= c0 + 1; ++cr)
            if (cr >= 0 && cr <= 255 && cr_to_r(cr) - cb_to_b(v) == q.diff)
                consider(d, src, q, v, cr,
                         guess_rank(0, (v - q.tcb) * (v - q.tcb) + (cr - q.tcr) * (cr - q.tcr),
                                    v * 256 + cr),
                         best);
    } else if (q.pair == 1) {
        // R - G = cr_to_r(cr) - cbcr_to_g(cb, cr): for each cr, the cbs near it (G moves by
        // 0.344 per step of Cb: a few give the same value).
        const float a =
            -((float)(cr_to_r(v) - q.diff) + 0.71414f * (float)(v - 128)) / 0.34414f + 128.0f;
        const i32 a0 = (i32)floorf(a + 0.5f);
        for (i32 cb = a0 - 4; cb <= a0 + 4; ++cb)
            if (cb >= 0 && cb <= 255 && cr_to_r(v) - cbcr_to_g(cb, v) == q.diff)
                consider(d, src, q, cb, v,
                         guess_rank(0, (cb - q.tcb) * (cb - q.tcb) + (v - q.tcr) * (v - q.tcr),
                                    v * 256 + cb),
                         best);
    } else {
        // G - B = cbcr_to_g(cb, cr) - cb_to_b(cb): for each cb, the crs near it.
        const float c =
            -((float)(q.diff + cb_to_b(v)) + 0.34414f * (float)(v - 128)) / 0.71414f + 128.0f;
        const i32 c0 = (i32)floorf(c + 0.5f);
        for (i32 cr = c0 - 2; cr <= c0 + 2; ++cr)
            if (cr >= 0 && cr <= 255 && cbcr_to_g(v, cr) - cb_to_b(v) == q.diff)
                consider(d, src, q, v, cr,
                         guess_rank(0, (v - q.tcb) * (v - q.tcb) + (cr - q.tcr) * (cr - q.tcr),
                                    v * 256 + cr),
                         best);
    }
}

// Steps first, first + stride, ... below `end` of the line into *best. A step's offset never
// shrinks, so once its square alone is beyond the best distance nothing further can win:
// returns true then, or when it reached the line's end (the line is settled).
__device__ __forceinline__ bool line_search(const ChromaDesc& d, const u8* src, const Guess& q,
                                            i32 first, i32 stride, i32 end, u64* best) {
    for (i32 s = first; s < end; s += stride) {
        const i32 off = line_offset(s);
        if (*best != NO_GUESS && off * off > rank_dist(*best)) return true;
        line_step(d, src, q, s, best);
    }
    return end >= LINE_STEPS;
}

// The rings: every offset (ocb, ocr) of Chebyshev radius 1..255 around the target, numbered
// ring after ring (radius r holds [(2r - 1)^2, (2r + 1)^2)), so that threads split them
// without walking the rings' insides.
#define RING_RADIUS 255
#define RING_CANDIDATES ((2 * RING_RADIUS + 1) * (2 * RING_RADIUS + 1))
__device__ __forceinline__ i32 ring_end(i32 r) { return (2 * r + 1) * (2 * r + 1); }

__device__ __forceinline__ void ring_candidate(const ChromaDesc& d, const u8* src, const Guess& q,
                                               i32 n, u64* best) {
    i32 r = 0, ocb = 0, ocr = 0;
    if (n > 0) {
        i32 root = (i32)sqrtf((float)n);
        while (root * root > n) --root;
        while ((root + 1) * (root + 1) <= n) ++root;
        r = (root + 1) / 2;
        const i32 m = n - (2 * r - 1) * (2 * r - 1), side = 2 * r + 1;
        if (m < side) {
            ocb = m - r;
            ocr = -r;
        } else if (m < 2 * side) {
            ocb = m - side - r;
            ocr = r;
        } else if (m < 2 * side + side - 2) {
            ocb = -r;
            ocr = m - 2 * side - r + 1;
        } else {
            ocb = r;
            ocr = m - 3 * side + 2 - r + 1;
        }
    }
    consider(d, src, q, q.tcb + ocb, q.tcr + ocr,
             guess_rank((u32)r + 1, ocb * ocb + ocr * ocr, (ocb + 255) * 512 + (ocr + 255)), best);
}

// One thread alone: the line's first steps, then the rings up to this radius. Past them a
// block is left to the whole block of threads (a thread searching tens of thousands of pairs
// would hold its warp and the kernel for milliseconds).
#define ALONE_LINE_STEPS 64
#define ALONE_RING_RADIUS 6

// The block's rank searched by one thread within those bounds; false when they didn't settle it.
__device__ __forceinline__ bool guess_alone(const ChromaDesc& d, const u8* src, const Guess& q,
                                            u64* best) {
    *best = NO_GUESS;
    if (q.pair >= 0) {
        if (!line_search(d, src, q, 0, 1, ALONE_LINE_STEPS, best)) return false;
        if (*best != NO_GUESS) return true;
    }
    for (i32 n = 0; n < ring_end(ALONE_RING_RADIUS); ++n) {
        if (*best != NO_GUESS && n >= ring_end((i32)rank_level(*best) - 1)) return true;
        ring_candidate(d, src, q, n, best);
    }
    return *best != NO_GUESS;
}

// The block's threads together: what the launch must give every block (chroma_guess).
#define GUESS_THREADS 256
struct GuessScratch {
    u64 rank[GUESS_THREADS];
    u8 left[GUESS_THREADS];  // thread t's chroma block was left to the whole block
};
// Declares the block's GuessScratch `name` in a kernel (the host emulation defines its own,
// as for RESAMPLE_SCRATCH).
#ifndef GUESS_SCRATCH
#define GUESS_SCRATCH(name) __shared__ GuessScratch name
#endif

// The lowest of every thread's `rank`, on every thread.
__device__ __forceinline__ u64 block_min(GuessScratch& sc, u64 rank) {
    sc.rank[threadIdx.x] = rank;
    __syncthreads();
    for (u32 w = 1; w < blockDim.x; w <<= 1) {
        const u32 t = threadIdx.x;
        if (t % (2 * w) == 0 && t + w < blockDim.x && sc.rank[t + w] < sc.rank[t])
            sc.rank[t] = sc.rank[t + w];
        __syncthreads();
    }
    const u64 low = sc.rank[0];
    __syncthreads();  // rank[] is written again by the next call
    return low;
}

// The block's rank searched by all the block's threads, unbounded: the whole line, then the
// rings a few candidates a thread at a time, until the ring of the best pair so far is done.
__device__ __forceinline__ u64 guess_together(GuessScratch& sc, const ChromaDesc& d,
                                              const u8* src, const Guess& q) {
    const i32 t = (i32)threadIdx.x, threads = (i32)blockDim.x, per_round = 4 * threads;
    u64 best = NO_GUESS;
    if (q.pair >= 0) {
        line_search(d, src, q, t, threads, LINE_STEPS, &best);
        best = block_min(sc, best);
        if (best != NO_GUESS) return best;
    }
    for (i32 base = 0; base < RING_CANDIDATES; base += per_round) {
        for (i32 n = base + t; n < base + per_round && n < RING_CANDIDATES; n += threads)
            ring_candidate(d, src, q, n, &best);
        best = block_min(sc, best);
        if (best != NO_GUESS && base + per_round >= ring_end((i32)rank_level(best) - 1)) break;
    }
    return best;
}

// Writes the block's chroma: the ranked pair's, the target's when none fits. State 2: guessed
// by one thread; 3: by the whole block (the tests tell them apart).
__device__ __forceinline__ void guess_store(const Guess& q, u64 best, u8* cb_plane, u8* cr_plane,
                                            u8* state, u32 k, u8 how) {
    i32 cb = q.tcb, cr = q.tcr;
    if (best != NO_GUESS) {
        const i32 key = (i32)(best & 0xFFFFF);
        if (rank_level(best) > 0) {
            cb = q.tcb + (key >> 9) - 255;
            cr = q.tcr + (key & 511) - 255;
        } else if (q.pair == 1) {
            cr = key >> 8;
            cb = key & 255;
        } else {
            cb = key >> 8;
            cr = key & 255;
        }
    }
    cb_plane[k] = (u8)cb;
    cr_plane[k] = (u8)cr;
    state[k] = how;
}

// Pass 2: each unresolved block takes the chroma pair that ranks lowest among those that
// reproduce all its pixels (above). Each thread takes a block and tries the few nearest
// candidates alone, which settles nearly all; the blocks it leaves are searched by the whole
// block of threads, one after another. Launch with GUESS_THREADS threads a block (or one).
extern "C" __global__ void chroma_guess(const ChromaDesc* descs, u32 n) {
    GUESS_SCRATCH(sc);
    const u32 s = blockIdx.y;
    // Uniform across the block, as every branch around a barrier below; a block larger than
    // the scratch would write past it.
    if (s >= n || blockDim.x > GUESS_THREADS) return;
    const ChromaDesc d = descs[s];
    const ChromaGrid g = grid_of(d);
    const u32 blocks = g.cols * g.rows;
    u8* cb_plane = (u8*)d.planes;
    u8* cr_plane = cb_plane + blocks;
    u8* state = cr_plane + blocks;
    const u8* src = (const u8*)d.src;
    for (u32 base = blockIdx.x * blockDim.x; base < blocks; base += gridDim.x * blockDim.x) {
        const u32 k = base + threadIdx.x;
        u8 left = 0;
        if (k < blocks && state[k] == 0) {
            const Guess q = guess_setup(d, g, src, cb_plane, cr_plane, state, k);
            u64 best;
            if (guess_alone(d, src, q, &best))
                guess_store(q, best, cb_plane, cr_plane, state, k, 2);
            else
                left = 1;
        }
        sc.left[threadIdx.x] = left;
        __syncthreads();
        for (u32 t = 0; t < blockDim.x; ++t) {
            if (!sc.left[t]) continue;
            const u32 kk = base + t;
            const Guess q = guess_setup(d, g, src, cb_plane, cr_plane, state, kk);
            const u64 best = guess_together(sc, d, src, q);
            if (threadIdx.x == 0) guess_store(q, best, cb_plane, cr_plane, state, kk, 3);
        }
        __syncthreads();  // left[] is written again for the next blocks
    }
}

// Chroma of block column i, row j of the region, clamped to the region (whose border blocks
// are the image's where the region reaches the image's border, and otherwise in the margin
// the caller does not read).
__device__ __forceinline__ i32 chroma_at(const u8* plane, const ChromaGrid& g, i32 i, i32 j) {
    i = i < 0 ? 0 : (i >= (i32)g.cols ? (i32)g.cols - 1 : i);
    j = j < 0 ? 0 : (j >= (i32)g.rows ? (i32)g.rows - 1 : j);
    return plane[(u32)j * g.cols + (u32)i];
}

// libjpeg's fancy upsampling of one plane at stored pixel (x, y) (jdsample.c:
// h2v2_fancy_upsample, h2v1_fancy_upsample, h1v2_fancy_upsample; edges replicated).
__device__ __forceinline__ i32 fancy_at(const ChromaDesc& d, const ChromaGrid& g, const u8* plane,
                                        u32 x, u32 y) {
    const i32 i = (i32)(x / d.sx) - (i32)g.bx0;
    const i32 j = (i32)(y / d.sy) - (i32)g.by0;
    const u32 last_col = (d.image_w + d.sx - 1) / d.sx - 1;
    if (d.sy == 2) {
        const i32 nj = (y & 1) ? j + 1 : j - 1;  // the nearer chroma row above or below
        if (d.sx == 1) {
            const i32 sum = 3 * chroma_at(plane, g, i, j) + chroma_at(plane, g, i, nj);
            return (sum + ((y & 1) ? 2 : 1)) >> 2;
        }
        const i32 here = 3 * chroma_at(plane, g, i, j) + chroma_at(plane, g, i, nj);
        if (!(x & 1)) {
            if (x / 2 == 0) return (here * 4 + 8) >> 4;
            const i32 left = 3 * chroma_at(plane, g, i - 1, j) + chroma_at(plane, g, i - 1, nj);
            return (here * 3 + left + 8) >> 4;
        }
        if (x / 2 == last_col) return (here * 4 + 7) >> 4;
        const i32 right = 3 * chroma_at(plane, g, i + 1, j) + chroma_at(plane, g, i + 1, nj);
        return (here * 3 + right + 7) >> 4;
    }
    if (d.sx == 2) {
        const i32 here = chroma_at(plane, g, i, j);
        if (!(x & 1)) {
            if (x / 2 == 0) return here;
            return (3 * here + chroma_at(plane, g, i - 1, j) + 1) >> 2;
        }
        if (x / 2 == last_col) return here;
        return (3 * here + chroma_at(plane, g, i + 1, j) + 2) >> 2;
    }
    return chroma_at(plane, g, i, j);
}

// Pass 3: every pixel of the region, luma from its RGB and its block's chroma, chroma
// upsampled the fancy way, back to RGB into dst.
extern "C" __global__ void chroma_upsample(const ChromaDesc* descs, u32 n) {
    const u32 s = blockIdx.y;
    if (s >= n) return;
    const ChromaDesc d = descs[s];
    const ChromaGrid g = grid_of(d);
    const u32 blocks = g.cols * g.rows;
    const u8* cb_plane = (const u8*)d.planes;
    const u8* cr_plane = cb_plane + blocks;
    const u8* src = (const u8*)d.src;
    u8* dst = (u8*)d.dst;
    const u32 pixels = d.width * d.height;
    for (u32 k = blockIdx.x * blockDim.x + threadIdx.x; k < pixels; k += gridDim.x * blockDim.x) {
        const u32 ry = k / d.width, rx = k - ry * d.width;
        const u32 x = d.x0 + rx, y = d.y0 + ry;
        const u8* p = src + (u64)ry * d.pitch + (u64)rx * 3;
        const i32 own_cb = chroma_at(cb_plane, g, (i32)(x / d.sx - g.bx0), (i32)(y / d.sy - g.by0));
        const i32 own_cr = chroma_at(cr_plane, g, (i32)(x / d.sx - g.bx0), (i32)(y / d.sy - g.by0));
        i32 lo, hi;
        luma_range(p[0], p[1], p[2], own_cb, own_cr, &lo, &hi);
        i32 luma = lo;
        if (p[0] == 255 && p[1] == 255 && p[2] == 255) luma = lo > 255 ? lo : (hi < 255 ? hi : 255);
        if (p[0] == 0 && p[1] == 0 && p[2] == 0) luma = hi < 0 ? hi : (lo > 0 ? lo : 0);
        luma = luma < 0 ? 0 : (luma > 255 ? 255 : luma);
        const i32 cb = fancy_at(d, g, cb_plane, x, y);
        const i32 cr = fancy_at(d, g, cr_plane, x, y);
        u8* o = dst + (u64)ry * d.pitch + (u64)rx * 3;
        o[0] = clamp_u8(luma + cr_to_r(cr));
        o[1] = clamp_u8(luma + cbcr_to_g(cb, cr));
        o[2] = clamp_u8(luma + cb_to_b(cb));
    }
}
