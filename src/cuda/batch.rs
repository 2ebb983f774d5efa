//! Images and batches in device memory.

use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaSlice, CudaStream};

use super::memory::{device_address, OneStreamBuffer};
use super::{cuda_err, Device};
use crate::error::Error;
use crate::image::{DType, Image, Layout, Pixels};

/// Device memory that images and batches point into.
#[derive(Debug)]
pub enum DeviceStorage {
    /// A buffer from the device's pool (returned to it when the last user drops).
    Pooled(OneStreamBuffer),
    /// A buffer allocated elsewhere (e.g. by the nvJPEG decoder).
    Owned(CudaSlice<u8>),
}

impl DeviceStorage {
    /// The allocation.
    pub fn slice(&self) -> &CudaSlice<u8> {
        match self {
            DeviceStorage::Pooled(p) => p.slice(),
            DeviceStorage::Owned(s) => s,
        }
    }
}

/// One image in device memory: `height` rows of `pitch` bytes (HWC), or `channels` planes
/// of `height × width` elements (CHW, packed), starting `offset` bytes into `storage`.
#[derive(Debug, Clone)]
pub struct DeviceImage {
    storage: Arc<DeviceStorage>,
    offset: usize,
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
    /// Channels.
    pub channels: usize,
    /// Bytes from one row to the next (HWC; `width * channels * size` when packed).
    pub pitch: usize,
    /// Element type.
    pub dtype: DType,
    /// Memory order.
    pub layout: Layout,
}

impl DeviceImage {
    /// A packed u8 HWC image in `slice` (e.g. a decoder's output); `pitch` bytes per row.
    /// Errors when the slice is too small.
    pub fn from_u8_hwc(
        slice: CudaSlice<u8>,
        height: usize,
        width: usize,
        channels: usize,
        pitch: usize,
    ) -> Result<DeviceImage, Error> {
        let im = DeviceImage {
            storage: Arc::new(DeviceStorage::Owned(slice)),
            offset: 0,
            height,
            width,
            channels,
            pitch,
            dtype: DType::U8,
            layout: Layout::Hwc,
        };
        im.check()?;
        Ok(im)
    }

    /// Copies a host image to the device (through the pinned staging ring).
    pub fn upload(dev: &Device, im: &Image) -> Result<DeviceImage, Error> {
        let bytes = im.pixels.as_bytes();
        if bytes.len() != im.height * im.width * im.channels * im.dtype().size() {
            return Err(Error::Cuda("image buffer does not match its size".into()));
        }
        let buf = dev.upload(bytes)?;
        Ok(DeviceImage {
            storage: Arc::new(DeviceStorage::Pooled(buf)),
            offset: 0,
            height: im.height,
            width: im.width,
            channels: im.channels,
            pitch: im.width * im.channels * im.dtype().size(),
            dtype: im.dtype(),
            layout: im.layout,
        })
    }

    /// Bytes from the first to one past the last element.
    pub fn byte_len(&self) -> usize {
        let row = self.width * self.channels * self.dtype.size();
        match self.layout {
            Layout::Hwc if self.height > 0 => (self.height - 1) * self.pitch + row,
            Layout::Hwc => 0,
            Layout::Chw => self.height * self.width * self.channels * self.dtype.size(),
        }
    }

    /// Whether the elements are contiguous (no row padding).
    pub fn is_packed(&self) -> bool {
        self.layout == Layout::Chw || self.pitch == self.width * self.channels * self.dtype.size()
    }

    pub(crate) fn check(&self) -> Result<(), Error> {
        let row = self.width * self.channels * self.dtype.size();
        if self.layout == Layout::Hwc && self.pitch < row {
            return Err(Error::Cuda(format!(
                "pitch {} < row of {row} bytes",
                self.pitch
            )));
        }
        if self.offset + self.byte_len() > self.storage.slice().len() {
            return Err(Error::Cuda(format!(
                "image of {} bytes at offset {} does not fit its buffer of {}",
                self.byte_len(),
                self.offset,
                self.storage.slice().len()
            )));
        }
        Ok(())
    }

    /// The allocation and the byte range of this image in it.
    pub fn bytes(&self) -> (&CudaSlice<u8>, std::ops::Range<usize>) {
        (
            self.storage.slice(),
            self.offset..self.offset + self.byte_len(),
        )
    }

    /// The device address of the first element.
    pub fn address(&self, stream: &CudaStream) -> u64 {
        device_address(self.storage.slice(), stream) + self.offset as u64
    }

    /// Copies the image back to the host (blocks until the copy is done).
    pub fn download(&self, stream: &Arc<CudaStream>) -> Result<Image, Error> {
        let view = self
            .storage
            .slice()
            .slice(self.offset..self.offset + self.byte_len());
        let mut bytes = vec![0u8; self.byte_len()];
        stream
            .memcpy_dtoh(&view, &mut bytes)
            .map_err(|e| cuda_err("device to host copy", e))?;
        stream
            .synchronize()
            .map_err(|e| cuda_err("stream synchronize", e))?;
        let row = self.width * self.channels * self.dtype.size();
        let packed: Vec<u8> = if self.is_packed() {
            bytes
        } else {
            bytes
                .chunks(self.pitch)
                .flat_map(|r| r[..row].iter().copied())
                .collect()
        };
        Ok(Image {
            height: self.height,
            width: self.width,
            channels: self.channels,
            layout: self.layout,
            pixels: pixels_from_bytes(&packed, self.dtype),
        })
    }
}

/// Pixels of `dtype` from native-endian bytes.
pub(crate) fn pixels_from_bytes(b: &[u8], dtype: DType) -> Pixels {
    match dtype {
        DType::U8 => Pixels::U8(b.to_vec()),
        DType::F16 => Pixels::F16(
            b.chunks_exact(2)
                .map(|c| half::f16::from_ne_bytes([c[0], c[1]]))
                .collect(),
        ),
        DType::F32 => Pixels::F32(
            b.chunks_exact(4)
                .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
    }
}

/// Where one sample of a [`DeviceBatch`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleShape {
    /// Byte offset in the batch buffer.
    pub offset: usize,
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
    /// Channels.
    pub channels: usize,
}

impl SampleShape {
    /// Elements.
    pub fn elements(&self) -> usize {
        self.height * self.width * self.channels
    }
}

/// The output of a batched launch: packed samples of one dtype and layout in one device
/// buffer, and the event that completes when they are written. Valid until dropped; the
/// buffer then goes back to the device's pool (or lives on in images taken from it).
#[derive(Debug)]
pub struct DeviceBatch {
    storage: Arc<DeviceStorage>,
    samples: Vec<SampleShape>,
    dtype: DType,
    layout: Layout,
    event: CudaEvent,
    stream: Arc<CudaStream>,
}

impl DeviceBatch {
    /// Packs `shapes` (height, width, channels) one after another; returns the buffer and
    /// the sample placements.
    pub(crate) fn allocate(
        dev: &Device,
        shapes: &[(usize, usize, usize)],
        dtype: DType,
    ) -> Result<(OneStreamBuffer, Vec<SampleShape>), Error> {
        let mut offset = 0usize;
        let mut samples = Vec::with_capacity(shapes.len());
        for &(height, width, channels) in shapes {
            let bytes = height
                .checked_mul(width)
                .and_then(|p| p.checked_mul(channels))
                .and_then(|e| e.checked_mul(dtype.size()))
                .filter(|&b| b <= u32::MAX as usize)
                .ok_or_else(|| {
                    Error::Cuda(format!("output {height}x{width}x{channels} too large"))
                })?;
            samples.push(SampleShape {
                offset,
                height,
                width,
                channels,
            });
            offset += bytes;
        }
        Ok((dev.pool().take(offset.max(1))?, samples))
    }

    /// Wraps a buffer written by work just queued on `dev`'s stream, recording its event.
    pub(crate) fn finish(
        dev: &Device,
        buf: OneStreamBuffer,
        samples: Vec<SampleShape>,
        dtype: DType,
        layout: Layout,
    ) -> Result<DeviceBatch, Error> {
        let event = super::record_blocking_event(dev.stream(), "batch")?;
        Ok(DeviceBatch {
            storage: Arc::new(DeviceStorage::Pooled(buf)),
            samples,
            dtype,
            layout,
            event,
            stream: dev.stream().clone(),
        })
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// True when the batch has no samples.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Layout of every sample.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Placement and size of each sample.
    pub fn samples(&self) -> &[SampleShape] {
        &self.samples
    }

    /// `[n, c, h, w]` (CHW) or `[n, h, w, c]` (HWC) when every sample has the same size.
    pub fn shape(&self) -> Option<[usize; 4]> {
        let first = self.samples.first()?;
        let same = self.samples.iter().all(|s| {
            (s.height, s.width, s.channels) == (first.height, first.width, first.channels)
        });
        same.then(|| match self.layout {
            Layout::Chw => [self.len(), first.channels, first.height, first.width],
            Layout::Hwc => [self.len(), first.height, first.width, first.channels],
        })
    }

    /// The device buffer holding the samples (packed from byte 0).
    pub fn slice(&self) -> &CudaSlice<u8> {
        self.storage.slice()
    }

    /// The bytes of all samples, as a view for the next consumer (e.g. a DLPack export).
    pub fn view(&self) -> cudarc::driver::CudaView<'_, u8> {
        self.slice().slice(0..self.byte_len())
    }

    /// Bytes used by the samples.
    pub fn byte_len(&self) -> usize {
        self.samples
            .last()
            .map_or(0, |s| s.offset + s.elements() * self.dtype.size())
    }

    /// The event that completes when the batch is written (wait on it from another stream).
    pub fn event(&self) -> &CudaEvent {
        &self.event
    }

    /// Blocks the host until the batch is written.
    pub fn wait(&self) -> Result<(), Error> {
        self.event
            .synchronize()
            .map_err(|e| cuda_err("wait for batch", e))
    }

    /// Sample `i` as an image sharing this batch's memory (for the next operator).
    pub fn image(&self, i: usize) -> Option<DeviceImage> {
        let s = self.samples.get(i)?;
        Some(DeviceImage {
            storage: self.storage.clone(),
            offset: s.offset,
            height: s.height,
            width: s.width,
            channels: s.channels,
            pitch: s.width * s.channels * self.dtype.size(),
            dtype: self.dtype,
            layout: self.layout,
        })
    }

    /// Every sample as an image (see [`DeviceBatch::image`]).
    pub fn images(&self) -> Vec<DeviceImage> {
        (0..self.len()).filter_map(|i| self.image(i)).collect()
    }

    /// Copies every sample back to the host (blocks).
    pub fn to_host(&self) -> Result<Vec<Image>, Error> {
        self.wait()?;
        self.images()
            .iter()
            .map(|im| im.download(&self.stream))
            .collect()
    }
}
