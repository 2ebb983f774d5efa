//! Tests of reading and writing pipeline files, by topic: [`parse`] (what a good file
//! becomes), [`mistakes`] (each kind of mistake, placed at its line and column),
//! [`locations`] (where each part was written), [`write`] (writing and round trips).

use std::path::{Path, PathBuf};

use super::*;

mod locations;
mod mistakes;
mod parse;
mod write;

const FILE: &str = "pipe.toml";

/// The error `text` gives, as (line, column, message, help).
fn config_err(text: &str) -> (usize, usize, String, Option<String>) {
    match parse(text, Path::new(FILE)) {
        Err(Error::Config {
            file,
            line,
            column,
            message,
            help,
        }) => {
            assert_eq!(file, PathBuf::from(FILE));
            (line, column, message, help)
        }
        other => panic!("expected a config error, got {other:?}"),
    }
}

fn ok(text: &str) -> LoadedSpec {
    match parse(text, Path::new(FILE)) {
        Ok(l) => l,
        Err(e) => panic!("expected {text:?} to parse, got {e}"),
    }
}

/// Asserts position and that the message and help contain the given words.
#[track_caller]
fn assert_err(text: &str, line: usize, column: usize, message: &str, help: Option<&str>) {
    let (l, c, m, h) = config_err(text);
    assert_eq!((l, c), (line, column), "position of {m:?} in\n{text}");
    assert!(m.contains(message), "message {m:?} lacks {message:?}");
    match (help, h) {
        (Some(want), Some(got)) => assert!(got.contains(want), "help {got:?} lacks {want:?}"),
        (None, _) => {}
        (Some(want), None) => panic!("no help, wanted {want:?} (message {m:?})"),
    }
}

const EXAMPLE: &str = r#"[pipeline]
batch = 64            # int >= 1 (default 32)
threads = 0
prefetch = 3
seed = 1
epochs = 2
on_error = "fail"
device = "cpu"
device_id = 1
outputs = ["images", "labels"]

[[op]]
kind = "file_reader"
name = "reader"
outputs = ["jpegs", "labels"]
root = "/data/train"
shuffle = true
ratio = [0.5, 1e-3, -2]

[[op]]
kind = "decode"
input = "jpegs"
output = "images"
"#;
