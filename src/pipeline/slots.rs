//! Batch buffers that several workers fill at once, each writing its sample's output straight
//! into that sample's slot, so a finished batch needs no copy (the copy was 5% of the CPU on
//! two cores at 1 800 images/s, and all of it on the thread that competes with the workers).
//!
//! A sample's slot is decided before it runs: sample `p` of an epoch goes to slot `p % batch`
//! of tentative batch `p / batch`. That is where it ends up unless an earlier sample of the
//! epoch was skipped; the assembler moves misplaced samples (a copy, as before), so a bad file
//! costs copies, never a wrong batch.

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use half::f16;

use super::batch::{BatchTensor, BufferPool, TensorBuilder};
use crate::image::{DType, Image, Layout, Pixels};
use crate::ops::PixelsMut;

/// One contiguous buffer of `slots × slot_len` elements whose slots are written by different
/// threads at once, each slot by one holder of a [`SlotLease`] at a time.
pub(crate) struct SlotBuffer<T> {
    /// Start of `owner`'s elements; they are reached only through leases until `owner` is
    /// taken back by [`SlotBuffer::into_vec`] (which needs every lease gone).
    base: *mut T,
    slot_len: usize,
    /// Each slot's [`FREE`], [`LEASED`] or [`WRITTEN`].
    state: Box<[AtomicU8]>,
    owner: Vec<T>,
}

/// Never leased: a worker may write it.
const FREE: u8 = 0;
/// Held by a lease.
const LEASED: u8 = 1;
/// Leased before: holds a sample only the assembler may take (or a failed sample's remains).
const WRITTEN: u8 = 2;

// SAFETY: elements are reached only through a `SlotLease`, and a slot is leased to one holder
// at a time (its state moves to LEASED by compare-exchange with Acquire and out of it with
// Release), so no two threads ever touch the same element at once; `T: Send + Sync` lets the elements be written
// on one thread and read on another.
unsafe impl<T: Copy + Send + Sync> Send for SlotBuffer<T> {}
// SAFETY: as above; `&SlotBuffer` itself gives no access to elements without a lease.
unsafe impl<T: Copy + Send + Sync> Sync for SlotBuffer<T> {}

impl<T: Copy + Send + Sync> SlotBuffer<T> {
    /// Shares `data` (whose length is a multiple of `slot_len`, at least 1) as slots.
    pub(crate) fn new(mut data: Vec<T>, slot_len: usize) -> Arc<SlotBuffer<T>> {
        assert!(slot_len > 0 && data.len() % slot_len == 0, "whole slots");
        let slots = data.len() / slot_len;
        SlotBuffer {
            base: data.as_mut_ptr(),
            slot_len,
            state: (0..slots).map(|_| AtomicU8::new(FREE)).collect(),
            owner: data,
        }
        .into()
    }

    /// Number of slots.
    pub(crate) fn slots(&self) -> usize {
        self.state.len()
    }

    /// Elements per slot.
    pub(crate) fn slot_len(&self) -> usize {
        self.slot_len
    }

    /// Exclusive access to slot `slot` if it was never leased (a worker writing a sample: it
    /// must not overwrite one written before that the assembler has yet to take).
    pub(crate) fn lease_free(self: &Arc<Self>, slot: usize) -> Option<SlotLease<T>> {
        self.lease_from(slot, FREE)
    }

    /// Exclusive access to slot `slot` unless someone holds it (the assembler).
    pub(crate) fn lease(self: &Arc<Self>, slot: usize) -> Option<SlotLease<T>> {
        self.lease_from(slot, FREE)
            .or_else(|| self.lease_from(slot, WRITTEN))
    }

    fn lease_from(self: &Arc<Self>, slot: usize, from: u8) -> Option<SlotLease<T>> {
        self.state
            .get(slot)?
            .compare_exchange(from, LEASED, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        Some(SlotLease {
            buffer: self.clone(),
            slot,
        })
    }

    /// The elements back as one vector, once nothing else holds the buffer (no lease, no
    /// other handle); else the handle back.
    pub(crate) fn into_vec(this: Arc<Self>) -> Result<Vec<T>, Arc<Self>> {
        Arc::try_unwrap(this).map(|b| b.owner)
    }
}

/// Exclusive access to one slot of a [`SlotBuffer`], given back when dropped.
pub(crate) struct SlotLease<T: Copy + Send + Sync> {
    buffer: Arc<SlotBuffer<T>>,
    slot: usize,
}

impl<T: Copy + Send + Sync> Deref for SlotLease<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        let b = &self.buffer;
        // SAFETY: the slot lies within `owner` (checked by `lease`), `owner` is neither moved
        // out nor resized while a lease holds the buffer, and this lease is the slot's only
        // holder, so nothing writes these elements meanwhile.
        unsafe { std::slice::from_raw_parts(b.base.add(self.slot * b.slot_len), b.slot_len) }
    }
}

impl<T: Copy + Send + Sync> DerefMut for SlotLease<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        let b = &self.buffer;
        // SAFETY: as in `deref`; `&mut self` makes this the only reference through the lease.
        unsafe { std::slice::from_raw_parts_mut(b.base.add(self.slot * b.slot_len), b.slot_len) }
    }
}

impl<T: Copy + Send + Sync> Drop for SlotLease<T> {
    fn drop(&mut self) {
        self.buffer.state[self.slot].store(WRITTEN, Ordering::Release);
    }
}

/// A [`SlotBuffer`] of one of the image element types.
#[derive(Clone)]
pub(crate) enum SharedPixels {
    U8(Arc<SlotBuffer<u8>>),
    F16(Arc<SlotBuffer<f16>>),
    F32(Arc<SlotBuffer<f32>>),
}

/// Runs `$body` with `$b` bound to the typed buffer, whatever its type.
macro_rules! each_type {
    ($p:expr, $b:ident => $body:expr) => {
        match $p {
            SharedPixels::U8($b) => $body,
            SharedPixels::F16($b) => $body,
            SharedPixels::F32($b) => $body,
        }
    };
}

/// A lease on a slot of a [`SharedPixels`].
pub(crate) enum PixelsLease {
    U8(SlotLease<u8>),
    F16(SlotLease<f16>),
    F32(SlotLease<f32>),
}

impl PixelsLease {
    fn as_mut(&mut self) -> PixelsMut<'_> {
        match self {
            PixelsLease::U8(l) => PixelsMut::U8(l),
            PixelsLease::F16(l) => PixelsMut::F16(l),
            PixelsLease::F32(l) => PixelsMut::F32(l),
        }
    }
}

impl SharedPixels {
    /// A buffer of `slots` slots of `slot_len` elements, from `pool` when it has one.
    fn new(pool: &BufferPool, dtype: DType, slots: usize, slot_len: usize) -> SharedPixels {
        match pool.take_initialized(dtype, slots * slot_len) {
            Pixels::U8(v) => SharedPixels::U8(SlotBuffer::new(v, slot_len)),
            Pixels::F16(v) => SharedPixels::F16(SlotBuffer::new(v, slot_len)),
            Pixels::F32(v) => SharedPixels::F32(SlotBuffer::new(v, slot_len)),
        }
    }

    fn dtype(&self) -> DType {
        match self {
            SharedPixels::U8(_) => DType::U8,
            SharedPixels::F16(_) => DType::F16,
            SharedPixels::F32(_) => DType::F32,
        }
    }

    fn slots(&self) -> usize {
        each_type!(self, b => b.slots())
    }

    fn slot_len(&self) -> usize {
        each_type!(self, b => b.slot_len())
    }

    fn same(&self, other: &SharedPixels) -> bool {
        match (self, other) {
            (SharedPixels::U8(a), SharedPixels::U8(b)) => Arc::ptr_eq(a, b),
            (SharedPixels::F16(a), SharedPixels::F16(b)) => Arc::ptr_eq(a, b),
            (SharedPixels::F32(a), SharedPixels::F32(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// A worker's lease of a never-leased slot.
    fn lease_free(&self, slot: usize) -> Option<PixelsLease> {
        Some(match self {
            SharedPixels::U8(b) => PixelsLease::U8(b.lease_free(slot)?),
            SharedPixels::F16(b) => PixelsLease::F16(b.lease_free(slot)?),
            SharedPixels::F32(b) => PixelsLease::F32(b.lease_free(slot)?),
        })
    }

    /// Copies slot `from` of `src` into slot `to` of `self` (which may be the same buffer);
    /// false when the types differ or a slot is out of range or held.
    fn copy_slot(&self, to: usize, src: &SharedPixels, from: usize) -> bool {
        if self.same(src) && to == from {
            return true;
        }
        match (self, src) {
            (SharedPixels::U8(d), SharedPixels::U8(s)) => copy_between(d, to, s, from),
            (SharedPixels::F16(d), SharedPixels::F16(s)) => copy_between(d, to, s, from),
            (SharedPixels::F32(d), SharedPixels::F32(s)) => copy_between(d, to, s, from),
            _ => false,
        }
    }

    /// Copies `pixels` into slot `to`; false when the type or length differs.
    fn write_slot(&self, to: usize, pixels: &Pixels) -> bool {
        match (self, pixels) {
            (SharedPixels::U8(d), Pixels::U8(s)) => write_into(d, to, s),
            (SharedPixels::F16(d), Pixels::F16(s)) => write_into(d, to, s),
            (SharedPixels::F32(d), Pixels::F32(s)) => write_into(d, to, s),
            _ => false,
        }
    }

    /// The whole buffer, cut to its first `slots` slots, once nothing else holds it.
    fn into_pixels(self, slots: usize) -> Result<Pixels, SharedPixels> {
        fn cut<T: Copy + Send + Sync>(
            b: Arc<SlotBuffer<T>>,
            slots: usize,
        ) -> Result<Vec<T>, Arc<SlotBuffer<T>>> {
            let n = slots * b.slot_len();
            SlotBuffer::into_vec(b).map(|mut v| {
                v.truncate(n);
                v
            })
        }
        match self {
            SharedPixels::U8(b) => cut(b, slots).map(Pixels::U8).map_err(SharedPixels::U8),
            SharedPixels::F16(b) => cut(b, slots).map(Pixels::F16).map_err(SharedPixels::F16),
            SharedPixels::F32(b) => cut(b, slots).map(Pixels::F32).map_err(SharedPixels::F32),
        }
    }

    /// A copy of slot `slot`'s elements (the slow path, for a buffer still shared).
    fn read_slot(&self, slot: usize) -> Option<Pixels> {
        Some(match self {
            SharedPixels::U8(b) => Pixels::U8(b.lease(slot)?.to_vec()),
            SharedPixels::F16(b) => Pixels::F16(b.lease(slot)?.to_vec()),
            SharedPixels::F32(b) => Pixels::F32(b.lease(slot)?.to_vec()),
        })
    }
}

fn copy_between<T: Copy + Send + Sync>(
    dst: &Arc<SlotBuffer<T>>,
    to: usize,
    src: &Arc<SlotBuffer<T>>,
    from: usize,
) -> bool {
    let (Some(mut d), Some(s)) = (dst.lease(to), src.lease(from)) else {
        return false;
    };
    if d.len() != s.len() {
        return false;
    }
    d.copy_from_slice(&s);
    true
}

fn write_into<T: Copy + Send + Sync>(dst: &Arc<SlotBuffer<T>>, to: usize, src: &[T]) -> bool {
    match dst.lease(to) {
        Some(mut d) if d.len() == src.len() => {
            d.copy_from_slice(src);
            true
        }
        _ => false,
    }
}

/// Where a sample's image output was written: a slot of a shared batch buffer.
#[derive(Clone)]
pub(crate) struct Placed {
    pixels: SharedPixels,
    slot: usize,
    /// Shape in layout order.
    shape: [usize; 3],
    layout: Layout,
}

impl Placed {
    /// The image as a standalone copy (for a batch built the ordinary way).
    pub(crate) fn to_image(&self) -> Option<Image> {
        let [a, b, c] = self.shape;
        let (height, width, channels) = match self.layout {
            Layout::Hwc => (a, b, c),
            Layout::Chw => (b, c, a),
        };
        Some(Image {
            height,
            width,
            channels,
            layout: self.layout,
            pixels: self.pixels.read_slot(self.slot)?,
        })
    }
}

/// Key of a batch's buffer: (epoch, batch in the epoch counted from where the epoch's
/// samples start, output index).
type Key = (u64, usize, usize);

/// The batch buffers, shared by the workers (who write samples into them where they expect
/// them to go) and the assembler (who builds each batch on its buffer and forgets buffers
/// once no worker can write them any more).
///
/// A sample's place: its position among the epoch's good samples, which a worker estimates
/// as its position in the epoch's order less the samples the assembler has skipped so far in
/// that epoch. Skipped samples the assembler has not reached yet make the estimate too high,
/// never too low; so once the assembler has taken `g` good samples of an epoch, no worker
/// will write below place `g` of it, and the buffers of batches below it can be forgotten.
///
/// Workers write only into the batches up to the one after the last batch delivered, so that
/// while the consumer is slow at most two buffers are being filled besides the batches queued
/// (samples in flight beyond those come as ordinary images and are copied, as before).
pub(crate) struct BatchSlots {
    batch: usize,
    /// Where the first epoch's samples start (a resumed run starts inside an epoch).
    start: (u64, usize),
    pool: Arc<BufferPool>,
    buffers: Mutex<BTreeMap<Key, SharedPixels>>,
    progress: Mutex<Progress>,
}

/// How far the assembler has come.
#[derive(Debug, Clone, Copy)]
struct Progress {
    epoch: u64,
    /// Samples of `epoch` skipped so far.
    skipped: usize,
    /// Good samples of `epoch` taken so far.
    good: usize,
    /// Batches of `epoch` handed on so far.
    delivered: usize,
}

impl BatchSlots {
    pub(crate) fn new(batch: usize, start: (u64, usize), pool: Arc<BufferPool>) -> BatchSlots {
        BatchSlots {
            batch: batch.max(1),
            start,
            pool,
            buffers: Mutex::new(BTreeMap::new()),
            progress: Mutex::new(Progress {
                epoch: start.0,
                skipped: 0,
                good: 0,
                delivered: 0,
            }),
        }
    }

    fn progress(&self) -> std::sync::MutexGuard<'_, Progress> {
        // Plain data, consistent after any panic.
        self.progress.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn pool(&self) -> &Arc<BufferPool> {
        &self.pool
    }

    /// The expected (batch, slot) of sample `pos` of `epoch`, if that batch is at most one
    /// after the last delivered.
    fn expected(&self, epoch: u64, pos: usize) -> Option<(usize, usize)> {
        let first = if epoch == self.start.0 {
            self.start.1
        } else {
            0
        };
        let p = *self.progress();
        let skipped = if p.epoch == epoch { p.skipped } else { 0 };
        let place = pos.saturating_sub(first).saturating_sub(skipped);
        let batch = place / self.batch;
        let near = if p.epoch == epoch {
            batch <= p.delivered + 1
        } else {
            epoch == p.epoch + 1 && batch == 0
        };
        near.then_some((batch, place % self.batch))
    }

    /// The assembler's progress, moved on to `epoch` if it was before it.
    fn progress_in(&self, epoch: u64) -> std::sync::MutexGuard<'_, Progress> {
        let mut p = self.progress();
        if p.epoch != epoch {
            *p = Progress {
                epoch,
                skipped: 0,
                good: 0,
                delivered: 0,
            };
        }
        p
    }

    /// The assembler skipped a sample of `epoch` (its epochs come in order).
    pub(crate) fn skip(&self, epoch: u64) {
        self.progress_in(epoch).skipped += 1;
    }

    /// The assembler took a good sample of `epoch`: buffers of batches no worker will write
    /// any more are forgotten.
    pub(crate) fn took_good(&self, epoch: u64) {
        let good = {
            let mut p = self.progress_in(epoch);
            p.good += 1;
            p.good
        };
        self.forget_before(epoch, good / self.batch);
    }

    fn buffers(&self) -> std::sync::MutexGuard<'_, BTreeMap<Key, SharedPixels>> {
        // A panic while holding this lock leaves the map consistent (single inserts and
        // removals), so a poisoned lock is still usable.
        self.buffers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The buffer of `key`, made for `dtype` and `slot_len` when there is none yet; `None`
    /// when the one there holds something else.
    fn buffer(&self, key: Key, dtype: DType, slot_len: usize) -> Option<SharedPixels> {
        if slot_len == 0 {
            return None;
        }
        let mut m = self.buffers();
        let b = m
            .entry(key)
            .or_insert_with(|| SharedPixels::new(&self.pool, dtype, self.batch, slot_len));
        (b.dtype() == dtype && b.slot_len() == slot_len).then(|| b.clone())
    }

    /// The buffer that the batch of `epoch` being filled is built on, for output `output`
    /// whose first sample is `first`.
    pub(crate) fn batch_buffer(
        &self,
        epoch: u64,
        output: usize,
        first: &Placed,
    ) -> Option<SharedPixels> {
        let batch = self.progress_in(epoch).good / self.batch;
        let len = first.pixels.slot_len();
        self.buffer((epoch, batch, output), first.pixels.dtype(), len)
    }

    /// A place for output `output` of sample `pos` of `epoch`, to hand to the operator that
    /// produces it.
    pub(crate) fn offer(&self, epoch: u64, pos: usize, output: usize) -> SlotOffer<'_> {
        SlotOffer {
            slots: self,
            epoch,
            pos,
            output,
            taken: None,
        }
    }

    /// Forgets the buffers of `epoch`'s batches before `batch` (and of earlier epochs).
    fn forget_before(&self, epoch: u64, batch: usize) {
        let mut m = self.buffers();
        if m.first_key_value()
            .is_some_and(|(k, _)| *k < (epoch, batch, 0))
        {
            let keep = m.split_off(&(epoch, batch, 0));
            *m = keep;
        }
    }

    /// The assembler handed on a batch of `epoch` (not counted once the epoch has ended).
    pub(crate) fn delivered(&self, epoch: u64) {
        let mut p = self.progress();
        if p.epoch == epoch {
            p.delivered += 1;
        }
    }

    /// Called by the assembler at the end of `epoch`: its buffers are the assembler's alone.
    pub(crate) fn epoch_ended(&self, epoch: u64) {
        drop(self.progress_in(epoch + 1));
        self.forget_before(epoch + 1, 0);
    }
}

/// A slot offered to one operator run (see [`crate::ops::OutputSlot`]).
pub(crate) struct SlotOffer<'a> {
    slots: &'a BatchSlots,
    epoch: u64,
    pos: usize,
    output: usize,
    taken: Option<(PixelsLease, Placed)>,
}

impl SlotOffer<'_> {
    /// Where the output went, if the operator wrote it into the slot; the lease ends here.
    pub(crate) fn placed(self) -> Option<Placed> {
        self.taken.map(|(_lease, placed)| placed)
    }
}

impl crate::ops::OutputSlot for SlotOffer<'_> {
    fn room(&mut self, dtype: DType, layout: Layout, shape: [usize; 3]) -> Option<PixelsMut<'_>> {
        if self.taken.is_some() {
            return None;
        }
        // As late as possible: the later, the more skipped samples are known.
        let (batch, slot) = self.slots.expected(self.epoch, self.pos)?;
        let len = shape.iter().product::<usize>();
        let pixels = self
            .slots
            .buffer((self.epoch, batch, self.output), dtype, len)?;
        let lease = pixels.lease_free(slot)?;
        let placed = Placed {
            pixels,
            slot,
            shape,
            layout,
        };
        let t = self.taken.insert((lease, placed));
        Some(t.0.as_mut())
    }
}

/// An image output of the batch being filled: built the ordinary way (each sample copied in)
/// or on a shared buffer the workers wrote into.
pub(crate) enum ImageFill {
    Copied(TensorBuilder),
    Shared {
        pixels: SharedPixels,
        layout: Layout,
        shapes: Vec<[usize; 3]>,
    },
}

impl ImageFill {
    /// A fill starting with a sample written into a shared buffer, built on `target` (the
    /// batch's buffer; the sample copied to its first slot unless it is there already, which
    /// the `bool` tells).
    pub(crate) fn start_placed(
        p: &Placed,
        target: Option<SharedPixels>,
        pool: &Arc<BufferPool>,
        batch: usize,
    ) -> (ImageFill, bool) {
        if let Some(pixels) = target {
            let in_place = pixels.same(&p.pixels) && p.slot == 0;
            if pixels.copy_slot(0, &p.pixels, p.slot) {
                let fill = ImageFill::Shared {
                    pixels,
                    layout: p.layout,
                    shapes: vec![p.shape],
                };
                return (fill, in_place);
            }
        }
        (Self::start_copied(&Self::image_of(p), pool, batch), false)
    }

    /// A fill starting with an ordinary image.
    pub(crate) fn start_copied(im: &Image, pool: &Arc<BufferPool>, batch: usize) -> ImageFill {
        ImageFill::Copied(TensorBuilder::new(im, batch, Some(pool)))
    }

    fn image_of(p: &Placed) -> Image {
        p.to_image()
            .expect("a taken sample's slot is free and in range")
    }

    /// Appends a sample written into a shared buffer: nothing to do when it is already where
    /// it belongs (then true), else a copy.
    pub(crate) fn push_placed(&mut self, p: &Placed, pool: &Arc<BufferPool>, batch: usize) -> bool {
        let mut in_place = false;
        let written = self.write_shared(p.layout, p.shape, |pixels, to| {
            in_place = pixels.same(&p.pixels) && to == p.slot;
            pixels.copy_slot(to, &p.pixels, p.slot)
        });
        if written {
            return in_place;
        }
        self.push(&Self::image_of(p), pool, batch);
        false
    }

    /// Appends the next sample to the shared buffer, through `write(buffer, slot)`, when this
    /// fill has one of `layout` with a slot left and `write` succeeds (then true; `shape`
    /// is recorded).
    fn write_shared(
        &mut self,
        layout: Layout,
        shape: [usize; 3],
        write: impl FnOnce(&SharedPixels, usize) -> bool,
    ) -> bool {
        if let ImageFill::Shared {
            pixels,
            layout: shared_layout,
            shapes,
        } = self
        {
            let to = shapes.len();
            if *shared_layout == layout && to < pixels.slots() && write(pixels, to) {
                shapes.push(shape);
                return true;
            }
        }
        false
    }

    /// Appends an ordinary image.
    pub(crate) fn push(&mut self, im: &Image, pool: &Arc<BufferPool>, batch: usize) {
        if self.write_shared(im.layout, im.shape(), |pixels, to| {
            pixels.write_slot(to, &im.pixels)
        }) {
            return;
        }
        if let ImageFill::Shared { .. } = self {
            // Another shape or type: from here on, built the ordinary way.
            self.make_copied(pool, batch);
        }
        if let ImageFill::Copied(b) = self {
            b.push(im);
        }
    }

    /// Appends a copy of the last sample (`last_batch = "pad"`).
    pub(crate) fn repeat_last(&mut self, pool: &Arc<BufferPool>, batch: usize) {
        if let ImageFill::Shared { pixels, shapes, .. } = self {
            let (to, Some(&last)) = (shapes.len(), shapes.last()) else {
                return;
            };
            if to < pixels.slots() && pixels.copy_slot(to, &pixels.clone(), to - 1) {
                shapes.push(last);
                return;
            }
            self.make_copied(pool, batch);
        }
        if let ImageFill::Copied(b) = self {
            b.repeat_last();
        }
    }

    /// Turns a shared fill into an ordinary one holding the same samples.
    fn make_copied(&mut self, pool: &Arc<BufferPool>, batch: usize) {
        let ImageFill::Shared {
            pixels,
            layout,
            shapes,
        } = self
        else {
            return;
        };
        let images: Vec<Image> = (0..shapes.len())
            .map(|slot| {
                Self::image_of(&Placed {
                    pixels: pixels.clone(),
                    slot,
                    shape: shapes[slot],
                    layout: *layout,
                })
            })
            .collect();
        let mut it = images.iter();
        let Some(first) = it.next() else { return };
        let mut b = TensorBuilder::new(first, batch, Some(pool));
        for im in it {
            b.push(im);
        }
        *self = ImageFill::Copied(b);
    }

    /// The finished tensor.
    pub(crate) fn finish(self, pool: &Arc<BufferPool>, batch: usize) -> BatchTensor {
        match self {
            ImageFill::Copied(b) => b.finish(),
            ImageFill::Shared {
                pixels,
                layout,
                shapes,
            } => {
                let n = shapes.len();
                let slot_len = pixels.slot_len();
                let dtype = pixels.dtype();
                match pixels.into_pixels(n) {
                    Ok(data) => BatchTensor::from_parts(
                        dtype,
                        layout,
                        (0..n).map(|k| k * slot_len).collect(),
                        shapes,
                        data,
                        Some(pool),
                    ),
                    // Still held elsewhere (never expected: every sample of the buffer has
                    // been taken): copy the samples out instead.
                    Err(pixels) => {
                        let mut fill = ImageFill::Shared {
                            pixels,
                            layout,
                            shapes,
                        };
                        fill.make_copied(pool, batch);
                        fill.finish(pool, batch)
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::OutputSlot;

    #[test]
    fn a_slot_has_one_holder_at_a_time_and_the_vector_comes_back_whole() {
        let b = SlotBuffer::new(vec![0u32; 12], 4);
        assert_eq!(b.slots(), 3);
        let mut a = b.lease_free(1).expect("free");
        assert!(b.lease(1).is_none(), "held");
        assert!(b.lease(3).is_none(), "out of range");
        a.copy_from_slice(&[1, 2, 3, 4]);
        let b2 = b.clone();
        assert!(SlotBuffer::into_vec(b2).is_err(), "still shared");
        drop(a);
        assert!(
            b.lease_free(1).is_none(),
            "written: only the assembler may take it"
        );
        let mut again = b.lease(1).expect("the assembler may");
        again[0] = 9;
        drop(again);
        let v = SlotBuffer::into_vec(b).ok().expect("sole holder");
        assert_eq!(v, vec![0, 0, 0, 0, 9, 2, 3, 4, 0, 0, 0, 0]);
    }

    #[test]
    fn threads_fill_their_own_slots_at_once() {
        let b = SlotBuffer::new(vec![0u64; 64 * 1000], 1000);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let b = b.clone();
                s.spawn(move || {
                    for slot in (t as usize..64).step_by(4) {
                        let mut l = b.lease_free(slot).expect("each slot leased once");
                        for (i, x) in l.iter_mut().enumerate() {
                            *x = slot as u64 * 1_000_000 + i as u64;
                        }
                    }
                });
            }
        });
        let v = SlotBuffer::into_vec(b).ok().expect("threads are done");
        for (k, x) in v.iter().enumerate() {
            assert_eq!(*x, (k / 1000) as u64 * 1_000_000 + (k % 1000) as u64);
        }
    }

    fn image(v: f32) -> Image {
        Image {
            height: 2,
            width: 2,
            channels: 3,
            layout: Layout::Chw,
            pixels: Pixels::F32(vec![v; 12]),
        }
    }

    /// Writes `v` through an offer for sample `pos` of epoch 0, as an operator would.
    fn place(slots: &BatchSlots, pos: usize, v: f32) -> Option<Placed> {
        let mut offer = slots.offer(0, pos, 0);
        match offer.room(DType::F32, Layout::Chw, [3, 2, 2]) {
            Some(PixelsMut::F32(d)) => d.fill(v),
            Some(_) => panic!("room of another type"),
            None => return None,
        }
        offer.placed()
    }

    fn values(t: &BatchTensor) -> Vec<f32> {
        t.as_f32().expect("f32").chunks(12).map(|c| c[0]).collect()
    }

    #[test]
    fn samples_in_place_need_no_copy_and_shifted_ones_are_moved() {
        let pool = Arc::new(BufferPool::default());
        let slots = BatchSlots::new(4, (0, 0), pool.clone());
        // Written before anyone knew that sample 1 is bad.
        let placed: Vec<Placed> = (0..7)
            .map(|p| place(&slots, p, p as f32).unwrap())
            .collect();
        slots.skip(0);
        // Batch 0 is samples 0, 2, 3, 4.
        let target = slots.batch_buffer(0, 0, &placed[0]);
        let (mut fill, in_place) = ImageFill::start_placed(&placed[0], target, &pool, 4);
        assert!(in_place);
        slots.took_good(0);
        let moved: Vec<bool> = [2, 3, 4]
            .iter()
            .map(|&p| {
                let in_place = fill.push_placed(&placed[p], &pool, 4);
                slots.took_good(0);
                in_place
            })
            .collect();
        assert_eq!(
            moved,
            vec![false; 3],
            "each one place early, or in the next buffer"
        );
        // Batch 1 starts with sample 5, one place after where it was written.
        let target = slots.batch_buffer(0, 0, &placed[5]);
        let (mut next, in_place) = ImageFill::start_placed(&placed[5], target, &pool, 4);
        assert!(!in_place, "moved to the first slot");
        assert!(!next.push_placed(&placed[6], &pool, 4));
        // Sample 7 now expects the place sample 6 was written in: it comes as an ordinary
        // image. Sample 8 lands where it belongs.
        assert!(place(&slots, 7, 7.0).is_none());
        next.push(&image(7.0), &pool, 4);
        let p8 = place(&slots, 8, 8.0).expect("a free slot");
        assert!(next.push_placed(&p8, &pool, 4), "in place");
        drop(placed);
        drop(p8);
        let first = fill.finish(&pool, 4);
        assert_eq!(values(&first), vec![0.0, 2.0, 3.0, 4.0]);
        assert_eq!(first.shapes, vec![[3, 2, 2]; 4]);
        assert_eq!(first.offsets, vec![0, 12, 24, 36]);
        slots.epoch_ended(0);
        let second = next.finish(&pool, 4);
        assert_eq!(values(&second), vec![5.0, 6.0, 7.0, 8.0]);
    }

    #[test]
    fn workers_write_only_the_batch_being_filled_and_the_next() {
        let slots = BatchSlots::new(2, (0, 0), Arc::new(BufferPool::default()));
        assert!(place(&slots, 3, 3.0).is_some(), "batch 1");
        assert!(place(&slots, 4, 4.0).is_none(), "batch 2 waits");
        assert!(
            slots.expected(1, 0).is_some(),
            "the next epoch's first batch"
        );
        assert!(slots.expected(1, 2).is_none());
        slots.took_good(0);
        slots.took_good(0);
        assert!(
            place(&slots, 4, 4.0).is_none(),
            "batch 0 is not handed on yet"
        );
        slots.delivered(0);
        assert!(place(&slots, 4, 4.0).is_some(), "now it is");
        slots.epoch_ended(0);
        assert_eq!(slots.expected(1, 3), Some((1, 1)));
    }

    #[test]
    fn a_worker_never_overwrites_a_sample_the_assembler_has_yet_to_take() {
        let slots = BatchSlots::new(4, (0, 0), Arc::new(BufferPool::default()));
        let p6 = place(&slots, 6, 6.0).expect("place 6");
        // Sample 1 turns out bad: sample 7 now expects place 6, which sample 6 holds.
        slots.skip(0);
        assert!(
            place(&slots, 7, 7.0).is_none(),
            "no room: it is copied instead"
        );
        assert_eq!(p6.to_image().unwrap().pixels, Pixels::F32(vec![6.0; 12]));
    }

    #[test]
    fn pads_and_another_shape_fall_back_to_copies_where_needed() {
        let pool = Arc::new(BufferPool::default());
        let slots = BatchSlots::new(3, (0, 0), pool.clone());
        let p = place(&slots, 0, 7.0).unwrap();
        let target = slots.batch_buffer(0, 0, &p);
        let (mut fill, _) = ImageFill::start_placed(&p, target, &pool, 3);
        fill.repeat_last(&pool, 3);
        let odd = Image {
            height: 1,
            width: 1,
            channels: 3,
            layout: Layout::Chw,
            pixels: Pixels::F32(vec![8.0; 3]),
        };
        fill.push(&odd, &pool, 3);
        drop(p);
        slots.epoch_ended(0);
        let t = fill.finish(&pool, 3);
        assert_eq!(t.shapes, vec![[3, 2, 2], [3, 2, 2], [3, 1, 1]]);
        assert_eq!(t.offsets, vec![0, 12, 24]);
        assert_eq!(t.as_f32().unwrap()[..24], [7.0; 24]);
        assert_eq!(t.as_f32().unwrap()[24..], [8.0; 3]);
    }

    #[test]
    fn an_offer_refuses_another_type_or_size_than_its_buffer() {
        let pool = Arc::new(BufferPool::default());
        let slots = BatchSlots::new(2, (0, 0), pool);
        let _first = place(&slots, 0, 1.0);
        let mut offer = slots.offer(0, 1, 0);
        assert!(offer.room(DType::F32, Layout::Chw, [3, 2, 3]).is_none());
        assert!(offer.room(DType::U8, Layout::Chw, [3, 2, 2]).is_none());
        assert!(offer.placed().is_none());
        // A resumed epoch counts places from where it starts; other epochs from 0, and
        // skips count only in their own epoch.
        let resumed = BatchSlots::new(2, (3, 5), Arc::new(BufferPool::default()));
        assert_eq!(resumed.expected(3, 5), Some((0, 0)));
        assert_eq!(resumed.expected(3, 8), Some((1, 1)));
        resumed.skip(3);
        assert_eq!(resumed.expected(3, 8), Some((1, 0)));
        resumed.epoch_ended(3);
        assert_eq!(resumed.expected(4, 3), Some((1, 1)));
    }
}
