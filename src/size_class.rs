//! Size classes of reused buffers: a request is rounded up to the next of 8 classes per power
//! of two, so a buffer given back serves later requests of a similar size without a new
//! allocation, and at most 1/8 of it is waste (a 154 MB batch takes 160 MiB, not the 256 MiB
//! a power of two would). The pools of the CUDA layer and nvJPEG's allocators share it.

/// Smallest buffer a class holds, in bytes.
const MIN_BUFFER: usize = 256;

/// Classes per power of two.
const CLASSES_PER_OCTAVE: usize = 8;

/// The size class of a `len`-byte request: the bytes actually allocated, at least `len` and
/// the smallest buffer (256 bytes), wasting at most 1/8 of it; `None` when that overflows.
///
/// ```
/// use stokehold::size_class::size_class;
/// assert_eq!(size_class(1000), Some(1024));
/// assert_eq!(size_class(1025), Some(1152));
/// assert_eq!(size_class(154_000_000), Some(160 << 20)); // 128 MiB + 2 × 16 MiB
/// ```
pub fn size_class(len: usize) -> Option<usize> {
    let len = len.max(MIN_BUFFER);
    // The power of two at or below len, and the step of its classes.
    let octave = 1usize << (usize::BITS - 1 - len.leading_zeros());
    let step = (octave / CLASSES_PER_OCTAVE).max(1);
    len.checked_next_multiple_of(step)
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes_waste_at_most_an_eighth() {
        assert_eq!(size_class(0), Some(256));
        assert_eq!(size_class(1000), Some(1024));
        assert_eq!(size_class(1025), Some(1152));
        // A ResNet-50 batch of 256 f32 CHW 224x224 images: 154 MB.
        let batch = 256 * 3 * 224 * 224 * 4;
        assert_eq!(size_class(batch), Some(160 << 20));
        assert_eq!(size_class(usize::MAX), None);
        let mut len = 1usize;
        let mut prev = 0;
        while len < (1 << 40) {
            for l in [len, len + 1, len * 3 / 2, len * 2 - 1] {
                let c = size_class(l).unwrap();
                assert!(c >= l && c >= 256, "{l} -> {c}");
                assert!((c - l.max(256)) * 8 <= c, "{l} -> {c}: more than 1/8 waste");
                assert_eq!(size_class(c), Some(c), "a class is its own class");
            }
            let c = size_class(len).unwrap();
            assert!(c >= prev, "classes grow with the request");
            prev = c;
            len = len * 5 / 3 + 1;
        }
    }
}
