//! The sample a rank repeats to even out an epoch that bad samples cut short.
//!
//! Data-parallel ranks must yield as many batches per epoch as each other (a rank with a
//! batch fewer leaves the others waiting in their next collective for ever). Skipped samples
//! can cost a rank a batch; the assembler then makes up the difference with batches of
//! repeats flagged as padding. The repeat is a copy of the last good sample handed out,
//! kept here as each batch goes (one sample's copy per batch, into a buffer reused from
//! batch to batch), since the batch that held it is the consumer's by the time the epoch
//! turns out short.

use crate::image::{Image, Pixels};
use crate::pipeline::batch::{BatchTensor, SampleInfo};

use super::gpu_plan::Prepared;

/// One output of the kept sample.
pub(super) enum Kept {
    /// An image output of the CPU path: the sample's values.
    Image(Image),
    Label(i64),
    /// The GPU path's image output: the sample as prepared for the device (decoded and
    /// transformed again when repeated; its parameters are the kept ones).
    Device(Box<Prepared>),
}

/// The last good sample handed out: its description and its outputs in the pipeline's output
/// order.
pub(super) struct Template {
    pub(super) sample: SampleInfo,
    pub(super) outputs: Vec<Kept>,
}

/// Copies sample `i` of `t` into `into`, reusing its buffer when it has one of the same
/// element type (no allocation from the second batch on).
pub(super) fn copy_sample(t: &BatchTensor, i: usize, into: &mut Option<Kept>) {
    let (Some(&shape), Some(&start)) = (t.shapes.get(i), t.offsets.get(i)) else {
        return;
    };
    let len = shape.iter().product::<usize>();
    let mut pixels = match into.take() {
        Some(Kept::Image(im)) => im.pixels,
        _ => Pixels::U8(Vec::new()),
    };
    fn fill<T: Copy>(into: &mut Vec<T>, from: &[T]) {
        into.clear();
        into.extend_from_slice(from);
    }
    match (&mut pixels, &t.data) {
        (Pixels::U8(d), Pixels::U8(s)) => fill(d, &s[start..start + len]),
        (Pixels::F16(d), Pixels::F16(s)) => fill(d, &s[start..start + len]),
        (Pixels::F32(d), Pixels::F32(s)) => fill(d, &s[start..start + len]),
        (d, Pixels::U8(s)) => *d = Pixels::U8(s[start..start + len].to_vec()),
        (d, Pixels::F16(s)) => *d = Pixels::F16(s[start..start + len].to_vec()),
        (d, Pixels::F32(s)) => *d = Pixels::F32(s[start..start + len].to_vec()),
    }
    let (height, width, channels) = match t.layout {
        crate::image::Layout::Hwc => (shape[0], shape[1], shape[2]),
        crate::image::Layout::Chw => (shape[1], shape[2], shape[0]),
    };
    *into = Some(Kept::Image(Image {
        height,
        width,
        channels,
        layout: t.layout,
        pixels,
    }));
}
