//! Owned nvJPEG objects, each destroyed by `Drop` (`handle.rs`), and the [`BatchDecoder`]
//! built from them (`batch.rs`, with its two paths in `decoupled.rs` and `hardware.rs`), the
//! memory they use (`alloc.rs`, `ring.rs`), the CUDA context they belong to (`context.rs`)
//! and the region a ROI decodes (`roi.rs`).
//!
//! # CUDA context and stream
//!
//! nvJPEG uses the CUDA runtime API, which works in the context current on the calling
//! thread. Every decoder holds its [`GpuContext`] and makes it current at creation and before
//! every call. Streams cross this API as raw `CUstream` / `cudaStream_t` values (`*mut
//! c_void`; null is the legacy default stream) and output buffers as `CUdeviceptr` values
//! (`u64`), so that `src/cuda` can pass its own types' raw handles.

mod alloc;
mod batch;
mod context;
mod decoupled;
mod handle;
mod hardware;
mod ring;
mod roi;
mod worker;

pub use alloc::{Allocators, BlockCache, CacheStats, MAX_IDLE};
pub use batch::{
    output_size, BackendPreference, BatchDecoder, DecoderConfig, EncodedImage, FeedTimes,
    Submitted, GPU_HYBRID_MIN_PIXELS,
};
pub use context::{
    Counters, CountersSnapshot, CudaGpuContext, EventPool, Fence, GpuContext, MemoryKind,
    PooledEvent,
};
pub use handle::{
    chroma_rebuild_enabled, DecodeParams, DecodedInfo, Decoder, DeviceBuffer, DeviceOutput, Handle,
    JpegState, JpegStream, NvjpegImageInfo, PinnedBuffer, Roi, DEVICE_PADDING, PINNED_PADDING,
};
pub use hardware::SupportChecks;
pub use roi::{decode_region, needs_margin, DecodeRegion};
pub use worker::WorkerDecoder;
