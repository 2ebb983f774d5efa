//! Pipeline files (TOML): parsing into a [`PipelineSpec`] while remembering where every
//! part was written, so that any later error (from this parser or from the graph
//! validator) is reported as `file:line:column` with a suggestion.
//!
//! ```toml
//! [pipeline]
//! batch = 64
//! outputs = ["images", "labels"]
//!
//! [[op]]
//! kind = "file_reader"
//! outputs = ["jpegs", "labels"]
//! root = "/data/train"
//!
//! [[op]]
//! kind = "decode"
//! input = "jpegs"
//! output = "images"
//! ```
//!
//! The top level holds only `[pipeline]` (the settings of
//! [`settings::SETTINGS`](crate::pipeline::settings::SETTINGS) and `outputs`) and `[[op]]`
//! tables. In an `[[op]]` table the keys of [`docs::OP_KEYS`] are reserved and every other
//! key is an argument of the operator. The parser checks the file's shape and the
//! settings; operator kinds, argument names and types and the graph are checked by the
//! validator, whose [`SpecError`]s [`config_error`] places in the file. [`Draft`] does both
//! and reports every problem it can find in one go.

use std::collections::HashMap;
use std::path::Path;

use super::spec::{PipelineSpec, SpecError, SpecPointer};
use crate::error::Error;

mod diagnose;
pub mod docs;
mod parse;
#[cfg(test)]
mod tests;
mod write;

pub use diagnose::{Checked, Draft};
pub use write::to_toml;

/// A 1-based (line, column) position; columns count characters.
type Pos = (usize, usize);

/// Where each part of a pipeline definition was written in its file, for error messages.
#[derive(Debug, Clone, Default)]
pub struct SpecLocations {
    points: HashMap<SpecPointer, Pos>,
    pipeline_header: Option<Pos>,
    op_inputs_key: HashMap<usize, Pos>,
    op_outputs_key: HashMap<usize, Pos>,
}

impl SpecLocations {
    /// The 1-based (line, column) of `at` in the file.
    ///
    /// A setting or output edge points at its value, an argument at its key, an input or
    /// output edge of an operator at its entry in `input(s)`/`output(s)`, a placement at
    /// the operator's `device` value. Parts that were not written fall back to the nearest
    /// enclosing part that was: a missing argument or edge to the operator's `kind` (or its
    /// `inputs`/`outputs` key when there is one), a missing setting to the `[pipeline]`
    /// header, and anything else to 1:1.
    pub fn locate(&self, at: &SpecPointer) -> (usize, usize) {
        if let Some(p) = self.points.get(at) {
            return *p;
        }
        let get = |p: SpecPointer| self.points.get(&p).copied();
        let op = |i: usize| get(SpecPointer::OpKind(i)).or_else(|| get(SpecPointer::Op(i)));
        let found = match at {
            SpecPointer::Setting(_) => self.pipeline_header,
            SpecPointer::Output(_) => {
                get(SpecPointer::Setting("outputs".to_string())).or(self.pipeline_header)
            }
            SpecPointer::Op(i) | SpecPointer::OpKind(i) => get(SpecPointer::Op(*i)),
            SpecPointer::OpArg(i, _) | SpecPointer::OpPlacement(i) => op(*i),
            SpecPointer::OpInput(i, _) => self.op_inputs_key.get(i).copied().or_else(|| op(*i)),
            SpecPointer::OpOutput(i, _) => self.op_outputs_key.get(i).copied().or_else(|| op(*i)),
            SpecPointer::Whole => None,
        };
        found.unwrap_or((1, 1))
    }
}

/// A pipeline definition read from a file, with the locations of its parts.
#[derive(Debug, Clone)]
pub struct LoadedSpec {
    /// The definition (not yet validated against the operator schemas).
    pub spec: PipelineSpec,
    /// Where each part was written.
    pub locations: SpecLocations,
}

/// Reads and parses the pipeline file at `file`; sets `spec.file`.
///
/// An unreadable file (or one that is not UTF-8) is [`Error::Io`]; anything wrong inside it
/// is [`Error::Config`] at the offending line and column (the first problem; [`Draft`]
/// reports them all).
pub fn load(file: &Path) -> Result<LoadedSpec, Error> {
    let text = read(file)?;
    let mut loaded = parse(&text, file)?;
    loaded.spec.file = Some(file.to_path_buf());
    Ok(loaded)
}

/// The text of the pipeline file at `file`.
fn read(file: &Path) -> Result<String, Error> {
    std::fs::read_to_string(file).map_err(|source| Error::Io {
        path: file.to_path_buf(),
        source,
    })
}

/// Parses the text of a pipeline file; `file` is only used in error messages (the
/// returned `spec.file` is `None`, see [`load`]).
///
/// Checks TOML syntax, the top-level tables, every `[pipeline]` setting (type and range)
/// and the shape of each `[[op]]` table. The first problem found is returned as
/// [`Error::Config`].
pub fn parse(text: &str, file: &Path) -> Result<LoadedSpec, Error> {
    let parsed = parse::parse_all(text, file);
    match parsed.errors.into_iter().next() {
        Some(e) => Err(e),
        None => Ok(parsed.loaded),
    }
}

/// Turns a validator error about a spec loaded from `file` into an [`Error::Config`]
/// at the place the offending part was written.
pub fn config_error(file: &Path, locations: &SpecLocations, e: SpecError) -> Error {
    let (line, column) = locations.locate(&e.at);
    Error::Config {
        file: file.to_path_buf(),
        line,
        column,
        message: e.message,
        help: e.help,
    }
}

/// Turns a validator error about `spec` into the error a user should see: for a spec read
/// from a file that still reads cleanly, [`Error::Config`] at the place in that file;
/// otherwise [`Error::Invalid`] saying in words which part is wrong.
pub fn spec_error(spec: &PipelineSpec, e: SpecError) -> Error {
    let located = spec.file.as_deref().and_then(|file| {
        let parsed = parse::parse_all(&read(file).ok()?, file);
        parsed
            .errors
            .is_empty()
            .then(|| config_error(file, &parsed.loaded.locations, e.clone()))
    });
    located.unwrap_or_else(|| e.into_invalid(spec))
}
