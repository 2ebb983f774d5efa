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

/// One `stokehold.PipelineError` for several problems (each a `PipelineError`): its text
/// is theirs, one after the other; its attributes (`file`, `line`, ...) are the first's; its
/// `errors` attribute lists them all. A single problem is returned as it is.
pub fn all_problems(py: Python<'_>, mut each: Vec<PyErr>) -> PyErr {
    if each.len() == 1 {
        return each.remove(0);
    }
    let made = || -> PyResult<PyErr> {
        let values: Vec<Bound<'_, pyo3::exceptions::PyBaseException>> =
            each.iter().map(|e| e.value(py).clone()).collect();
        let mut text = Vec::with_capacity(values.len() + 1);
        for v in &values {
            text.push(v.str()?.to_cow()?.into_owned());
        }
        text.push(format!("{} problems found", values.len()));
        let combined = new_err(py, Kind::Pipeline, &text.join("\n"), &[]);
        let value = combined.value(py);
        if let Some(first) = values.first() {
            for name in ["file", "line", "column", "message", "help"] {
                value.setattr(name, first.getattr(name)?)?;
            }
        }
        value.setattr("errors", pyo3::types::PyList::new(py, &values)?)?;
        Ok(combined)
    };
    made().unwrap_or_else(|e| e)
}

/// The attributes that could be made.
fn present(attrs: Vec<(&str, Option<Py<PyAny>>)>) -> Vec<(&str, Py<PyAny>)> {
    attrs
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
}

/// Issues a pipeline's start warning as a Python warning (`stokehold.DataWarning` or
/// `stokehold.PerformanceWarning`), pointing at the caller's line; an error only when the
/// warning filters make it one.
pub fn warn(py: Python<'_>, w: &stokehold::pipeline::run::StartWarning) -> PyResult<()> {
    use stokehold::pipeline::run::StartWarning;
    let class = match w {
        StartWarning::Data(_) => "DataWarning",
        StartWarning::Speed(_) => "PerformanceWarning",
    };
    let category = errors_module(py)?.getattr(class)?;
    let message = std::ffi::CString::new(w.message().replace('\0', " "))?;
    PyErr::warn(py, &category, &message, 1)
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
