//! Builds the ResNet-50 training pipeline in Rust (no pipeline file), runs one epoch, and
//! shows the random parameters each sample got (what you need to transform boxes or masks).
//!
//! ```text
//! cargo run --release --example 02-build-in-rust -- [DATA_DIR]
//! ```

use std::path::PathBuf;

use stokehold::pipeline::{OpSpec, Pipeline, PipelineSpec};

fn main() -> Result<(), stokehold::Error> {
    let data = match std::env::args().nth(1) {
        Some(d) => PathBuf::from(d),
        None => stokehold::builtin_data::ensure(&stokehold::builtin_data::default_dir())?,
    };
    let spec = PipelineSpec::builder()
        .batch(32)
        .seed(7)
        .op(OpSpec::new("file_reader")
            .output("jpegs")
            .output("labels")
            .arg("root", data.as_path()))
        .op(OpSpec::new("decode").input("jpegs").output("decoded"))
        .op(OpSpec::new("random_resized_crop")
            .input("decoded")
            .output("cropped")
            .arg("size", 224))
        .op(OpSpec::new("flip")
            .input("cropped")
            .output("flipped")
            .arg("horizontal", 0.5))
        .op(OpSpec::new("normalize")
            .input("flipped")
            .output("normalized")
            .arg("mean", [123.675, 116.28, 103.53])
            .arg("std", [58.395, 57.12, 57.375]))
        .op(OpSpec::new("layout")
            .input("normalized")
            .output("images")
            .arg("layout", "CHW"))
        .outputs(&["images", "labels"]);

    let mut pipeline = Pipeline::new(spec)?;
    let first = pipeline.next_batch().expect("at least one batch")?;
    let images = first.images("images").expect("images output");
    println!(
        "batch shape {:?}, labels {:?}",
        images.shape(),
        first.labels("labels")
    );
    for sample in first.samples.iter().take(3) {
        let crop = sample
            .crop()
            .expect("random_resized_crop records its window");
        let flip = sample.flip().expect("flip records its choice");
        println!(
            "{}: window {}x{} at ({}, {}) of the {}x{} image, mirrored: {}",
            sample.path.display(),
            crop.height,
            crop.width,
            crop.top,
            crop.left,
            crop.source_height,
            crop.source_width,
            flip.horizontal
        );
    }
    let rest: usize = pipeline
        .map(|b| b.map(|b| b.len()))
        .sum::<Result<usize, _>>()?;
    println!("{} more samples in the epoch", rest);
    Ok(())
}
