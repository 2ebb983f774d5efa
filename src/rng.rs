//! Counter-based randomness: every random choice is a pure function of
//! (seed, epoch, sample index, operator key), so results never depend on thread
//! count or scheduling, and the GPU path can recompute the CPU path's parameters.

/// SplitMix64 finaliser: a strong 64-bit mixing function.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Combines several words into one key; order matters.
pub fn key(parts: &[u64]) -> u64 {
    parts
        .iter()
        .fold(0x5354_4F4B_4548_4F4C_u64, |acc, &p| mix64(acc ^ mix64(p)))
}

/// Stable 64-bit hash of a string (FNV-1a, then mixed), used to key operators by name
/// so adding an unrelated operator does not change another's random choices.
pub fn hash_str(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    mix64(h)
}

/// Domain tags, so the shuffle stream and the per-sample streams never coincide.
pub mod domain {
    /// Per-epoch shuffling of the dataset order.
    pub const SHUFFLE: u64 = 1;
    /// Per-sample, per-operator random parameters.
    pub const SAMPLE: u64 = 2;
    /// Choosing a replacement sample.
    pub const REPLACE: u64 = 3;
    /// Per-epoch order of a data set's shards.
    pub const SHARD_ORDER: u64 = 4;
    /// The draws of a shard reader's shuffle buffer.
    pub const SHUFFLE_BUFFER: u64 = 5;
}

/// A small deterministic generator (SplitMix64 stream) seeded from a key.
#[derive(Debug, Clone)]
pub struct SampleRng {
    state: u64,
}

impl SampleRng {
    /// A generator for one operator's choices on one sample in one epoch.
    pub fn for_sample(seed: u64, epoch: u64, sample_index: u64, op_key: u64) -> Self {
        Self::from_key(key(&[domain::SAMPLE, seed, epoch, sample_index, op_key]))
    }

    /// A generator from an explicit key.
    pub fn from_key(k: u64) -> Self {
        SampleRng { state: k }
    }

    /// Next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) with 53 bits of precision.
    #[inline]
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [lo, hi) (returns `lo` when `hi <= lo`).
    #[inline]
    pub fn uniform_range(&mut self, lo: f64, hi: f64) -> f64 {
        if hi <= lo {
            return lo;
        }
        lo + (hi - lo) * self.uniform()
    }

    /// Uniform integer in [0, n) without modulo bias; `n == 0` gives 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n <= 1 {
            return 0;
        }
        // Lemire's multiply-shift with rejection.
        loop {
            let x = self.next_u64();
            let m = (x as u128) * (n as u128);
            let low = m as u64;
            if low >= n || low >= n.wrapping_neg() % n {
                return (m >> 64) as u64;
            }
        }
    }

    /// True with probability `p`.
    #[inline]
    pub fn bernoulli(&mut self, p: f64) -> bool {
        self.uniform() < p
    }

    /// Fisher–Yates shuffle in place.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn same_key_same_stream() {
        let mut a = SampleRng::for_sample(1, 2, 3, hash_str("crop"));
        let mut b = SampleRng::for_sample(1, 2, 3, hash_str("crop"));
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        let mut c = SampleRng::for_sample(1, 2, 4, hash_str("crop"));
        assert_ne!(a.next_u64(), c.next_u64());
    }

    #[test]
    fn uniform_mean_is_half() {
        let mut r = SampleRng::from_key(7);
        let n = 100_000;
        let mean: f64 = (0..n).map(|_| r.uniform()).sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
    }

    proptest! {
        #[test]
        fn below_is_in_range(k in any::<u64>(), n in 1u64..1_000_000) {
            let mut r = SampleRng::from_key(k);
            for _ in 0..16 { prop_assert!(r.below(n) < n); }
        }

        #[test]
        fn shuffle_is_a_permutation(k in any::<u64>(), n in 0usize..300) {
            let mut v: Vec<usize> = (0..n).collect();
            SampleRng::from_key(k).shuffle(&mut v);
            v.sort_unstable();
            prop_assert_eq!(v, (0..n).collect::<Vec<_>>());
        }
    }
}
