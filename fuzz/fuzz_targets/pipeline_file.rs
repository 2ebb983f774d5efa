//! Fuzz target: arbitrary text through the pipeline-file parser and, when it parses, the
//! graph validator (and the error locator). Errors are fine; a panic is a bug.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use stokehold::pipeline::file;
use stokehold::pipeline::graph::Graph;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fuzz.toml");
    match file::parse(text, path) {
        Ok(loaded) => {
            if let Err(e) = Graph::build(&loaded.spec) {
                let _ = file::config_error(path, &loaded.locations, e);
            } else {
                // A valid spec writes out and reads back.
                let again = file::to_toml(&loaded.spec);
                let _ = file::parse(&again, path);
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
