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
use crate::nvjpeg::safe::WorkerDecoder;
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

    /// Whether a photo of `pixels` pixels is one for this decoder.
    pub(super) fn takes(pixels: usize) -> bool {
        WorkerDecoder::takes(pixels)
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
        let end = dev.record(stream, false)?;
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::cuda::gpu_device::GpuDevice;
    use crate::decode::{DecodeOptions, ParsedImage, Upsampling};
    use crate::nvjpeg::{DeviceOutput, Roi};
    use crate::testutil::{encode_jpeg, pattern_rgb, psnr_u8, Sub};

    /// A worker's GPU decoder decodes a 1.9 MP photo, whole and a region of it, as our CPU
    /// decoder does (repeated chroma on both; PSNR ≥ 40 dB). Real device only: skips
    /// visibly without one (fails under `STOKEHOLD_REQUIRE_GPU=1`).
    #[test]
    fn gpu_a_workers_gpu_decoder_matches_the_cpu() {
        if crate::cuda::test_support::real_device().is_none() {
            return;
        }
        let dev = crate::cuda::RealDevice::with_upsampling(0, 64, Upsampling::Nearest).unwrap();
        let mut worker = dev
            .worker_decoder()
            .expect("nvJPEG 13 has the GPU-assisted Huffman decoder");
        let (h, w) = (1200, 1600);
        let jpeg = Arc::new(encode_jpeg(&pattern_rgb(h, w), h, w, 3, 90, Sub::S420));
        let opts = DecodeOptions {
            upsampling: Upsampling::Nearest,
            ..DecodeOptions::default()
        };
        let parsed = ParsedImage::parse(&jpeg, &opts).unwrap();
        let header = parsed.jpeg_header().unwrap().clone();
        let roi = Roi {
            x: 333,
            y: 217,
            width: 640,
            height: 480,
        };
        for asked in [None, Some(roi)] {
            let region = dev.region_to_decode(&header, asked, false).unwrap();
            let (rh, rw) = (region.height, region.width);
            let len = rh * rw * 3;
            let out = dev.alloc(len).unwrap();
            // SAFETY: `out` holds the region as RGB and nothing else uses it until the copy
            // back below, queued on the decoder's stream after the decode.
            unsafe {
                worker
                    .decode(
                        &jpeg,
                        h * w,
                        region.decode,
                        DeviceOutput {
                            ptr: out,
                            pitch: rw * 3,
                            len,
                        },
                    )
                    .unwrap()
            };
            let mut got = vec![0u8; len];
            // SAFETY: `out` holds `len` bytes; the copy is ordered after the decode.
            unsafe { dev.copy_to_host(worker.stream(), &mut got, out).unwrap() };
            let d = region.decode.unwrap_or(Roi {
                x: 0,
                y: 0,
                width: w,
                height: h,
            });
            let cpu = parsed.decode_window((d.y, d.x, d.height, d.width)).unwrap();
            let psnr = psnr_u8(cpu.pixels.as_bytes(), &got);
            eprintln!("worker GPU decoder, region {asked:?}: PSNR {psnr:.2} dB against the CPU");
            assert!(psnr >= 40.0, "{asked:?}: {psnr:.2} dB");
            // SAFETY: the copy back waited for every use of it.
            unsafe { dev.free(out) };
        }
    }
}
