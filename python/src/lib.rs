//! The native module of the `stokehold` Python package (`stokehold._native`): pipelines
//! (`pipeline`), batches and their records (`batch`), zero-copy DLPack tensors
//! (`tensor`), pipelines given as dicts (`dict_spec`), the keyword settings and ranks
//! (`options`), the exceptions (`errors`), the log lines as Python `logging` records (`log`), and the command line (`_cli_main`, the
//! library's `cli`). The Python-facing documentation is in the docstrings and
//! `stokehold/_native.pyi`.

use std::path::PathBuf;

use pyo3::prelude::*;
use stokehold::cli::heap::CountingAllocator;

mod batch;
mod dict_spec;
mod errors;
mod log;
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

/// The system allocator, counting for `stokehold bench --stats` as the Rust binary's does
/// (`stokehold::cli::heap`): this module's Rust allocations only, Python's own untouched.
#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Runs the `stokehold` command line with `args` (the program's name first) and returns its
/// exit status: what the `stokehold` command and `python -m stokehold` do. The GIL is
/// released meanwhile; `run` takes over Ctrl-C as the binary does.
#[pyfunction]
fn _cli_main(py: Python<'_>, args: Vec<std::ffi::OsString>) -> u8 {
    let code = log::during_command(py, || stokehold::cli::main(args));
    // std has no stable way to read an ExitCode's number back.
    (0..=u8::MAX)
        .find(|&k| std::process::ExitCode::from(k) == code)
        .unwrap_or(1)
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
    m.add_function(wrap_pyfunction!(_cli_main, m)?)?;
    Ok(())
}
