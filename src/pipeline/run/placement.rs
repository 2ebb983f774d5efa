//! Placement: where in the batch buffers each sample's image is written. Several workers fill
//! a buffer at once, each writing its sample's output straight into that sample's place, so
//! a finished batch needs no copy on the assembler's thread, which would otherwise take its
//! time from the workers (`docs/performance.md` measures the difference).
//!
//! A sample's place is decided before it runs: sample `p` of an epoch goes to place
//! `p % batch` of tentative batch `p / batch`. That is where it ends up unless an earlier
//! sample of the epoch was skipped; the assembler moves misplaced samples (a copy), so a bad
//! file costs copies, never a wrong batch.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use half::f16;

use crate::image::{DType, Image, Layout, Pixels};
use crate::ops::PixelsMut;
use crate::pipeline::batch::BatchBufferPool;
use crate::pipeline::graph::Graph;
use crate::value::ValueType;

use super::place_buffer::{PlaceBuffer, PlaceLease};

/// A [`PlaceBuffer`] of one of the image element types.
#[derive(Clone)]
pub(crate) enum SharedPixels {
    U8(Arc<PlaceBuffer<u8>>),
    F16(Arc<PlaceBuffer<f16>>),
    F32(Arc<PlaceBuffer<f32>>),
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

/// A lease on a place of a [`SharedPixels`].
pub(crate) enum PixelsLease {
    U8(PlaceLease<u8>),
    F16(PlaceLease<f16>),
    F32(PlaceLease<f32>),
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
    /// A buffer of `places` places of `place_len` elements, from `pool` when it has one;
    /// `None` when the memory can't be had (the samples then come as ordinary images).
    fn new(
        pool: &BatchBufferPool,
        dtype: DType,
        places: usize,
        place_len: usize,
    ) -> Option<SharedPixels> {
        let len = places.checked_mul(place_len)?;
        Some(match pool.take_initialized(dtype, len).ok()? {
            Pixels::U8(v) => SharedPixels::U8(PlaceBuffer::new(v, place_len)),
            Pixels::F16(v) => SharedPixels::F16(PlaceBuffer::new(v, place_len)),
            Pixels::F32(v) => SharedPixels::F32(PlaceBuffer::new(v, place_len)),
        })
    }

    pub(super) fn dtype(&self) -> DType {
        match self {
            SharedPixels::U8(_) => DType::U8,
            SharedPixels::F16(_) => DType::F16,
            SharedPixels::F32(_) => DType::F32,
        }
    }

    pub(super) fn places(&self) -> usize {
        each_type!(self, b => b.places())
    }

    pub(super) fn place_len(&self) -> usize {
        each_type!(self, b => b.place_len())
    }

    pub(super) fn same(&self, other: &SharedPixels) -> bool {
        match (self, other) {
            (SharedPixels::U8(a), SharedPixels::U8(b)) => Arc::ptr_eq(a, b),
            (SharedPixels::F16(a), SharedPixels::F16(b)) => Arc::ptr_eq(a, b),
            (SharedPixels::F32(a), SharedPixels::F32(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// A worker's lease of a never-leased place.
    fn lease_free(&self, place: usize) -> Option<PixelsLease> {
        Some(match self {
            SharedPixels::U8(b) => PixelsLease::U8(b.lease_free(place)?),
            SharedPixels::F16(b) => PixelsLease::F16(b.lease_free(place)?),
            SharedPixels::F32(b) => PixelsLease::F32(b.lease_free(place)?),
        })
    }

    /// Copies place `from` of `src` into place `to` of `self` (which may be the same buffer);
    /// false when the types differ or a place is out of range or held.
    pub(super) fn copy_place(&self, to: usize, src: &SharedPixels, from: usize) -> bool {
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

    /// Copies `pixels` into place `to`; false when the type or length differs.
    pub(super) fn write_place(&self, to: usize, pixels: &Pixels) -> bool {
        match (self, pixels) {
            (SharedPixels::U8(d), Pixels::U8(s)) => write_into(d, to, s),
            (SharedPixels::F16(d), Pixels::F16(s)) => write_into(d, to, s),
            (SharedPixels::F32(d), Pixels::F32(s)) => write_into(d, to, s),
            _ => false,
        }
    }

    /// The whole buffer, cut to its first `places` places, once nothing else holds it.
    pub(super) fn into_pixels(self, places: usize) -> Result<Pixels, SharedPixels> {
        fn cut<T: Copy + Send + Sync>(
            b: Arc<PlaceBuffer<T>>,
            places: usize,
        ) -> Result<Vec<T>, Arc<PlaceBuffer<T>>> {
            let n = places * b.place_len();
            PlaceBuffer::into_vec(b).map(|mut v| {
                v.truncate(n);
                v
            })
        }
        match self {
            SharedPixels::U8(b) => cut(b, places).map(Pixels::U8).map_err(SharedPixels::U8),
            SharedPixels::F16(b) => cut(b, places).map(Pixels::F16).map_err(SharedPixels::F16),
            SharedPixels::F32(b) => cut(b, places).map(Pixels::F32).map_err(SharedPixels::F32),
        }
    }

    /// A copy of place `place`'s elements (the slow path, for a buffer still shared).
    pub(super) fn read_place(&self, place: usize) -> Option<Pixels> {
        Some(match self {
            SharedPixels::U8(b) => Pixels::U8(b.lease(place)?.to_vec()),
            SharedPixels::F16(b) => Pixels::F16(b.lease(place)?.to_vec()),
            SharedPixels::F32(b) => Pixels::F32(b.lease(place)?.to_vec()),
        })
    }
}

fn copy_between<T: Copy + Send + Sync>(
    dst: &Arc<PlaceBuffer<T>>,
    to: usize,
    src: &Arc<PlaceBuffer<T>>,
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

fn write_into<T: Copy + Send + Sync>(dst: &Arc<PlaceBuffer<T>>, to: usize, src: &[T]) -> bool {
    match dst.lease(to) {
        Some(mut d) if d.len() == src.len() => {
            d.copy_from_slice(src);
            true
        }
        _ => false,
    }
}

/// Where a sample's image output was written: a place of a shared batch buffer.
#[derive(Clone)]
pub(crate) struct Placed {
    pub(super) pixels: SharedPixels,
    pub(super) place: usize,
    /// Shape in layout order.
    pub(super) shape: [usize; 3],
    pub(super) layout: Layout,
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
            pixels: self.pixels.read_place(self.place)?,
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
/// Workers write only into the batches up to the one after the last batch delivered, and
/// into the next epoch's first batch, so that while the consumer is slow at most three
/// buffers are being filled besides the batches queued (samples in flight beyond those come
/// as ordinary images and are copied); see [`super::memory`] for the whole count.
pub(crate) struct BatchBuffers {
    batch: usize,
    /// Places per buffer: the batch size, or fewer when an epoch can't fill a batch.
    places: usize,
    /// Where the first epoch's samples start (a resumed run starts inside an epoch).
    start: (u64, usize),
    pool: Arc<BatchBufferPool>,
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

impl BatchBuffers {
    /// Buffers for batches of `batch` samples, each with `places` places (at most `batch`;
    /// fewer when no batch can hold more), the first epoch starting at `start` (epoch,
    /// position in its order).
    pub(crate) fn new(
        batch: usize,
        places: usize,
        start: (u64, usize),
        pool: Arc<BatchBufferPool>,
    ) -> BatchBuffers {
        BatchBuffers {
            batch: batch.max(1),
            places: places.clamp(1, batch.max(1)),
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

    pub(crate) fn pool(&self) -> &Arc<BatchBufferPool> {
        &self.pool
    }

    /// The expected (batch, place) of sample `pos` of `epoch`, if that batch is at most one
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
        let place = place % self.batch;
        (near && place < self.places).then_some((batch, place))
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

    /// The buffer of `key`, made for `dtype` and `place_len` when there is none yet; `None`
    /// when the one there holds something else, or when there is no memory for a new one.
    fn buffer(&self, key: Key, dtype: DType, place_len: usize) -> Option<SharedPixels> {
        if place_len == 0 {
            return None;
        }
        let mut m = self.buffers();
        let b = match m.entry(key) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => e.insert(SharedPixels::new(
                &self.pool,
                dtype,
                self.places,
                place_len,
            )?),
        };
        (b.dtype() == dtype && b.place_len() == place_len).then(|| b.clone())
    }

    /// The buffer that the batch of `epoch` being filled is built on, for output `output`
    /// whose first sample is `first`.
    pub(crate) fn batch_buffer(
        &self,
        epoch: u64,
        output: usize,
        first: &Placed,
    ) -> Option<SharedPixels> {
        let len = first.pixels.place_len();
        self.batch_buffer_for(epoch, output, first.pixels.dtype(), len)
    }

    /// As [`BatchBuffers::batch_buffer`], for a first sample of `dtype` and `place_len`
    /// elements that no worker placed: the batch is still built on its one buffer, so a
    /// batch never holds two.
    pub(crate) fn batch_buffer_for(
        &self,
        epoch: u64,
        output: usize,
        dtype: DType,
        place_len: usize,
    ) -> Option<SharedPixels> {
        let batch = self.progress_in(epoch).good / self.batch;
        self.buffer((epoch, batch, output), dtype, place_len)
    }

    /// A place for output `output` of sample `pos` of `epoch`, to hand to the operator that
    /// produces it.
    pub(crate) fn offer(&self, epoch: u64, pos: usize, output: usize) -> PlaceOffer<'_> {
        PlaceOffer {
            buffers: self,
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

/// A place offered to one operator run (see [`crate::ops::OutputPlace`]).
pub(crate) struct PlaceOffer<'a> {
    buffers: &'a BatchBuffers,
    epoch: u64,
    pos: usize,
    output: usize,
    taken: Option<(PixelsLease, Placed)>,
}

impl PlaceOffer<'_> {
    /// Where the output went, if the operator wrote it into the place; the lease ends here.
    pub(crate) fn placed(self) -> Option<Placed> {
        self.taken.map(|(_lease, placed)| placed)
    }
}

impl crate::ops::OutputPlace for PlaceOffer<'_> {
    fn room(&mut self, dtype: DType, layout: Layout, shape: [usize; 3]) -> Option<PixelsMut<'_>> {
        if self.taken.is_some() {
            return None;
        }
        // As late as possible: the later, the more skipped samples are known.
        let (batch, place) = self.buffers.expected(self.epoch, self.pos)?;
        let len = shape.iter().product::<usize>();
        let pixels = self
            .buffers
            .buffer((self.epoch, batch, self.output), dtype, len)?;
        let lease = pixels.lease_free(place)?;
        let placed = Placed {
            pixels,
            place,
            shape,
            layout,
        };
        let t = self.taken.insert((lease, placed));
        Some(t.0.as_mut())
    }
}

/// Where workers may write final images: the batch buffers and which nodes may.
pub(crate) struct Placing {
    pub(crate) buffers: BatchBuffers,
    /// By node, see [`placeable_outputs`].
    pub(crate) placeable: Vec<Option<usize>>,
}

impl Placing {
    /// Placement for `graph`'s outputs into `buffers`.
    pub(crate) fn new(graph: &Graph, buffers: BatchBuffers) -> Placing {
        Placing {
            buffers,
            placeable: placeable_outputs(graph),
        }
    }

    /// Placement where no worker writes into batch buffers (the GPU path: samples run on
    /// the CPU there come back as images).
    pub(crate) fn without_places(graph: &Graph, buffers: BatchBuffers) -> Placing {
        Placing {
            buffers,
            placeable: vec![None; graph.nodes.len()],
        }
    }

    /// True when workers may write pipeline output `output` into the batch buffers.
    pub(crate) fn is_placeable(&self, output: usize) -> bool {
        self.placeable.contains(&Some(output))
    }
}

/// For each node, the pipeline output it may write straight into a place of a batch buffer:
/// its one output, an image of fixed type and size that is a pipeline output (once) and no
/// other node's input.
fn placeable_outputs(graph: &Graph) -> Vec<Option<usize>> {
    graph
        .nodes
        .iter()
        .map(|node| {
            let &[s] = node.outputs.as_slice() else {
                return None;
            };
            let fixed = matches!(
                graph.edge_types[s],
                ValueType::Image(t) if t.size.is_some() && t.channels.is_some()
            );
            let read_later = graph.nodes.iter().any(|n| n.inputs.contains(&s));
            let mut as_output = graph.outputs.iter().enumerate().filter(|(_, &o)| o == s);
            match (as_output.next(), as_output.next()) {
                (Some((i, _)), None) if fixed && !read_later => Some(i),
                _ => None,
            }
        })
        .collect()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::ops::OutputPlace;

    /// Writes `v` through an offer for sample `pos` of epoch 0, as an operator would.
    pub(in crate::pipeline::run) fn place(
        buffers: &BatchBuffers,
        pos: usize,
        v: f32,
    ) -> Option<Placed> {
        let mut offer = buffers.offer(0, pos, 0);
        match offer.room(DType::F32, Layout::Chw, [3, 2, 2]) {
            Some(PixelsMut::F32(d)) => d.fill(v),
            Some(_) => panic!("room of another type"),
            None => return None,
        }
        offer.placed()
    }

    #[test]
    fn a_buffer_holds_no_more_places_than_an_epoch_can_fill() {
        let buffers = BatchBuffers::new(100_000, 3, (0, 0), Arc::new(BatchBufferPool::default()));
        let p = place(&buffers, 2, 2.0).expect("place 2");
        assert_eq!(p.pixels.places(), 3);
        assert!(
            place(&buffers, 3, 3.0).is_none(),
            "beyond what an epoch holds"
        );
    }

    #[test]
    fn workers_write_only_the_batch_being_filled_and_the_next() {
        let buffers = BatchBuffers::new(2, 2, (0, 0), Arc::new(BatchBufferPool::default()));
        assert!(place(&buffers, 3, 3.0).is_some(), "batch 1");
        assert!(place(&buffers, 4, 4.0).is_none(), "batch 2 waits");
        assert!(
            buffers.expected(1, 0).is_some(),
            "the next epoch's first batch"
        );
        assert!(buffers.expected(1, 2).is_none());
        buffers.took_good(0);
        buffers.took_good(0);
        assert!(
            place(&buffers, 4, 4.0).is_none(),
            "batch 0 is not handed on yet"
        );
        buffers.delivered(0);
        assert!(place(&buffers, 4, 4.0).is_some(), "now it is");
        buffers.epoch_ended(0);
        assert_eq!(buffers.expected(1, 3), Some((1, 1)));
    }

    #[test]
    fn a_worker_never_overwrites_a_sample_the_assembler_has_yet_to_take() {
        let buffers = BatchBuffers::new(4, 4, (0, 0), Arc::new(BatchBufferPool::default()));
        let p6 = place(&buffers, 6, 6.0).expect("place 6");
        // Sample 1 turns out bad: sample 7 now expects place 6, which sample 6 holds.
        buffers.skip(0);
        assert!(
            place(&buffers, 7, 7.0).is_none(),
            "no room: it is copied instead"
        );
        assert_eq!(p6.to_image().unwrap().pixels, Pixels::F32(vec![6.0; 12]));
    }

    #[test]
    fn an_offer_refuses_another_type_or_size_than_its_buffer() {
        let pool = Arc::new(BatchBufferPool::default());
        let buffers = BatchBuffers::new(2, 2, (0, 0), pool);
        let _first = place(&buffers, 0, 1.0);
        let mut offer = buffers.offer(0, 1, 0);
        assert!(offer.room(DType::F32, Layout::Chw, [3, 2, 3]).is_none());
        assert!(offer.room(DType::U8, Layout::Chw, [3, 2, 2]).is_none());
        assert!(offer.placed().is_none());
        // A resumed epoch counts places from where it starts; other epochs from 0, and
        // skips count only in their own epoch.
        let resumed = BatchBuffers::new(2, 2, (3, 5), Arc::new(BatchBufferPool::default()));
        assert_eq!(resumed.expected(3, 5), Some((0, 0)));
        assert_eq!(resumed.expected(3, 8), Some((1, 1)));
        resumed.skip(3);
        assert_eq!(resumed.expected(3, 8), Some((1, 0)));
        resumed.epoch_ended(3);
        assert_eq!(resumed.expected(4, 3), Some((1, 1)));
    }
}
