//! The GPU stage's first half, the decode: the samples of the batch being filled
//! ([`DeviceFill`]) that the device's JPEG decoder takes are submitted in sub-batches as they
//! arrive ([`GpuStage::offer`]: every `engine_chunk` samples, then the rest when the batch
//! is complete, [`GpuStage::resolve`]), each into a decode area of its own, and the host
//! goes on at once: the kernels wait for the decodes on the device (`gpu_stage`). A refusal
//! is known when the call returns, so an image the decoder refuses is decoded on the CPU
//! then and there (from the header read for the sample), and one that fails there too is
//! taken out of the batch before the batch is complete, as on the CPU path.
//!
//! The device decodes the region its plan names (`GpuDevice::region_to_decode`: an MCU wider on
//! every side for subsampled chroma, whose interpolation `gpu_stage` rebuilds); the sample's
//! descriptor window, set when it was prepared, is the crop's place inside that.

use crate::cuda::chain::SourceDims;
use crate::cuda::gpu_device::{streams, DecodeJob};
use crate::decode::ParsedImage;
use crate::error::{Error, SampleErrorKind};
use crate::nvjpeg::DeviceOutput;

use super::gpu_plan::{Prepared, Source};
use super::gpu_stage::{Decoded, DeviceFill, Entry, GpuStage, Rebuild, ALIGN};

impl GpuStage {
    /// Takes note of the fill's newest sample and submits the device's pending samples once
    /// there are `engine_chunk` of them. Returns the samples that can't be decoded at all
    /// (refused by the device, then failed on the CPU), by their place in the fill, with the
    /// CPU's error: the caller removes them.
    pub(crate) fn offer(
        &self,
        fill: &mut DeviceFill,
    ) -> Result<Vec<(usize, SampleErrorKind)>, Error> {
        note_newest(fill);
        if fill.pending.len() < self.engine_chunk {
            return Ok(Vec::new());
        }
        self.submit_pending(fill)
    }

    /// Takes note of the fill's newest sample and submits every pending one (the batch is
    /// complete, or its epoch ended). Returns the samples that can't be decoded, as
    /// [`GpuStage::offer`] does.
    pub(crate) fn resolve(
        &self,
        fill: &mut DeviceFill,
    ) -> Result<Vec<(usize, SampleErrorKind)>, Error> {
        note_newest(fill);
        self.submit_pending(fill)
    }

    /// One decode submission of the pending samples into a decode area of their own;
    /// refusals decoded on the CPU at once.
    fn submit_pending(
        &self,
        fill: &mut DeviceFill,
    ) -> Result<Vec<(usize, SampleErrorKind)>, Error> {
        let pending = std::mem::take(&mut fill.pending);
        if pending.is_empty() {
            return Ok(Vec::new());
        }
        // Lay out the area: each image at an aligned offset.
        let mut area_len = 0usize;
        let mut at = Vec::with_capacity(pending.len());
        let rebuilt = self.plan.rebuilds_chroma(&*self.dev);
        for &i in &pending {
            let Entry::Sample {
                prepared:
                    Prepared::Chain {
                        source: Source::Device { stored, .. },
                        ..
                    },
                ..
            } = &fill.entries[i]
            else {
                return Err(Error::Cuda("a pending sample is not the device's".into()));
            };
            at.push(area_len);
            area_len = (area_len + stored.0 * stored.1 * 3).next_multiple_of(ALIGN);
        }
        let (batch, n) = (self.batch, pending.len());
        let mut area = self.pools.decoded.take(area_len, streams::DECODE, &|| {
            format!("the decoded images of a batch of {batch} samples ({n} decoded at once)")
        })?;
        let start = self.dev.record(streams::DECODE, true)?;
        let mut jobs = Vec::with_capacity(n);
        for (&i, &offset) in pending.iter().zip(&at) {
            if let Entry::Sample {
                prepared:
                    Prepared::Chain {
                        bytes,
                        source:
                            Source::Device {
                                header,
                                roi,
                                stored,
                                engines_checked,
                                staged,
                                ..
                            },
                        ..
                    },
                ..
            } = &fill.entries[i]
            {
                jobs.push(DecodeJob {
                    // The worker's pinned copy, read in place; else the file's bytes, which
                    // the decoder copies.
                    bytes: staged.as_ref().map_or(bytes.as_slice(), |s| s.as_slice()),
                    pinned: staged.is_some(),
                    header,
                    roi: *roi,
                    rebuilt,
                    engines_checked: *engines_checked,
                    out: DeviceOutput {
                        ptr: area.ptr() + offset as u64,
                        pitch: stored.1 * 3,
                        len: stored.0 * stored.1 * 3,
                    },
                });
            }
        }
        // SAFETY: each output lies in `area`, laid out for its plan (the device's own
        // `region_to_decode`, in `prepare`), which nothing else uses until the kernels' release
        // event (the area goes back to the pool with it); each job's bytes are kept by the
        // fill's entries and then by `keep_until` below until the decodes' event.
        let pixels: u64 = jobs
            .iter()
            .map(|j| (j.header.width() * j.header.height()) as u64)
            .sum();
        let t0 = std::time::Instant::now();
        let queued = unsafe { self.dev.submit_decode(streams::DECODE, &jobs) }
            .and_then(|outcome| Ok((outcome, self.dev.record(streams::DECODE, true)?)));
        let (outcome, end) = match queued {
            Ok(q) => q,
            Err(e) => {
                // Part of it may be queued, reading the bytes the entries hold: the device
                // is done with them before they go (the error fails the pipeline anyway).
                let _ = self.dev.synchronize_all();
                return Err(e);
            }
        };
        self.split.submitted(jobs.len(), pixels, t0.elapsed());
        drop(jobs);
        area.used_until(end.clone());
        self.keep_until(&end, pending.iter().map(|&i| &fill.entries[i]));
        self.push_timing(false, start, end.clone());
        let mut failed = Vec::new();
        for ((&i, &offset), r) in pending.iter().zip(&at).zip(outcome) {
            let Entry::Sample {
                prepared: Prepared::Chain { source, .. },
                decoded,
            } = &mut fill.entries[i]
            else {
                continue;
            };
            let Source::Device { header, stored, .. } = &*source else {
                continue;
            };
            let info = match r {
                Ok(info) if (info.height, info.width) == *stored => info,
                Ok(info) => {
                    self.refused(&format!(
                        "the device would write {}x{}, its plan said {}x{}",
                        info.width, info.height, stored.1, stored.0
                    ));
                    if let Err(kind) = self.decode_on_cpu(&mut fill.entries[i]) {
                        failed.push((i, kind));
                    }
                    continue;
                }
                Err(e) => {
                    self.refused(&e.to_string());
                    if let Err(kind) = self.decode_on_cpu(&mut fill.entries[i]) {
                        failed.push((i, kind));
                    }
                    continue;
                }
            };
            let rebuild = if rebuilt {
                Rebuild::of(header, info.roi, info.width, info.height)
            } else {
                None
            };
            *decoded = Some(Decoded {
                ptr: area.ptr() + offset as u64,
                dims: SourceDims {
                    height: stored.0,
                    width: stored.1,
                    channels: 3,
                    pitch: stored.1 * 3,
                },
                rebuild,
            });
        }
        fill.areas.push(area);
        fill.decoded_at.push(end);
        Ok(failed)
    }

    /// Counts and logs a refusal of the device's decoder.
    fn refused(&self, why: &str) {
        self.stats.count_gpu_source("device-decoder-refused");
        tracing::debug!("the device's decoder refused an image ({why}); decoding on the CPU");
    }

    /// Keeps the encoded bytes of `entries` (the files' and their pinned copies) alive
    /// until the host has seen `event` complete (the device reads them until then; the JPEG
    /// engines read when called, which only the host's view orders).
    fn keep_until<'e>(
        &self,
        event: &crate::cuda::gpu_device::Event,
        entries: impl Iterator<Item = &'e Entry>,
    ) {
        let (mut files, mut copies) = (Vec::new(), Vec::new());
        for e in entries {
            if let Entry::Sample {
                prepared: Prepared::Chain { bytes, source, .. },
                ..
            } = e
            {
                files.push(bytes.clone());
                if let Source::Device {
                    staged: Some(s), ..
                } = source
                {
                    copies.push(s.clone());
                }
            }
        }
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        kept.retain(|(e, _, _)| !self.dev.is_complete(e).unwrap_or(false));
        kept.push((event.clone(), files, copies));
    }

    /// Turns a sample the device refused into one decoded on the CPU (the crop window, as
    /// displayed, from the header read for the sample), or returns the CPU decoder's error.
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
            cause: "device-decoder-refused",
        };
        Ok(())
    }
}

/// Adds the fill's newest sample to the pending ones when the device's decoder takes it.
fn note_newest(fill: &mut DeviceFill) {
    let last = fill.entries.len().wrapping_sub(1);
    if let Some(Entry::Sample {
        prepared:
            Prepared::Chain {
                source: Source::Device { .. },
                ..
            },
        decoded: None,
    }) = fill.entries.get(last)
    {
        if fill.pending.last() != Some(&last) {
            fill.pending.push(last);
        }
    }
}
