//! Turning stokehold's errors into the Python exceptions of `stokehold._errors`, with the
//! parts of the error (file, line, column, help; path and cause) as attributes.

use std::path::Path;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use pyo3::IntoPyObjectExt;
use stokehold::Error;

/// The exception classes, by name in `stokehold._errors`.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// `stokehold.Error`.
    Base,
    /// `stokehold.PipelineError`.
    Pipeline,
    /// `stokehold.DataError`.
    Data,
    /// `stokehold.DeviceError`.
    Device,
    /// `stokehold.OutOfMemoryError`.
    OutOfMemory,
}

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::Base => "Error",
            Kind::Pipeline => "PipelineError",
            Kind::Data => "DataError",
            Kind::Device => "DeviceError",
            Kind::OutOfMemory => "OutOfMemoryError",
        }
    }
}

/// The `stokehold._errors` module, imported once.
fn errors_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    static MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    MODULE
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(py.import("stokehold._errors")?.unbind())
        })
        .map(|m| m.bind(py))
}

/// An exception of `kind` with `message`, and `attrs` set on it.
pub fn new_err(py: Python<'_>, kind: Kind, message: &str, attrs: &[(&str, Py<PyAny>)]) -> PyErr {
    let made = || -> PyResult<PyErr> {
        let class = errors_module(py)?.getattr(kind.class_name())?;
        let class = class.cast_into::<PyType>()?;
        let value = class.call1((message,))?;
        for (name, v) in attrs {
            value.setattr(*name, v.bind(py))?;
        }
        Ok(PyErr::from_value(value))
    };
    made().unwrap_or_else(|e| e)
}

/// A `stokehold.PipelineError` about the definition itself (a keyword argument, a dict).
pub fn pipeline_err(py: Python<'_>, message: impl AsRef<str>, help: Option<&str>) -> PyErr {
    let message = message.as_ref();
    let text = match help {
        Some(h) => format!("{message}\n  help: {h}"),
        None => message.to_string(),
    };
    let attrs = present(vec![("message", obj(py, message)), ("help", obj(py, help))]);
    new_err(py, Kind::Pipeline, &text, &attrs)
}

/// The attributes that could be made.
fn present(attrs: Vec<(&str, Option<Py<PyAny>>)>) -> Vec<(&str, Py<PyAny>)> {
    attrs
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
}

/// A `stokehold.DataError` with `message`.
pub fn data_err(py: Python<'_>, message: impl AsRef<str>) -> PyErr {
    new_err(py, Kind::Data, message.as_ref(), &[])
}

fn obj<'py, T: IntoPyObject<'py>>(py: Python<'py>, v: T) -> Option<Py<PyAny>> {
    v.into_py_any(py).ok()
}

fn path_str(p: &Path) -> String {
    p.display().to_string()
}

/// The Python exception for a stokehold error: its text is the error's, its class says
/// whose fault it is.
pub fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let text = e.to_string();
    let mut attrs: Vec<(&str, Option<Py<PyAny>>)> = Vec::new();
    let kind = match &e {
        Error::Config {
            file,
            line,
            column,
            message,
            help,
        } => {
            attrs.push(("file", obj(py, path_str(file))));
            attrs.push(("line", obj(py, *line)));
            attrs.push(("column", obj(py, *column)));
            attrs.push(("message", obj(py, message.as_str())));
            attrs.push(("help", obj(py, help.as_deref())));
            Kind::Pipeline
        }
        Error::Invalid { message, help, .. } => {
            attrs.push(("message", obj(py, message.as_str())));
            attrs.push(("help", obj(py, help.as_deref())));
            Kind::Pipeline
        }
        Error::Io { path, .. } => {
            attrs.push(("path", obj(py, path_str(path))));
            Kind::Data
        }
        Error::Dataset(_) => Kind::Data,
        Error::Sample(s) => {
            attrs.push(("path", obj(py, path_str(&s.path))));
            attrs.push(("cause", obj(py, s.kind.to_string())));
            Kind::Data
        }
        Error::GpuUnavailable(_)
        | Error::LibraryNotFound { .. }
        | Error::Nvjpeg(_)
        | Error::Cuda(_) => Kind::Device,
        Error::BatchMemory { .. } | Error::Allocation { .. } => Kind::OutOfMemory,
        _ => Kind::Base,
    };
    new_err(py, kind, &text, &present(attrs))
}
