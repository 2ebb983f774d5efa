//! The prep worker's own GPU decode (`STOKEHOLD_GPU_HUFFMAN=1`, not yet measured on a GPU):
//! of the samples the split gives the workers rather than the JPEG engines, photos of at
//! least a megapixel go to nvJPEG's decoder with the Huffman stage on the GPU
//! ([`GpuDevice::worker_decoder`]) instead of our CPU decoder. Its host phase is a fraction
//! of a CPU decode of such a photo, so the workers' share can grow — the second decoder
//! DALI gives large photos (its `hybrid_huffman_threshold`). The sample then reaches the
//! assembler decoded, like one the feeding thread submitted: its pixels in a decode area of
//! its own, written once the event recorded after it on the worker's stream completes.

use std::sync::{Arc, Mutex};

use crate::cuda::chain::SourceDims;
use crate::cuda::gpu_device::{GpuDevice, WorkerJpeg};
use crate::cuda::pool::DevicePool;
use crate::error::Error;
use crate::nvjpeg::{DeviceOutput, Roi};

use super::gpu_decoded::{DecodeArea, Decoded, DeviceDecoded, Rebuild};

/// A prep worker's GPU decoder and the pool of the areas it writes.
pub(crate) struct GpuHuffman {
    decoder: Box<dyn WorkerJpeg>,
    areas: Arc<DevicePool>,
}

impl GpuHuffman {
    /// The worker's decoder where `STOKEHOLD_GPU_HUFFMAN=1` and the device has one.
    pub(super) fn for_worker(dev: &dyn GpuDevice, areas: &Arc<DevicePool>) -> Option<GpuHuffman> {
        if std::env::var("STOKEHOLD_GPU_HUFFMAN").as_deref() != Ok("1") {
            return None;
        }
        let decoder = dev.worker_decoder()?;
        Some(GpuHuffman {
            decoder,
            areas: areas.clone(),
        })
    }

    /// Decodes `bytes` (a photo of `pixels` pixels), region `roi` of it, which the device
    /// writes as `stored` = (rows, columns) of RGB, into an area of its own; `rebuild` as the
    /// engines' output would have it. `Err` where the decoder refuses the image: the caller
    /// decodes it on the CPU.
    pub(super) fn decode(
        &mut self,
        dev: &dyn GpuDevice,
        bytes: &Arc<Vec<u8>>,
        pixels: usize,
        roi: Option<Roi>,
        stored: (usize, usize),
        rebuild: Option<Rebuild>,
    ) -> Result<DeviceDecoded, Error> {
        let (h, w) = stored;
        let len = h * w * 3;
        let stream = self.decoder.stream();
        let mut buffer = self.areas.take(len, stream, &|| {
            format!("a {w}x{h} photo decoded by a prep worker's GPU decoder")
        })?;
        let out = DeviceOutput {
            ptr: buffer.ptr(),
            pitch: w * 3,
            len,
        };
        // SAFETY: `buffer` is device memory of this device for `len` bytes, the region as
        // RGB; nothing else uses it until the event recorded below (the pool hands it out
        // again only after the release events its users add).
        let queued = unsafe { self.decoder.decode(bytes, pixels, roi, out) };
        // Recorded either way: part of a failed decode may be queued.
        let end = match dev.record(stream, false) {
            Ok(e) => e,
            Err(e) => {
                // The buffer goes back to its pool without a release event: the device is
                // done with it first (the error fails the pipeline anyway).
                let _ = dev.synchronize_all();
                return Err(e);
            }
        };
        buffer.used_until(end.clone());
        queued.map_err(Error::from)?;
        Ok(DeviceDecoded {
            at: Decoded {
                ptr: buffer.ptr(),
                dims: SourceDims {
                    height: h,
                    width: w,
                    channels: 3,
                    pitch: w * 3,
                },
                rebuild,
            },
            area: Arc::new(DecodeArea {
                buffer: Mutex::new(buffer),
                end,
            }),
        })
    }
}
