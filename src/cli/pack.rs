//! `stokehold pack`: a class-folder data set into WebDataset tar shards and an index.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::reader::shards::pack::{pack, PackOptions};
use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use super::output::outln;

/// Arguments of `stokehold pack`.
#[derive(Args)]
pub struct PackArgs {
    /// The data set: a folder whose sub-folders are classes.
    folder: PathBuf,
    /// Where the shards go (created if missing; refused where it holds shards already, or
    /// lies inside the data set).
    out: PathBuf,
    /// Bytes per shard at most (a shard is closed before it would pass this; a sample larger
    /// than it gets a shard of its own): 1GB, 500MB, 64kB or bytes.
    #[arg(long, default_value = "1GB", value_parser = parse_size)]
    shard_size: u64,
    /// Shard names: PREFIX-000000.tar, … (a file name: no folders)
    #[arg(long, default_value = "train", value_parser = parse_prefix)]
    prefix: String,
    /// Keep the listing's (sorted, class by class) order instead of shuffling the samples
    /// from seed 0 (shuffled shards let a reader's shuffle buffer mix classes at once).
    #[arg(long)]
    keep_order: bool,
    /// The folder has no class sub-folders: pack it without labels (every sample's .cls
    /// member is -1). Without this a flat folder is refused, and with it a folder of class
    /// sub-folders (its labels would be lost).
    #[arg(long)]
    no_labels: bool,
}

fn parse_prefix(s: &str) -> Result<String, String> {
    if s.is_empty() || s.contains(['/', '\\']) || s == "." || s == ".." {
        return Err(format!(
            "'{s}' is not a file name: the shards go into OUT, named PREFIX-000000.tar, …; \
             give the folder as OUT"
        ));
    }
    Ok(s.to_string())
}

fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("'{s}' is not a size"))?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1e0,
        "kb" | "k" => 1e3,
        "mb" | "m" => 1e6,
        "gb" | "g" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        u => return Err(format!("unknown unit '{u}' (write e.g. 1GB, 500MB)")),
    };
    let bytes = (n * scale) as u64;
    if bytes < 1024 {
        return Err(format!("{s} is too small for a shard"));
    }
    Ok(bytes)
}

/// Packs the folder; unreadable files are left out and listed on stderr.
pub fn pack_folder(a: &PackArgs) -> Result<ExitCode> {
    let options = PackOptions {
        shard_size: a.shard_size,
        prefix: a.prefix.clone(),
        shuffle_seed: (!a.keep_order).then_some(0),
        labels: !a.no_labels,
        ..PackOptions::default()
    };
    let pb = ProgressBar::new(0);
    pb.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} samples  {msg}  eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    pb.set_draw_target(indicatif::ProgressDrawTarget::stderr_with_hz(4));
    let report = pack(&a.folder, &a.out, &options, &mut |done, all, bytes| {
        pb.set_length(all as u64);
        pb.set_position(done as u64);
        pb.set_message(format!("{:.1} MB written", bytes as f64 / 1e6));
    })
    .with_context(|| format!("packing {}", a.folder.display()))?;
    pb.finish_and_clear();
    for (path, why) in &report.left_out {
        eprintln!("left out {}: {why}", path.display());
    }
    let shards = report.index.shardlist.len();
    outln!(
        "{} samples in {shards} {} in {} ({} left out); index: {}",
        report.samples,
        if shards == 1 { "shard" } else { "shards" },
        a.out.display(),
        report.left_out.len(),
        a.out.join("index.json").display()
    )?;
    Ok(ExitCode::SUCCESS)
}
