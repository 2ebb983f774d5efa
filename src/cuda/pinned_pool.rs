//! Pinned host buffers handed to a consumer and reused after it drops them: the
//! [`PinnedPool`] behind `batch_memory = "pinned"`.
//!
//! A consumer copies such a buffer to its GPU itself, asynchronously
//! (`.cuda(non_blocking=True)`), and may drop it before the copy has run. So a buffer that
//! comes back is not written again until the copies queued from it before it came back have
//! run:
//!
//! - on a real device, the pool records a **fence** on CUDA's legacy default stream when it
//!   takes back what was dropped (on the pipeline's thread, never the consumer's): it
//!   completes after all work queued before it on that stream and on every blocking stream
//!   (PyTorch's default stream, the per-thread default streams);
//! - a consumer that copies on a stream of its own names it (`PinnedTensor::use_on_stream`,
//!   Python's `Tensor.record_stream`): the tensor records a **release event** on that stream
//!   when it drops, as a device tensor does.
//!
//! Dropping a buffer only puts it on a list (a consumer's thread never waits, frees or
//! records a fence); the pipeline's thread takes it back, prefers buffers whose events are
//! complete, and waits on the host only when every buffer that fits is still being copied
//! (the consumer's GPU is behind). Buffers are made up front ([`PinnedPool::reserve`]), grown
//! to the largest batch at the end of the warm-up ([`PinnedPool::settle`]), and reused, so
//! steady state allocates nothing.

use std::sync::{Arc, Mutex};

use super::gpu_device::{Event, GpuDevice, PinnedHost, StreamId};
use super::pool::GRANULE;
use crate::error::Error;

/// CUDA's legacy default stream as a `CUstream` handle (`CU_STREAM_LEGACY`).
const CU_STREAM_LEGACY: u64 = 1;

/// A buffer not handed out, with the events its last users' work ends at.
struct Idle {
    host: PinnedHost,
    release: Vec<Event>,
}

#[derive(Default)]
struct Lists {
    /// Taken back and fenced: free once their events are complete.
    idle: Vec<Idle>,
    /// Dropped by consumers since the pipeline last took buffers back.
    returned: Vec<Idle>,
    /// The largest buffer made: later ones are at least this large.
    largest: usize,
}

/// Pinned host buffers on one device, reused (see the module docs).
pub struct PinnedPool {
    dev: Arc<dyn GpuDevice>,
    /// Where a fence is recorded for buffers taken back (the legacy default stream of a real
    /// device; none on the emulated device, which has no such stream: its consumers name
    /// theirs).
    fence: Option<StreamId>,
    lists: Mutex<Lists>,
}

impl std::fmt::Debug for PinnedPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedPool")
            .field("back", &self.back())
            .finish()
    }
}

impl PinnedPool {
    /// An empty pool on `dev`.
    pub fn new(dev: Arc<dyn GpuDevice>) -> Result<Arc<PinnedPool>, Error> {
        let fence = if dev.describe().emulated {
            None
        } else {
            // SAFETY: `CU_STREAM_LEGACY` is a handle the driver takes for the legacy default
            // stream of the current context, which lives as long as the context (the device).
            Some(unsafe { dev.adopt_stream(CU_STREAM_LEGACY)? })
        };
        Ok(Arc::new(PinnedPool {
            dev,
            fence,
            lists: Mutex::new(Lists::default()),
        }))
    }

    /// The device.
    pub fn device(&self) -> &Arc<dyn GpuDevice> {
        &self.dev
    }

    fn lists(&self) -> std::sync::MutexGuard<'_, Lists> {
        // Plain lists, consistent after any panic.
        self.lists.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Buffers back in the pool (not handed out): idle, and dropped but not yet taken back.
    pub fn back(&self) -> usize {
        let l = self.lists();
        l.idle.len() + l.returned.len()
    }

    /// The size a new buffer for `len` bytes gets: a quarter more, at least the largest
    /// made, in whole granules (the batches vary in size: the last of an epoch, images of
    /// varying shapes).
    fn new_size(largest: usize, len: usize) -> usize {
        (len.max(1) + len / 4)
            .max(largest)
            .next_multiple_of(GRANULE)
    }

    /// Takes back what consumers dropped: fenced (on a real device) by one event recorded
    /// now, after every copy they queued before they dropped it. Pipeline thread only.
    fn take_back(&self, l: &mut Lists) -> Result<(), Error> {
        if l.returned.is_empty() {
            return Ok(());
        }
        let fence = match self.fence {
            Some(s) => Some(self.dev.record(s, false)?),
            None => None,
        };
        for mut b in l.returned.drain(..) {
            b.release.extend(fence.clone());
            l.idle.push(b);
        }
        Ok(())
    }

    fn is_done(&self, events: &[Event]) -> Result<bool, Error> {
        for e in events {
            if !self.dev.is_complete(e)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// A buffer of at least `len` bytes, free to write (contents unspecified): a buffer back
    /// in the pool whose copies are done, else the one that fits after waiting (on the host,
    /// on this thread: the pipeline's) for its copies, else a new one. `what` names it in an
    /// allocation error.
    pub fn take(
        self: &Arc<Self>,
        len: usize,
        what: &dyn Fn() -> String,
    ) -> Result<PinnedBuffer, Error> {
        let found = {
            let mut l = self.lists();
            self.take_back(&mut l)?;
            let mut fits: Vec<usize> = (0..l.idle.len())
                .filter(|&i| l.idle[i].host.len() >= len)
                .collect();
            // Smallest first: large buffers stay for large batches.
            fits.sort_by_key(|&i| l.idle[i].host.len());
            let mut done = None;
            for &i in &fits {
                if self.is_done(&l.idle[i].release)? {
                    done = Some(i);
                    break;
                }
            }
            match done.or(fits.first().copied()) {
                Some(i) => Some(l.idle.swap_remove(i)),
                None => {
                    // None fits: a smaller buffer whose copies are done makes room for the new
                    // one, so that the pool does not grow with sizes it no longer serves.
                    let small = (0..l.idle.len())
                        .find(|&i| self.is_done(&l.idle[i].release).unwrap_or(false));
                    if let Some(i) = small {
                        drop(l.idle.swap_remove(i));
                    }
                    None
                }
            }
        };
        let host = match found {
            Some(b) => {
                for e in &b.release {
                    self.dev.synchronize(e)?;
                }
                b.host
            }
            None => {
                let size = {
                    let mut l = self.lists();
                    let size = Self::new_size(l.largest, len);
                    l.largest = l.largest.max(size);
                    size
                };
                self.alloc(size, what)?
            }
        };
        Ok(PinnedBuffer {
            host: Some(host),
            len,
            release: Vec::new(),
            pool: self.clone(),
        })
    }

    fn alloc(&self, size: usize, what: &dyn Fn() -> String) -> Result<PinnedHost, Error> {
        self.dev.alloc_pinned(size).map_err(|e| match e {
            Error::Cuda(detail) => {
                Error::Cuda(format!("{} ({size} pinned bytes): {detail}", what()))
            }
            other => other,
        })
    }

    /// Makes `n` buffers of `len` bytes at once, idle (the warm-up's first batch: made on
    /// demand, a consumer slower in the first epoch than later would leave later epochs
    /// allocating).
    pub fn reserve(&self, n: usize, len: usize, what: &dyn Fn() -> String) -> Result<(), Error> {
        let size = {
            let mut l = self.lists();
            let size = Self::new_size(l.largest, len);
            l.largest = l.largest.max(size);
            size
        };
        for _ in 0..n {
            let host = self.alloc(size, what)?;
            self.lists().idle.push(Idle {
                host,
                release: Vec::new(),
            });
        }
        Ok(())
    }

    /// Ends the warm-up: every buffer back in the pool that is smaller than the largest made
    /// is made again at that size (waiting for its copies first), so that later batches of
    /// any size the warm-up met allocate nothing. Pipeline thread only.
    pub fn settle(&self) -> Result<(), Error> {
        // Out of the lists while they are waited for and made again: a consumer dropping a
        // buffer meanwhile never waits for the lock.
        let (small, largest) = {
            let mut l = self.lists();
            self.take_back(&mut l)?;
            let largest = l.largest;
            let (keep, small) = std::mem::take(&mut l.idle)
                .into_iter()
                .partition(|b| b.host.len() >= largest);
            l.idle = keep;
            (small, largest)
        };
        for b in small {
            for e in &b.release {
                self.dev.synchronize(e)?;
            }
            drop(b);
            let host = self.dev.alloc_pinned(largest)?;
            self.lists().idle.push(Idle {
                host,
                release: Vec::new(),
            });
        }
        Ok(())
    }

    /// A buffer comes back (any thread, a consumer's included): onto a list, nothing else.
    fn give_back(&self, host: PinnedHost, release: Vec<Event>) {
        self.lists().returned.push(Idle { host, release });
    }
}

impl Drop for PinnedPool {
    fn drop(&mut self) {
        // Every buffer is back (each holds the pool). Their memory is freed now, so the
        // copies from it must have run: the end of a run, the only wait outside the
        // pipeline's thread.
        let mut l = std::mem::take(&mut *self.lists());
        if let Err(e) = self.take_back(&mut l) {
            tracing::debug!("pinned pool dropped after a device failure: {e}");
        }
        for b in &l.idle {
            for e in &b.release {
                if let Err(err) = self.dev.synchronize(e) {
                    tracing::debug!("pinned pool dropped after a device failure: {err}");
                }
            }
        }
    }
}

/// A pinned buffer of a [`PinnedPool`], back to it when dropped, with the release events
/// given by [`PinnedBuffer::used_until`].
pub struct PinnedBuffer {
    /// `None` only once dropped.
    host: Option<PinnedHost>,
    len: usize,
    release: Vec<Event>,
    pool: Arc<PinnedPool>,
}

impl std::fmt::Debug for PinnedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedBuffer")
            .field("len", &self.len)
            .finish()
    }
}

impl PinnedBuffer {
    fn host(&self) -> &PinnedHost {
        self.host.as_ref().expect("a live buffer has memory")
    }

    /// The `len` bytes asked for.
    pub fn as_slice(&self) -> &[u8] {
        &self.host().as_slice()[..self.len]
    }

    /// The `len` bytes asked for, to fill.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self
            .host
            .as_mut()
            .expect("a live buffer has memory")
            .as_mut_slice()[..len]
    }

    /// The host address of byte 0.
    pub fn as_ptr(&self) -> *const u8 {
        self.host().as_ptr()
    }

    /// Bytes asked for.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when zero bytes were asked for.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device that pinned it.
    pub fn device(&self) -> &Arc<dyn GpuDevice> {
        &self.pool.dev
    }

    /// Work up to `event` reads this buffer: it is not written again before.
    pub fn used_until(&mut self, event: Event) {
        self.release.push(event);
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        if let Some(host) = self.host.take() {
            let release = std::mem::take(&mut self.release);
            self.pool.give_back(host, release);
        }
    }
}

#[cfg(test)]
#[path = "pinned_pool_tests.rs"]
mod tests;
