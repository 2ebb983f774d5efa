//! Emulated device and pinned memory: host allocations addressed by their host addresses,
//! checked on every use, poisoned when freed.
//!
//! A freed allocation is filled with [`POISON`] and kept mapped (quarantined) for a while,
//! so queued work that still reads it reads poison — a lifetime bug shows up as wrong
//! pixels, never as a crash — and work that writes it writes into nothing anyone reads.
//! Only once the quarantine holds more than [`QUARANTINE_BYTES`] is the oldest entry really
//! released, and from then on any use of it is an "illegal address" fault of the device.
//! Every copy and kernel checks the ranges it touches before it runs, and holds the memory
//! lock (shared) while it runs, so memory is never released under running work.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, RwLock, RwLockReadGuard};

use super::order::{Op, Touches, Use};

/// The byte freed memory is filled with.
pub const POISON: u8 = 0xA5;

/// Freed bytes kept mapped (poisoned) before the oldest are released.
pub const QUARANTINE_BYTES: usize = 256 << 20;

/// What an allocation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Device,
    Pinned,
}

/// One allocation: `words` u64s (8-byte aligned: kernels read u64 and f32 through these
/// addresses) owned through a raw pointer, since queued work writes them through addresses.
struct Alloc {
    ptr: *mut u64,
    words: usize,
    len: usize,
    kind: Kind,
    freed: bool,
}

// SAFETY: the storage is owned by the `Alloc` (from `Box::into_raw`, released once in
// `Drop`); every access to its bytes goes through addresses checked under the memory lock
// (`Access`: shared, for work; the write lock, for poisoning and release), so moving or
// sharing the bookkeeping between threads is sound.
unsafe impl Send for Alloc {}
// SAFETY: as above.
unsafe impl Sync for Alloc {}

impl Alloc {
    fn new(len: usize, kind: Kind) -> Result<Alloc, String> {
        let words = len.div_ceil(8).max(1);
        let mut v: Vec<u64> = Vec::new();
        v.try_reserve_exact(words)
            .map_err(|_| format!("out of memory: {len} bytes asked for (host refused)"))?;
        v.resize(words, u64::from_ne_bytes([POISON; 8]));
        let ptr = Box::into_raw(v.into_boxed_slice()).cast::<u64>();
        Ok(Alloc {
            ptr,
            words,
            len,
            kind,
            freed: false,
        })
    }

    fn start(&self) -> u64 {
        self.ptr as u64
    }

    /// Fills the storage with poison. Only under the write lock (no work runs).
    fn poison(&mut self) {
        // SAFETY: `ptr` holds `words` u64s owned by this allocation; the caller holds the
        // memory's write lock, so no queued work reads or writes them meanwhile.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.words) }
            .fill(u64::from_ne_bytes([POISON; 8]));
    }
}

impl Drop for Alloc {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `Box::into_raw` of a boxed slice of `words` u64s and is
        // released here once; allocations are dropped only under the write lock (or with the
        // whole memory), so no work uses them.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.words)) });
    }
}

#[derive(Default)]
struct Map {
    allocs: BTreeMap<u64, Alloc>,
    quarantine: VecDeque<u64>,
    quarantined_bytes: usize,
    device: usize,
    device_peak: usize,
    pinned: usize,
    pinned_peak: usize,
}

/// All memory of one emulated device.
#[derive(Default)]
pub(crate) struct Memory {
    map: RwLock<Map>,
    /// Most live device bytes (`None`: no cap): the simulated device size.
    cap: Mutex<Option<usize>>,
    /// Device memory's accesses, for the check of stream order (`order.rs`).
    touches: Touches,
}

/// A held read lock: the memory checked under it stays mapped until it drops. With an
/// operation, every device range checked is also checked for stream order and recorded.
pub(crate) struct Access<'a> {
    map: RwLockReadGuard<'a, Map>,
    touches: &'a Touches,
    op: Option<Op>,
}

impl Access<'_> {
    /// Whether `ptr..ptr+len` lies inside one mapped allocation of `kind` (live or
    /// quarantined), and, for device memory under an operation, whether the access is
    /// ordered after every earlier one it conflicts with; an error naming the range
    /// otherwise.
    pub(crate) fn check(
        &self,
        (ptr, len): (u64, usize),
        kind: Kind,
        how: Use,
        what: &'static str,
    ) -> Result<(), String> {
        if len == 0 {
            return Ok(());
        }
        let end = ptr.checked_add(len as u64);
        let alloc =
            self.map.allocs.range(..=ptr).next_back().filter(|(_, a)| {
                a.kind == kind && end.is_some_and(|e| e <= a.start() + a.len as u64)
            });
        let Some((&start, _)) = alloc else {
            return Err(format!(
                "illegal address: {what} touches {len} bytes at {ptr:#x}, outside every {kind:?} allocation"
            ));
        };
        match (&self.op, kind) {
            (Some(op), Kind::Device) => {
                self.touches
                    .touch(start, (ptr, ptr + len as u64), how, op, what)
            }
            _ => Ok(()),
        }
    }

    /// The bytes from `ptr` to the end of its allocation (for tables whose length the
    /// kernel arguments don't say).
    pub(crate) fn room(&self, ptr: u64, kind: Kind) -> usize {
        self.map
            .allocs
            .range(..=ptr)
            .next_back()
            .filter(|(_, a)| a.kind == kind)
            .map_or(0, |(_, a)| {
                (a.start() + a.len as u64).saturating_sub(ptr) as usize
            })
    }
}

impl Memory {
    /// Sets the most live device bytes (`None`: no cap).
    pub(crate) fn set_cap(&self, cap: Option<usize>) {
        *self.cap.lock().unwrap_or_else(|p| p.into_inner()) = cap;
    }

    pub(crate) fn cap(&self) -> Option<usize> {
        *self.cap.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Map> {
        self.map.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Shared access for work that touches memory (check ranges with it, then use them);
    /// with `op`, the ranges are checked for stream order as that operation's.
    pub(crate) fn access(&self, op: Option<Op>) -> Access<'_> {
        Access {
            map: self.map.read().unwrap_or_else(|p| p.into_inner()),
            touches: &self.touches,
            op,
        }
    }

    /// Accesses on record for the check of stream order.
    #[cfg(test)]
    pub(crate) fn touches_on_record(&self) -> usize {
        self.touches.len()
    }

    /// `len` bytes (filled with poison: nothing promises their contents). `Err` with the
    /// figures when over the cap or when the host refuses.
    pub(crate) fn alloc(&self, len: usize, kind: Kind) -> Result<u64, String> {
        let cap = self.cap();
        let mut m = self.write();
        if kind == Kind::Device {
            if let Some(cap) = cap {
                if m.device.saturating_add(len) > cap {
                    return Err(format!(
                        "out of memory: {len} bytes asked for, {} of {cap} in use",
                        m.device
                    ));
                }
            }
        }
        let a = Alloc::new(len, kind)?;
        let start = a.start();
        // A released allocation's address may come back.
        self.touches.forget(start);
        m.allocs.insert(start, a);
        match kind {
            Kind::Device => {
                m.device += len;
                m.device_peak = m.device_peak.max(m.device);
            }
            Kind::Pinned => {
                m.pinned += len;
                m.pinned_peak = m.pinned_peak.max(m.pinned);
            }
        }
        Ok(start)
    }

    /// Frees the allocation at `ptr`: poisoned and quarantined (see the module docs). Waits
    /// for running work that touches memory. `Err` for an address that is not a live
    /// allocation (a double free).
    pub(crate) fn free(&self, ptr: u64) -> Result<(), String> {
        let mut m = self.write();
        let Some(a) = m.allocs.get_mut(&ptr) else {
            return Err(format!("free of {ptr:#x}, which is no allocation"));
        };
        if a.freed {
            return Err(format!("double free of {ptr:#x}"));
        }
        a.freed = true;
        a.poison();
        // Work still queued on it reads poison; its order no longer matters.
        self.touches.forget(ptr);
        let (len, kind) = (a.len, a.kind);
        match kind {
            Kind::Device => m.device -= len,
            Kind::Pinned => m.pinned -= len,
        }
        m.quarantine.push_back(ptr);
        m.quarantined_bytes += len;
        while m.quarantined_bytes > QUARANTINE_BYTES {
            let Some(old) = m.quarantine.pop_front() else {
                break;
            };
            if let Some(a) = m.allocs.remove(&old) {
                m.quarantined_bytes -= a.len;
            }
        }
        Ok(())
    }

    /// (device now, device peak, pinned now, pinned peak) bytes.
    pub(crate) fn usage(&self) -> (usize, usize, usize, usize) {
        let m = self.map.read().unwrap_or_else(|p| p.into_inner());
        (m.device, m.device_peak, m.pinned, m.pinned_peak)
    }

    /// Whether `ptr..ptr+len` lies inside one live (not freed) allocation of `kind`.
    pub(crate) fn is_live(&self, ptr: u64, len: usize, kind: Kind) -> bool {
        let m = self.map.read().unwrap_or_else(|p| p.into_inner());
        let end = ptr.checked_add(len as u64);
        m.allocs.range(..=ptr).next_back().is_some_and(|(_, a)| {
            a.kind == kind && !a.freed && end.is_some_and(|e| e <= a.start() + a.len as u64)
        })
    }
}
