//! `stokehold check`: reports every problem of a pipeline file (and a device the file asks
//! for that `run` would refuse), or prints the graph and where it will run.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::pipeline::file::config_error;
use crate::pipeline::graph::Graph;
use crate::pipeline::run::choose_device_for;
use crate::pipeline::spec::{SpecError, SpecPointer};
use anyhow::Result;
use clap::Args;

use super::options;
use super::output::{outln, Problems};

/// Arguments of `stokehold check`.
#[derive(Args)]
pub struct CheckArgs {
    /// The pipeline file.
    pipeline: PathBuf,
    /// Print the graph in Graphviz dot format instead.
    #[arg(long)]
    dot: bool,
}

/// Checks the file; exit status 1 with every problem on stderr.
pub fn check(args: &CheckArgs) -> Result<ExitCode> {
    let path = &args.pipeline;
    let checked = options::load(path, None)?;
    let device = choose_device_for(&checked.graph).map_err(|e| Problems {
        file: path.clone(),
        errors: vec![config_error(
            path,
            &checked.loaded.locations,
            SpecError::new(
                SpecPointer::Setting("device".into()),
                format!("`stokehold run` would stop here: {e}"),
            )
            .help("use device = \"auto\" (the GPU when it can run, else the CPU, saying why) or \"cpu\""),
        )],
    })?;
    // Show the graph as written; fusion is an execution detail, listed after it.
    let fused = &checked.graph;
    let g = Graph::build_unfused(&fused.spec).map_err(|e| anyhow::anyhow!("{}", e.message))?;
    if args.dot {
        outln!("{}", g.to_dot().trim_end())?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!("{}: ok", path.display())?;
    outln!("{}", g.describe().trim_end())?;
    let merged: Vec<&str> = fused
        .nodes
        .iter()
        .map(|n| &*n.name)
        .filter(|n| n.contains('+'))
        .collect();
    if !merged.is_empty() {
        outln!(
            "  fused when run (same results, one pass): {}",
            merged.join(", ")
        )?;
    }
    // The one opt-in exception to "same results".
    for n in &fused.nodes {
        if let Some(what) = n.fusion_differs() {
            outln!("  {}: {what}", n.name)?;
        }
    }
    outln!("  runs on: {} ({})", device.device, device.reason)?;
    Ok(ExitCode::SUCCESS)
}
