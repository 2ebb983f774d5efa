//! `stokehold.Batch` and the records it carries: `Sample` (who each sample is and the random
//! parameters applied to it) and `Skipped` (a bad file and why).

use std::sync::Arc;

use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyString};
use stokehold::pipeline::batch::BatchOutput;
use stokehold::pipeline::{Batch, Position, SampleInfo};
use stokehold::SampleError;

use crate::tensor::PyTensor;

/// One batch: its outputs by name (``batch["images"]``, ``batch["labels"]``, as
/// :class:`Tensor`), or in order (``images, labels = batch``), and who its samples are.
#[pyclass(module = "stokehold", name = "Batch", frozen)]
pub struct PyBatch {
    epoch: u64,
    index: usize,
    padded: usize,
    names: Arc<[String]>,
    tensors: Vec<Py<PyTensor>>,
    samples: Vec<SampleInfo>,
    samples_made: PyOnceLock<Py<PyList>>,
    skipped: Vec<SampleError>,
    skipped_made: PyOnceLock<Py<PyList>>,
    replaced: Vec<SampleError>,
    replaced_made: PyOnceLock<Py<PyList>>,
    /// Where a run resumes to get the batches after this one.
    pub resume: Position,
}

impl PyBatch {
    /// Wraps a batch; its buffers move into the tensors.
    pub fn new(py: Python<'_>, b: Batch) -> PyResult<PyBatch> {
        let tensors = b
            .outputs
            .into_iter()
            .map(|o| {
                let t = match o {
                    BatchOutput::Images(t) => PyTensor::images(t),
                    BatchOutput::Labels(l) => PyTensor::labels(l),
                    BatchOutput::Device(t) => PyTensor::device_images(t),
                    BatchOutput::Pinned(t) => PyTensor::pinned_images(t),
                };
                Py::new(py, t)
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyBatch {
            epoch: b.epoch,
            index: b.index,
            padded: b.padded,
            names: b.names,
            tensors,
            samples: b.samples,
            samples_made: PyOnceLock::new(),
            skipped: b.skipped,
            skipped_made: PyOnceLock::new(),
            replaced: b.replaced,
            replaced_made: PyOnceLock::new(),
            resume: b.resume,
        })
    }

    /// The epoch this batch belongs to.
    pub fn epoch_of(&self) -> u64 {
        self.epoch
    }

    /// Its index in its epoch.
    pub fn index_of(&self) -> usize {
        self.index
    }
}

/// The random parameters a sample was given, as plain values: ``{"crop": {...}, "flip":
/// {...}, "color_jitter": {...}}``, each from the first operator of its kind; the crop
/// carries the size of the image it was cut from.
fn params_dict<'py>(py: Python<'py>, s: &SampleInfo) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    if let Some(c) = s.crop() {
        let d = PyDict::new(py);
        d.set_item("top", c.top)?;
        d.set_item("left", c.left)?;
        d.set_item("height", c.height)?;
        d.set_item("width", c.width)?;
        d.set_item("source_height", c.source_height)?;
        d.set_item("source_width", c.source_width)?;
        out.set_item("crop", d)?;
    }
    if let Some(f) = s.flip() {
        let d = PyDict::new(py);
        d.set_item("horizontal", f.horizontal)?;
        d.set_item("vertical", f.vertical)?;
        out.set_item("flip", d)?;
    }
    if let Some(j) = s.color_jitter() {
        let d = PyDict::new(py);
        d.set_item("order", j.order.to_vec())?;
        d.set_item("brightness", j.brightness)?;
        d.set_item("contrast", j.contrast)?;
        d.set_item("saturation", j.saturation)?;
        d.set_item("hue", j.hue)?;
        out.set_item("color_jitter", d)?;
    }
    Ok(out)
}

#[pymethods]
impl PyBatch {
    /// The epoch (from 0).
    #[getter]
    fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The index of this batch in its epoch.
    #[getter]
    fn index(&self) -> usize {
        self.index
    }

    /// How many of the last samples are padding (repeats that even out the last batch or
    /// the ranks' batch counts); they are flagged in :attr:`samples` too.
    #[getter]
    fn padded(&self) -> usize {
        self.padded
    }

    /// The output names, in order.
    fn keys(&self) -> Vec<String> {
        self.names.to_vec()
    }

    /// The samples, in batch order: :class:`Sample` records.
    #[getter]
    fn samples<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let made = self.samples_made.get_or_try_init(py, || {
            let first_padding = self.samples.len() - self.padded;
            let records = self
                .samples
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    Py::new(
                        py,
                        PySample {
                            path: s.path.to_string_lossy().into_owned(),
                            index: s.index,
                            epoch: self.epoch,
                            label: s.label,
                            params: params_dict(py, s)?.unbind(),
                            padding: i >= first_padding,
                        },
                    )
                })
                .collect::<PyResult<Vec<_>>>()?;
            Ok::<_, PyErr>(PyList::new(py, records)?.unbind())
        })?;
        Ok(made.bind(py).clone())
    }

    /// Bad files skipped since the previous batch of the epoch: :class:`Skipped` records
    /// with the path and the cause.
    #[getter]
    fn skipped<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        records(py, &self.skipped_made, &self.skipped)
    }

    /// Bad files replaced by other samples (``on_error="replace"``) since the previous batch
    /// of the epoch: :class:`Skipped` records with the path and the cause.
    #[getter]
    fn replaced<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        records(py, &self.replaced_made, &self.replaced)
    }

    /// Number of samples, padding included.
    fn __len__(&self) -> usize {
        self.samples.len()
    }

    /// An output by name (``batch["images"]``) or position (``batch[0]``).
    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let k = if let Ok(name) = key.cast::<PyString>() {
            let name = &*name.to_cow()?;
            self.names.iter().position(|n| n == name).ok_or_else(|| {
                PyKeyError::new_err(format!(
                    "no output {name:?}; this pipeline's outputs are {:?}",
                    self.names
                ))
            })?
        } else if let Ok(i) = key.extract::<isize>() {
            let n = self.tensors.len() as isize;
            let j = if i < 0 { i + n } else { i };
            if !(0..n).contains(&j) {
                return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                    "output index {i} out of range for {n} outputs"
                )));
            }
            j as usize
        } else {
            return Err(PyTypeError::new_err(
                "index a batch by output name or position",
            ));
        };
        Ok(self.tensors[k].clone_ref(py))
    }

    fn __contains__(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }

    /// The outputs in order, so that ``images, labels = batch`` works.
    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let items: Vec<Py<PyTensor>> = self.tensors.iter().map(|t| t.clone_ref(py)).collect();
        PyList::new(py, items)?.try_iter().map(Bound::into_any)
    }

    fn __repr__(&self) -> String {
        format!(
            "stokehold.Batch(epoch={}, index={}, samples={}, padded={}, skipped={}, replaced={}, outputs={:?})",
            self.epoch,
            self.index,
            self.samples.len(),
            self.padded,
            self.skipped.len(),
            self.replaced.len(),
            self.names
        )
    }
}

/// Who one sample of a batch is: ``path``, ``index`` (in the dataset's sorted listing),
/// ``epoch``, ``label``, ``params`` (its random parameters as plain values, e.g.
/// ``{"crop": {"top": 12, "left": 40, "height": 180, "width": 200}, "flip": {"horizontal":
/// True, "vertical": False}}``) and ``padding`` (a repeat that only fills the batch).
#[pyclass(module = "stokehold", name = "Sample", frozen, get_all)]
pub struct PySample {
    path: String,
    index: usize,
    epoch: u64,
    label: i64,
    params: Py<PyDict>,
    padding: bool,
}

#[pymethods]
impl PySample {
    fn __repr__(&self) -> String {
        format!(
            "stokehold.Sample(path={:?}, index={}, epoch={}, label={}{})",
            self.path,
            self.index,
            self.epoch,
            self.label,
            if self.padding { ", padding=True" } else { "" }
        )
    }
}

/// A bad file met while filling a batch: ``path``, ``index`` (in the dataset), ``cause``
/// (what went wrong, in words) and ``category`` (e.g. ``"decode:corrupt"``, ``"read"``).
#[pyclass(module = "stokehold", name = "Skipped", frozen, get_all)]
pub struct PySkipped {
    path: String,
    index: usize,
    cause: String,
    category: &'static str,
}

#[pymethods]
impl PySkipped {
    fn __repr__(&self) -> String {
        format!(
            "stokehold.Skipped(path={:?}, cause={:?})",
            self.path, self.cause
        )
    }
}

/// The Python records of `errors`, made once.
fn records<'py>(
    py: Python<'py>,
    made: &PyOnceLock<Py<PyList>>,
    errors: &[SampleError],
) -> PyResult<Bound<'py, PyList>> {
    let list = made.get_or_try_init(py, || {
        let records = errors
            .iter()
            .map(|e| {
                Py::new(
                    py,
                    PySkipped {
                        path: e.path.to_string_lossy().into_owned(),
                        index: e.index,
                        cause: e.kind.to_string(),
                        category: e.kind.category(),
                    },
                )
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok::<_, PyErr>(PyList::new(py, records)?.unbind())
    })?;
    Ok(list.bind(py).clone())
}
