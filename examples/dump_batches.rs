//! Writes every batch a pipeline file gives to a folder, so another consumer of the same
//! pipeline (the Python package's tests) can check it gets the very same batches.
//!
//! ```text
//! cargo run --example dump_batches -- PIPELINE DATA OUT BATCH SEED EPOCHS
//! ```
//! For each batch, `OUT/batches.tsv` gets a line `epoch index padded indices labels` (the
//! sample indices and labels comma-separated) and each image output's bytes go to
//! `OUT/e{epoch}-b{index}-{output}.bin`.

use std::fmt::Write as _;
use std::path::PathBuf;

use stokehold::pipeline::batch::BatchOutput;
use stokehold::pipeline::{file, Pipeline};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [pipeline, data, out, batch, seed, epochs] = args.as_slice() else {
        return Err("usage: dump_batches PIPELINE DATA OUT BATCH SEED EPOCHS".into());
    };
    let out = PathBuf::from(out);
    std::fs::create_dir_all(&out)?;
    let mut spec = file::load(pipeline.as_ref())?.spec;
    spec.set_data(data.as_ref());
    spec.settings.batch = batch.parse()?;
    spec.settings.seed = seed.parse()?;
    spec.settings.epochs = Some(epochs.parse()?);
    let mut index = String::new();
    for b in Pipeline::new(spec)? {
        let b = b?;
        let join = |v: Vec<String>| v.join(",");
        let indices = join(b.samples.iter().map(|s| s.index.to_string()).collect());
        let labels = join(b.samples.iter().map(|s| s.label.to_string()).collect());
        writeln!(
            index,
            "{}\t{}\t{}\t{indices}\t{labels}",
            b.epoch, b.index, b.padded
        )?;
        for (name, output) in b.names.iter().zip(&b.outputs) {
            if let BatchOutput::Images(t) = output {
                let path = out.join(format!("e{}-b{}-{name}.bin", b.epoch, b.index));
                std::fs::write(path, t.as_bytes())?;
            }
        }
    }
    std::fs::write(out.join("batches.tsv"), index)?;
    Ok(())
}
