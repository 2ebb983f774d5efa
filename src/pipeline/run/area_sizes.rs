//! How large a decode area must be for the groups after the warm-up. A group's area is the
//! sum of its images' decoded regions, which vary with each epoch's random crops; the warm-up
//! sees few groups (a first epoch of 200 photos in batches of 16 is 13 of them) but every
//! image of them, so the bound comes from the images' spread: a group of `n` takes at most
//! `n·μ + K·σ·√n` (μ, σ: an image's mean and standard deviation, measured), more than the
//! warm-up's largest group and its pool's quarter more. With batches of 16 on the built-in
//! photos the areas had grown after the warm-up to 1.5 times the largest it saw (three
//! allocations in a run, each a `cuMemAlloc`); with 256, the sum of many images varies
//! little and the bound adds ~10% to the quarter more.

use std::sync::Mutex;

/// Standard deviations of a group's sum the bound allows (a group past it is rarer than one
/// in a billion for a normal sum; images' sizes are skewed, so a margin).
const K: f64 = 6.0;

/// The sizes of the images decode areas were made of.
#[derive(Debug, Default)]
pub(super) struct AreaSizes {
    /// Images, the sum of their sizes and of their squares (bytes).
    seen: Mutex<(u64, f64, f64)>,
}

impl AreaSizes {
    /// Counts a group's images of `lens` bytes each.
    pub(super) fn add(&self, lens: impl Iterator<Item = usize>) {
        let (mut n, mut sum, mut squares) = (0u64, 0.0, 0.0);
        for len in lens {
            let x = len as f64;
            n += 1;
            sum += x;
            squares += x * x;
        }
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.0 += n;
        seen.1 += sum;
        seen.2 += squares;
    }

    /// The most bytes a group of `n` images needs (module docs), or 0 before any was seen.
    pub(super) fn bound(&self, n: usize) -> usize {
        let (count, sum, squares) = *self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if count == 0 {
            return 0;
        }
        let c = count as f64;
        let mean = sum / c;
        let sd = (squares / c - mean * mean).max(0.0).sqrt();
        let n = n as f64;
        (n * mean + K * sd * n.sqrt()).ceil() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_the_groups_mean_and_six_deviations_of_its_sum() {
        let a = AreaSizes::default();
        assert_eq!(a.bound(16), 0);
        // Images of 1 and 3 MB: mean 2, deviation 1.
        a.add([1 << 20, 3 << 20].into_iter());
        a.add([1 << 20, 3 << 20].into_iter());
        let mb = f64::from(1 << 20);
        assert_eq!(a.bound(16), (16.0 * 2.0 * mb + 6.0 * mb * 4.0) as usize);
        // A group of one image of each size: no deviation, n times the size.
        let b = AreaSizes::default();
        b.add([5000; 7].into_iter());
        assert_eq!(b.bound(4), 20_000);
    }
}
