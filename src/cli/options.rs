//! The options `run`, `bench` and `tune` share: `--data`, `--rank`/`--world-size` and one
//! override flag per pipeline setting, built from the settings declarations; and loading a
//! pipeline file with them applied, every problem reported at once.

use std::path::{Path, PathBuf};

use crate::ops::ArgValue;
use crate::pipeline::file::{Checked, Draft};
use crate::pipeline::settings::{Setting, SETTINGS};
use crate::pipeline::{Pipeline, PipelineSpec, Position};
use crate::reader::shards::list::data_exists;
use anyhow::{Context, Result};
use clap::{Arg, ArgMatches, Args, Command, FromArgMatches};

use super::output::Problems;

/// Options of the commands that run a pipeline.
#[derive(Args, Clone)]
pub struct RunOpts {
    /// Dataset: a folder (class sub-folders, or flat) or a list file; or tar shards: a folder
    /// of .tar files, a brace pattern, a shard's path or URL, or a list of them. Overrides the
    /// file's reader.
    #[arg(long)]
    pub data: Option<PathBuf>,
    #[command(flatten)]
    pub ranks: RankFlags,
    #[command(flatten)]
    pub settings: SettingFlags,
}

/// This process's part of the data among data-parallel ranks: the flags, else `RANK` and
/// `WORLD_SIZE` (as torchrun sets them), else the reader's `rank` and `world_size` in the
/// file (set by [`PipelineSpec::set_rank`]).
#[derive(Args, Clone, Default)]
pub struct RankFlags {
    /// This process's rank, from 0 (default: $RANK, else the pipeline file's reader's).
    #[arg(long, value_name = "N")]
    pub rank: Option<usize>,
    /// Number of ranks (default: $WORLD_SIZE, else the pipeline file's reader's).
    #[arg(long, value_name = "N")]
    pub world_size: Option<usize>,
}

impl RankFlags {
    /// The rank and number of ranks given, by flag or environment (`None`: neither).
    pub fn resolve(&self) -> Result<Option<(usize, usize)>> {
        let env = |name: &str| -> Result<Option<usize>> {
            match std::env::var(name) {
                Ok(v) => v
                    .trim()
                    .parse()
                    .map(Some)
                    .with_context(|| format!("${name} = {v:?} is not a non-negative integer")),
                Err(_) => Ok(None),
            }
        };
        let rank = match self.rank {
            Some(r) => Some(r),
            None => env("RANK")?,
        };
        let world_size = match self.world_size {
            Some(w) => Some(w),
            None => env("WORLD_SIZE")?,
        };
        let (rank, world_size) = match (rank, world_size) {
            (None, None) => return Ok(None),
            (Some(r), Some(w)) => (r, w),
            (Some(r), None) => {
                anyhow::bail!(
                    "rank {r} is given without a world size (--world-size or $WORLD_SIZE)"
                )
            }
            (None, Some(1)) => (0, 1),
            (None, Some(w)) => {
                anyhow::bail!("the world size is {w} but no rank is given (--rank or $RANK)")
            }
        };
        anyhow::ensure!(
            rank < world_size,
            "rank {rank} of world size {world_size}: ranks count from 0 and must be less than the world size"
        );
        Ok(Some((rank, world_size)))
    }
}

/// The settings given on the command line, one flag per setting
/// ([`crate::pipeline::settings::SETTINGS`]), each checked as the file's value is.
#[derive(Clone, Default)]
pub struct SettingFlags(Vec<(&'static Setting, ArgValue)>);

impl SettingFlags {
    /// The value given for setting `name`, if any.
    pub fn get(&self, name: &str) -> Option<&ArgValue> {
        self.0
            .iter()
            .find(|(s, _)| s.name() == name)
            .map(|(_, v)| v)
    }

    /// An integer setting given on the command line.
    pub fn int(&self, name: &str) -> Option<i64> {
        match self.get(name)? {
            ArgValue::Int(n) => Some(*n),
            _ => None,
        }
    }

    /// Applies every flag given to `spec`.
    pub fn apply(&self, spec: &mut PipelineSpec) -> Result<()> {
        for (setting, value) in &self.0 {
            setting
                .apply(&mut spec.settings, value)
                .map_err(|e| anyhow::anyhow!("--{}: {}", setting.flag.long, e.message))?;
        }
        Ok(())
    }
}

impl FromArgMatches for SettingFlags {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let given = SETTINGS
            .iter()
            .filter_map(|s| Some((s, matches.get_one::<ArgValue>(s.name())?.clone())))
            .collect();
        Ok(SettingFlags(given))
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = SettingFlags::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Args for SettingFlags {
    fn augment_args(cmd: Command) -> Command {
        SETTINGS.iter().fold(cmd, |cmd, s| {
            cmd.arg(
                Arg::new(s.name())
                    .long(s.flag.long)
                    .value_name(s.flag.value_name)
                    .help(format!("{} [{}]", s.flag.help, s.type_doc()))
                    .value_parser(move |text: &str| {
                        s.parse_flag(text)
                            .map_err(|e| format!("{}\n  help: {}", e.message, e.help))
                    }),
            )
        })
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// Reads the pipeline file, applies the command-line options, and checks the result:
/// every problem found is reported, each at its line and column.
pub fn load(path: &Path, opts: Option<&RunOpts>) -> Result<Checked> {
    let mut draft = Draft::load(path)?;
    if let Some(o) = opts {
        o.settings.apply(draft.spec_mut())?;
        point_at_data(draft.spec_mut(), o.data.as_deref())?;
        // After the data: it may have turned the file reader into a shard reader.
        if let Some((rank, world_size)) = o.ranks.resolve()? {
            draft.spec_mut().set_rank(rank, world_size);
        }
    }
    libjpeg_switches(draft.spec_mut());
    draft.finish().map_err(|errors| {
        Problems {
            file: path.to_path_buf(),
            errors,
        }
        .into()
    })
}

/// Points the reader at `--data`, or at the built-in sample set when neither the file nor
/// the command line names any data.
fn point_at_data(spec: &mut PipelineSpec, data: Option<&Path>) -> Result<()> {
    if let Some(d) = data {
        anyhow::ensure!(
            data_exists(d),
            "--data {}: no such file or folder",
            d.display()
        );
        spec.set_data(d);
    } else if !spec.has_data() {
        let dir = crate::builtin_data::ensure(&crate::builtin_data::default_dir())
            .context("generating the built-in sample set")?;
        eprintln!(
            "no data given: using the built-in sample set in {}",
            dir.display()
        );
        spec.set_data(&dir);
    }
    Ok(())
}

/// Starts the checked pipeline (at `resume`, when given); when `verbose`, says on stderr
/// what [`describe`] says.
pub fn start(checked: Checked, resume: Option<Position>, verbose: bool) -> Result<Pipeline> {
    let p = match resume {
        Some(at) => Pipeline::resume_graph(checked.graph, at)?,
        None => Pipeline::from_graph(checked.graph)?,
    };
    if verbose {
        describe(&p);
    }
    Ok(p)
}

/// Says on stderr which device runs `p` and why, its worker threads, samples per epoch and
/// the JPEG decoder's SIMD (the library warns once when there is none).
pub fn describe(p: &Pipeline) {
    eprintln!(
        "device: {} ({}); {} worker threads; {} samples per epoch; JPEG SIMD: {}",
        p.device().device,
        p.device().reason,
        p.worker_threads(),
        p.samples_per_epoch(),
        crate::decode::jpeg_simd()
    );
}

/// Escape hatches and A/B switches: with `STOKEHOLD_LIBJPEG_SEQUENTIAL` /
/// `STOKEHOLD_LIBJPEG_PROGRESSIVE` set (not "0"), every `decode` operator of the spec
/// entropy-decodes those JPEGs with libjpeg-turbo alone (its `sequential_decoder` /
/// `progressive_decoder` argument).
fn libjpeg_switches(spec: &mut PipelineSpec) {
    for (var, arg) in [
        ("STOKEHOLD_LIBJPEG_SEQUENTIAL", "sequential_decoder"),
        ("STOKEHOLD_LIBJPEG_PROGRESSIVE", "progressive_decoder"),
    ] {
        if std::env::var_os(var).is_none_or(|v| v == "0") {
            continue;
        }
        tracing::info!("{var}: decode operators get {arg} = \"libjpeg\"");
        for op in spec.ops.iter_mut().filter(|op| op.kind == "decode") {
            op.args.insert(arg.to_string(), "libjpeg".into());
        }
    }
}
