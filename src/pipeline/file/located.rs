//! A pipeline definition read from a file with the place each part was written
//! ([`SpecLocations`]), and validator errors placed at those places ([`config_error`]).

use std::collections::HashMap;
use std::path::Path;

use crate::error::Error;
use crate::pipeline::spec::{PipelineSpec, SpecError, SpecPointer};

/// A 1-based (line, column) position; columns count characters.
pub(super) type Pos = (usize, usize);

/// Where each part of a pipeline definition was written in its file, for error messages.
#[derive(Debug, Clone, Default)]
pub struct SpecLocations {
    pub(super) points: HashMap<SpecPointer, Pos>,
    pub(super) pipeline_header: Option<Pos>,
    pub(super) op_inputs_key: HashMap<usize, Pos>,
    pub(super) op_outputs_key: HashMap<usize, Pos>,
}

impl SpecLocations {
    /// The 1-based (line, column) of `at` in the file.
    ///
    /// A setting, an argument or an output edge points at its value, an argument's name
    /// ([`SpecPointer::OpArgName`]) at its key, an input or
    /// output edge of an operator at its entry in `input(s)`/`output(s)`. Parts that were not written fall back to the nearest
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
            SpecPointer::Op(i) | SpecPointer::OpKind(i) | SpecPointer::OpName(i) => {
                get(SpecPointer::Op(*i))
            }
            SpecPointer::OpArg(i, _) | SpecPointer::OpArgName(i, _) => op(*i),
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

/// The text of the pipeline file at `file`.
pub(super) fn read(file: &Path) -> Result<String, Error> {
    let bytes = std::fs::read(file).map_err(|source| Error::Io {
        path: file.to_path_buf(),
        source,
    })?;
    String::from_utf8(bytes).map_err(|e| {
        // Where the text stops being UTF-8: a binary file given by mistake, or text in
        // another encoding.
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let text = String::from_utf8_lossy(valid);
        let line = text.matches('\n').count() + 1;
        let column = text.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        Error::Config {
            file: file.to_path_buf(),
            line,
            column,
            message: "not UTF-8 text: a pipeline file is a TOML file".into(),
            help: Some(
                "give the pipeline's .toml file (the data set goes in `--data` or the \
                 reader's `root`), saved as UTF-8"
                    .into(),
            ),
        }
    })
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
