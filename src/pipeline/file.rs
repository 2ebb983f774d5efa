//! Pipeline files (TOML) — interim stub; replaced by the full parser.
#![allow(missing_docs)]
use std::path::Path;

use super::spec::{PipelineSpec, SpecError, SpecPointer};
use crate::error::Error;

#[derive(Debug, Default, Clone)]
pub struct SpecLocations;
impl SpecLocations {
    pub fn locate(&self, _: &SpecPointer) -> (usize, usize) {
        (1, 1)
    }
}
pub struct LoadedSpec {
    pub spec: PipelineSpec,
    pub locations: SpecLocations,
}
pub fn load(file: &Path) -> Result<LoadedSpec, Error> {
    Err(Error::Config {
        file: file.into(),
        line: 1,
        column: 1,
        message: "stub".into(),
        help: None,
    })
}
pub fn config_error(file: &Path, locations: &SpecLocations, e: SpecError) -> Error {
    let (line, column) = locations.locate(&e.at);
    Error::Config {
        file: file.into(),
        line,
        column,
        message: e.message,
        help: e.help,
    }
}
pub fn to_toml(_: &PipelineSpec) -> String {
    String::new()
}
