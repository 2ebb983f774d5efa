//! How large a decode area must be for the groups after the warm-up. A group's area is the
//! sum of its images' decoded regions, which vary with each epoch's random crops; the warm-up
//! sees few groups (13 in a run in batches of 16 on the built-in photos) but every image of
//! them, so the bound comes from the images' spread: a group of `n` takes at most
//! `n·μ + K·σ·√n` (μ, σ: an image's mean size and its standard deviation, measured), and
//! never more than the `n` largest images seen (one huge photo would otherwise inflate σ and
//! every area with it; a later crop larger than any the warm-up drew may then still
//! allocate). With batches of 16 on the built-in photos the areas had grown after
//! the warm-up to 1.5 times the largest it saw (three `cuMemAlloc`s in a run of 25,600
//! images); with 256 ImageNet photos the sum of many images varies little. The images of a
//! batch the engines can't take, which the CPU decodes and the batch uploads, are bounded
//! the same way (the host images' area: every image of a batch on a device without engines).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Standard deviations of a group's sum the bound allows (a group past it is rarer than one
/// in a billion for a normal sum; images' sizes are skewed, so a margin).
const K: f64 = 6.0;

/// The largest sizes kept (for groups of up to that many images; a larger group's bound
/// takes the rest at the largest size).
const LARGEST: usize = 1024;

/// What the warm-up's groups were made of.
#[derive(Debug, Default)]
struct Seen {
    /// Images, the sum of their sizes and of their squares (bytes).
    count: u64,
    sum: f64,
    squares: f64,
    /// The most images one group held, the most bytes, and the groups counted.
    most_in_group: usize,
    largest_group: usize,
    groups: u64,
    /// The largest sizes, the smallest of them on top.
    largest: BinaryHeap<Reverse<usize>>,
}

/// The sizes of the images decode areas were made of.
#[derive(Debug, Default)]
pub(super) struct AreaSizes {
    seen: Mutex<Seen>,
    /// The areas are sized ([`AreaSizes::close`]): nothing more is counted (the feeding
    /// thread, the engines' bound, does no work for it after the warm-up).
    closed: AtomicBool,
}

impl AreaSizes {
    /// Counts a group's images of `lens` bytes each, until closed.
    pub(super) fn add(&self, lens: impl Iterator<Item = usize>) {
        if self.closed.load(Ordering::Relaxed) {
            return;
        }
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let (mut n, mut bytes) = (0, 0);
        for len in lens {
            let x = len as f64;
            n += 1;
            bytes += len;
            seen.count += 1;
            seen.sum += x;
            seen.squares += x * x;
            if seen.largest.len() < LARGEST {
                seen.largest.push(Reverse(len));
            } else if seen
                .largest
                .peek()
                .is_some_and(|&Reverse(least)| least < len)
            {
                seen.largest.pop();
                seen.largest.push(Reverse(len));
            }
        }
        seen.most_in_group = seen.most_in_group.max(n);
        seen.largest_group = seen.largest_group.max(bytes);
        seen.groups += 1;
    }

    /// Stops counting: the warm-up is over and the areas sized.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
    }

    /// The most bytes one group held so far.
    pub(super) fn largest_group(&self) -> usize {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .largest_group
    }

    /// The most images one group held so far.
    pub(super) fn most_in_group(&self) -> usize {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .most_in_group
    }

    /// The most images a later group of `of` samples may hold, where each sample is one of
    /// these images as often as the groups so far say (the images the engines can't take in
    /// a batch vary with the shuffle): the binomial count's mean and [`K`] deviations, at
    /// least the most a group held, at most `of`.
    pub(super) fn likely_most_in_group(&self, of: usize) -> usize {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.groups == 0 || of == 0 {
            return seen.most_in_group;
        }
        let n = of as f64;
        let p = (seen.count as f64 / (seen.groups as f64 * n)).min(1.0);
        let likely = (n * p + K * (n * p * (1.0 - p)).sqrt()).ceil() as usize;
        likely.max(seen.most_in_group).min(of)
    }

    /// The most bytes a group of `n` images needs (module docs), or 0 before any was seen.
    pub(super) fn bound(&self, n: usize) -> usize {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.count == 0 || n == 0 {
            return 0;
        }
        let c = seen.count as f64;
        let mean = seen.sum / c;
        let sd = (seen.squares / c - mean * mean).max(0.0).sqrt();
        let spread = n as f64 * mean + K * sd * (n as f64).sqrt();
        (spread.ceil() as usize).min(largest_sum(&seen, n))
    }

    /// The `n` largest sizes seen, summed: the most a group of `n` needs unless an image
    /// comes larger than any seen (for sizes whose bound may be generous: the chain's
    /// descriptors and taps, where the warm-up saw every photo of the data set, cropped).
    pub(super) fn largest_sum(&self, n: usize) -> usize {
        largest_sum(&self.seen.lock().unwrap_or_else(|p| p.into_inner()), n)
    }
}

/// The `n` largest sizes of `seen`; a group larger than the sizes kept takes them again (a
/// group across an epoch's end holds an image twice).
fn largest_sum(seen: &Seen, n: usize) -> usize {
    let mut sizes: Vec<usize> = seen.largest.iter().map(|&Reverse(s)| s).collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    sizes.iter().cycle().take(n).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_the_groups_mean_and_six_deviations_of_its_sum() {
        let a = AreaSizes::default();
        assert_eq!(a.bound(16), 0);
        // Ten images of each size from 1 to 100 kB: mean 50.5, deviation 28.87. For 100 of
        // them the spread, 5,050 + 6 × 288.7 = 6,782 kB, is less than the 100 largest
        // (10 × (100 + 99 + … + 91) = 9,550 kB).
        for _ in 0..10 {
            a.add((1..=100).map(|k| k * 1000));
        }
        assert_eq!(a.most_in_group(), 100);
        let sd = ((1..=100).map(|k| (k as f64 - 50.5).powi(2)).sum::<f64>() / 100.0).sqrt();
        let spread = (100.0 * 50_500.0 + 6.0 * sd * 1000.0 * 10.0).ceil() as usize;
        assert_eq!(a.bound(100), spread);
        // For 4, the 4 largest are less: 400 kB.
        assert_eq!(a.bound(4), 400_000);
        // Seven images of one size: no deviation, n times the size.
        let b = AreaSizes::default();
        b.add([5000; 7].into_iter());
        assert_eq!(b.bound(4), 20_000);
        assert_eq!(b.most_in_group(), 7);
    }

    #[test]
    fn a_groups_count_of_images_allows_for_the_shuffle() {
        // Batches of 16 that held 1 to 6 such images, 3.2 on average: p = 0.2, σ = 1.6;
        // 3.2 + 6 × 1.6 = 12.8, so 13 of 16.
        let a = AreaSizes::default();
        for k in 0..10 {
            a.add(std::iter::repeat_n(1000, [2, 3, 6, 4, 1][k % 5]));
        }
        assert_eq!(a.most_in_group(), 6);
        assert_eq!(a.likely_most_in_group(16), 13);
        // None of them, or all: nothing more, every sample.
        let none = AreaSizes::default();
        none.add(std::iter::empty());
        assert_eq!(none.likely_most_in_group(16), 0);
        let all = AreaSizes::default();
        all.add(std::iter::repeat_n(1000, 16));
        assert_eq!(all.likely_most_in_group(16), 16);
    }

    #[test]
    fn one_huge_image_bounds_the_group_by_the_largest_seen_not_by_the_spread() {
        // 199 images of 150 kB and one of 72 MB: the spread alone would ask 617 MB for 256
        // (σ is 5 MB); the largest seen are the huge one and every other, the first 56 of
        // them again (a group across an epoch's end).
        let a = AreaSizes::default();
        a.add(std::iter::repeat_n(150_000, 199).chain([72_000_000]));
        assert_eq!(a.bound(256), 2 * 72_000_000 + (199 + 55) * 150_000);
        assert_eq!(a.bound(200), 72_000_000 + 199 * 150_000);
    }

    #[test]
    fn the_largest_sum_takes_the_largest_seen_again_for_a_larger_group() {
        let a = AreaSizes::default();
        assert_eq!(a.largest_sum(4), 0);
        a.add([5, 1, 9].into_iter());
        a.add([7, 3].into_iter());
        assert_eq!(a.largest_sum(2), 9 + 7);
        assert_eq!(a.largest_group(), 5 + 1 + 9);
        assert_eq!(a.largest_sum(7), 9 + 7 + 5 + 3 + 1 + 9 + 7);
    }
}
