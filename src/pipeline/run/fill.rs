//! Filling one image output of a batch: on the batch buffer the workers wrote into (no copy
//! for a sample already in its place), or the ordinary way, each sample copied in.

use std::sync::Arc;

use crate::error::Error;
use crate::image::{Image, Layout};
use crate::pipeline::batch::{BatchBufferPool, BatchTensor, TensorBuilder};

use super::placement::{Placed, SharedPixels};

/// An image output of the batch being filled: built the ordinary way (each sample copied in)
/// or on a shared buffer the workers wrote into. `capacity` in the methods is the number of
/// samples a batch buffer holds; every allocation may fail with an error, never an abort.
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
    /// batch's buffer; the sample copied to its first place unless it is there already, which
    /// the `bool` tells).
    pub(crate) fn start_placed(
        p: &Placed,
        target: Option<SharedPixels>,
        pool: &Arc<BatchBufferPool>,
        capacity: usize,
    ) -> Result<(ImageFill, bool), Error> {
        if let Some(pixels) = target {
            let in_place = pixels.same(&p.pixels) && p.place == 0;
            if pixels.copy_place(0, &p.pixels, p.place) {
                let fill = ImageFill::Shared {
                    pixels,
                    layout: p.layout,
                    shapes: vec![p.shape],
                };
                return Ok((fill, in_place));
            }
        }
        Ok((
            Self::start_copied(&Self::image_of(p), pool, capacity)?,
            false,
        ))
    }

    /// A fill starting with an ordinary image, built on `target` (the batch's buffer) when
    /// there is one the image fits, else the ordinary way.
    pub(crate) fn start_on(
        target: Option<SharedPixels>,
        im: &Image,
        pool: &Arc<BatchBufferPool>,
        capacity: usize,
    ) -> Result<ImageFill, Error> {
        if let Some(pixels) = target {
            if pixels.write_place(0, &im.pixels) {
                return Ok(ImageFill::Shared {
                    pixels,
                    layout: im.layout,
                    shapes: vec![im.shape()],
                });
            }
        }
        Self::start_copied(im, pool, capacity)
    }

    /// A fill starting with an ordinary image, built the ordinary way.
    pub(crate) fn start_copied(
        im: &Image,
        pool: &Arc<BatchBufferPool>,
        capacity: usize,
    ) -> Result<ImageFill, Error> {
        Ok(ImageFill::Copied(TensorBuilder::new(
            im,
            capacity,
            Some(pool),
        )?))
    }

    fn image_of(p: &Placed) -> Image {
        p.to_image()
            .expect("a taken sample's place is free and in range")
    }

    /// Appends a sample written into a shared buffer: nothing to do when it is already where
    /// it belongs (then true), else a copy.
    pub(crate) fn push_placed(
        &mut self,
        p: &Placed,
        pool: &Arc<BatchBufferPool>,
        capacity: usize,
    ) -> Result<bool, Error> {
        let mut in_place = false;
        let written = self.write_shared(p.layout, p.shape, |pixels, to| {
            in_place = pixels.same(&p.pixels) && to == p.place;
            pixels.copy_place(to, &p.pixels, p.place)
        });
        if written {
            return Ok(in_place);
        }
        self.push(&Self::image_of(p), pool, capacity)?;
        Ok(false)
    }

    /// Appends the next sample to the shared buffer, through `write(buffer, place)`, when this
    /// fill has one of `layout` with a place left and `write` succeeds (then true; `shape`
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
            if *shared_layout == layout && to < pixels.places() && write(pixels, to) {
                shapes.push(shape);
                return true;
            }
        }
        false
    }

    /// Appends an ordinary image.
    pub(crate) fn push(
        &mut self,
        im: &Image,
        pool: &Arc<BatchBufferPool>,
        capacity: usize,
    ) -> Result<(), Error> {
        if self.write_shared(im.layout, im.shape(), |pixels, to| {
            pixels.write_place(to, &im.pixels)
        }) {
            return Ok(());
        }
        if let ImageFill::Shared { .. } = self {
            // Another shape or type: from here on, built the ordinary way.
            self.make_copied(pool, capacity)?;
        }
        if let ImageFill::Copied(b) = self {
            b.push(im)?;
        }
        Ok(())
    }

    /// Appends a copy of the last sample (`last_batch = "pad"`).
    pub(crate) fn repeat_last(
        &mut self,
        pool: &Arc<BatchBufferPool>,
        capacity: usize,
    ) -> Result<(), Error> {
        if let ImageFill::Shared { pixels, shapes, .. } = self {
            let (to, Some(&last)) = (shapes.len(), shapes.last()) else {
                return Ok(());
            };
            if to < pixels.places() && pixels.copy_place(to, &pixels.clone(), to - 1) {
                shapes.push(last);
                return Ok(());
            }
            self.make_copied(pool, capacity)?;
        }
        if let ImageFill::Copied(b) = self {
            b.repeat_last()?;
        }
        Ok(())
    }

    /// Turns a shared fill into an ordinary one holding the same samples.
    fn make_copied(&mut self, pool: &Arc<BatchBufferPool>, capacity: usize) -> Result<(), Error> {
        let ImageFill::Shared {
            pixels,
            layout,
            shapes,
        } = self
        else {
            return Ok(());
        };
        let images: Vec<Image> = (0..shapes.len())
            .map(|place| {
                Self::image_of(&Placed {
                    pixels: pixels.clone(),
                    place,
                    shape: shapes[place],
                    layout: *layout,
                })
            })
            .collect();
        let mut it = images.iter();
        let Some(first) = it.next() else {
            return Ok(());
        };
        let mut b = TensorBuilder::new(first, capacity, Some(pool))?;
        for im in it {
            b.push(im)?;
        }
        *self = ImageFill::Copied(b);
        Ok(())
    }

    /// The finished tensor.
    pub(crate) fn finish(
        self,
        pool: &Arc<BatchBufferPool>,
        capacity: usize,
    ) -> Result<BatchTensor, Error> {
        match self {
            ImageFill::Copied(b) => Ok(b.finish()),
            ImageFill::Shared {
                pixels,
                layout,
                shapes,
            } => {
                let n = shapes.len();
                let place_len = pixels.place_len();
                let dtype = pixels.dtype();
                match pixels.into_pixels(n) {
                    Ok(data) => Ok(BatchTensor::from_parts(
                        dtype,
                        layout,
                        (0..n).map(|k| k * place_len).collect(),
                        shapes,
                        data,
                        Some(pool),
                    )),
                    // Still held elsewhere (never expected: every sample of the buffer has
                    // been taken): copy the samples out instead.
                    Err(pixels) => {
                        let mut fill = ImageFill::Shared {
                            pixels,
                            layout,
                            shapes,
                        };
                        fill.make_copied(pool, capacity)?;
                        fill.finish(pool, capacity)
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::placement::tests::place;
    use super::super::placement::BatchBuffers;
    use super::*;
    use crate::image::Pixels;

    fn image(v: f32) -> Image {
        Image {
            height: 2,
            width: 2,
            channels: 3,
            layout: Layout::Chw,
            pixels: Pixels::F32(vec![v; 12]),
        }
    }

    fn values(t: &BatchTensor) -> Vec<f32> {
        t.as_f32().expect("f32").chunks(12).map(|c| c[0]).collect()
    }

    #[test]
    fn samples_in_place_need_no_copy_and_shifted_ones_are_moved() {
        let pool = Arc::new(BatchBufferPool::default());
        let buffers = BatchBuffers::new(4, 4, (0, 0), pool.clone());
        // Written before anyone knew that sample 1 is bad.
        let placed: Vec<Placed> = (0..7)
            .map(|p| place(&buffers, p, p as f32).unwrap())
            .collect();
        buffers.skip(0);
        // Batch 0 is samples 0, 2, 3, 4.
        let target = buffers.batch_buffer(0, 0, &placed[0]);
        let (mut fill, in_place) = ImageFill::start_placed(&placed[0], target, &pool, 4).unwrap();
        assert!(in_place);
        buffers.took_good(0);
        let moved: Vec<bool> = [2, 3, 4]
            .iter()
            .map(|&p| {
                let in_place = fill.push_placed(&placed[p], &pool, 4).unwrap();
                buffers.took_good(0);
                in_place
            })
            .collect();
        assert_eq!(
            moved,
            vec![false; 3],
            "each one place early, or in the next buffer"
        );
        // Batch 1 starts with sample 5, one place after where it was written.
        let target = buffers.batch_buffer(0, 0, &placed[5]);
        let (mut next, in_place) = ImageFill::start_placed(&placed[5], target, &pool, 4).unwrap();
        assert!(!in_place, "moved to the first place");
        assert!(!next.push_placed(&placed[6], &pool, 4).unwrap());
        // Sample 7 now expects the place sample 6 was written in: it comes as an ordinary
        // image. Sample 8 lands where it belongs.
        assert!(place(&buffers, 7, 7.0).is_none());
        next.push(&image(7.0), &pool, 4).unwrap();
        let p8 = place(&buffers, 8, 8.0).expect("a free place");
        assert!(next.push_placed(&p8, &pool, 4).unwrap(), "in place");
        drop(placed);
        drop(p8);
        let first = fill.finish(&pool, 4).unwrap();
        assert_eq!(values(&first), vec![0.0, 2.0, 3.0, 4.0]);
        assert_eq!(first.shapes, vec![[3, 2, 2]; 4]);
        assert_eq!(first.offsets, vec![0, 12, 24, 36]);
        buffers.epoch_ended(0);
        let second = next.finish(&pool, 4).unwrap();
        assert_eq!(values(&second), vec![5.0, 6.0, 7.0, 8.0]);
    }

    #[test]
    fn pads_and_another_shape_fall_back_to_copies_where_needed() {
        let pool = Arc::new(BatchBufferPool::default());
        let buffers = BatchBuffers::new(3, 3, (0, 0), pool.clone());
        let p = place(&buffers, 0, 7.0).unwrap();
        let target = buffers.batch_buffer(0, 0, &p);
        let (mut fill, _) = ImageFill::start_placed(&p, target, &pool, 3).unwrap();
        fill.repeat_last(&pool, 3).unwrap();
        let odd = Image {
            height: 1,
            width: 1,
            channels: 3,
            layout: Layout::Chw,
            pixels: Pixels::F32(vec![8.0; 3]),
        };
        fill.push(&odd, &pool, 3).unwrap();
        drop(p);
        buffers.epoch_ended(0);
        let t = fill.finish(&pool, 3).unwrap();
        assert_eq!(t.shapes, vec![[3, 2, 2], [3, 2, 2], [3, 1, 1]]);
        assert_eq!(t.offsets, vec![0, 12, 24]);
        assert_eq!(t.as_f32().unwrap()[..24], [7.0; 24]);
        assert_eq!(t.as_f32().unwrap()[24..], [8.0; 3]);
    }

    #[test]
    fn a_batch_whose_first_sample_was_not_placed_is_built_on_its_buffer_all_the_same() {
        let pool = Arc::new(BatchBufferPool::default());
        let buffers = BatchBuffers::new(3, 3, (0, 0), pool.clone());
        // Samples 1 and 2 were written in their places; sample 0 came as an ordinary image.
        let p1 = place(&buffers, 1, 1.0).unwrap();
        let p2 = place(&buffers, 2, 2.0).unwrap();
        let target = buffers.batch_buffer_for(0, 0, crate::image::DType::F32, 12);
        let mut fill = ImageFill::start_on(target, &image(0.0), &pool, 3).unwrap();
        assert!(
            matches!(fill, ImageFill::Shared { .. }),
            "one buffer for the batch"
        );
        buffers.took_good(0);
        for p in [&p1, &p2] {
            assert!(fill.push_placed(p, &pool, 3).unwrap(), "no copy");
            buffers.took_good(0);
        }
        drop((p1, p2));
        let t = fill.finish(&pool, 3).unwrap();
        assert_eq!(values(&t), vec![0.0, 1.0, 2.0]);
        // Without a buffer to build on, the ordinary way.
        let fill = ImageFill::start_on(None, &image(5.0), &pool, 3).unwrap();
        assert!(matches!(fill, ImageFill::Copied(_)));
    }

    #[test]
    fn a_buffer_too_large_for_memory_is_an_error_not_an_abort() {
        let pool = Arc::new(BatchBufferPool::default());
        // Room for usize::MAX / 16 images of 12 floats: more than any allocator gives.
        match ImageFill::start_copied(&image(1.0), &pool, usize::MAX / 16) {
            Err(Error::Allocation { what, bytes }) => {
                assert_eq!(what, "a batch buffer");
                assert!(bytes > 1 << 40, "{bytes}");
            }
            Ok(_) => panic!("allocated an impossible buffer"),
            Err(e) => panic!("another error: {e}"),
        }
    }
}
