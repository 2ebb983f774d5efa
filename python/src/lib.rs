//! The native module of the `stokehold` Python package (`stokehold._native`): pipelines
//! (`pipeline`), batches and their records (`batch`), zero-copy DLPack tensors
//! (`tensor`), pipelines given as dicts (`dict_spec`), the keyword settings and ranks
//! (`options`) and the exceptions (`errors`). The Python-facing documentation is in the
//! docstrings and `stokehold/_native.pyi`.

use std::path::PathBuf;

use pyo3::prelude::*;

mod batch;
mod dict_spec;
mod errors;
mod options;
mod pipeline;
mod tensor;

/// The folder of stokehold's built-in demo images (a few dozen small photos in four class
/// folders), generated the first time: ``path`` if given, else ``$STOKEHOLD_SAMPLES``, else a
/// folder in the system's temporary folder. Returns the folder as a string.
#[pyfunction]
#[pyo3(signature = (path=None))]
fn builtin_data(py: Python<'_>, path: Option<PathBuf>) -> PyResult<String> {
    let dir = path.unwrap_or_else(stokehold::builtin_data::default_dir);
    let made = py.detach(|| stokehold::builtin_data::ensure(&dir));
    made.map(|d| d.display().to_string())
        .map_err(|e| errors::to_py(py, e))
}

#[pymodule(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<pipeline::PyPipeline>()?;
    m.add_class::<pipeline::EpochIterator>()?;
    m.add_class::<batch::PyBatch>()?;
    m.add_class::<batch::PySample>()?;
    m.add_class::<batch::PySkipped>()?;
    m.add_class::<tensor::PyTensor>()?;
    m.add_function(wrap_pyfunction!(builtin_data, m)?)?;
    Ok(())
}
