//! The emulated JPEG decoder's side of a submission: refusals simulated, the images prepared
//! on the caller's thread, and their decode queued on the stream (in the order the JPEG
//! engines keep: `order.rs`), or only their modelled time where a timing model is set.

use std::sync::atomic::Ordering;

use super::{decode, EmuDevice};
use crate::cuda::gpu_device::{DecodeJob, StreamId};
use crate::error::Error;
use crate::nvjpeg::{needs_margin, DecodedInfo, FallbackReason, GpuRoute, NvjpegError};

impl EmuDevice {
    /// [`crate::cuda::gpu_device::GpuDevice::submit_decode`] without its bookkeeping.
    ///
    /// # Safety
    /// As `submit_decode`: each job's output is device memory of this emulation, its bytes
    /// readable and unchanged until an event after the decode completes.
    pub(super) unsafe fn queue_decodes(
        &self,
        stream: StreamId,
        jobs: &[DecodeJob<'_>],
    ) -> Result<Vec<Result<DecodedInfo, NvjpegError>>, Error> {
        let mut results = Vec::with_capacity(jobs.len());
        let mut queued = Vec::new();
        let mut engines = false;
        for j in jobs {
            let refuse = self
                .failing_decodes
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |k| k.checked_sub(1))
                .is_ok();
            if refuse {
                let why = FallbackReason::NvjpegFailed("simulated decoder failure".into());
                results.push(Err(NvjpegError::CpuFallback(why)));
                continue;
            }
            let pad = !self.options.exact_roi || (j.rebuilt && needs_margin(j.header));
            match decode::prepare(j, pad, self.options.interpolate) {
                Ok((info, q)) => {
                    engines |= info.route == GpuRoute::Hardware;
                    results.push(Ok(info));
                    queued.push(q);
                }
                Err(e) => results.push(Err(e)),
            }
        }
        if queued.is_empty() {
            return Ok(results);
        }
        if let Some(model) = &self.options.model {
            // The host's time now, on the caller's thread; the engines' on the stream.
            let mp: Vec<f64> = queued
                .iter()
                .map(|q| (q.header.width() * q.header.height()) as f64 / 1e6)
                .collect();
            crate::cuda::timing_model::busy_for(model.submit_time(&mp));
            let before = self
                .modelled_images
                .fetch_add(mp.len() as u64, Ordering::Relaxed);
            let wait = model.wait_time(before, mp.len());
            if !wait.is_zero() {
                std::thread::sleep(wait);
            }
            self.delay(stream, model.engine_time(&mp))?;
            return Ok(results);
        }
        // The JPEG engines write when they are called, whatever the stream waits for (the
        // CUDA decoders keep stream order): `order::Order::engines_op`.
        let op = if engines {
            self.order.engines_op(stream.0)
        } else {
            self.order.op(stream.0)
        };
        let threads = self.threads;
        self.queue_as(stream, op, move |mem| {
            let chunk = queued.len().div_ceil(threads.max(1)).max(1);
            let faults: Vec<String> = std::thread::scope(|scope| {
                let parts: Vec<_> = queued
                    .chunks(chunk)
                    .map(|part| {
                        scope.spawn(move || {
                            for q in part {
                                // SAFETY: the caller keeps each job's bytes readable and
                                // unchanged until an event after this decode completes
                                // (`submit_decode`'s contract): the decode runs before it.
                                if let Err(fault) = unsafe { decode::run(mem, q) } {
                                    return Some(fault);
                                }
                            }
                            None
                        })
                    })
                    .collect();
                parts
                    .into_iter()
                    .filter_map(|h| h.join().ok().flatten())
                    .collect()
            });
            match faults.into_iter().next() {
                Some(f) => Err(f),
                None => Ok(()),
            }
        })?;
        Ok(results)
    }
}
