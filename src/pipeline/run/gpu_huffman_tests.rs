//! The prep workers' own GPU decoder on a real device (`gpu_huffman`).

use std::sync::Arc;

use crate::cuda::gpu_device::GpuDevice;
use crate::decode::{DecodeOptions, ParsedImage, Upsampling};
use crate::nvjpeg::{DeviceOutput, NvjpegError, Roi};
use crate::testutil::{encode_jpeg, pattern_rgb, psnr_u8, Sub};

/// A worker's GPU decoder decodes a 1.9 MP photo, whole and a region of it, as our CPU
/// decoder does, with either chroma upsampling (PSNR ≥ 40 dB). Real device only: skips
/// visibly without one (fails under `STOKEHOLD_REQUIRE_GPU=1`).
#[test]
fn gpu_a_workers_gpu_decoder_matches_the_cpu() {
    if crate::cuda::test_support::real_device().is_none() {
        return;
    }
    for upsampling in [Upsampling::Nearest, Upsampling::Fancy] {
        decodes_as_the_cpu(upsampling);
    }
}

fn decodes_as_the_cpu(upsampling: Upsampling) {
    let dev =
        crate::cuda::RealDevice::with_upsampling(0, 64, upsampling, &crate::cuda::Kernel::ALL)
            .unwrap();
    let mut worker = dev.worker_decoder().unwrap_or_else(|| {
        panic!("{upsampling:?}: no GPU-assisted Huffman decoder with the engines' chroma")
    });
    let (h, w) = (1200, 1600);
    let jpeg = Arc::new(encode_jpeg(&pattern_rgb(h, w), h, w, 3, 90, Sub::S420));
    let opts = DecodeOptions {
        upsampling,
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
        let queued = unsafe {
            worker.decode(
                &jpeg,
                h * w,
                region.decode,
                DeviceOutput {
                    ptr: out,
                    pitch: rw * 3,
                    len,
                },
            )
        };
        match (queued, asked) {
            (Ok(()), _) => {}
            // nvJPEG's GPU Huffman decoder may not take a region: the worker then leaves
            // the sample to the CPU (never to the CPU-Huffman decoder). The whole image it
            // must take.
            (Err(NvjpegError::CpuFallback(why)), Some(_)) => {
                eprintln!("worker GPU decoder, {upsampling:?}: refuses a region ({why})");
                // SAFETY: nothing was queued that writes it.
                unsafe { dev.free(out) };
                continue;
            }
            (Err(e), _) => panic!("{upsampling:?}, region {asked:?}: {e}"),
        }
        let mut got = vec![0u8; len];
        // SAFETY: `out` holds `len` bytes; the copy is ordered after the decode.
        unsafe { dev.copy_to_host(worker.stream(), &mut got, out).unwrap() };
        // What was asked for, inside what was written (a padded ROI's border is nvJPEG's
        // to get wrong before 13.3: the stage reads the window only).
        let win = region.window;
        let mut got_window = Vec::with_capacity(win.width * win.height * 3);
        for y in win.y..win.y + win.height {
            let row = (y * rw + win.x) * 3;
            got_window.extend_from_slice(&got[row..row + win.width * 3]);
        }
        let a = asked.unwrap_or(Roi {
            x: 0,
            y: 0,
            width: w,
            height: h,
        });
        let cpu = parsed.decode_window((a.y, a.x, a.height, a.width)).unwrap();
        let psnr = psnr_u8(cpu.pixels.as_bytes(), &got_window);
        eprintln!(
            "worker GPU decoder, {upsampling:?}, region {asked:?}: PSNR {psnr:.2} dB against the CPU"
        );
        assert!(psnr >= 40.0, "{asked:?}: {psnr:.2} dB");
        // SAFETY: the copy back waited for every use of it.
        unsafe { dev.free(out) };
    }
}
