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

use std::path::Path;

use super::spec::{PipelineSpec, SpecError};
use crate::error::Error;

mod diagnose;
pub mod docs;
mod located;
mod parse;
#[cfg(test)]
mod tests;
mod write;

pub use diagnose::{Checked, Draft};
use located::read;
pub use located::{config_error, LoadedSpec, SpecLocations};
pub use write::to_toml;

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
