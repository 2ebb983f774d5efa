//! The GPU stage's first half, the decode. The feeding thread submits the samples the
//! device's JPEG decoder takes in groups as they arrive, ahead of the assembler
//! (`assembler::ahead`, [`GpuStage::decode`]): each group into a decode area of its own, and
//! the thread goes on at once: the kernels wait for the decodes on the device (`gpu_stage`).
//! A refusal is known when the call returns, so an image the decoder refuses is decoded on
//! the CPU then and there (from the header read for the sample), and one that fails there too
//! reaches the assembler as a failed sample, before its batch is drawn up, as on the CPU path.
//! A padding repeat's sample, which the assembler adds itself, is submitted from its fill
//! ([`GpuStage::resolve`]).
//!
//! The device decodes the region its plan names (`GpuDevice::region_to_decode`: an MCU wider on
//! every side for subsampled chroma, whose interpolation `gpu_stage` rebuilds); the sample's
//! descriptor window, set when it was prepared, is the crop's place inside that.

use std::sync::Arc;

use crate::cuda::chain::SourceDims;
use crate::cuda::gpu_device::{streams, DecodeJob};
use crate::decode::ParsedImage;
use crate::error::{Error, SampleErrorKind};
use crate::nvjpeg::DeviceOutput;

use super::gpu_plan::{Prepared, Source};
use super::gpu_stage::{
    DecodeArea, Decoded, DeviceDecoded, DeviceFill, Entry, GpuStage, Rebuild, ALIGN,
};

impl GpuStage {
    /// Submits the fill's samples the device has not decoded (the feeding thread decodes
    /// every sample ahead of the assembler; this is for the ones the assembler adds itself:
    /// a padding repeat's sample) in one call. Returns the samples that can't be decoded at
    /// all (refused by the device, then failed on the CPU), by their place in the fill, with
    /// the CPU's error: the caller removes them.
    pub(crate) fn resolve(
        &self,
        fill: &mut DeviceFill,
    ) -> Result<Vec<(usize, SampleErrorKind)>, Error> {
        let mut places = Vec::new();
        let mut samples = Vec::new();
        for (i, e) in fill.entries.iter_mut().enumerate() {
            if let Entry::Sample {
                prepared:
                    p @ Prepared::Chain {
                        source: Source::Device { .. },
                        ..
                    },
                decoded: None,
            } = e
            {
                places.push(i);
                samples.push(p);
            }
        }
        if samples.is_empty() {
            return Ok(Vec::new());
        }
        let outcome = self.decode(&mut samples)?;
        let mut failed = Vec::new();
        for (&i, r) in places.iter().zip(outcome) {
            match r {
                Some(kind) => failed.push((i, kind)),
                None => fill.adopt(i),
            }
        }
        Ok(failed)
    }

    /// One decode submission of `samples` (each decoded by the device: [`Source::Device`])
    /// into a decode area of their own, which each sample's source then points into; an image
    /// the device refuses is decoded on the CPU at once (its source becomes
    /// [`Source::Host`]). Returns, for each sample, the CPU's error when it can't be decoded
    /// at all. Called by the feeding thread ahead of the assembler (`assembler::ahead`).
    pub(crate) fn decode(
        &self,
        samples: &mut [&mut Prepared],
    ) -> Result<Vec<Option<SampleErrorKind>>, Error> {
        if samples.is_empty() {
            return Ok(Vec::new());
        }
        // Lay out the area: each image at an aligned offset.
        let mut area_len = 0usize;
        let mut at = Vec::with_capacity(samples.len());
        let rebuilt = self.plan.rebuilds_chroma(&*self.dev);
        for p in samples.iter() {
            let Prepared::Chain {
                source: Source::Device { stored, .. },
                ..
            } = &**p
            else {
                return Err(Error::Cuda("a sample to decode is not the device's".into()));
            };
            at.push(area_len);
            area_len += (stored.0 * stored.1 * 3).next_multiple_of(ALIGN);
        }
        // After the warm-up the areas have the size `area_sizes` bounds a group by; a group
        // a little past it (a large photo's wide crop among the others) goes in parts that
        // each fit a settled area, rather than allocate (the pool keeps one area to spare,
        // and `area_sizes` makes a group past its bound rare).
        if samples.len() > 1 && self.pools.decoded.a_little_past_settled(area_len) {
            // The most images from the front whose area fits (`at[i]`: the first i's).
            let cut = at
                .iter()
                .position(|&end| self.pools.decoded.past_settled(end))
                .map_or(samples.len() - 1, |i| i - 1)
                .max(1);
            self.stats.count_split_group();
            let (first, rest) = samples.split_at_mut(cut);
            let mut failed = self.decode(first)?;
            failed.extend(self.decode(rest)?);
            return Ok(failed);
        }
        self.area_sizes.add(
            at.iter()
                .zip(at.iter().skip(1).chain([&area_len]))
                .map(|(a, b)| b - a),
        );
        let (batch, n) = (self.batch, samples.len());
        let mut area = self.pools.decoded.take(area_len, streams::DECODE, &|| {
            format!("the decoded images of a batch of {batch} samples ({n} decoded at once)")
        })?;
        let start = self.dev.record(streams::DECODE, true)?;
        let mut jobs = Vec::with_capacity(n);
        for (p, &offset) in samples.iter().zip(&at) {
            if let Prepared::Chain {
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
            } = &**p
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
        // events (the area goes back to the pool with them); each job's bytes are kept by
        // `samples` and then by `keep_until` below until the decodes' event.
        let pixels: u64 = jobs
            .iter()
            .map(|j| (j.header.width() * j.header.height()) as u64)
            .sum();
        let (t0, cpu0) = (std::time::Instant::now(), super::threads::this_thread_cpu());
        let queued = unsafe { self.dev.submit_decode(streams::DECODE, &jobs) }
            .and_then(|outcome| Ok((outcome, self.dev.record(streams::DECODE, true)?)));
        let (outcome, end) = match queued {
            Ok(q) => q,
            Err(e) => {
                // Part of it may be queued, reading the bytes the samples hold: the device
                // is done with them before they go (the error fails the pipeline anyway).
                let _ = self.dev.synchronize_all();
                return Err(e);
            }
        };
        // Without a thread CPU clock the call counts as all CPU (nvJPEG's waits spin).
        let wall = t0.elapsed();
        let cpu = super::threads::this_thread_cpu()
            .zip(cpu0)
            .map_or(wall, |(c1, c0)| c1.saturating_sub(c0));
        self.split.submitted(jobs.len(), pixels, (wall, cpu));
        let bytes = jobs.iter().map(|j| j.out.len).sum();
        self.split.decoded_pixels(bytes, jobs.len());
        drop(jobs);
        area.used_until(end.clone());
        self.keep_until(&end, samples.iter().map(|p| &**p));
        self.push_timing(false, start, end.clone());
        let base = area.ptr();
        let area = Arc::new(DecodeArea {
            buffer: std::sync::Mutex::new(area),
            end,
        });
        let mut failed = Vec::with_capacity(n);
        for ((p, &offset), r) in samples.iter_mut().zip(&at).zip(outcome) {
            let Prepared::Chain { source, .. } = &mut **p else {
                failed.push(None);
                continue;
            };
            let Source::Device {
                header,
                stored,
                decoded,
                ..
            } = source
            else {
                failed.push(None);
                continue;
            };
            let info = match r {
                Ok(info) if (info.height, info.width) == *stored => info,
                Ok(info) => {
                    self.refused(&format!(
                        "the device would write {}x{}, its plan said {}x{}",
                        info.width, info.height, stored.1, stored.0
                    ));
                    failed.push(self.decode_on_cpu(p).err());
                    continue;
                }
                Err(e) => {
                    self.refused(&e.to_string());
                    failed.push(self.decode_on_cpu(p).err());
                    continue;
                }
            };
            let rebuild = if rebuilt {
                Rebuild::of(header, info.roi, info.width, info.height)
            } else {
                None
            };
            *decoded = Some(DeviceDecoded {
                at: Decoded {
                    ptr: base + offset as u64,
                    dims: SourceDims {
                        height: stored.0,
                        width: stored.1,
                        channels: 3,
                        pitch: stored.1 * 3,
                    },
                    rebuild,
                },
                area: area.clone(),
            });
            failed.push(None);
        }
        Ok(failed)
    }

    /// Counts and logs a refusal of the device's decoder.
    fn refused(&self, why: &str) {
        self.stats.count_gpu_source("device-decoder-refused");
        tracing::debug!("the device's decoder refused an image ({why}); decoding on the CPU");
    }

    /// Keeps the encoded bytes of `samples` (the files' and their pinned copies) alive
    /// until the host has seen `event` complete (the device reads them until then; the JPEG
    /// engines read when called, which only the host's view orders).
    fn keep_until<'e>(
        &self,
        event: &crate::cuda::gpu_device::Event,
        samples: impl Iterator<Item = &'e Prepared>,
    ) {
        let (mut files, mut copies) = (Vec::new(), Vec::new());
        for p in samples {
            if let Prepared::Chain { bytes, source, .. } = p {
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
        self.sweep_kept(&mut kept);
        kept.push((event.clone(), files, copies));
    }

    /// Lets go of what `kept` holds for work the device has finished; the files' buffers go
    /// back to the pools for the readers (where their batch is gone too).
    pub(super) fn sweep_kept(&self, kept: &mut Vec<super::gpu_stage::KeptBytes>) {
        for (_, files, _) in
            kept.extract_if(.., |(e, _, _)| self.dev.is_complete(e).unwrap_or(false))
        {
            files.into_iter().for_each(crate::scratch::recycle_encoded);
        }
    }

    /// Turns a sample the device refused into one decoded on the CPU (the crop window, as
    /// displayed, from the header read for the sample), or returns the CPU decoder's error.
    fn decode_on_cpu(&self, prepared: &mut Prepared) -> Result<(), SampleErrorKind> {
        let Prepared::Chain {
            bytes,
            source,
            fused,
        } = prepared
        else {
            return Ok(());
        };
        let Source::Device { header, window, .. } = source else {
            return Ok(());
        };
        let parsed =
            ParsedImage::with_jpeg_header(bytes, self.plan.decode_options(), header.clone());
        let image = parsed
            .decode_window(*window)
            .map_err(SampleErrorKind::Decode)?;
        fused.window = (0, 0, image.height, image.width);
        fused.orientation = 1;
        *source = Source::Host {
            image,
            cause: "device-decoder-refused",
            staged: None,
        };
        Ok(())
    }
}
