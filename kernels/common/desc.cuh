// Per-sample descriptors. Each struct is mirrored field for field by a `#[repr(C)]` struct in
// src/cuda/desc.rs; both sides assert the size (and the Rust tests check every offset).
#pragma once
#include "types.cuh"

// Flags of FusedDesc.flags.
#define FUSED_FLIP_H 1u
#define FUSED_FLIP_V 2u
#define FUSED_VERTICAL_FIRST 4u
#define FUSED_H_PASS 8u
#define FUSED_V_PASS 16u
#define FUSED_NEAREST 32u
#define FUSED_NORMALIZE 64u
#define FUSED_CHW 128u

// One sample of the fused chain: window of a u8 HWC source -> resample -> flip -> normalize
// -> cast -> layout. Tap tables live in one shared i32 array:
//   bilinear axis of n outputs at `off`: start[n], len[n], weights[n * ksize]
//   nearest axis of n outputs at `off`: source index[n] (absolute)
struct FusedDesc {
    u64 src;        // u8 HWC pixels, as stored (before the EXIF orientation)
    u64 dst;        // this sample's output
    u32 src_pitch;  // bytes from one source row to the next
    u32 src_h;      // stored rows
    u32 src_w;      // stored columns
    u32 channels;   // 1..=4
    u32 win_top;    // window inside the source as displayed (after the orientation)
    u32 win_left;
    u32 win_h;
    u32 win_w;
    u32 out_h;
    u32 out_w;
    u32 flags;
    u32 out_dtype;  // DT_*
    u32 h_off;      // horizontal table offset (i32 entries)
    u32 h_ksize;
    u32 v_off;      // vertical table offset
    u32 v_ksize;
    float mean[4];
    float inv_std[4];
    u32 orientation;  // EXIF orientation 1..=8 the source is read through (0 = 1)
    u32 reserved;
};
static_assert(sizeof(FusedDesc) == 120, "FusedDesc size must match src/cuda/desc.rs");

// Color jitter of one u8 HWC RGB image, in place.
struct JitterDesc {
    u64 data;
    u32 pixels;
    u32 order;      // byte k = adjustment applied at step k (0 b, 1 c, 2 s, 3 h)
    u32 enabled;    // bit k = adjustment k is on
    float brightness;
    float contrast;
    float saturation;
    u32 hue_shift;  // byte added to H (mod 256)
    u32 reserved;
};
static_assert(sizeof(JitterDesc) == 40, "JitterDesc size must match src/cuda/desc.rs");

// One region the JPEG engines decoded with nearest-upsampled chroma, to be rebuilt with
// libjpeg's fancy upsampling (chroma.cu). `planes` is scratch of 3 bytes per chroma block the
// region covers (Cb, Cr, state; planar).
struct ChromaDesc {
    u64 src;        // u8 RGB as the engines wrote it, `pitch` bytes per row
    u64 dst;        // u8 RGB rebuilt, same geometry
    u64 planes;
    u32 pitch;
    u32 width;      // the region decoded
    u32 height;
    u32 x0;         // its place in the stored image
    u32 y0;
    u32 image_w;    // the stored image
    u32 image_h;
    u32 sx;         // chroma subsampling: horizontal, vertical (1 or 2)
    u32 sy;
    u32 reserved;
};
static_assert(sizeof(ChromaDesc) == 64, "ChromaDesc size must match src/cuda/desc.rs");
