//! The GPU stage's first half, the decode: the samples of a batch being filled
//! ([`DeviceFill`]) decoded by the device's JPEG decoder in one submission on the decode
//! stream (nvJPEG's submit, then finish at the batch's fence), and those decoded on the CPU
//! uploaded behind them; images the device failed on, at once or only at the fence, are
//! decoded again on the CPU from the header read for the sample. `gpu_stage` then launches
//! the kernels over the batch.
//!
//! The device decodes the region its plan names (`GpuDevice::plan_decode`: nvJPEG before
//! 13.3 pads ROIs by an MCU); the sample's descriptor window, set when it was prepared, is
//! the crop's place inside that.

use crate::cuda::chain::SourceDims;
use crate::cuda::gpu_device::{streams, DecodeJob};
use crate::decode::ParsedImage;
use crate::error::{Error, SampleErrorKind};
use crate::nvjpeg::DeviceOutput;

use super::gpu_plan::{Prepared, Source};
use super::gpu_stage::{Decoded, DeviceFill, Entry, GpuStage, ALIGN};

impl GpuStage {
    /// Decodes the samples of `fill` not decoded yet: one decode call for those the device
    /// decodes, uploads for those decoded on the CPU, then (host) waits for it. Images the
    /// device failed on are decoded again on the CPU; those that fail there too are
    /// returned, by their place in the fill, with the CPU's error (the caller removes them).
    pub(crate) fn resolve(
        &self,
        fill: &mut DeviceFill,
    ) -> Result<Vec<(usize, SampleErrorKind)>, Error> {
        let mut failed = Vec::new();
        // Two rounds at most: the second uploads what the device failed to decode.
        for _ in 0..2 {
            let redo = self.resolve_round(fill, &mut failed)?;
            if !redo {
                break;
            }
        }
        failed.sort_by_key(|f| f.0);
        Ok(failed)
    }

    /// One decode round; true when images the device failed on now wait for an upload.
    ///
    /// The device's decodes are submitted first (the device copies their bytes), then the
    /// images decoded on the CPU are staged and uploaded behind them on the decode stream,
    /// and the host waits at the decodes' fence (`finish_decode`) for their outcome; the
    /// kernels wait for the uploads on the device.
    fn resolve_round(
        &self,
        fill: &mut DeviceFill,
        failed: &mut Vec<(usize, SampleErrorKind)>,
    ) -> Result<bool, Error> {
        // Lay out the area: each pending image at an aligned offset; the staging of the
        // images decoded on the CPU.
        let mut area_len = 0usize;
        let mut staged_len = 0usize;
        let mut pending = Vec::new();
        for (i, e) in fill.entries.iter().enumerate() {
            let Entry::Sample {
                prepared: Prepared::Chain { source, .. },
                decoded: None,
            } = e
            else {
                continue;
            };
            let (h, w, c, staged) = match source {
                Source::Device { stored, .. } => (stored.0, stored.1, 3, 0),
                Source::Host { image, .. } => {
                    let n = image.pixels.len();
                    (image.height, image.width, image.channels, n)
                }
            };
            pending.push((i, area_len, staged_len, (h, w, c)));
            area_len = (area_len + h * w * c).next_multiple_of(ALIGN);
            staged_len = (staged_len + staged).next_multiple_of(ALIGN);
        }
        if pending.is_empty() {
            return Ok(false);
        }
        let (batch, n) = (self.batch, pending.len());
        let mut area = self.pool.take(area_len, streams::DECODE, &|| {
            format!("the decoded images of a batch of {batch} samples ({n} decoded at once)")
        })?;
        let start = self.dev.record(streams::DECODE, true)?;
        // The device's decodes.
        let mut jobs = Vec::new();
        let mut job_of = Vec::new();
        for &(i, at, _, (h, w, _)) in &pending {
            if let Entry::Sample {
                prepared:
                    Prepared::Chain {
                        bytes,
                        source: Source::Device { header, roi, .. },
                        ..
                    },
                ..
            } = &fill.entries[i]
            {
                job_of.push(i);
                jobs.push(DecodeJob {
                    bytes: bytes.as_slice(),
                    header,
                    roi: *roi,
                    out: DeviceOutput {
                        ptr: area.ptr() + at as u64,
                        pitch: w * 3,
                        len: h * w * 3,
                    },
                });
            }
        }
        let ticket = if jobs.is_empty() {
            None
        } else {
            // SAFETY: each output lies in `area`, laid out for its plan (the device's own
            // `plan_decode`, in `prepare`), which no other work uses until the kernels'
            // release event; the ticket is finished below before anything reads them.
            let t = unsafe { self.dev.submit_decode(streams::DECODE, &jobs)? };
            // Whatever happens next, the area goes back to the pool only after the decodes
            // writing into it.
            area.used_until(self.dev.record(streams::DECODE, false)?);
            Some(t)
        };
        drop(jobs);
        // The images decoded on the CPU, behind the decodes on the same stream.
        let end = if staged_len == 0 {
            self.dev.record(streams::DECODE, true)?
        } else {
            let mut staging = self.staging.lock().unwrap_or_else(|p| p.into_inner());
            let mut lease = staging.lease(staged_len, streams::DECODE)?;
            for &(i, at, st, (h, w, c)) in &pending {
                if let Entry::Sample {
                    prepared:
                        Prepared::Chain {
                            source: Source::Host { image, .. },
                            ..
                        },
                    ..
                } = &fill.entries[i]
                {
                    let px = image.pixels.as_bytes();
                    lease.bytes()[st..st + px.len()].copy_from_slice(px);
                    // SAFETY: the staged bytes stay in the lease until the event it is given
                    // below; the destination is inside `area` (laid out for h × w × c
                    // bytes), used by nothing else until the kernels' release event.
                    unsafe {
                        self.dev.copy_to_device(
                            streams::DECODE,
                            area.ptr() + at as u64,
                            lease.ptr(st),
                            h * w * c,
                        )?
                    };
                }
            }
            let end = self.dev.record(streams::DECODE, true)?;
            lease.done_at(end.clone());
            end
        };
        // The host waits here, once per batch, for the decodes' outcome: some nvJPEG errors
        // show only at the fence.
        let outcome = match ticket {
            Some(t) => self.dev.finish_decode(t)?,
            None => Vec::new(),
        };
        self.timings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back((false, start, end.clone()));
        let mut redo = false;
        let mut device_ok = vec![true; fill.entries.len()];
        for (&i, r) in job_of.iter().zip(outcome) {
            let why = match r {
                Ok(info) => match &fill.entries[i] {
                    Entry::Sample {
                        prepared:
                            Prepared::Chain {
                                source: Source::Device { stored, .. },
                                ..
                            },
                        ..
                    } if (info.height, info.width) != *stored => format!(
                        "the device wrote {}x{}, its plan said {}x{}",
                        info.width, info.height, stored.1, stored.0
                    ),
                    _ => continue,
                },
                Err(e) => e.to_string(),
            };
            device_ok[i] = false;
            self.stats.count_gpu_source("device-decoder-failed");
            tracing::debug!("device decode failed ({why}); decoding on the CPU");
            match self.decode_on_cpu(&mut fill.entries[i]) {
                Ok(()) => redo = true,
                Err(kind) => failed.push((i, kind)),
            }
        }
        for &(i, at, _, (h, w, c)) in &pending {
            if !device_ok[i] {
                continue;
            }
            if let Entry::Sample { decoded, .. } = &mut fill.entries[i] {
                *decoded = Some(Decoded {
                    ptr: area.ptr() + at as u64,
                    dims: SourceDims {
                        height: h,
                        width: w,
                        channels: c,
                        pitch: w * c,
                    },
                });
            }
        }
        area.used_until(end.clone());
        fill.areas.push(area);
        fill.decoded_at.push(end);
        Ok(redo)
    }

    /// Turns a sample the device failed to decode into one decoded on the CPU (the crop
    /// window, as displayed, from the header read for the sample), or returns the CPU
    /// decoder's error.
    fn decode_on_cpu(&self, entry: &mut Entry) -> Result<(), SampleErrorKind> {
        let Entry::Sample {
            prepared:
                Prepared::Chain {
                    bytes,
                    source,
                    fused,
                },
            ..
        } = entry
        else {
            return Ok(());
        };
        let Source::Device { header, window, .. } = source else {
            return Ok(());
        };
        let parsed =
            ParsedImage::with_jpeg_header(bytes, self.plan.decode_options(), (**header).clone());
        let image = parsed
            .decode_window(*window)
            .map_err(SampleErrorKind::Decode)?;
        fused.window = (0, 0, image.height, image.width);
        fused.orientation = 1;
        *source = Source::Host {
            image,
            cause: "device-decoder-failed",
        };
        Ok(())
    }
}
