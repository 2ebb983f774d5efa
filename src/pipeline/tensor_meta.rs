//! What a batch's image output says about its samples, whatever memory holds them:
//! [`TensorMeta`], held by [`DeviceTensor`](super::DeviceTensor) and
//! [`PinnedTensor`](super::PinnedTensor), whose accessors for it are written once
//! ([`tensor_meta_accessors!`]).

use crate::image::{DType, Layout};

/// The element type, the layout and each sample's shape and first element of one image
/// output of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TensorMeta {
    pub(crate) dtype: DType,
    pub(crate) layout: Layout,
    /// Each sample's shape in layout order.
    pub(crate) shapes: Vec<[usize; 3]>,
    /// Each sample's first element, in elements from the first sample's.
    pub(crate) offsets: Vec<usize>,
}

impl TensorMeta {
    /// Samples of `shapes` packed one after another.
    pub(crate) fn packed(dtype: DType, layout: Layout, shapes: Vec<[usize; 3]>) -> TensorMeta {
        let mut offsets = Vec::with_capacity(shapes.len());
        let mut at = 0;
        for s in &shapes {
            offsets.push(at);
            at += s.iter().product::<usize>();
        }
        TensorMeta {
            dtype,
            layout,
            shapes,
            offsets,
        }
    }

    /// `[n, ...sample shape]` when every sample has the same shape.
    pub(crate) fn shape(&self) -> Option<[usize; 4]> {
        batch_shape(&self.shapes)
    }

    /// Bytes of all samples.
    pub(crate) fn nbytes(&self) -> usize {
        let elements: usize = self
            .shapes
            .iter()
            .map(|s| s.iter().product::<usize>())
            .sum();
        elements * self.dtype.size()
    }
}

/// `[n, ...sample shape]` for samples of `shapes` when every one is the same.
pub(crate) fn batch_shape(shapes: &[[usize; 3]]) -> Option<[usize; 4]> {
    let first = *shapes.first()?;
    shapes
        .iter()
        .all(|s| *s == first)
        .then_some([shapes.len(), first[0], first[1], first[2]])
}

/// The public accessors of a tensor's [`TensorMeta`], for an `impl` of a type with a
/// `fn meta(&self) -> &TensorMeta`; `$base` names the method whose address the offsets
/// count from. A macro rather than a trait, so that callers need no import.
macro_rules! tensor_meta_accessors {
    ($base:literal) => {
        /// Element type.
        pub fn dtype(&self) -> $crate::image::DType {
            self.meta().dtype
        }

        /// Layout of each sample.
        pub fn layout(&self) -> $crate::image::Layout {
            self.meta().layout
        }

        /// Each sample's shape in layout order.
        pub fn shapes(&self) -> &[[usize; 3]] {
            &self.meta().shapes
        }

        #[doc = concat!("Each sample's first element, counted in elements from [`", $base, "`].")]
        pub fn offsets(&self) -> &[usize] {
            &self.meta().offsets
        }

        /// Number of samples.
        pub fn len(&self) -> usize {
            self.meta().shapes.len()
        }

        /// True when there are no samples (never the case for a delivered batch).
        pub fn is_empty(&self) -> bool {
            self.meta().shapes.is_empty()
        }

        /// `[n, ...sample shape]` when every sample has the same shape.
        pub fn shape(&self) -> Option<[usize; 4]> {
            self.meta().shape()
        }
    };
}

pub(crate) use tensor_meta_accessors;
