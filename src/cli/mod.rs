//! The `stokehold` command line: run, bench, tune, check and compare pipeline files; pack a
//! data set into tar shards. One file per command; the `stokehold` binary
//! (`src/bin/stokehold/main.rs`) and the Python package's `stokehold` command both call
//! [`main`]. It is the program's edge: errors are `anyhow`'s here, reported by `output`.
//! Built with the `cli` feature (on by default).

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod check;
mod compare;
mod consumer;
pub mod heap;
mod interrupt;
mod logs;
mod options;
mod output;
mod pack;
mod progress;
mod run;
mod stats;
mod tune;

pub use logs::subscriber as log_subscriber;

#[derive(Parser)]
#[command(
    name = "stokehold",
    version,
    about = "Keeps a GPU fed: image input pipelines from TOML files"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a pipeline over its data, with a progress bar and a summary. The first Ctrl-C
    /// stops it cleanly and prints where to resume from; a second one quits at once.
    Run(run::RunArgs),
    /// One warm-up epoch, then timed epochs (at least 3, repeated for at least
    /// `--min-seconds`); prints the spread and a throughput line.
    Bench(bench::BenchArgs),
    /// Try thread counts and prefetch depths on this machine and print the best setting,
    /// or say that the differences are within the measured spread.
    Tune(tune::TuneArgs),
    /// Check a pipeline file, report every problem found, and print its graph.
    Check(check::CheckArgs),
    /// Pack a class-folder data set into WebDataset tar shards (+ index.json), for
    /// `--data` or a shard_reader to read.
    Pack(pack::PackArgs),
    /// Run a pipeline on two devices (one epoch, or --epochs) and report, per output, the largest and mean
    /// difference, the PSNR of the decoded images and whether every sample's random
    /// parameters match; exit status 3 when beyond the documented tolerance.
    Compare(compare::CompareArgs),
}

/// Runs the command line `args` (the program's name first, as `std::env::args_os` gives
/// them) and returns its exit status; `--help`, `--version` and usage errors print and exit
/// as clap does.
///
/// ```no_run
/// let status = stokehold::cli::main(["stokehold", "check", "pipelines/resnet50-train.toml"]);
/// # let _ = status;
/// ```
pub fn main<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    logs::init();
    let cli = Cli::parse_from(args);
    let result = match cli.command {
        Command::Run(args) => run::run(&args),
        Command::Bench(args) => bench::bench(&args),
        Command::Tune(args) => tune::tune(&args),
        Command::Check(args) => check::check(&args),
        Command::Pack(args) => pack::pack_folder(&args),
        Command::Compare(args) => compare::compare(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => output::report(&e),
    }
}
