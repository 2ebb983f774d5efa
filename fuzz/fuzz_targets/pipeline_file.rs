//! Fuzz target: arbitrary text through the pipeline-file parser and, when it parses, the
//! graph validator (and the error locator). Every error must be an `Error::Config` placed on
//! a line of the file with a message; a panic or any other error is a bug.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use stokehold::pipeline::file;
use stokehold::pipeline::graph::Graph;
use stokehold::Error;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fuzz.toml");
    let lines = text.lines().count().max(1);
    let err = match file::parse(text, path) {
        Ok(loaded) => match Graph::build(&loaded.spec) {
            Err(e) => file::config_error(path, &loaded.locations, e),
            Ok(_) => {
                // A valid spec writes out and reads back.
                let again = file::to_toml(&loaded.spec);
                let _ = file::parse(&again, path);
                return;
            }
        },
        Err(e) => e,
    };
    // Every error is a config error placed inside the file, with a message.
    match err {
        Error::Config {
            line,
            column,
            message,
            ..
        } => {
            assert!(
                (1..=lines).contains(&line),
                "line {line} of {lines}: {message}"
            );
            assert!(column >= 1);
            assert!(!message.is_empty());
        }
        other => panic!("not a config error: {other}"),
    }
});
