//! Runs a pipeline file over a folder and prints each batch's shape.
//!
//! ```text
//! cargo run --release --example 01-run-pipeline-file -- pipelines/resnet50-train.toml [DATA_DIR]
//! ```
//! Without DATA_DIR it reads the data the file names (its reader's `root` or `list`), or
//! the built-in sample set where the file names none.

use std::path::PathBuf;

use stokehold::pipeline::{file, Pipeline};

fn main() -> Result<(), stokehold::Error> {
    let mut args = std::env::args().skip(1);
    let pipeline = PathBuf::from(
        args.next()
            .unwrap_or_else(|| "pipelines/resnet50-train.toml".into()),
    );
    let mut spec = file::load(&pipeline)?.spec;
    match args.next() {
        Some(d) => spec.set_data(&PathBuf::from(d)),
        None if spec.has_data() => {}
        None => spec.set_data(&stokehold::builtin_data::ensure(
            &stokehold::builtin_data::default_dir(),
        )?),
    }
    let mut pipeline = Pipeline::new(spec)?;
    println!("device: {}", pipeline.device());
    // `&mut`: the pipeline stays ours, for its summaries at the end.
    for batch in &mut pipeline {
        let batch = batch?;
        let images = batch
            .images("images")
            .expect("an image output named 'images'");
        println!(
            "epoch {} batch {}: {:?} {:?} {:?}, {} skipped",
            batch.epoch,
            batch.index,
            images.shape(),
            images.dtype,
            images.layout,
            batch.skipped.len()
        );
    }
    for e in pipeline.epoch_summaries() {
        println!(
            "epoch {}: {} images, {} skipped",
            e.epoch, e.images, e.skipped
        );
    }
    Ok(())
}
