//! Batches: one contiguous tensor per image output, labels, and who each sample is.

use std::path::Path;
use std::sync::Arc;

use half::f16;

use crate::error::{Error, SampleError};
use crate::image::{DType, Image, Layout, Pixels};
use crate::ops::{ColorJitterParams, CropParams, FlipParams, OpParams};

pub use super::device_tensor::DeviceTensor;
pub use super::pinned_tensor::PinnedTensor;

/// Batch buffers given back by dropped batches, reused for the next ones so that steady
/// state allocates (and page-faults) nothing new.
#[derive(Debug, Default)]
pub struct BatchBufferPool {
    free: std::sync::Mutex<Vec<Pixels>>,
}

impl BatchBufferPool {
    /// Buffers kept at most; more are freed.
    const MAX: usize = 8;

    /// An empty buffer of `dtype` with room for `len` elements, reused when possible; an
    /// error (never an abort) when the memory can't be had.
    fn take(&self, dtype: DType, len: usize) -> Result<Pixels, Error> {
        if let Ok(mut free) = self.free.lock() {
            if let Some(i) = free
                .iter()
                .position(|p| p.dtype() == dtype && capacity(p) >= len)
            {
                let mut p = free.swap_remove(i);
                clear(&mut p);
                return Ok(p);
            }
        }
        Ok(match dtype {
            DType::U8 => Pixels::U8(try_with_capacity(len)?),
            DType::F16 => Pixels::F16(try_with_capacity(len)?),
            DType::F32 => Pixels::F32(try_with_capacity(len)?),
        })
    }

    /// A buffer of `dtype` holding exactly `len` elements of unspecified value: a given-back
    /// one (cut to `len`, or grown within its capacity, which writes only the tail), else a new
    /// zeroed one; an error (never an abort) when the memory can't be had.
    pub(crate) fn take_initialized(&self, dtype: DType, len: usize) -> Result<Pixels, Error> {
        if let Ok(mut free) = self.free.lock() {
            let fits = |p: &Pixels| p.dtype() == dtype && capacity(p) >= len;
            let long_enough = free.iter().position(|p| fits(p) && p.len() >= len);
            if let Some(i) = long_enough.or_else(|| free.iter().position(fits)) {
                let mut p = free.swap_remove(i);
                match &mut p {
                    Pixels::U8(v) => v.resize(len, 0),
                    Pixels::F16(v) => v.resize(len, f16::ZERO),
                    Pixels::F32(v) => v.resize(len, 0.0),
                }
                return Ok(p);
            }
        }
        fn zeroed<T: Clone>(len: usize, zero: T) -> Result<Vec<T>, Error> {
            let mut v = try_with_capacity(len)?;
            v.resize(len, zero);
            Ok(v)
        }
        Ok(match dtype {
            DType::U8 => Pixels::U8(zeroed(len, 0)?),
            DType::F16 => Pixels::F16(zeroed(len, f16::ZERO)?),
            DType::F32 => Pixels::F32(zeroed(len, 0.0)?),
        })
    }

    /// Buffers given back and waiting to be reused.
    pub fn idle(&self) -> usize {
        self.free.lock().map_or(0, |free| free.len())
    }

    fn give(&self, p: Pixels) {
        if capacity(&p) == 0 {
            return;
        }
        if let Ok(mut free) = self.free.lock() {
            if free.len() < Self::MAX {
                free.push(p);
            }
        }
    }
}

/// An empty vector with room for `len` elements, or an [`Error::Allocation`] when the
/// allocator refuses (a batch too large for memory must not abort the process).
fn try_with_capacity<T>(len: usize) -> Result<Vec<T>, Error> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| Error::Allocation {
        what: "a batch buffer",
        bytes: (len as u64).saturating_mul(std::mem::size_of::<T>() as u64),
    })?;
    Ok(v)
}

fn capacity(p: &Pixels) -> usize {
    match p {
        Pixels::U8(v) => v.capacity(),
        Pixels::F16(v) => v.capacity(),
        Pixels::F32(v) => v.capacity(),
    }
}

fn clear(p: &mut Pixels) {
    match p {
        Pixels::U8(v) => v.clear(),
        Pixels::F16(v) => v.clear(),
        Pixels::F32(v) => v.clear(),
    }
}

/// The images of one output for a whole batch, in one contiguous buffer.
#[derive(Debug, Clone)]
pub struct BatchTensor {
    /// Element type.
    pub dtype: DType,
    /// Layout of each sample.
    pub layout: Layout,
    /// Each sample's shape in layout order (`[h, w, c]` or `[c, h, w]`).
    pub shapes: Vec<[usize; 3]>,
    /// Each sample's first element in `data`.
    pub offsets: Vec<usize>,
    /// All samples, back to back.
    pub data: Pixels,
    /// Where the buffer goes back when the batch is dropped.
    pool: Option<Arc<BatchBufferPool>>,
}

impl PartialEq for BatchTensor {
    fn eq(&self, other: &Self) -> bool {
        self.dtype == other.dtype
            && self.layout == other.layout
            && self.shapes == other.shapes
            && self.offsets == other.offsets
            && self.data == other.data
    }
}

impl Drop for BatchTensor {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            pool.give(std::mem::replace(&mut self.data, Pixels::U8(Vec::new())));
        }
    }
}

impl BatchTensor {
    /// A tensor of samples already laid out in `data` (given back to `pool` when dropped).
    pub(crate) fn from_parts(
        dtype: DType,
        layout: Layout,
        offsets: Vec<usize>,
        shapes: Vec<[usize; 3]>,
        data: Pixels,
        pool: Option<&Arc<BatchBufferPool>>,
    ) -> BatchTensor {
        BatchTensor {
            dtype,
            layout,
            shapes,
            offsets,
            data,
            pool: pool.cloned(),
        }
    }

    /// Concatenates images (all of one dtype and layout); an error when the memory for
    /// them can't be had.
    pub fn from_images(images: &[&Image]) -> Result<BatchTensor, Error> {
        Self::from_images_pooled(images, None)
    }

    /// Concatenates images into a buffer from `pool` (given back when the batch drops).
    pub fn from_images_pooled(
        images: &[&Image],
        pool: Option<&Arc<BatchBufferPool>>,
    ) -> Result<BatchTensor, Error> {
        let Some((first, rest)) = images.split_first() else {
            return Ok(BatchTensor {
                dtype: DType::U8,
                layout: Layout::Hwc,
                shapes: Vec::new(),
                offsets: Vec::new(),
                data: Pixels::U8(Vec::new()),
                pool: pool.cloned(),
            });
        };
        let mut b = TensorBuilder::new(first, images.len(), pool)?;
        for im in rest {
            b.push(im)?;
        }
        Ok(b.finish())
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.shapes.len()
    }

    /// True when there are no samples (never the case for a delivered batch).
    pub fn is_empty(&self) -> bool {
        self.shapes.is_empty()
    }

    /// The batch shape `[n, ...sample shape]` when every sample has the same shape.
    pub fn shape(&self) -> Option<[usize; 4]> {
        super::tensor_meta::batch_shape(&self.shapes)
    }

    /// The data as `f32`, if that is its type.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.data {
            Pixels::F32(v) => Some(v),
            _ => None,
        }
    }

    /// The data as `f16`, if that is its type.
    pub fn as_f16(&self) -> Option<&[f16]> {
        match &self.data {
            Pixels::F16(v) => Some(v),
            _ => None,
        }
    }

    /// The data as `u8`, if that is its type.
    pub fn as_u8(&self) -> Option<&[u8]> {
        match &self.data {
            Pixels::U8(v) => Some(v),
            _ => None,
        }
    }

    /// The raw bytes of the whole batch.
    pub fn as_bytes(&self) -> &[u8] {
        self.data.as_bytes()
    }

    /// Size of the data in bytes.
    pub fn nbytes(&self) -> usize {
        self.data.len() * self.dtype.size()
    }
}

/// One image output of a batch being filled a sample at a time, so each sample is copied
/// while its pixels are still in cache and its buffer goes back to the pool at once.
#[derive(Debug)]
pub struct TensorBuilder {
    tensor: BatchTensor,
}

impl TensorBuilder {
    /// A builder whose first sample is `first`, with room for `batch` samples of its size;
    /// an error (never an abort) when that memory can't be had.
    pub fn new(
        first: &Image,
        batch: usize,
        pool: Option<&Arc<BatchBufferPool>>,
    ) -> Result<TensorBuilder, Error> {
        let len = first.pixels.len().saturating_mul(batch.max(1));
        let data = match pool {
            Some(p) => p.take(first.dtype(), len)?,
            None => BatchBufferPool::default().take(first.dtype(), len)?,
        };
        let shapes = try_with_capacity(batch)?;
        let offsets = try_with_capacity(batch)?;
        let mut b = TensorBuilder {
            tensor: BatchTensor {
                dtype: first.dtype(),
                layout: first.layout,
                shapes,
                offsets,
                data,
                pool: pool.cloned(),
            },
        };
        b.push(first)?;
        Ok(b)
    }

    /// Appends one sample (of the builder's dtype and layout; the graph's types ensure it);
    /// an error when there was no room left and more memory can't be had.
    pub fn push(&mut self, im: &Image) -> Result<(), Error> {
        let t = &mut self.tensor;
        debug_assert_eq!(im.dtype(), t.dtype, "one dtype per output");
        reserve(&mut t.data, im.pixels.len())?;
        t.shapes.push(im.shape());
        t.offsets.push(t.data.len());
        match (&mut t.data, &im.pixels) {
            (Pixels::U8(d), Pixels::U8(s)) => d.extend_from_slice(s),
            (Pixels::F16(d), Pixels::F16(s)) => d.extend_from_slice(s),
            (Pixels::F32(d), Pixels::F32(s)) => d.extend_from_slice(s),
            _ => unreachable!("one dtype per output"),
        }
        Ok(())
    }

    /// Appends a copy of the last sample (`last_batch = "pad"`); an error as for
    /// [`TensorBuilder::push`].
    pub fn repeat_last(&mut self) -> Result<(), Error> {
        let t = &mut self.tensor;
        let (Some(&shape), Some(&start)) = (t.shapes.last(), t.offsets.last()) else {
            return Ok(());
        };
        let end = t.data.len();
        reserve(&mut t.data, end - start)?;
        t.shapes.push(shape);
        t.offsets.push(end);
        match &mut t.data {
            Pixels::U8(d) => d.extend_from_within(start..end),
            Pixels::F16(d) => d.extend_from_within(start..end),
            Pixels::F32(d) => d.extend_from_within(start..end),
        }
        Ok(())
    }

    /// The finished tensor.
    pub fn finish(self) -> BatchTensor {
        self.tensor
    }
}

/// Room for `more` elements in `data` (nothing to do within its capacity), or an
/// [`Error::Allocation`].
fn reserve(data: &mut Pixels, more: usize) -> Result<(), Error> {
    fn go<T>(v: &mut Vec<T>, more: usize) -> Result<(), Error> {
        v.try_reserve(more).map_err(|_| Error::Allocation {
            what: "a batch buffer",
            bytes: ((v.len() + more) as u64).saturating_mul(std::mem::size_of::<T>() as u64),
        })
    }
    match data {
        Pixels::U8(v) => go(v, more),
        Pixels::F16(v) => go(v, more),
        Pixels::F32(v) => go(v, more),
    }
}

impl DeviceTensor {
    /// A host copy of every sample (waits for the write).
    pub fn to_host(&self) -> Result<BatchTensor, Error> {
        Ok(host_tensor(self.meta(), self.download()?))
    }
}

impl PinnedTensor {
    /// A copy in ordinary memory (a [`BatchTensor`], as `batch_memory = "auto"` gives).
    pub fn to_host(&self) -> BatchTensor {
        host_tensor(
            self.meta(),
            Pixels::from_bytes(self.as_bytes(), self.dtype()),
        )
    }
}

/// The samples `data` holds as `meta` describes them, in ordinary memory.
fn host_tensor(meta: &super::tensor_meta::TensorMeta, data: Pixels) -> BatchTensor {
    BatchTensor::from_parts(
        meta.dtype,
        meta.layout,
        meta.offsets.clone(),
        meta.shapes.clone(),
        data,
        None,
    )
}

/// One output of a batch.
#[derive(Debug, Clone, PartialEq)]
pub enum BatchOutput {
    /// Images in host memory.
    Images(BatchTensor),
    /// Images in device memory (the GPU path): see [`DeviceTensor`] for how to hand them
    /// to a framework.
    Device(DeviceTensor),
    /// Images in pinned host memory (`batch_memory = "pinned"`): see [`PinnedTensor`] for
    /// copying them to a GPU.
    Pinned(PinnedTensor),
    /// Labels.
    Labels(Vec<i64>),
}

/// Who a sample in a batch is, and the random parameters applied to it.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleInfo {
    /// Index in the dataset (position in the reader's sorted listing).
    pub index: usize,
    /// The file (shared with the data set's listing; a tar shard's sample's `shard:member`).
    pub path: Arc<Path>,
    /// The label the reader gave it.
    pub label: i64,
    /// Random parameters chosen by each operator, by operator name, in the order the
    /// operators ran. The typed accessors ([`SampleInfo::crop`], [`SampleInfo::flip`],
    /// [`SampleInfo::color_jitter`]) read them without knowing the names.
    pub params: crate::ops::SampleParams,
}

impl SampleInfo {
    /// The crop window the first cropping operator (`crop`, `random_resized_crop`) chose,
    /// with the size of the image it was cut from, to carry boxes and masks over:
    ///
    /// ```
    /// # fn main() -> Result<(), stokehold::Error> {
    /// use stokehold::pipeline::{OpSpec, Pipeline, PipelineSpec};
    ///
    /// let dir = tempfile::tempdir().expect("a temporary folder");
    /// let data = stokehold::builtin_data::ensure(&dir.path().join("data"))?; // the demo images
    /// let spec = PipelineSpec::builder()
    ///     .batch(4)
    ///     .op(OpSpec::new("file_reader").output("jpegs").arg("root", data.as_path()))
    ///     .op(OpSpec::new("decode").input("jpegs").output("decoded"))
    ///     .op(OpSpec::new("random_resized_crop").input("decoded").output("cropped").arg("size", 64))
    ///     .op(OpSpec::new("flip").input("cropped").output("images"))
    ///     .outputs(&["images"]);
    /// let batch = Pipeline::new(spec)?.next().expect("a batch")?;
    /// for s in &batch.samples {
    ///     let c = s.crop().expect("a crop");
    ///     // A box (y0, x0, y1, x1) in the source image, in the 64x64 output:
    ///     let (sy, sx) = (64.0 / c.height as f64, 64.0 / c.width as f64);
    ///     let map = |y: f64, x: f64| ((y - c.top as f64) * sy, (x - c.left as f64) * sx);
    ///     let (_y0, x0) = map(0.0, 0.0);
    ///     let (_y1, x1) = map(c.source_height as f64, c.source_width as f64);
    ///     // ... then mirrored if the flip says so.
    ///     let flipped = s.flip().expect("a flip").horizontal;
    ///     let (_left, _right) = if flipped { (64.0 - x1, 64.0 - x0) } else { (x0, x1) };
    ///     assert!(c.is_inside());
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn crop(&self) -> Option<&CropParams> {
        self.params.iter().find_map(|(_, p)| p.as_crop())
    }

    /// The flips the first `flip` operator chose.
    pub fn flip(&self) -> Option<&FlipParams> {
        self.params.iter().find_map(|(_, p)| p.as_flip())
    }

    /// The factors the first `color_jitter` operator chose.
    pub fn color_jitter(&self) -> Option<&ColorJitterParams> {
        self.params.iter().find_map(|(_, p)| p.as_color_jitter())
    }

    /// The parameters the operator named `name` chose (for pipelines with several operators
    /// of one kind).
    pub fn params_of(&self, name: &str) -> Option<&OpParams> {
        self.params
            .iter()
            .find(|(n, _)| &**n == name)
            .map(|(_, p)| p)
    }
}

/// A batch of samples, as handed to the consumer.
#[derive(Debug, Clone)]
pub struct Batch {
    /// Epoch (from 0).
    pub epoch: u64,
    /// Index of this batch in its epoch.
    pub index: usize,
    /// Output names, in the order of `outputs`.
    pub names: Arc<[String]>,
    /// The outputs, in the order the pipeline names them.
    pub outputs: Vec<BatchOutput>,
    /// The samples, in batch order.
    pub samples: Vec<SampleInfo>,
    /// How many trailing samples are padding: repeats added by `last_batch = "pad"`, and the
    /// repeat that gives a rank as many batches as the others (see
    /// [`EpochOrder`](crate::reader::schedule::EpochOrder)).
    pub padded: usize,
    /// Bad samples skipped since the previous batch of the same epoch, each with its path
    /// and cause. Those after an epoch's last batch are in that epoch's summary
    /// ([`crate::Pipeline::epoch_summaries`]).
    pub skipped: Vec<SampleError>,
    /// Bad samples replaced by other samples (`on_error = "replace"`) since the previous
    /// batch of the same epoch, each with its path and cause.
    pub replaced: Vec<SampleError>,
    /// Where to resume to get the batches after this one ([`crate::Pipeline::resume`]).
    pub resume: crate::reader::schedule::Position,
}

impl Batch {
    /// Number of samples (padding included).
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Never true for a delivered batch.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// An output by name.
    pub fn get(&self, name: &str) -> Option<&BatchOutput> {
        let k = self.names.iter().position(|n| n == name)?;
        self.outputs.get(k)
    }

    /// An image output in ordinary host memory by name (`None` for one on the device or in
    /// pinned memory: see [`Batch::device_images`], [`Batch::pinned_images`]).
    pub fn images(&self, name: &str) -> Option<&BatchTensor> {
        match self.get(name)? {
            BatchOutput::Images(t) => Some(t),
            BatchOutput::Device(_) | BatchOutput::Pinned(_) | BatchOutput::Labels(_) => None,
        }
    }

    /// An image output in device memory by name (pipelines on the GPU path).
    pub fn device_images(&self, name: &str) -> Option<&DeviceTensor> {
        match self.get(name)? {
            BatchOutput::Device(t) => Some(t),
            BatchOutput::Images(_) | BatchOutput::Pinned(_) | BatchOutput::Labels(_) => None,
        }
    }

    /// An image output in pinned host memory by name (`batch_memory = "pinned"`).
    pub fn pinned_images(&self, name: &str) -> Option<&PinnedTensor> {
        match self.get(name)? {
            BatchOutput::Pinned(t) => Some(t),
            BatchOutput::Images(_) | BatchOutput::Device(_) | BatchOutput::Labels(_) => None,
        }
    }

    /// An image output by name as ordinary host memory: the tensor itself, or a copy of a
    /// pinned or device tensor (a device tensor's waits for it).
    pub fn images_on_host(&self, name: &str) -> Option<Result<BatchTensor, Error>> {
        match self.get(name)? {
            BatchOutput::Images(t) => Some(Ok(t.clone())),
            BatchOutput::Device(t) => Some(t.to_host()),
            BatchOutput::Pinned(t) => Some(Ok(t.to_host())),
            BatchOutput::Labels(_) => None,
        }
    }

    /// A label output by name.
    pub fn labels(&self, name: &str) -> Option<&[i64]> {
        match self.get(name)? {
            BatchOutput::Labels(l) => Some(l),
            BatchOutput::Images(_) | BatchOutput::Device(_) | BatchOutput::Pinned(_) => None,
        }
    }
}
