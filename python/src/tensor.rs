//! `stokehold.Tensor`: one output of a batch, handed to frameworks through the DLPack protocol
//! (`__dlpack__`, `__dlpack_device__`) without copying.
//!
//! Every export hands the consumer a new reference to the tensor's [`Buffer`]; the buffer
//! lives until the last one is gone (the `Tensor` object, and each array or tensor made from
//! it), and only then goes back to its pipeline's pool.
//!
//! # Device-resident batches
//!
//! A batch from the GPU stage is a [`DeviceTensor`]: `kDLCUDA` on the pipeline's device, its
//! device pointer, its shape. `__dlpack__(stream=s)` makes the consumer's stream `s` wait, on
//! the device, for the event the GPU stage recorded after its last kernel or copy into the
//! buffer ([`DeviceTensor::use_on_stream`]): no host synchronisation. `s` follows the
//! protocol: an omitted stream or `1` is CUDA's legacy default stream, `2` the per-thread
//! default stream, a larger number a `CUstream`, `-1` no ordering at all (the consumer
//! orders its work itself). When the last reference goes, the buffer returns to the pool
//! with an event recorded on every consumer stream it was exported to, so the pool hands it
//! out again only after the consumers' work queued before that moment has run.
//!
//! # Pinned host batches
//!
//! With `batch_memory="pinned"` the CPU path's images are a [`PinnedTensor`]: host memory
//! (`kDLCPU`: PyTorch's `from_dlpack` takes no other host device type) that the GPU pinned,
//! so `torch.from_dlpack(t).cuda(non_blocking=True)` is an asynchronous copy. Dropping the
//! last reference puts the buffer back on the pool's list and nothing else; the pool writes it
//! again only after the copies queued from it on CUDA's default streams (and on any stream
//! named with `record_stream`) have run.
//!
//! The emulated device (`device="emu"`, a test device) keeps its "device memory" in host
//! memory: its batches say `kDLCPU`, so NumPy reads them in place, and an export waits on the
//! host for the batch's ready event (the emulated kernels run on threads of their own). The
//! bookkeeping is the device path's: the same tensor, ready event and release.

use std::ffi::c_void;
use std::sync::Arc;

use dlpark::ffi::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType};
use dlpark::metadata::Dynamic;
use dlpark::python::{export_dlpack, CudaStreamRequest, DlpackExporter, ExportRequest};
use dlpark::{DlpackFlags, Managed, ManagedTensorBase};
use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use stokehold::pipeline::{BatchTensor, DeviceTensor, PinnedTensor};
use stokehold::{DType, Layout};

/// What a tensor's elements live in, and what keeps them alive.
pub enum Buffer {
    /// A batch's image output in host memory: the pipeline's batch buffer itself, which goes
    /// back to the pipeline's pool when this is dropped.
    Images(BatchTensor),
    /// A batch's image output in device memory (the GPU path), which goes back to the
    /// pipeline's device pool, after its consumers' work, when this is dropped.
    Device(DeviceTensor),
    /// A batch's image output in pinned host memory (`batch_memory="pinned"`), which goes
    /// back to the pipeline's pinned pool when this is dropped (and is written again only
    /// after the copies queued from it).
    Pinned(PinnedTensor),
    /// A batch's labels in host memory.
    Labels(Vec<i64>),
}

/// CUDA's legacy default stream as a `CUstream` handle (`CU_STREAM_LEGACY`).
const CU_STREAM_LEGACY: u64 = 1;
/// CUDA's per-thread default stream as a `CUstream` handle (`CU_STREAM_PER_THREAD`).
const CU_STREAM_PER_THREAD: u64 = 2;

impl Buffer {
    /// Where the elements are.
    pub fn device(&self) -> DLDevice {
        match self {
            // Pinned memory is host memory (`kDLCUDAHost` is not a device PyTorch takes).
            Buffer::Images(_) | Buffer::Pinned(_) | Buffer::Labels(_) => DLDevice::CPU,
            // The emulated device's memory is host memory.
            Buffer::Device(t) if t.is_emulated() => DLDevice::CPU,
            Buffer::Device(t) => DLDevice {
                device_type: DLDeviceType::CUDA,
                device_id: i32::try_from(t.device_id()).unwrap_or(i32::MAX),
            },
        }
    }

    /// The first element.
    pub fn data_ptr(&self) -> *const c_void {
        match self {
            Buffer::Images(t) => t.as_bytes().as_ptr().cast(),
            Buffer::Device(t) => t.device_ptr() as usize as *const c_void,
            Buffer::Pinned(t) => t.as_ptr().cast(),
            Buffer::Labels(l) => l.as_ptr().cast(),
        }
    }

    fn nbytes(&self) -> usize {
        match self {
            Buffer::Images(t) => t.nbytes(),
            Buffer::Device(t) => t.nbytes(),
            Buffer::Pinned(t) => t.nbytes(),
            Buffer::Labels(l) => std::mem::size_of_val(l.as_slice()),
        }
    }
}

/// Orders the consumer named in `request` after the work that fills `buffer`. Host buffers
/// (pinned ones included) are complete when the batch is handed out: nothing to order. A device buffer orders the
/// consumer's stream after its ready event, on the device; an emulated one is waited for on
/// the host (its consumer reads host memory).
fn order_after(py: Python<'_>, buffer: &Buffer, request: &ExportRequest<'_>) -> PyResult<()> {
    let t = match buffer {
        Buffer::Images(_) | Buffer::Pinned(_) | Buffer::Labels(_) => return Ok(()),
        Buffer::Device(t) => t,
    };
    let failed = |e: stokehold::Error| crate::errors::to_py(py, e);
    if t.is_emulated() {
        return py.detach(|| t.wait()).map_err(failed);
    }
    let raw = match request.cuda_stream()? {
        CudaStreamRequest::NoSync => return Ok(()),
        CudaStreamRequest::Omitted | CudaStreamRequest::LegacyDefault => CU_STREAM_LEGACY,
        CudaStreamRequest::PerThreadDefault => CU_STREAM_PER_THREAD,
        CudaStreamRequest::Pointer(p) => p as u64,
    };
    // SAFETY: `raw` is the consumer's stream on the tensor's device (the DLPack protocol:
    // the consumer passes a stream of the device `__dlpack_device__` named, or a default
    // stream sentinel, which the driver takes as a handle), kept alive by the consumer while
    // it uses the tensor, which it does until its last reference (and so this buffer) drops.
    unsafe { t.use_on_stream(raw) }.map_err(failed)
}

/// One output of a batch: images (`uint8`, `float16` or `float32`, `NCHW` or `NHWC`) or
/// labels (`int64`). Hand it to a framework with ``torch.from_dlpack(t)`` or
/// ``numpy.from_dlpack(t)``: no copy is made, and the batch buffer stays alive as long as any
/// array made from it.
#[pyclass(module = "stokehold", name = "Tensor", frozen)]
pub struct PyTensor {
    buffer: Arc<Buffer>,
    /// The shape when every sample has the same one; else the first two that differ.
    shape: Result<Vec<i64>, ([usize; 3], [usize; 3])>,
    dtype: DLDataType,
    dtype_name: &'static str,
    layout: Option<&'static str>,
    samples: usize,
}

fn dim(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn dtype_of(t: DType) -> (DLDataType, &'static str) {
    match t {
        DType::U8 => (DLDataType::U8, "uint8"),
        DType::F16 => (DLDataType::scalar(DLDataTypeCode::FLOAT, 16), "float16"),
        DType::F32 => (DLDataType::F32, "float32"),
    }
}

fn layout_name(l: Layout) -> &'static str {
    match l {
        Layout::Hwc => "NHWC",
        Layout::Chw => "NCHW",
    }
}

impl PyTensor {
    /// The tensor of an image output.
    pub fn images(t: BatchTensor) -> PyTensor {
        let tensor_of = PyTensor::image_output(t.dtype, t.layout, &t.shapes, t.shape());
        tensor_of(Buffer::Images(t))
    }

    /// The tensor of an image output in device memory (the GPU path).
    pub fn device_images(t: DeviceTensor) -> PyTensor {
        let tensor_of = PyTensor::image_output(t.dtype(), t.layout(), t.shapes(), t.shape());
        tensor_of(Buffer::Device(t))
    }

    /// The tensor of an image output in pinned host memory (`batch_memory="pinned"`).
    pub fn pinned_images(t: PinnedTensor) -> PyTensor {
        let tensor_of = PyTensor::image_output(t.dtype(), t.layout(), t.shapes(), t.shape());
        tensor_of(Buffer::Pinned(t))
    }

    /// What the tensor of an image output says, from the output's metadata (`shape`: the
    /// batch shape when every sample of `shapes` has the same one), whatever memory holds
    /// it; it takes the buffer afterwards, since the metadata is borrowed from the buffer.
    fn image_output(
        dtype: DType,
        layout: Layout,
        shapes: &[[usize; 3]],
        shape: Option<[usize; 4]>,
    ) -> impl FnOnce(Buffer) -> PyTensor {
        let shape = match shape {
            Some(s) => Ok(s.iter().map(|&d| dim(d)).collect()),
            None => {
                let first = shapes.first().copied().unwrap_or_default();
                let other = shapes.iter().find(|s| **s != first).copied();
                Err((first, other.unwrap_or(first)))
            }
        };
        let (dtype, dtype_name) = dtype_of(dtype);
        let layout = Some(layout_name(layout));
        let samples = shapes.len();
        move |buffer| PyTensor {
            buffer: Arc::new(buffer),
            shape,
            dtype,
            dtype_name,
            layout,
            samples,
        }
    }

    /// The tensor of a label output.
    pub fn labels(l: Vec<i64>) -> PyTensor {
        PyTensor {
            samples: l.len(),
            shape: Ok(vec![dim(l.len())]),
            buffer: Arc::new(Buffer::Labels(l)),
            dtype: DLDataType::I64,
            dtype_name: "int64",
            layout: None,
        }
    }

    fn shape_or_err(&self) -> PyResult<&[i64]> {
        self.shape.as_deref().map_err(|(a, b)| {
            PyBufferError::new_err(format!(
                "the samples of this output differ in shape ({a:?} and {b:?}): a tensor needs \
                 one shape; resize or crop them to one size in the pipeline"
            ))
        })
    }

    /// A new DLPack managed tensor of ABI `M` sharing the buffer.
    fn export<M: ManagedTensorBase>(&self) -> PyResult<Managed<M>> {
        let shape = self.shape_or_err()?.to_vec();
        let mut t = Dynamic::compact(shape)
            .initialize_as::<M>(self.buffer.clone())
            .map_err(|e| PyBufferError::new_err(e.to_string()))?;
        t.set_data(self.buffer.data_ptr().cast_mut())
            .set_dtype(self.dtype)
            .set_device(self.buffer.device());
        // SAFETY: the data pointer is the start of the buffer owned by the `Arc` installed as
        // the managed tensor's context, so it stays valid until the consumer calls the deleter
        // (a device buffer goes back to its pool only then, after the consumer's streams);
        // the buffer holds exactly `shape` elements of `dtype`, contiguous, row-major (the
        // strides `compact` wrote), on the device `set_device` names; no flags are set. The
        // consumer may write through the pointer: stokehold never reads or reuses a batch
        // buffer while a reference to it lives.
        Ok(unsafe { t.finish() })
    }
}

impl DlpackExporter for PyTensor {
    fn device(&self) -> DLDevice {
        self.buffer.device()
    }

    fn flags(&self) -> DlpackFlags {
        DlpackFlags::empty()
    }

    fn prepare_export(&self, py: Python<'_>, request: &ExportRequest<'_>) -> PyResult<()> {
        order_after(py, &self.buffer, request)
    }

    fn export_legacy(&self, _py: Python<'_>) -> PyResult<Managed<dlpark::ffi::DLManagedTensor>> {
        self.export()
    }

    fn export_versioned(
        &self,
        _py: Python<'_>,
    ) -> PyResult<Managed<dlpark::ffi::DLManagedTensorVersioned>> {
        self.export()
    }
}

#[pymethods]
impl PyTensor {
    /// Exports the tensor as a DLPack capsule (the array-API protocol; frameworks call it
    /// through ``from_dlpack``). No copy is made: ``copy=True`` and cross-device requests
    /// raise ``BufferError``. For a GPU batch, ``stream`` is the consumer's CUDA stream
    /// (``1`` or omitted: the legacy default stream; ``2``: the per-thread default stream;
    /// ``-1``: no ordering): it waits on the device for the batch to be written, and the
    /// memory is reused only after the work it queued before the last reference went.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<&Bound<'_, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(u32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        self.shape_or_err()?;
        let request = ExportRequest::parse(stream, max_version, dl_device, copy)?;
        export_dlpack(self, py, request)
    }

    /// ``(device_type, device_id)`` in DLPack's numbering: ``(1, 0)`` for host memory,
    /// ``(2, N)`` for CUDA device N. Batches of the emulated device (``device="emu"``, a
    /// test device) are host memory: ``(1, 0)``.
    fn __dlpack_device__(&self) -> (u32, i32) {
        let d = self.buffer.device();
        (d.device_type.0, d.device_id)
    }

    /// The shape, ``(batch, ...)``: images ``(n, c, h, w)`` (NCHW) or ``(n, h, w, c)``
    /// (NHWC), labels ``(n,)``; ``None`` when the samples differ in shape.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        match &self.shape {
            Ok(s) => Ok(Some(PyTuple::new(py, s)?)),
            Err(_) => Ok(None),
        }
    }

    /// The element type: ``"uint8"``, ``"float16"``, ``"float32"`` or ``"int64"``.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.dtype_name
    }

    /// ``"NCHW"`` or ``"NHWC"`` for images, ``None`` for labels.
    #[getter]
    fn layout(&self) -> Option<&'static str> {
        self.layout
    }

    /// Where the elements are: ``"cpu"`` (host memory: pinned batches and the emulated
    /// device's included), or ``"cuda:N"``.
    #[getter]
    fn device(&self) -> String {
        let d = self.buffer.device();
        if d.device_type == DLDeviceType::CUDA {
            format!("cuda:{}", d.device_id)
        } else {
            "cpu".to_string()
        }
    }

    /// True for host memory the GPU pinned (``batch_memory="pinned"``): a copy to the GPU
    /// with ``non_blocking=True`` is asynchronous.
    #[getter]
    fn pinned(&self) -> bool {
        matches!(*self.buffer, Buffer::Pinned(_))
    }

    /// Keeps a pinned batch's memory (``batch_memory="pinned"``) from being written again
    /// until the work queued on ``stream`` before the last reference goes has run, as
    /// ``torch.Tensor.record_stream`` does: call it when the batch is copied on a CUDA
    /// stream other than the default one (the default streams need no call). ``stream``: a
    /// ``torch.cuda.Stream`` (anything with a ``cuda_stream`` handle) or a raw ``CUstream``
    /// handle, alive until the tensor is gone. A device batch's ``stream`` waits for the
    /// batch to be written, as ``__dlpack__(stream=...)`` does; for host batches in
    /// ordinary memory there is nothing to do (a copy from them has read them when it
    /// returns).
    fn record_stream(&self, py: Python<'_>, stream: &Bound<'_, PyAny>) -> PyResult<()> {
        let raw: u64 = match stream.getattr("cuda_stream") {
            Ok(handle) => handle.extract()?,
            Err(_) => stream.extract()?,
        };
        let failed = |e: stokehold::Error| crate::errors::to_py(py, e);
        match &*self.buffer {
            // SAFETY: `raw` is the caller's live stream of the batch's device, kept alive
            // while the tensor lives (this method's documented contract, as for
            // `__dlpack__(stream=...)`).
            Buffer::Pinned(t) => unsafe { t.use_on_stream(raw) }.map_err(failed),
            // SAFETY: as above.
            Buffer::Device(t) => unsafe { t.use_on_stream(raw) }.map_err(failed),
            Buffer::Images(_) | Buffer::Labels(_) => Ok(()),
        }
    }

    /// The address of the first element (what any array made from this tensor points at).
    #[getter]
    fn data_ptr(&self) -> usize {
        self.buffer.data_ptr() as usize
    }

    /// Size of the data in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.buffer.nbytes()
    }

    /// Number of samples.
    fn __len__(&self) -> usize {
        self.samples
    }

    /// The tensor as a NumPy array (``numpy.from_dlpack``: no copy).
    fn numpy<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let np = slf.py().import("numpy")?;
        np.call_method1("from_dlpack", (slf,))
    }

    /// NumPy's conversion protocol (``numpy.asarray(t)``): no copy unless a ``dtype`` other
    /// than the tensor's is asked for.
    #[pyo3(signature = (dtype=None, copy=None))]
    fn __array__<'py>(
        slf: &Bound<'py, Self>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let array = Self::numpy(slf)?;
        let array = match dtype {
            Some(d) => array.call_method1("astype", (d,))?,
            None => array,
        };
        match copy {
            Some(true) => array.call_method0("copy"),
            _ => Ok(array),
        }
    }

    fn __repr__(&self) -> String {
        let shape = match &self.shape {
            Ok(s) => format!("{s:?}"),
            Err(_) => "ragged".to_string(),
        };
        let layout = self
            .layout
            .map(|l| format!(", layout={l}"))
            .unwrap_or_default();
        format!(
            "stokehold.Tensor(shape={shape}, dtype={}{layout}, device={})",
            self.dtype_name,
            self.device()
        )
    }
}
