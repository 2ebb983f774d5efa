//! Device memory reused across batches, through the device seam: the [`DevicePool`] of
//! device buffers and the [`PinnedRing`] of pinned host staging buffers.
//!
//! This is the pipeline's GPU stage's memory, on any [`GpuDevice`] (real or emulated) and
//! shared by several streams, hence the release events.
//!
//! A buffer is never handed out while work that used it may still be pending: each one goes
//! back to the pool with the **release events** of its last users (the stage's stream, a
//! consumer's stream, …), and whoever takes it next makes its own stream wait on them
//! ([`GpuDevice::wait`]: on the device, the host does not block). The pool prefers buffers
//! whose release events are complete, so a new batch's work rarely waits at all.
//!
//! The JPEG engines don't wait for their stream: they write their outputs when nvJPEG is
//! called, before the work queued ahead of them and whatever events the stream waits for
//! (`docs/gpu.md`, "The JPEG engines and stream order"). Their outputs come from a pool made
//! with [`DevicePool::for_engines`], which hands out only buffers whose release events the
//! host has seen complete: during the warm-up it allocates another rather than wait, so that
//! it settles with enough of them for the batches in flight; after, where none is done yet,
//! the host waits ([`DevicePool::host_waits`] counts it).
//!
//! Sizes are rounded up to a size class ([`crate::size_class::size_class`]: at most 1/8 more than
//! asked), a new buffer is at least as large as the largest the pool made (a quarter more
//! than asked), and any idle buffer large enough serves a request: use one pool per role
//! (buffers of similar sizes), and after the first batches every buffer of a role fits
//! every request of it. A buffer that comes back only goes
//! to the idle list — whoever drops it (a consumer's thread, in a DLPack deleter) never
//! waits, frees or synchronises; idle buffers beyond [`MAX_IDLE`] are freed by the pipeline's
//! own thread ([`DevicePool::trim_done`]), and only once their work is done (`cuMemFree`
//! would wait for the whole device, the training loop's work included).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::gpu_device::{DevicePtr, Event, GpuDevice, PinnedHost, StreamId};
use crate::error::Error;
use crate::size_class::size_class;

/// Allocation granularity, in bytes.
pub const GRANULE: usize = 64 << 10;

/// Buffers smaller than this get a spare when a pool settles ([`DevicePool::settle`]).
pub const SPARE_UNDER: usize = 64 << 20;

/// Idle buffers kept before [`DevicePool::trim_done`] frees some.
pub const MAX_IDLE: usize = 48;

struct Idle {
    ptr: DevicePtr,
    cap: usize,
    release: Vec<Event>,
    /// When it came back (a count): of two equally fitting buffers still in use, the one
    /// back first is likely done first.
    back: u64,
}

/// A pool of device buffers on one device.
pub struct DevicePool {
    dev: Arc<dyn GpuDevice>,
    idle: Mutex<Vec<Idle>>,
    /// The largest buffer allocated so far.
    high_water: Mutex<usize>,
    /// Capacities of the buffers handed out and not back yet, and the most at once (with
    /// [`Reuse::AfterHost`], idle buffers whose work was not done when one was taken count
    /// as handed out: they could not be).
    out: Mutex<(Vec<usize>, usize)>,
    reuse: Reuse,
    /// New buffers get a quarter more than asked, for roles whose sizes vary (see
    /// [`DevicePool::take`]); not for a role of one size.
    headroom: bool,
    /// [`DevicePool::settle`] has run.
    settled: AtomicBool,
    /// Takes that waited on the host for a buffer's release events.
    host_waits: AtomicU64,
    /// Buffers given back so far (each idle buffer's [`Idle::back`]).
    returns: AtomicU64,
}

/// When an idle buffer may be handed out again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reuse {
    /// At once: its next user's stream waits for the release events on the device.
    InStreamOrder,
    /// Once the host has seen its release events complete (for the JPEG engines, which don't
    /// wait for their stream).
    AfterHost,
}

impl std::fmt::Debug for DevicePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevicePool")
            .field("idle", &self.idle_count())
            .finish()
    }
}

impl DevicePool {
    /// An empty pool on `dev`, for work that keeps stream order.
    pub fn new(dev: Arc<dyn GpuDevice>) -> Arc<DevicePool> {
        Self::with_reuse(dev, Reuse::InStreamOrder, true)
    }

    /// An empty pool on `dev` for what the JPEG engines write: a buffer is handed out only
    /// once the host has seen its last users' work complete (see the module docs).
    pub fn for_engines(dev: Arc<dyn GpuDevice>) -> Arc<DevicePool> {
        Self::with_reuse(dev, Reuse::AfterHost, true)
    }

    /// An empty pool on `dev`, for work that keeps stream order, whose buffers are all of one
    /// size or smaller (a full batch's output; a short last batch fits in it): new buffers
    /// are the size asked, with no room for larger requests.
    pub fn of_one_size(dev: Arc<dyn GpuDevice>) -> Arc<DevicePool> {
        Self::with_reuse(dev, Reuse::InStreamOrder, false)
    }

    fn with_reuse(dev: Arc<dyn GpuDevice>, reuse: Reuse, headroom: bool) -> Arc<DevicePool> {
        Arc::new(DevicePool {
            dev,
            idle: Mutex::new(Vec::new()),
            high_water: Mutex::new(0),
            out: Mutex::new((Vec::new(), 0)),
            reuse,
            headroom,
            settled: Default::default(),
            host_waits: Default::default(),
            returns: Default::default(),
        })
    }

    /// How many takes made the host wait for a buffer's last users (only a pool
    /// [`for_engines`](Self::for_engines) waits, and only once it has settled).
    pub fn host_waits(&self) -> u64 {
        self.host_waits.load(Ordering::Relaxed)
    }

    /// The device.
    pub fn device(&self) -> &Arc<dyn GpuDevice> {
        &self.dev
    }

    /// Idle buffers held now.
    pub fn idle_count(&self) -> usize {
        self.idle.lock().map(|v| v.len()).unwrap_or(0)
    }

    /// Whether every event has completed; one whose query fails has not (a buffer is then
    /// neither handed out nor freed on its account: the device's next call reports the
    /// error).
    fn is_done(&self, events: &[Event]) -> bool {
        events
            .iter()
            .all(|e| self.dev.is_complete(e).unwrap_or(false))
    }

    /// A buffer of at least `len` bytes for work on `stream` (contents unspecified): an idle
    /// one when one fits (`stream` then waits, on the device, for its last users), else a new
    /// one. A pool [`for_engines`](Self::for_engines) hands out an idle buffer only once its
    /// last users' work is done: before it settles it allocates rather than wait; after, the
    /// host waits. `what` names the buffer in an out-of-memory error.
    pub fn take(
        self: &Arc<Self>,
        len: usize,
        stream: StreamId,
        what: &dyn Fn() -> String,
    ) -> Result<DeviceBuffer, Error> {
        let cap = capacity_for(len)?;
        let after_host = self.reuse == Reuse::AfterHost;
        // A pool for the engines waits for a buffer still in use only once settled: until
        // then it allocates another (and settles with enough).
        let may_wait = !after_host || self.settled.load(Ordering::Relaxed);
        let busy = match self.idle_that_fits(cap, may_wait) {
            Ok(b) => return self.hand_out_idle(b, len, stream),
            Err(busy) => busy,
        };
        // A new buffer is as large as the largest this pool made, and a quarter more than
        // asked: the areas of a role (a pool each) vary in size with the batches' random
        // crops, and once every buffer has the high-water size any later request fits.
        let asked = cap;
        let cap = {
            let mut high = self.high_water.lock().unwrap_or_else(|p| p.into_inner());
            let c = if self.headroom {
                size_class((cap + cap / 4).max(*high)).unwrap_or(cap)
            } else {
                cap.max(*high)
            };
            *high = (*high).max(c);
            c
        };
        let ptr = match self.dev.alloc(cap) {
            Ok(p) => p,
            Err(Error::DeviceOutOfMemory { .. }) => {
                // No room for another: a buffer still in use, once done, serves as well.
                if let Ok(b) = self.idle_that_fits(asked, true) {
                    return self.hand_out_idle(b, len, stream);
                }
                // Idle buffers of other sizes may be what stands in the way.
                self.trim(0)?;
                self.dev.alloc(cap).map_err(|e| match e {
                    Error::DeviceOutOfMemory { detail, .. } => Error::DeviceOutOfMemory {
                        what: what(),
                        bytes: cap as u64,
                        detail,
                    },
                    other => other,
                })?
            }
            Err(e) => return Err(e),
        };
        if after_host && busy > 0 {
            // The idle buffers still in use were out too, in effect: settling keeps enough.
            let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
            out.1 = out.1.max(out.0.len() + busy + 1);
        }
        self.handed_out(cap);
        Ok(DeviceBuffer {
            ptr,
            len,
            cap,
            release: Vec::new(),
            pool: self.clone(),
        })
    }

    /// Takes out the idle buffer that best serves a request of `cap` bytes: among those
    /// that fit, the smallest whose work is done; else, if `may_wait`, the smallest, back
    /// first. `Err`: none was taken, with the number of idle buffers still in use.
    fn idle_that_fits(&self, cap: usize, may_wait: bool) -> Result<Idle, usize> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let best = |done: bool| {
            idle.iter()
                .enumerate()
                .filter(|(_, b)| b.cap >= cap && (!done || self.is_done(&b.release)))
                .min_by_key(|(_, b)| (b.cap, b.back))
                .map(|(i, _)| i)
        };
        match best(true).or_else(|| best(false).filter(|_| may_wait)) {
            Some(i) => Ok(idle.swap_remove(i)),
            None => Err(idle.iter().filter(|b| !self.is_done(&b.release)).count()),
        }
    }

    /// Hands out idle buffer `b` for work on `stream`, after its last users: `stream` waits
    /// for them on the device, or, in a pool for the engines, the host does (counted).
    fn hand_out_idle(
        self: &Arc<Self>,
        b: Idle,
        len: usize,
        stream: StreamId,
    ) -> Result<DeviceBuffer, Error> {
        let after_host = self.reuse == Reuse::AfterHost;
        if after_host && !self.is_done(&b.release) {
            self.host_waits.fetch_add(1, Ordering::Relaxed);
        }
        let buffer = DeviceBuffer {
            ptr: b.ptr,
            len,
            cap: b.cap,
            release: Vec::new(),
            pool: self.clone(),
        };
        self.handed_out(b.cap);
        for e in &b.release {
            // On error the buffer goes back to the idle list, with no release events: a
            // failed device runs nothing more.
            if after_host {
                self.dev.synchronize(e)?;
            } else {
                self.dev.wait(stream, e)?;
            }
        }
        Ok(buffer)
    }

    /// Frees idle buffers until at most `keep` are left (oldest first), waiting for their
    /// release events first.
    pub fn trim(&self, keep: usize) -> Result<(), Error> {
        let freed: Vec<Idle> = {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            let n = idle.len().saturating_sub(keep);
            idle.drain(..n).collect()
        };
        let mut result = Ok(());
        for b in freed {
            for e in &b.release {
                if let Err(err) = self.dev.synchronize(e) {
                    // A failed device: its memory can't be freed safely; keep the error.
                    result = Err(err);
                }
            }
            if result.is_ok() {
                // SAFETY: allocated by this pool on this device, freed once (it left the
                // idle list above); every event recorded after its last use has completed.
                unsafe { self.dev.free(b.ptr) };
            }
        }
        result
    }

    /// Frees idle buffers beyond [`MAX_IDLE`] whose work is done, largest first, without
    /// waiting for any (for the pipeline's thread; a consumer's never frees).
    pub fn trim_done(&self) {
        let freed: Vec<Idle> = {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            if idle.len() <= MAX_IDLE {
                return;
            }
            idle.sort_by_key(|b| std::cmp::Reverse(b.cap));
            let mut out = Vec::new();
            let mut k = 0;
            while idle.len() > MAX_IDLE && k < idle.len() {
                if self.is_done(&idle[k].release) {
                    out.push(idle.remove(k));
                } else {
                    k += 1;
                }
            }
            out
        };
        for b in freed {
            // SAFETY: allocated by this pool on this device, freed once (it left the idle
            // list above); its release events are complete.
            unsafe { self.dev.free(b.ptr) };
        }
    }

    fn handed_out(&self, cap: usize) {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        out.0.push(cap);
        out.1 = out.1.max(out.0.len());
    }

    fn give_back(&self, ptr: DevicePtr, cap: usize, release: Vec<Event>) {
        {
            let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(i) = out.0.iter().position(|&c| c == cap) {
                out.0.swap_remove(i);
            }
        }
        let back = self.returns.fetch_add(1, Ordering::Relaxed);
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.push(Idle {
            ptr,
            cap,
            release,
            back,
        });
    }

    /// Counts at least `n` buffers out at once, whatever the warm-up saw: for a role whose
    /// most at once is known beforehand (the batches a consumer's queue holds), so that
    /// [`DevicePool::settle`] keeps enough for it.
    pub fn expect_out(&self, n: usize) {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        out.1 = out.1.max(n);
    }

    /// Whether a request of `len` bytes is larger than the buffers this pool settled on
    /// ([`DevicePool::settle`]), so that taking it would allocate: false before it settles.
    pub fn past_settled(&self, len: usize) -> bool {
        self.settled.load(Ordering::Relaxed)
            && capacity_for(len).map_or(true, |cap| cap > self.high_water())
    }

    /// Whether a request of `len` bytes is past the settled size ([`past_settled`]) by less
    /// than that size again: work that size may be done in parts, each in a settled buffer.
    /// Further past, the sizing missed (a role the warm-up never met): better one allocation,
    /// after which the pool's buffers are that large, than many parts from then on.
    ///
    /// [`past_settled`]: DevicePool::past_settled
    pub fn a_little_past_settled(&self, len: usize) -> bool {
        self.past_settled(len) && !self.past_settled(len / 2)
    }

    /// The largest buffer this pool made so far (0 before the first).
    pub fn high_water(&self) -> usize {
        *self.high_water.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Raises the size [`DevicePool::settle`] makes its buffers to at least `len`: for a
    /// role whose largest request is bounded beyond what the warm-up met (the decode areas
    /// by their images' spread, the chroma planes by the areas).
    pub fn raise_high_water(&self, len: usize) {
        let mut high = self.high_water.lock().unwrap_or_else(|p| p.into_inner());
        *high = (*high).max(size_class(len).unwrap_or(len));
    }

    /// Ends the warm-up: from what it needed, the pool holds enough buffers of the largest
    /// size for the most it handed out at once, and one to spare where that costs less than
    /// [`SPARE_UNDER`] (batches in flight vary by one), so that later batches (whose random
    /// crops vary in size) find one. Idle buffers smaller than that size are freed (waiting
    /// for their work: once per run). Returns the buffers allocated.
    pub fn settle(&self) -> Result<usize, Error> {
        self.settled.store(true, Ordering::Relaxed);
        let high = *self.high_water.lock().unwrap_or_else(|p| p.into_inner());
        let (out_large, most) = {
            let out = self.out.lock().unwrap_or_else(|p| p.into_inner());
            (out.0.iter().filter(|&&c| c >= high).count(), out.1)
        };
        if high == 0 || most == 0 {
            return Ok(0);
        }
        let small: Vec<Idle> = {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            let (keep, small) = std::mem::take(&mut *idle)
                .into_iter()
                .partition(|b| b.cap >= high);
            *idle = keep;
            small
        };
        for b in small {
            for e in &b.release {
                self.dev.synchronize(e)?;
            }
            // SAFETY: allocated by this pool on this device, freed once (it left the idle
            // list above); every event recorded after its last use has completed.
            unsafe { self.dev.free(b.ptr) };
        }
        let spare = usize::from(high < SPARE_UNDER);
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let want = (most + spare).saturating_sub(out_large + idle.len());
        let mut made = 0;
        for _ in 0..want {
            let ptr = match self.dev.alloc(high) {
                Ok(p) => p,
                // The engines' pool counted buffers it could have waited for: without room
                // for them, later takes wait (counted) rather than fail.
                Err(Error::DeviceOutOfMemory { .. }) if self.reuse == Reuse::AfterHost => break,
                Err(e) => return Err(e),
            };
            idle.push(Idle {
                ptr,
                cap: high,
                release: Vec::new(),
                back: 0,
            });
            made += 1;
        }
        Ok(made)
    }
}

/// The capacity a request of `len` bytes takes: its size class, in whole 256 bytes.
fn capacity_for(len: usize) -> Result<usize, Error> {
    size_class(len.max(1))
        .and_then(|c| c.checked_next_multiple_of(256))
        .ok_or_else(|| Error::Cuda(format!("a buffer of {len} bytes is too large")))
}

impl Drop for DevicePool {
    fn drop(&mut self) {
        // Every buffer is back (each holds the pool); free them once their users are done.
        if let Err(e) = self.trim(0) {
            tracing::warn!("device pool dropped with a failed device: {e}");
        }
    }
}

/// A device buffer from a [`DevicePool`]; goes back to it when dropped, with the release
/// events given by [`DeviceBuffer::used_until`].
pub struct DeviceBuffer {
    ptr: DevicePtr,
    len: usize,
    cap: usize,
    release: Vec<Event>,
    pool: Arc<DevicePool>,
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("len", &self.len)
            .field("cap", &self.cap)
            .finish()
    }
}

impl DeviceBuffer {
    /// The device address of byte 0.
    pub fn ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// Bytes asked for.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when zero bytes were asked for.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes allocated (at least `len`).
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Records that work up to `event` uses this buffer: the next user waits for it.
    pub fn used_until(&mut self, event: Event) {
        self.release.push(event);
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        let release = std::mem::take(&mut self.release);
        self.pool.give_back(self.ptr, self.cap, release);
    }
}

struct Slot {
    host: Option<PinnedHost>,
    done: Option<Event>,
}

/// A ring of pinned host buffers for uploads: the next slot is handed out once its previous
/// use is done (the host waits on that use's event, normally long complete); slots grow to
/// the largest request, rounded up to [`GRANULE`].
pub struct PinnedRing {
    dev: Arc<dyn GpuDevice>,
    slots: Vec<Slot>,
    next: usize,
    /// The largest slot allocated: a slot that grows takes at least this much.
    largest: usize,
    /// Bytes [`PinnedRing::settle`] tries to add to every slot ([`PinnedRing::make_room`]).
    room: usize,
}

impl std::fmt::Debug for PinnedRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedRing")
            .field("slots", &self.slots.len())
            .finish()
    }
}

impl PinnedRing {
    /// A ring of `n` (at least 1) slots on `dev`, allocated on first use.
    pub fn new(dev: Arc<dyn GpuDevice>, n: usize) -> PinnedRing {
        PinnedRing {
            dev,
            slots: (0..n.max(1))
                .map(|_| Slot {
                    host: None,
                    done: None,
                })
                .collect(),
            next: 0,
            largest: 0,
            room: 0,
        }
    }

    /// The next slot, with at least `len` bytes, free of earlier work, for copies queued on
    /// `stream`; call [`PinnedLease::done_at`] once the work reading it is queued (a lease
    /// dropped without it records an event on `stream` itself).
    pub fn lease(&mut self, len: usize, stream: StreamId) -> Result<PinnedLease<'_>, Error> {
        let i = self.next;
        self.next = (self.next + 1) % self.slots.len();
        let slot = &mut self.slots[i];
        if let Some(e) = slot.done.take() {
            self.dev.synchronize(&e)?;
        }
        if slot.host.as_ref().is_none_or(|h| h.len() < len) {
            // A quarter more than asked, and at least twice what it had: the batches'
            // uploads vary in size, and each growth is a free and an allocation (so they
            // end within the first batches).
            let had = slot.host.take().map_or(0, |h| h.len());
            let cap = (len.max(1) + len / 4)
                .max(2 * had)
                .max(self.largest)
                .next_multiple_of(GRANULE);
            self.largest = self.largest.max(cap);
            slot.host = Some(self.dev.alloc_pinned(cap)?);
        }
        Ok(PinnedLease {
            slot,
            dev: &self.dev,
            stream,
            done: false,
        })
    }
}

impl PinnedRing {
    /// Makes [`PinnedRing::settle`] try to bring every slot to `more` bytes beyond the largest
    /// so far: for uploads that may grow after the warm-up by a known bound (best effort:
    /// where the host pins no more, the slots stay at the largest size).
    pub fn make_room(&mut self, more: usize) {
        self.room = more;
    }

    /// Ends the warm-up: every slot holds the largest size any has, and the room asked for
    /// where the host has it (waiting for a slot's earlier work where it grows), so that a
    /// ring whose later slots were not used yet, or were used for smaller uploads, allocates
    /// nothing after it.
    pub fn settle(&mut self) -> Result<(), Error> {
        let roomy = (self.largest + self.room).next_multiple_of(GRANULE);
        if self.room > 0 && self.settle_to(roomy).is_ok() {
            return Ok(());
        }
        // (A slot that got the room keeps it; the others need the largest size only.)
        self.settle_to(self.largest)
    }

    /// Brings every slot to at least `len` bytes; `largest` follows.
    fn settle_to(&mut self, len: usize) -> Result<(), Error> {
        if len == 0 {
            return Ok(());
        }
        for slot in &mut self.slots {
            if slot.host.as_ref().is_none_or(|h| h.len() < len) {
                if let Some(e) = slot.done.take() {
                    self.dev.synchronize(&e)?;
                }
                slot.host = None;
                slot.host = Some(self.dev.alloc_pinned(len)?);
            }
        }
        self.largest = self.largest.max(len);
        Ok(())
    }
}

impl Drop for PinnedRing {
    fn drop(&mut self) {
        for s in &mut self.slots {
            if let Some(e) = s.done.take() {
                if let Err(err) = self.dev.synchronize(&e) {
                    tracing::debug!("pinned ring dropped after a device failure: {err}");
                }
            }
        }
    }
}

/// One slot of a [`PinnedRing`], held while it is filled and its copies queued.
pub struct PinnedLease<'a> {
    slot: &'a mut Slot,
    dev: &'a Arc<dyn GpuDevice>,
    stream: StreamId,
    done: bool,
}

impl PinnedLease<'_> {
    /// The slot's bytes.
    pub fn bytes(&mut self) -> &mut [u8] {
        self.slot
            .host
            .as_mut()
            .expect("a leased slot has memory")
            .as_mut_slice()
    }

    /// `len` bytes from `offset`, to hand to work that reads them until the done event.
    pub fn view(&self, offset: usize, len: usize) -> &[u8] {
        let h = self.slot.host.as_ref().expect("a leased slot has memory");
        &h.as_slice()[offset..offset + len]
    }

    /// The host address of byte `offset` (for queued copies).
    pub fn ptr(&self, offset: usize) -> *const u8 {
        let h = self.slot.host.as_ref().expect("a leased slot has memory");
        h.as_slice()[offset..].as_ptr()
    }

    /// The work reading this slot ends at `event`: the slot is not written again before.
    pub fn done_at(mut self, event: Event) {
        self.slot.done = Some(event);
        self.done = true;
    }
}

impl Drop for PinnedLease<'_> {
    fn drop(&mut self) {
        if !self.done {
            match self.dev.record(self.stream, false) {
                Ok(e) => self.slot.done = Some(e),
                // The device failed: nothing queued will run any more; the slot is dropped
                // rather than reused.
                Err(_) => self.slot.host = None,
            }
        }
    }
}

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;
