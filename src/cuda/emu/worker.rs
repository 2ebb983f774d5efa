//! The emulated prep worker's GPU decoder ([`WorkerJpeg`]), as a real device's nvJPEG decoder
//! with the Huffman stage on the GPU (`STOKEHOLD_GPU_HUFFMAN=1`): on a stream of its own, the
//! region written by our CPU decoder on the stream's thread as the emulated engines' decodes
//! are (`decode.rs`), in stream order (nvJPEG's CUDA decoders keep it), its output checked by
//! the stream-order clocks like any device write. What nvJPEG would not decode on the device
//! (`route_header`) is refused, for the CPU. Not offered with a timing model (no time for it
//! was measured).

use std::sync::Arc;

use crate::cuda::gpu_device::{StreamId, WorkerJpeg};
use crate::decode::{DecodeOptions, ParsedImage};
use crate::nvjpeg::safe::{output_size, GPU_HYBRID_MIN_PIXELS};
use crate::nvjpeg::{route_header, DeviceOutput, FallbackReason, NvjpegError, Roi, Route};

use super::decode::{self, Queued};
use super::memory::Memory;
use super::order::Order;
use super::stream::EmuStream;

/// A worker's decoder: its stream, and the device's memory and clocks.
pub(super) struct EmuWorkerJpeg {
    pub(super) id: StreamId,
    pub(super) stream: Arc<EmuStream>,
    pub(super) memory: Arc<Memory>,
    pub(super) order: Arc<Order>,
    /// Chroma interpolated (the emulation's `interpolate`), else repeated.
    pub(super) fancy: bool,
}

impl WorkerJpeg for EmuWorkerJpeg {
    fn stream(&self) -> StreamId {
        self.id
    }

    unsafe fn decode(
        &mut self,
        bytes: &Arc<Vec<u8>>,
        pixels: usize,
        roi: Option<Roi>,
        out: DeviceOutput,
    ) -> Result<(), NvjpegError> {
        // As the real one: only images its GPU Huffman decoder is for.
        if pixels < GPU_HYBRID_MIN_PIXELS {
            let why = format!("under {GPU_HYBRID_MIN_PIXELS} pixels, for the GPU Huffman decoder");
            return Err(NvjpegError::CpuFallback(FallbackReason::NvjpegUnsupported(
                why,
            )));
        }
        let refused = |e: String| NvjpegError::CpuFallback(FallbackReason::NvjpegFailed(e));
        let header = ParsedImage::parse(bytes, &DecodeOptions::default())
            .map_err(|e| refused(e.to_string()))?
            .into_jpeg_header()
            .ok_or_else(|| refused("not a JPEG".into()))?;
        if let Route::Cpu(reason) = route_header(&header, true) {
            return Err(NvjpegError::CpuFallback(reason));
        }
        let (width, height) = output_size(header.width(), header.height(), roi, out)?;
        let q = Queued {
            bytes: bytes.as_ptr() as u64,
            len: bytes.len(),
            header,
            roi,
            out,
            width,
            height,
            fancy: self.fancy,
        };
        // The bytes stay with the work until it has run, as nvJPEG's decoder keeps them.
        let kept = bytes.clone();
        let op = self.order.op(self.id.0);
        let memory = self.memory.clone();
        self.stream.push(Box::new(move || {
            let _kept = &kept;
            // SAFETY: `q.bytes` is `kept`'s buffer, alive and unchanged while this runs (an
            // `Arc` of bytes no one writes).
            unsafe { decode::run(&memory.access(Some(op)), &q) }
        }));
        Ok(())
    }
}
