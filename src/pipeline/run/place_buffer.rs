//! One buffer whose places different threads write at the same time: each place of
//! `place_len` elements is leased to one holder at a time ([`PlaceLease`]), and the whole
//! vector comes back once every lease and handle is gone.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// One contiguous buffer of `places × place_len` elements whose places are written by different
/// threads at once, each place by one holder of a [`PlaceLease`] at a time.
pub(crate) struct PlaceBuffer<T> {
    /// Start of `owner`'s elements; they are reached only through leases until `owner` is
    /// taken back by [`PlaceBuffer::into_vec`] (which needs every lease gone).
    base: *mut T,
    place_len: usize,
    /// Each place's [`FREE`], [`LEASED`] or [`WRITTEN`].
    state: Box<[AtomicU8]>,
    owner: Vec<T>,
}

/// Never leased: a worker may write it.
const FREE: u8 = 0;
/// Held by a lease.
const LEASED: u8 = 1;
/// Leased before: holds a sample only the assembler may take (or a failed sample's remains).
const WRITTEN: u8 = 2;

// SAFETY: elements are reached only through a `PlaceLease`, and a place is leased to one holder
// at a time (its state moves to LEASED by compare-exchange with Acquire and out of it with
// Release), so no two threads ever touch the same element at once; `T: Send + Sync` lets the elements be written
// on one thread and read on another.
unsafe impl<T: Copy + Send + Sync> Send for PlaceBuffer<T> {}
// SAFETY: as above; `&PlaceBuffer` itself gives no access to elements without a lease.
unsafe impl<T: Copy + Send + Sync> Sync for PlaceBuffer<T> {}

impl<T: Copy + Send + Sync> PlaceBuffer<T> {
    /// Shares `data` (whose length is a multiple of `place_len`, at least 1) as places.
    pub(crate) fn new(mut data: Vec<T>, place_len: usize) -> Arc<PlaceBuffer<T>> {
        assert!(
            place_len > 0 && data.len().is_multiple_of(place_len),
            "whole places"
        );
        let places = data.len() / place_len;
        PlaceBuffer {
            base: data.as_mut_ptr(),
            place_len,
            state: (0..places).map(|_| AtomicU8::new(FREE)).collect(),
            owner: data,
        }
        .into()
    }

    /// Number of places.
    pub(crate) fn places(&self) -> usize {
        self.state.len()
    }

    /// Elements per place.
    pub(crate) fn place_len(&self) -> usize {
        self.place_len
    }

    /// Exclusive access to place `place` if it was never leased (a worker writing a sample: it
    /// must not overwrite one written before that the assembler has yet to take).
    pub(crate) fn lease_free(self: &Arc<Self>, place: usize) -> Option<PlaceLease<T>> {
        self.lease_from(place, FREE)
    }

    /// Exclusive access to place `place` unless someone holds it (the assembler).
    pub(crate) fn lease(self: &Arc<Self>, place: usize) -> Option<PlaceLease<T>> {
        self.lease_from(place, FREE)
            .or_else(|| self.lease_from(place, WRITTEN))
    }

    fn lease_from(self: &Arc<Self>, place: usize, from: u8) -> Option<PlaceLease<T>> {
        self.state
            .get(place)?
            .compare_exchange(from, LEASED, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        Some(PlaceLease {
            buffer: self.clone(),
            place,
        })
    }

    /// The elements back as one vector, once nothing else holds the buffer (no lease, no
    /// other handle); else the handle back.
    pub(crate) fn into_vec(this: Arc<Self>) -> Result<Vec<T>, Arc<Self>> {
        Arc::try_unwrap(this).map(|b| b.owner)
    }
}

/// Exclusive access to one place of a [`PlaceBuffer`], given back when dropped.
pub(crate) struct PlaceLease<T: Copy + Send + Sync> {
    buffer: Arc<PlaceBuffer<T>>,
    place: usize,
}

impl<T: Copy + Send + Sync> Deref for PlaceLease<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        let b = &self.buffer;
        // SAFETY: the place lies within `owner` (checked by `lease`), `owner` is neither moved
        // out nor resized while a lease holds the buffer, and this lease is the place's only
        // holder, so nothing writes these elements meanwhile.
        unsafe { std::slice::from_raw_parts(b.base.add(self.place * b.place_len), b.place_len) }
    }
}

impl<T: Copy + Send + Sync> DerefMut for PlaceLease<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        let b = &self.buffer;
        // SAFETY: as in `deref`; `&mut self` makes this the only reference through the lease.
        unsafe { std::slice::from_raw_parts_mut(b.base.add(self.place * b.place_len), b.place_len) }
    }
}

impl<T: Copy + Send + Sync> Drop for PlaceLease<T> {
    fn drop(&mut self) {
        self.buffer.state[self.place].store(WRITTEN, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_has_one_holder_at_a_time_and_the_vector_comes_back_whole() {
        let b = PlaceBuffer::new(vec![0u32; 12], 4);
        assert_eq!(b.places(), 3);
        let mut a = b.lease_free(1).expect("free");
        assert!(b.lease(1).is_none(), "held");
        assert!(b.lease(3).is_none(), "out of range");
        a.copy_from_slice(&[1, 2, 3, 4]);
        let b2 = b.clone();
        assert!(PlaceBuffer::into_vec(b2).is_err(), "still shared");
        drop(a);
        assert!(
            b.lease_free(1).is_none(),
            "written: only the assembler may take it"
        );
        let mut again = b.lease(1).expect("the assembler may");
        again[0] = 9;
        drop(again);
        let v = PlaceBuffer::into_vec(b).ok().expect("sole holder");
        assert_eq!(v, vec![0, 0, 0, 0, 9, 2, 3, 4, 0, 0, 0, 0]);
    }

    #[test]
    fn threads_fill_their_own_places_at_once() {
        let b = PlaceBuffer::new(vec![0u64; 64 * 1000], 1000);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let b = b.clone();
                s.spawn(move || {
                    for place in (t as usize..64).step_by(4) {
                        let mut l = b.lease_free(place).expect("each place leased once");
                        for (i, x) in l.iter_mut().enumerate() {
                            *x = place as u64 * 1_000_000 + i as u64;
                        }
                    }
                });
            }
        });
        let v = PlaceBuffer::into_vec(b).ok().expect("threads are done");
        for (k, x) in v.iter().enumerate() {
            assert_eq!(*x, (k / 1000) as u64 * 1_000_000 + (k % 1000) as u64);
        }
    }
}
