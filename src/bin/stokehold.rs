//! The `stokehold` command line: run, bench and check pipeline files.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use stokehold::pipeline::graph::Graph;
use stokehold::pipeline::StatsSnapshot;
use stokehold::pipeline::{file, DeviceChoice, Pipeline, PipelineSpec};

// Moves to src/bin/stokehold/pack.rs with the one-file-per-command layout.
#[path = "stokehold_cmd/pack.rs"]
mod pack;

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
    /// Run a pipeline over its data, with a progress bar and a summary.
    Run {
        /// The pipeline file.
        pipeline: PathBuf,
        #[command(flatten)]
        opts: RunOpts,
        /// Print per-stage statistics at the end.
        #[arg(long)]
        stats: bool,
    },
    /// One warm-up epoch, then `--epochs` timed epochs; prints a throughput line.
    Bench {
        /// The pipeline file.
        pipeline: PathBuf,
        #[command(flatten)]
        opts: RunOpts,
        /// Simulate a training step of this many milliseconds per batch, and report whether
        /// the run is loader-bound or compute-bound.
        #[arg(long, value_name = "MS")]
        consumer_ms: Option<f64>,
    },
    /// Try thread counts and prefetch depths on this machine and print the best setting.
    Tune {
        /// The pipeline file.
        pipeline: PathBuf,
        #[command(flatten)]
        opts: RunOpts,
        /// Thread counts to try (default: 1 up to the core count, and one more).
        #[arg(long, value_delimiter = ',')]
        thread_counts: Vec<usize>,
        /// Prefetch depths to try.
        #[arg(long, value_delimiter = ',', default_values_t = vec![1, 2, 4])]
        prefetch_depths: Vec<usize>,
    },
    /// Pack a class-folder data set into WebDataset tar shards (+ index.json).
    Pack(pack::PackArgs),
    /// Validate a pipeline file and print its graph.
    Check {
        /// The pipeline file.
        pipeline: PathBuf,
        /// Print the graph in Graphviz dot format instead.
        #[arg(long)]
        dot: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum DeviceArg {
    Auto,
    Cpu,
    Gpu,
}

#[derive(Args, Clone)]
struct RunOpts {
    /// Dataset: a folder (class sub-folders, or flat) or a list file; or tar shards: a folder
    /// of .tar files, a brace pattern, a shard's path or URL, or a list of them. Overrides
    /// the file's reader.
    #[arg(long)]
    data: Option<PathBuf>,
    /// This process's rank (default: $RANK, else the file's).
    #[arg(long)]
    rank: Option<usize>,
    /// Number of ranks (default: $WORLD_SIZE, else the file's).
    #[arg(long)]
    world_size: Option<usize>,
    /// Where to run.
    #[arg(long, value_enum)]
    device: Option<DeviceArg>,
    /// Worker threads (default: the file's, else one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// Samples per batch.
    #[arg(long)]
    batch: Option<usize>,
    /// Epochs (for bench: timed epochs after the warm-up).
    #[arg(long)]
    epochs: Option<u64>,
    /// Seed of every random choice.
    #[arg(long)]
    seed: Option<u64>,
    /// Batches prepared ahead.
    #[arg(long)]
    prefetch: Option<usize>,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("STOKEHOLD_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_target(false)
        .init();
    let cli = Cli::parse();
    // Escape hatches and A/B switches: JPEGs entropy-decoded by libjpeg-turbo alone.
    if env_flag("STOKEHOLD_LIBJPEG_PROGRESSIVE") {
        stokehold::decode::set_own_progressive_decoder(false);
        tracing::info!(
            "STOKEHOLD_LIBJPEG_PROGRESSIVE: progressive JPEGs decoded by libjpeg-turbo alone"
        );
    }
    if env_flag("STOKEHOLD_LIBJPEG_SEQUENTIAL") {
        stokehold::decode::set_own_sequential_decoder(false);
        tracing::info!(
            "STOKEHOLD_LIBJPEG_SEQUENTIAL: sequential JPEGs entropy-decoded by libjpeg-turbo"
        );
    }
    let result = match cli.command {
        Command::Run {
            pipeline,
            opts,
            stats,
        } => run(&pipeline, &opts, stats),
        Command::Bench {
            pipeline,
            opts,
            consumer_ms,
        } => bench(&pipeline, &opts, consumer_ms),
        Command::Tune {
            pipeline,
            opts,
            thread_counts,
            prefetch_depths,
        } => tune(&pipeline, &opts, &thread_counts, &prefetch_depths),
        Command::Check { pipeline, dot } => check(&pipeline, dot),
        Command::Pack(a) => pack::run(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Loads and validates a pipeline file with command-line overrides applied.
fn load(path: &Path, opts: Option<&RunOpts>) -> Result<Graph> {
    let loaded = file::load(path)?;
    let mut spec: PipelineSpec = loaded.spec;
    if let Some(o) = opts {
        apply(&mut spec, o)?;
    }
    Graph::build(&spec).map_err(|e| file::config_error(path, &loaded.locations, e).into())
}

fn apply(spec: &mut PipelineSpec, o: &RunOpts) -> Result<()> {
    let s = &mut spec.settings;
    if let Some(d) = o.device {
        s.device = match d {
            DeviceArg::Auto => DeviceChoice::Auto,
            DeviceArg::Cpu => DeviceChoice::Cpu,
            DeviceArg::Gpu => DeviceChoice::Gpu,
        };
    }
    if let Some(t) = o.threads {
        anyhow::ensure!(t >= 1, "--threads must be at least 1");
        s.threads = Some(t);
    }
    if let Some(b) = o.batch {
        anyhow::ensure!(b >= 1, "--batch must be at least 1");
        s.batch = b;
    }
    if let Some(e) = o.epochs {
        anyhow::ensure!(e >= 1, "--epochs must be at least 1");
        s.epochs = Some(e);
    }
    if let Some(seed) = o.seed {
        s.seed = seed;
    }
    if let Some(p) = o.prefetch {
        anyhow::ensure!(p >= 1, "--prefetch must be at least 1");
        s.prefetch = p;
    }
    if let Some(d) = &o.data {
        let text = d.to_string_lossy();
        let remote_or_pattern = stokehold::reader::shards::list::is_url(&text)
            || stokehold::reader::shards::list::has_braces(&text);
        anyhow::ensure!(
            remote_or_pattern || d.exists(),
            "--data {}: no such file or folder",
            d.display()
        );
        spec.set_data(d);
    } else if !spec.has_data() {
        let dir = stokehold::builtin_data::ensure(&stokehold::builtin_data::default_dir())
            .context("generating the built-in sample set")?;
        eprintln!(
            "no data given: using the built-in sample set in {}",
            dir.display()
        );
        spec.set_data(&dir);
    }
    if let Some((r, w)) = rank(o)? {
        spec.set_rank(r, w);
    }
    Ok(())
}

/// The rank and number of ranks from the flags, else from `RANK` and `WORLD_SIZE`.
fn rank(o: &RunOpts) -> Result<Option<(usize, usize)>> {
    let env = |name: &str| -> Result<Option<usize>> {
        match std::env::var(name) {
            Ok(v) => v
                .trim()
                .parse()
                .map(Some)
                .with_context(|| format!("${name} = '{v}' is not a number")),
            Err(_) => Ok(None),
        }
    };
    let rank = match o.rank {
        Some(r) => Some(r),
        None => env("RANK")?,
    };
    let world = match o.world_size {
        Some(w) => Some(w),
        None => env("WORLD_SIZE")?,
    };
    match (rank, world) {
        (None, None) => Ok(None),
        (r, Some(w)) => {
            let r = r.unwrap_or(0);
            anyhow::ensure!(w >= 1, "the world size must be at least 1");
            anyhow::ensure!(r < w, "rank {r} is not below the world size {w}");
            Ok(Some((r, w)))
        }
        (Some(r), None) => {
            anyhow::bail!("rank {r} given without a world size (--world-size or $WORLD_SIZE)")
        }
    }
}

fn start(path: &Path, opts: &RunOpts, verbose: bool) -> Result<Pipeline> {
    let graph = load(path, Some(opts))?;
    let p = Pipeline::from_graph(graph)?;
    if !verbose {
        return Ok(p);
    }
    eprintln!(
        "device: {} ({}); {} worker threads; {} samples per epoch",
        p.device().device,
        p.device().reason,
        p.worker_threads(),
        p.samples_per_epoch()
    );
    Ok(p)
}

fn progress(total: Option<u64>) -> ProgressBar {
    let pb = match total {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::new_spinner(),
    };
    pb.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} images  {per_sec}  {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    pb.set_draw_target(indicatif::ProgressDrawTarget::stderr_with_hz(4));
    pb
}

fn run(path: &Path, opts: &RunOpts, show_stats: bool) -> Result<()> {
    let mut p = start(path, opts, true)?;
    let epochs = p.graph().spec.settings.epochs;
    let pb = progress(epochs.map(|e| e * p.samples_per_epoch() as u64));
    let t0 = Instant::now();
    let mut skipped = 0u64;
    while let Some(b) = p.next_batch() {
        let b = b?;
        skipped += b.skipped.len() as u64;
        pb.inc((b.len() - b.padded + b.skipped.len()) as u64);
        if skipped > 0 {
            pb.set_message(format!("{skipped} skipped"));
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let st = p.stats();
    if show_stats {
        print_stats(&st, secs);
    }
    for (cause, n) in &st.skipped_by_cause {
        println!("skipped {n} ({cause})");
    }
    println!(
        "images={} skipped={} seconds={:.3} throughput={:.1} img/s",
        st.images,
        st.skipped,
        secs,
        st.images as f64 / secs.max(1e-9)
    );
    Ok(())
}

fn print_stats(st: &StatsSnapshot, secs: f64) {
    let pct = |d: Duration| 100.0 * d.as_secs_f64() / secs.max(1e-9);
    println!("stage times (summed over threads; % of wall time):");
    println!(
        "  read      {:>9.3} s  {:>6.1}%  ({:.1} MB)",
        st.read.as_secs_f64(),
        pct(st.read),
        st.read_bytes as f64 / 1e6
    );
    for (name, d) in &st.ops {
        println!("  {name:<9} {:>9.3} s  {:>6.1}%", d.as_secs_f64(), pct(*d));
    }
    println!(
        "  assemble  {:>9.3} s  {:>6.1}%  ({} of {} images written in place by the workers)",
        st.assemble.as_secs_f64(),
        pct(st.assemble),
        st.in_place,
        st.batch_images
    );
    println!(
        "  consumer waited {:.3} s ({:.1}% of the run)",
        st.consumer_wait.as_secs_f64(),
        pct(st.consumer_wait)
    );
    println!(
        "  batches={} dropped={} padded={} replaced={}; {:.2} batches ready on average when asked",
        st.batches, st.dropped, st.padded, st.replaced, st.mean_queue_depth
    );
    for e in &st.epochs {
        println!(
            "  epoch {}: {} images in {} batches, {} skipped, {} replaced, {} dropped",
            e.epoch, e.images, e.batches, e.skipped, e.replaced, e.dropped
        );
    }
    if let Some(peak) = peak_rss_bytes() {
        println!("  peak resident memory {:.1} MB", peak as f64 / 1e6);
    }
}

/// Peak resident set size of this process (Linux: VmHWM), if known.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// What one timed run measured.
struct Measurement {
    device: &'static str,
    threads: usize,
    batch: usize,
    images: u64,
    seconds: f64,
    /// Time the consumer spent waiting for batches during the timed epochs.
    waited: f64,
}

impl Measurement {
    fn throughput(&self) -> f64 {
        self.images as f64 / self.seconds.max(1e-9)
    }
}

/// One warm-up epoch, then `timed` epochs; `consumer_ms` simulates a training step per batch.
fn measure(
    path: &Path,
    opts: &RunOpts,
    timed: u64,
    consumer_ms: Option<f64>,
    show_progress: bool,
) -> Result<Measurement> {
    let mut o = opts.clone();
    o.epochs = Some(timed + 1);
    let mut p = start(path, &o, show_progress)?;
    let batch = p.graph().spec.settings.batch;
    let pb = if show_progress {
        progress(Some((timed + 1) * p.samples_per_epoch() as u64))
    } else {
        ProgressBar::hidden()
    };
    let step = consumer_ms.map(|ms| Duration::from_secs_f64(ms / 1000.0));
    let mut t0 = Instant::now();
    let mut images = 0u64;
    let mut waited = Duration::ZERO;
    loop {
        let w0 = Instant::now();
        let Some(b) = p.next_batch() else { break };
        let b = b?;
        let w = w0.elapsed();
        pb.inc((b.len() - b.padded + b.skipped.len()) as u64);
        if b.epoch == 0 {
            // Warm-up: the clock starts after its last batch.
            t0 = Instant::now();
            waited = Duration::ZERO;
        } else {
            images += (b.len() - b.padded) as u64;
            waited += w;
        }
        if let Some(step) = step {
            std::thread::sleep(step);
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    pb.finish_and_clear();
    Ok(Measurement {
        device: p.device().device,
        threads: p.worker_threads(),
        batch,
        images,
        seconds,
        waited: waited.as_secs_f64(),
    })
}

fn bench(path: &Path, opts: &RunOpts, consumer_ms: Option<f64>) -> Result<()> {
    let m = measure(path, opts, opts.epochs.unwrap_or(3), consumer_ms, true)?;
    if let Some(ms) = consumer_ms {
        let wait_pct = 100.0 * m.waited / m.seconds.max(1e-9);
        let step_rate = m.batch as f64 / (ms / 1000.0);
        if wait_pct > 5.0 {
            println!(
                "loader-bound: the {ms} ms training step waited for data {wait_pct:.1}% of the time; \
                 the step could take {step_rate:.0} img/s, the loader delivered {:.0} img/s \
                 (more threads, or the GPU path, would help)",
                m.throughput()
            );
        } else {
            println!(
                "compute-bound: the {ms} ms training step waited for data {wait_pct:.1}% of the time; \
                 the loader keeps up with {step_rate:.0} img/s"
            );
        }
    }
    if let Some(peak) = peak_rss_bytes() {
        println!("peak resident memory {:.1} MB", peak as f64 / 1e6);
    }
    println!(
        "device={} threads={} batch={} images={} seconds={:.3} throughput={:.1} img/s",
        m.device,
        m.threads,
        m.batch,
        m.images,
        m.seconds,
        m.throughput()
    );
    Ok(())
}

fn tune(path: &Path, opts: &RunOpts, threads: &[usize], prefetch: &[usize]) -> Result<()> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads: Vec<usize> = if threads.is_empty() {
        (1..=cores + 1).collect()
    } else {
        threads.to_vec()
    };
    let timed = opts.epochs.unwrap_or(1);
    println!("{:>8} {:>9} {:>12}", "threads", "prefetch", "img/s");
    let mut best: Option<(f64, usize, usize)> = None;
    for &t in &threads {
        for &d in prefetch {
            let mut o = opts.clone();
            o.threads = Some(t);
            o.prefetch = Some(d);
            let m = measure(path, &o, timed, None, false)?;
            println!("{t:>8} {d:>9} {:>12.1}", m.throughput());
            if best.is_none_or(|(b, _, _)| m.throughput() > b) {
                best = Some((m.throughput(), t, d));
            }
        }
    }
    if let Some((tp, t, d)) = best {
        println!("best: threads = {t}, prefetch = {d} ({tp:.1} img/s on {cores} cores)");
        println!("put `threads = {t}` and `prefetch = {d}` in the [pipeline] table, or pass --threads {t} --prefetch {d}");
    }
    Ok(())
}

fn check(path: &Path, dot: bool) -> Result<()> {
    let fused = load(path, None)?;
    // Show the graph as written; fusion is an execution detail, listed after it.
    let g = Graph::build_unfused(&fused.spec).map_err(|e| anyhow::anyhow!("{}", e.message))?;
    if dot {
        print!("{}", g.to_dot());
    } else {
        println!("{}: ok", path.display());
        print!("{}", g.describe());
        let merged: Vec<&str> = fused
            .nodes
            .iter()
            .map(|n| &*n.name)
            .filter(|n| n.contains('+'))
            .collect();
        if !merged.is_empty() {
            println!(
                "  fused when run (same results, one pass): {}",
                merged.join(", ")
            );
        }
        // The one opt-in exception to "same results".
        for n in &fused.nodes {
            if let Some(what) = n.op.fusion_differs() {
                println!("  {}: {what}", n.name);
            }
        }
    }
    Ok(())
}

/// Whether environment variable `name` is set to something other than `0`.
fn env_flag(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| v != "0")
}
