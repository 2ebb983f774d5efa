//! The reader owns the dataset: its settings (the `file_reader` schema and [`ReaderConfig`]),
//! the listing ([`dataset`]), the sample schedule ([`schedule`]: epoch order, each rank's
//! part, where a run stands, the last batch), reading the files ([`file_io`]), WebDataset tar shards
//! ([`shards`], the `shard_reader`), and what the read stage takes its samples from
//! ([`source`]).
//!
//! The reader is a node of the pipeline graph like any operator (kind `file_reader` or
//! `shard_reader`), but runs on dedicated I/O threads ahead of the decoding workers.

use std::path::{Path, PathBuf};

use crate::schema::{ArgAlias, ArgError, ArgSpec, ArgType, Args, Backends, OpSchema, PortSpec};
use crate::value::ValueType;

// The files below use this one's configuration; this one re-exports nothing of theirs, so
// that no two files of the reader import each other.
pub mod dataset;
pub mod file_io;
pub mod schedule;
pub mod shards;
pub mod source;

use schedule::{EpochOrder, LastBatch};

/// Schema of the file reader.
pub static SCHEMA: OpSchema = OpSchema {
    kind: crate::schema::READER_KIND,
    doc: "Reads image files and their labels. Sources: a folder whose sub-folders are classes \
          (labels are the sub-folders' indices in sorted order, like torchvision's ImageFolder; \
          files are found recursively), a flat folder (label -1), or a list file with one \
          `path label` per line (the label is the last whitespace-separated field; paths may \
          contain spaces; relative paths resolve against `root`, or the list file's folder). \
          Every epoch is reshuffled from (seed, epoch); with several ranks each reads a \
          disjoint, contiguous part of the shuffled order (sizes differ by at most one), and \
          every rank has as many batches: a rank whose part would give one batch fewer reads \
          a repeat of its first sample, counted as padding in its batch. Bad samples never \
          cost a rank a batch either: one that skips cut short ends its epoch with batches of \
          padding (repeats of its last good sample). The `labels` output is optional.",
    inputs: &[],
    outputs: &[
        PortSpec {
            name: "encoded",
            doc: "file bytes",
        },
        PortSpec {
            name: "labels",
            doc: "class labels (optional)",
        },
    ],
    args: &[
        ArgSpec {
            name: "root",
            ty: ArgType::Str,
            default: Some("\"\""),
            doc: "dataset folder (relative to the pipeline file); `--data` overrides it",
        },
        ArgSpec {
            name: "list",
            ty: ArgType::Str,
            default: Some("\"\""),
            doc: "list file (relative to the pipeline file) of `path label` lines: the label a \
                  class index from 0 (left out: -1), paths relative to `root` (else the list's \
                  folder) and may hold spaces; blank lines and `#` comments are skipped, a line whose label \
                  can't be one is left out with a warning",
        },
        ArgSpec {
            name: "source",
            ty: ArgType::Choice(&["auto", "class_folders", "flat", "list"]),
            default: Some("\"auto\""),
            doc: "how to read `root`: auto = list if `list` is set, else class_folders if `root` has sub-folders, else flat",
        },
        ArgSpec {
            name: "extensions",
            ty: ArgType::Str,
            default: Some("\"jpg,jpeg,jpe,jfif,png\""),
            doc: "comma-separated file extensions to take from folders (case-insensitive)",
        },
        ArgSpec {
            name: "shuffle",
            ty: ArgType::Bool,
            default: Some("true"),
            doc: "reshuffle every epoch from (seed, epoch)",
        },
        ArgSpec {
            name: "rank",
            ty: ArgType::Int { min: 0, max: i64::MAX },
            default: Some("0"),
            doc: "which rank this process is (0-based): it reads that rank's part; `--rank` or RANK override it",
        },
        ArgSpec {
            name: "world_size",
            ty: ArgType::Int { min: 1, max: i64::MAX },
            default: Some("1"),
            doc: "number of ranks (data-parallel processes); `--world-size` or WORLD_SIZE override it",
        },
        ArgSpec {
            name: "last_batch",
            ty: ArgType::Choice(LastBatch::NAMES),
            default: Some("\"partial\""),
            doc: "the last, incomplete batch of an epoch: partial = smaller batch, drop = left out, pad = filled by repeating its last sample",
        },
    ],
    aliases: RANK_ALIASES,
    backends: Backends::CpuOnly,
};

/// DALI's names for a reader's rank and number of ranks, accepted by both readers.
pub const RANK_ALIASES: &[ArgAlias] = &[
    ArgAlias {
        alias: "shard_id",
        name: "rank",
    },
    ArgAlias {
        alias: "num_shards",
        name: "world_size",
    },
];

/// Where the reader finds its samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// Decide from the arguments and the folder.
    Auto,
    /// Sub-folders are classes.
    ClassFolders,
    /// All files in one folder, no labels.
    Flat,
    /// A list file.
    List,
}

/// The reader's validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ReaderConfig {
    /// Dataset folder (may be empty until `--data` fills it).
    pub root: PathBuf,
    /// List file, if any.
    pub list: Option<PathBuf>,
    /// Source kind.
    pub source: SourceKind,
    /// Lower-case extensions without the dot.
    pub extensions: Vec<String>,
    /// Reshuffle each epoch.
    pub shuffle: bool,
    /// This process's rank (from 0): which part of each epoch it reads.
    pub rank: usize,
    /// Number of ranks.
    pub world_size: usize,
    /// Last-batch policy.
    pub last_batch: LastBatch,
    /// The shard reader's settings (`None` for the file reader).
    pub shards: Option<shards::set::ShardConfig>,
}

/// True for the kinds that are a pipeline's reader: the file reader and the shard reader.
///
/// ```
/// use stokehold::reader::is_reader_kind;
/// assert!(is_reader_kind("file_reader") && is_reader_kind("shard_reader"));
/// assert!(!is_reader_kind("decode"));
/// ```
pub fn is_reader_kind(kind: &str) -> bool {
    kind == crate::schema::READER_KIND || kind == shards::set::KIND
}

impl ReaderConfig {
    /// Reads the configuration from validated arguments.
    pub fn from_args(args: &Args) -> Result<ReaderConfig, ArgError> {
        let source = match args.str("source") {
            "class_folders" => SourceKind::ClassFolders,
            "flat" => SourceKind::Flat,
            "list" => SourceKind::List,
            _ => SourceKind::Auto,
        };
        let extensions = extensions(args)?;
        let (rank, world_size) = rank_and_world_size(args)?;
        let list = args.opt_str("list").map(PathBuf::from);
        if source == SourceKind::List && list.is_none() {
            return Err(ArgError::arg("list", "source = \"list\" needs a list file")
                .with_help("add list = \"train.txt\""));
        }
        Ok(ReaderConfig {
            root: PathBuf::from(args.str("root")),
            list,
            source,
            extensions,
            shuffle: args.bool("shuffle"),
            rank,
            world_size,
            last_batch: LastBatch::from_name(args.str("last_batch")).unwrap_or_default(),
            shards: None,
        })
    }

    /// Reads the configuration of a reader node of `kind` (`file_reader` or `shard_reader`).
    pub fn from_node(kind: &str, args: &Args) -> Result<ReaderConfig, ArgError> {
        if kind != shards::set::KIND {
            return Self::from_args(args);
        }
        let config = shard_config_from_args(args)?;
        let extensions = extensions(args)?;
        Ok(ReaderConfig {
            root: PathBuf::new(),
            list: None,
            source: SourceKind::Auto,
            extensions,
            shuffle: config.split.shuffle,
            rank: config.split.rank,
            world_size: config.split.world_size,
            last_batch: LastBatch::from_name(args.str("last_batch")).unwrap_or_default(),
            shards: Some(config),
        })
    }

    /// The kind of reader node this configuration is of.
    pub fn kind(&self) -> &'static str {
        match self.shards {
            Some(_) => shards::set::KIND,
            None => crate::schema::READER_KIND,
        }
    }

    /// How this reader orders each epoch, in batches of `batch` samples.
    pub fn epoch_order(&self, batch: usize) -> EpochOrder {
        EpochOrder {
            shuffle: self.shuffle,
            rank: self.rank,
            world_size: self.world_size,
            batch,
            last_batch: self.last_batch,
        }
    }

    /// Makes a relative `root` and `list` relative to `dir` (the pipeline file's folder).
    pub fn resolve_relative_to(&mut self, dir: &Path) {
        if !self.root.as_os_str().is_empty() && self.root.is_relative() {
            self.root = dir.join(&self.root);
        }
        if let Some(l) = self.list.as_mut().filter(|l| l.is_relative()) {
            *l = dir.join(&*l);
        }
        if let Some(s) = self.shards.as_mut() {
            s.base = dir.join(&s.base);
        }
    }
}

/// The types of the reader's outputs: encoded file bytes, then labels.
pub const OUTPUT_TYPES: [ValueType; 2] = [ValueType::Encoded, ValueType::Label];

/// Schema of the shard reader.
pub static SHARD_SCHEMA: OpSchema = OpSchema {
    kind: shards::set::KIND,
    doc: "Reads WebDataset tar shards (local files or http(s) URLs): members sharing a key \
          (`n0123.jpg`, `n0123.cls`) are one sample, its image the member with one of the \
          `extensions`, its label from the `.cls` member or a field of the `.json` member. \
          Each epoch the shard order is reshuffled from (seed, epoch) and the samples pass \
          through a shuffle buffer; with several ranks each reads an equal, contiguous part \
          of the epoch's samples. Damaged members cost their samples only (never a rank's \
          batch: see `file_reader`). The `labels` \
          output is optional.",
    inputs: &[],
    outputs: &[
        PortSpec {
            name: "encoded",
            doc: "image member bytes",
        },
        PortSpec {
            name: "labels",
            doc: "class labels (optional)",
        },
    ],
    args: &[
        ArgSpec {
            name: "shards",
            ty: ArgType::Str,
            default: Some("\"\""),
            doc: "a folder of .tar files, a brace pattern (`train-{000000..000146}.tar`), one shard's path or URL, or a list file of paths or URLs; `--data` overrides it",
        },
        ArgSpec {
            name: "index",
            ty: ArgType::Str,
            default: Some("\"\""),
            doc: "sample counts per shard: \"\" = index.json beside the first shard if there, else counted; \"count\" = counted by reading the headers; else an index file's path or URL",
        },
        ArgSpec {
            name: "extensions",
            ty: ArgType::Str,
            default: Some("\"jpg,jpeg,jpe,jfif,png\""),
            doc: "comma-separated extensions of the image member, preferred in this order (case-insensitive)",
        },
        ArgSpec {
            name: "label",
            ty: ArgType::Str,
            default: Some("\"cls\""),
            doc: "extension of the member holding the label: its text is the integer (`cls`), or `json` for a field of the JSON member (`label_field`); \"\" = no labels",
        },
        ArgSpec {
            name: "label_field",
            ty: ArgType::Str,
            default: Some("\"label\""),
            doc: "with label = \"json\": the field holding the label (`a.b` for nested objects)",
        },
        ArgSpec {
            name: "shuffle",
            ty: ArgType::Bool,
            default: Some("true"),
            doc: "reshuffle the shard order every epoch from (seed, epoch) and draw samples through the shuffle buffer",
        },
        ArgSpec {
            name: "shuffle_buffer",
            ty: ArgType::Int { min: 1, max: 1 << 24 },
            default: Some("1000"),
            doc: "samples held in memory to shuffle within (their encoded bytes)",
        },
        ArgSpec {
            name: "rank",
            ty: ArgType::Int { min: 0, max: i64::MAX },
            default: Some("0"),
            doc: "which rank this process is (0-based); `--rank` or RANK override it",
        },
        ArgSpec {
            name: "world_size",
            ty: ArgType::Int { min: 1, max: i64::MAX },
            default: Some("1"),
            doc: "number of ranks; `--world-size` or WORLD_SIZE override it",
        },
        ArgSpec {
            name: "read_ahead",
            ty: ArgType::Int { min: 1, max: 64 },
            default: Some("2"),
            doc: "shards read at once (on threads of their own), ahead of the one being taken",
        },
        ArgSpec {
            name: "retries",
            ty: ArgType::Int { min: 0, max: 100 },
            default: Some("5"),
            doc: "retries of a dropped http connection (waits 0.2 s, doubling)",
        },
        ArgSpec {
            name: "last_batch",
            ty: ArgType::Choice(LastBatch::NAMES),
            default: Some("\"partial\""),
            doc: "the last, incomplete batch of an epoch: partial = smaller batch, drop = left out, pad = filled by repeating its last sample",
        },
    ],
    aliases: RANK_ALIASES,
    backends: Backends::CpuOnly,
};

/// The `rank` and `world_size` arguments, the rank less than the number of ranks.
fn rank_and_world_size(args: &Args) -> Result<(usize, usize), ArgError> {
    let rank = args.int("rank") as usize;
    let world_size = args.int("world_size") as usize;
    if rank >= world_size {
        return Err(ArgError::arg(
            "rank",
            format!("rank = {rank} but world_size = {world_size}"),
        )
        .with_help("rank counts from 0 and must be less than world_size"));
    }
    Ok((rank, world_size))
}

/// The `extensions` argument: lower-case, without dots, at least one.
fn extensions(args: &Args) -> Result<Vec<String>, ArgError> {
    let extensions: Vec<String> = args
        .str("extensions")
        .split(',')
        .map(|e| e.trim().trim_start_matches('.').to_ascii_lowercase())
        .filter(|e| !e.is_empty())
        .collect();
    if extensions.is_empty() {
        return Err(ArgError::arg("extensions", "no extensions given")
            .with_help("write e.g. extensions = \"jpg,jpeg,png\""));
    }
    Ok(extensions)
}

/// Reads the shard settings from validated arguments.
fn shard_config_from_args(args: &Args) -> Result<shards::set::ShardConfig, ArgError> {
    let (rank, world_size) = rank_and_world_size(args)?;
    let label = match args.str("label").trim().trim_start_matches('.') {
        "" => shards::samples::LabelFrom::None,
        "json" => {
            let field = args.str("label_field").trim();
            if field.is_empty() {
                return Err(ArgError::arg("label_field", "no field named")
                    .with_help("write e.g. label_field = \"label\""));
            }
            shards::samples::LabelFrom::Json(field.to_string())
        }
        ext => shards::samples::LabelFrom::Text(ext.to_ascii_lowercase()),
    };
    Ok(shards::set::ShardConfig {
        shards: args.str("shards").to_string(),
        base: PathBuf::new(),
        index: args.str("index").trim().to_string(),
        label,
        shuffle_buffer: args.int("shuffle_buffer") as usize,
        read_ahead: args.int("read_ahead") as usize,
        retry: shards::http::Retry {
            attempts: args.int("retries") as u32,
            backoff: std::time::Duration::from_millis(200),
            ..shards::http::Retry::default()
        },
        split: shards::schedule::RankSplit {
            shuffle: args.bool("shuffle"),
            rank,
            world_size,
        },
    })
}

#[cfg(test)]
mod tests;
