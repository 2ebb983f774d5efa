//! Device memory of the one-stream [`Device`](super::Device), allocated once and reused: a
//! pool of device buffers (returned on drop) and a ring of pinned host staging buffers for
//! uploads.
//!
//! Why beside [`super::pool`]: `Device` (cudarc direct, one stream) runs the operators' own
//! launches ([`GpuOperator::launch`](crate::ops::GpuOperator::launch)) and the kernel tests,
//! where stream order alone makes reuse safe; the pipeline's GPU stage works through the
//! device seam ([`GpuDevice`](super::GpuDevice), real or emulated, several streams), whose
//! pool guards reuse with release events.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::{
    CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtrMut, PinnedHostSlice,
};

use super::cuda_err;
use crate::error::Error;
use crate::size_class::size_class;

/// At most this many idle buffers are kept; more are freed.
const MAX_IDLE: usize = 64;

/// A pool of device byte buffers on one stream. Sizes are rounded up to a [`size_class`], so
/// a returned buffer serves later requests of similar size without a new allocation.
///
/// Reuse is safe without events because every user of a [`Device`](super::Device) queues its
/// work on the device's one stream: a buffer handed out again is written by work queued after
/// everything that read it.
pub struct OneStreamPool {
    stream: Arc<CudaStream>,
    idle: Mutex<Vec<CudaSlice<u8>>>,
}

impl std::fmt::Debug for OneStreamPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let idle = self.idle.lock().map(|v| v.len()).unwrap_or(0);
        f.debug_struct("OneStreamPool")
            .field("idle", &idle)
            .finish()
    }
}

impl OneStreamPool {
    /// An empty pool allocating on `stream`.
    pub fn new(stream: Arc<CudaStream>) -> OneStreamPool {
        OneStreamPool {
            stream,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// A buffer of at least `len` bytes (contents unspecified), reused when one fits.
    pub fn take(self: &Arc<Self>, len: usize) -> Result<OneStreamBuffer, Error> {
        let cap = size_class(len)
            .ok_or_else(|| Error::Cuda(format!("buffer of {len} bytes is too large")))?;
        let reused = {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            idle.iter()
                .position(|b| b.len() == cap)
                .map(|i| idle.swap_remove(i))
        };
        let slice = match reused {
            Some(s) => s,
            None => self
                .stream
                .alloc_zeros::<u8>(cap)
                .map_err(|e| cuda_err(&format!("allocate {cap} device bytes"), e))?,
        };
        Ok(OneStreamBuffer {
            slice: Some(slice),
            len,
            pool: Arc::downgrade(self),
        })
    }

    /// Idle buffers held now.
    pub fn idle_count(&self) -> usize {
        self.idle.lock().map(|v| v.len()).unwrap_or(0)
    }

    fn give_back(&self, s: CudaSlice<u8>) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(s);
        }
    }
}

/// A device buffer from a [`OneStreamPool`]; goes back to the pool when dropped.
pub struct OneStreamBuffer {
    slice: Option<CudaSlice<u8>>,
    len: usize,
    pool: std::sync::Weak<OneStreamPool>,
}

impl std::fmt::Debug for OneStreamBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OneStreamBuffer")
            .field("len", &self.len)
            .finish()
    }
}

impl OneStreamBuffer {
    /// Bytes requested (the allocation may be larger).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when zero bytes were requested.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole allocation.
    pub fn slice(&self) -> &CudaSlice<u8> {
        self.slice
            .as_ref()
            .expect("OneStreamBuffer holds its slice until dropped")
    }

    /// The whole allocation, mutably.
    pub fn slice_mut(&mut self) -> &mut CudaSlice<u8> {
        self.slice
            .as_mut()
            .expect("OneStreamBuffer holds its slice until dropped")
    }

    /// The device address of byte `offset` (see [`device_address`]).
    pub fn address(&self, stream: &CudaStream, offset: usize) -> u64 {
        device_address(self.slice(), stream) + offset as u64
    }
}

impl Drop for OneStreamBuffer {
    fn drop(&mut self) {
        if let (Some(s), Some(pool)) = (self.slice.take(), self.pool.upgrade()) {
            pool.give_back(s);
        }
    }
}

/// The device address of `slice`, for descriptors.
///
/// With cudarc's event tracking off (as [`Device`](super::Device) sets it), the guard
/// `device_ptr` returns does nothing, so dropping it at once is fine; ordering is kept by
/// running all work on one stream.
pub fn device_address(slice: &CudaSlice<u8>, stream: &CudaStream) -> u64 {
    use cudarc::driver::DevicePtr;
    let (ptr, _guard) = slice.device_ptr(stream);
    ptr
}

struct Slot {
    host: Option<PinnedHostSlice<u8>>,
    done: Option<CudaEvent>,
}

/// A ring of pinned host buffers for host → device uploads on the one-stream
/// [`Device`](super::Device). Each upload takes the next slot,
/// waits for that slot's previous copy to finish (its event), copies the bytes in and queues
/// an asynchronous copy; slots grow when a larger upload comes and are reused otherwise.
pub struct OneStreamStaging {
    ctx: Arc<CudaContext>,
    slots: Vec<Mutex<Slot>>,
    next: AtomicUsize,
}

impl OneStreamStaging {
    /// A ring of `n` (at least 1) empty slots; memory is allocated on first use.
    pub fn new(ctx: Arc<CudaContext>, n: usize) -> OneStreamStaging {
        OneStreamStaging {
            ctx,
            slots: (0..n.max(1))
                .map(|_| {
                    Mutex::new(Slot {
                        host: None,
                        done: None,
                    })
                })
                .collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Always false (a ring has at least one slot).
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Queues a copy of `bytes` into the start of `dst` on `stream`.
    pub fn upload(
        &self,
        stream: &CudaStream,
        bytes: &[u8],
        dst: &mut CudaSlice<u8>,
    ) -> Result<(), Error> {
        if bytes.is_empty() {
            return Ok(());
        }
        if dst.len() < bytes.len() {
            return Err(Error::Cuda(format!(
                "upload of {} bytes into a buffer of {}",
                bytes.len(),
                dst.len()
            )));
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut slot = self.slots[i].lock().unwrap_or_else(|p| p.into_inner());
        if let Some(ev) = &slot.done {
            ev.synchronize()
                .map_err(|e| cuda_err("wait for staging slot", e))?;
        }
        if slot.host.as_ref().is_none_or(|h| h.len() < bytes.len()) {
            let cap = bytes.len().next_power_of_two().max(4096);
            slot.host = None;
            // SAFETY: the memory is uninitialised until written; it is only read by the copy
            // below after `bytes` has been written into its first `bytes.len()` bytes.
            let host = unsafe { self.ctx.alloc_pinned::<u8>(cap) }
                .map_err(|e| cuda_err("allocate pinned staging", e))?;
            slot.host = Some(host);
        }
        let host = slot.host.as_mut().expect("allocated above");
        let staged = host
            .as_mut_slice()
            .map_err(|e| cuda_err("map pinned staging", e))?;
        staged[..bytes.len()].copy_from_slice(bytes);
        let (dptr, _g) = dst.device_ptr_mut(stream);
        // SAFETY: `dptr` is a live device allocation of at least `bytes.len()` bytes (checked);
        // the source is pinned memory owned by this slot, which is not written again before
        // the event recorded below has completed (checked at the top of the next use).
        unsafe {
            cudarc::driver::result::memcpy_htod_async(
                dptr,
                &staged[..bytes.len()],
                stream.cu_stream(),
            )
        }
        .map_err(|e| cuda_err("host to device copy", e))?;
        let ev = super::record_blocking_event(stream, "staging")?;
        slot.done = Some(ev);
        Ok(())
    }
}
