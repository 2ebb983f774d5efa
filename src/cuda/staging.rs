//! Pinned slabs the prep workers copy encoded files into, so that the thread feeding the JPEG
//! engines hands nvJPEG their addresses instead of copying every batch itself
//! (`docs/gpu.md`, The engines' feeding thread).
//!
//! A worker takes the next free range of the current slab ([`StagingSlabs::stage`]: a bump
//! under a lock, the copy outside it) and gets a [`StagedBytes`], which keeps its slab alive.
//! The stage keeps each sample's [`StagedBytes`] until the host has seen its decode's event
//! complete (the engines read their input when called, whatever their stream waits for:
//! only the host's view orders them), so a slab goes back to the free list only once every
//! image copied into it has been decoded, and is written again only then.
//!
//! Memory is bounded and steady: slabs are made during the warm-up, at most
//! `max_slabs`; after [`StagingSlabs::settle`] (the end of the first epoch) none are made, and
//! an image finding no room (or larger than a slab) is not staged: the feeding thread copies
//! it, as it copies everything without this.

use std::sync::{Arc, Mutex};

use super::gpu_device::{GpuDevice, PinnedHost};
use crate::error::Error;

/// The pinned slabs of one GPU stage (see the module docs).
pub struct StagingSlabs {
    dev: Arc<dyn GpuDevice>,
    slab_len: usize,
    max_slabs: usize,
    state: Mutex<State>,
    /// Slabs whose images are all decoded, ready for reuse (shared with each [`Slab`], which
    /// puts its memory back here when the last of its images lets go).
    free: Arc<Mutex<Vec<PinnedHost>>>,
}

#[derive(Default)]
struct State {
    /// The slab being filled and the bytes of it handed out.
    current: Option<(Arc<Slab>, usize)>,
    /// Slabs made so far.
    made: usize,
    /// No slab is made any more.
    settled: bool,
}

impl std::fmt::Debug for StagingSlabs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagingSlabs")
            .field("slab_len", &self.slab_len)
            .field("max_slabs", &self.max_slabs)
            .finish()
    }
}

/// A slab's pinned memory, back on the free list when the last [`StagedBytes`] in it drops.
struct Slab {
    host: Option<PinnedHost>,
    free: Arc<Mutex<Vec<PinnedHost>>>,
}

impl Drop for Slab {
    fn drop(&mut self) {
        if let Some(host) = self.host.take() {
            self.free
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(host);
        }
    }
}

/// One file's bytes in a pinned slab: readable by the device's decoder until dropped.
#[derive(Clone)]
pub struct StagedBytes {
    slab: Arc<Slab>,
    offset: usize,
    len: usize,
}

impl std::fmt::Debug for StagedBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagedBytes")
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish()
    }
}

impl StagedBytes {
    /// The bytes, in pinned host memory.
    pub fn as_slice(&self) -> &[u8] {
        let host = self.slab.host.as_ref().expect("a live slab has its memory");
        // SAFETY: `offset..offset + len` lies in the slab and was written before this value
        // existed; nothing writes it while the slab lives (its range is handed out once).
        // Only this range is borrowed: workers may be writing other ranges of the slab.
        unsafe { std::slice::from_raw_parts(host.as_ptr().add(self.offset), self.len) }
    }
}

impl StagingSlabs {
    /// Slabs of `slab_len` bytes on `dev`, at most `max_slabs` of them.
    pub fn new(dev: Arc<dyn GpuDevice>, slab_len: usize, max_slabs: usize) -> StagingSlabs {
        StagingSlabs {
            dev,
            slab_len: slab_len.max(1),
            max_slabs,
            state: Mutex::default(),
            free: Arc::default(),
        }
    }

    /// Copies `bytes` into a slab, or returns `None` where none has room (all in use, none
    /// may be made) or the file is larger than a slab. Errors making a slab are `Err`.
    pub fn stage(&self, bytes: &[u8]) -> Result<Option<StagedBytes>, Error> {
        let len = bytes.len();
        if len > self.slab_len {
            return Ok(None);
        }
        let (slab, offset) = {
            let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            let fits = st
                .current
                .as_ref()
                .is_some_and(|(_, used)| used + len <= self.slab_len);
            if !fits {
                let free = self.free.lock().unwrap_or_else(|p| p.into_inner()).pop();
                let host = match free {
                    Some(h) => h,
                    // No room: the current slab stays, for smaller files.
                    None if st.settled || st.made >= self.max_slabs => return Ok(None),
                    None => {
                        let h = self.dev.alloc_pinned(self.slab_len)?;
                        st.made += 1;
                        h
                    }
                };
                // The full slab stays alive as long as its images need it.
                let slab = Arc::new(Slab {
                    host: Some(host),
                    free: self.free.clone(),
                });
                st.current = Some((slab, 0));
            }
            let (slab, used) = st.current.as_mut().expect("set above");
            let offset = *used;
            // Aligned starts: the decoder reads whole words.
            *used = (offset + len).next_multiple_of(64).min(self.slab_len);
            (slab.clone(), offset)
        };
        let host = slab.host.as_ref().expect("a live slab has its memory");
        // SAFETY: `offset..offset + len` lies in the slab (`offset + len <= slab_len`) and
        // was handed to this call alone under the lock; nobody reads it before this returns
        // (its `StagedBytes` is made below), and the memory lives while `slab` does.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), host.as_ptr().cast_mut().add(offset), len)
        };
        Ok(Some(StagedBytes { slab, offset, len }))
    }

    /// Makes no more slabs (the warm-up is over: the ones made suffice for the batches in
    /// flight; what finds no room is copied by the feeding thread).
    pub fn settle(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).settled = true;
    }

    /// [`StagingSlabs::settle`], after making half as many slabs again as the warm-up made,
    /// and one (none where the warm-up made none), and enough for `more` bytes besides
    /// (within `max_slabs`): for copies whose need the warm-up may not have seen at its height
    /// (a consumer's queue not yet full, a share of the work still rising or allowed to rise).
    pub fn settle_with_spare(&self, more: usize) {
        let spare = {
            let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            let want = if st.made == 0 { 0 } else { st.made / 2 + 1 };
            (want + more.div_ceil(self.slab_len)).min(self.max_slabs.saturating_sub(st.made))
        };
        // Made outside the lock (workers stage meanwhile); a host that can pin no more stops
        // here: a copy without room goes the slower way, nothing fails.
        let mut made = 0;
        for _ in 0..spare {
            match self.dev.alloc_pinned(self.slab_len) {
                Ok(h) => {
                    self.free.lock().unwrap_or_else(|p| p.into_inner()).push(h);
                    made += 1;
                }
                Err(e) => {
                    tracing::debug!("no spare pinned slab ({e}): {made} of {spare} made");
                    break;
                }
            }
        }
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.made += made;
        st.settled = true;
    }

    /// Slabs made so far.
    pub fn made(&self) -> usize {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).made
    }
}

#[cfg(test)]
#[path = "staging_tests.rs"]
mod tests;
