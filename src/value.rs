//! What flows along the edges of a pipeline graph, per sample, and the static types the
//! graph validator infers for each edge.

use std::sync::Arc;

pub use crate::image::Image;
use crate::image::{DType, Layout};
/// Makes [`Values`] as `vec!` makes a `Vec`: `smallvec![Value::Label(3)]`.
pub use smallvec::smallvec;

/// One sample's values on an operator's input or output edges, in port order: up to two
/// held in place (no heap allocation a sample; operators have one or two ports). Build it
/// with [`smallvec!`] or by collecting; it reads as a slice.
///
/// ```
/// use stokehold::value::{smallvec, Value, Values};
/// let v: Values = smallvec![Value::Label(3)];
/// assert!(matches!(v[..], [Value::Label(3)]) && !v.spilled());
/// ```
pub type Values = smallvec::SmallVec<[Value; 2]>;

/// One sample's value on one edge.
#[derive(Debug, Clone)]
pub enum Value {
    /// Encoded file bytes (a JPEG or PNG), as read from disk.
    Encoded(Arc<Vec<u8>>),
    /// A decoded or transformed image.
    Image(Image),
    /// A class label (`-1` when the source has none).
    Label(i64),
}

impl Value {
    /// The static type of this value.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::Encoded(_) => ValueType::Encoded,
            Value::Label(_) => ValueType::Label,
            Value::Image(im) => ValueType::Image(ImageType {
                dtype: im.dtype(),
                layout: im.layout,
                channels: Some(im.channels),
                size: Some((im.height, im.width)),
            }),
        }
    }
}

/// The type of an edge, as far as it is known before running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    /// Encoded file bytes.
    Encoded,
    /// Class labels.
    Label,
    /// Images or image-shaped tensors.
    Image(ImageType),
}

/// What is known statically about an image edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageType {
    /// Element type.
    pub dtype: DType,
    /// Memory layout.
    pub layout: Layout,
    /// Channel count, if fixed.
    pub channels: Option<usize>,
    /// (height, width), if every sample has the same size.
    pub size: Option<(usize, usize)>,
}

impl ImageType {
    /// Freshly decoded 8-bit HWC images of unknown size.
    pub fn decoded(channels: usize) -> ImageType {
        ImageType {
            dtype: DType::U8,
            layout: Layout::Hwc,
            channels: Some(channels),
            size: None,
        }
    }
}

impl std::fmt::Display for ValueType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ValueType::Encoded => write!(f, "encoded bytes"),
            ValueType::Label => write!(f, "labels"),
            ValueType::Image(t) => {
                write!(f, "{} {} images", t.dtype.name(), t.layout.name())?;
                match t.channels {
                    Some(1) => write!(f, ", 1 channel")?,
                    Some(c) => write!(f, ", {c} channels")?,
                    None => {}
                }
                if let Some((h, w)) = t.size {
                    write!(f, ", {h}x{w}")?;
                }
                Ok(())
            }
        }
    }
}
