//! Readers: list a dataset (class folders, a flat folder, or a list file), and plan each
//! epoch's sample order (shuffling from the seed, sharding).
//!
//! The reader is a node of the pipeline graph like any operator (kind `file_reader`), but
//! runs on dedicated I/O threads ahead of the decoding workers.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::pipeline::spec::LastBatch;
use crate::rng::{domain, key, SampleRng};
use crate::schema::{ArgError, ArgSpec, ArgType, Args, Backends, OpSchema, PortSpec};
use crate::value::ValueType;

/// Schema of the file reader.
pub static SCHEMA: OpSchema = OpSchema {
    kind: crate::schema::READER_KIND,
    doc: "Reads image files and their labels. Sources: a folder whose sub-folders are classes \
          (labels are the sub-folders' indices in sorted order, like torchvision's ImageFolder; \
          files are found recursively), a flat folder (label -1), or a list file with one \
          `path label` per line (the label is the last whitespace-separated field; paths may \
          contain spaces; relative paths resolve against `root`, or the list file's folder). \
          Every epoch is reshuffled from (seed, epoch); with several shards each gets a \
          disjoint, equally long part (the shuffled order padded by wrapping around). The \
          `labels` output is optional.",
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
            doc: "list file of `path label` lines (relative to the pipeline file)",
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
            name: "shard_id",
            ty: ArgType::Int { min: 0, max: i64::MAX },
            default: Some("0"),
            doc: "which shard this process reads (0-based)",
        },
        ArgSpec {
            name: "num_shards",
            ty: ArgType::Int { min: 1, max: i64::MAX },
            default: Some("1"),
            doc: "number of shards (e.g. data-parallel ranks)",
        },
        ArgSpec {
            name: "last_batch",
            ty: ArgType::Choice(LastBatch::NAMES),
            default: Some("\"partial\""),
            doc: "the last, incomplete batch of an epoch: partial = smaller batch, drop = left out, pad = filled by repeating its last sample",
        },
    ],
    backends: Backends::CpuOnly,
};

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
    /// This shard.
    pub shard_id: usize,
    /// Number of shards.
    pub num_shards: usize,
    /// Last-batch policy.
    pub last_batch: LastBatch,
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
        let shard_id = args.int("shard_id") as usize;
        let num_shards = args.int("num_shards") as usize;
        if shard_id >= num_shards {
            return Err(ArgError::arg(
                "shard_id",
                format!("shard_id = {shard_id} but there are only {num_shards} shards"),
            )
            .with_help("shard_id counts from 0 and must be less than num_shards"));
        }
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
            shard_id,
            num_shards,
            last_batch: LastBatch::from_name(args.str("last_batch")).unwrap_or_default(),
        })
    }
}

/// The types of the reader's outputs: encoded file bytes, then labels.
pub const OUTPUT_TYPES: [ValueType; 2] = [ValueType::Encoded, ValueType::Label];

/// One sample of a dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The file.
    pub path: PathBuf,
    /// Its label (-1 when the source has none).
    pub label: i64,
}

/// A listed dataset.
#[derive(Debug, Clone, Default)]
pub struct Dataset {
    /// Samples in their canonical (sorted) order; a sample's index is its position here.
    pub entries: Vec<Entry>,
    /// Class names by label, for class-folder sources.
    pub classes: Vec<OsString>,
    /// Problems met while listing (unreadable sub-folders, symlink loops, bad list lines).
    pub warnings: Vec<String>,
}

impl Dataset {
    /// Lists the samples described by `config`.
    pub fn list(config: &ReaderConfig) -> Result<Dataset, Error> {
        let source = match config.source {
            SourceKind::Auto if config.list.is_some() => SourceKind::List,
            SourceKind::Auto => {
                if config.root.as_os_str().is_empty() {
                    return Err(Error::Dataset(
                        "no data given: set `root` (or `list`) on the file_reader, or pass --data DIR"
                            .into(),
                    ));
                }
                if has_subfolders(&config.root)? {
                    SourceKind::ClassFolders
                } else {
                    SourceKind::Flat
                }
            }
            s => s,
        };
        let mut ds = Dataset::default();
        match source {
            SourceKind::List => {
                let list = config.list.as_ref().expect("checked in from_args");
                let base = if config.root.as_os_str().is_empty() {
                    list.parent().map(Path::to_path_buf).unwrap_or_default()
                } else {
                    config.root.clone()
                };
                read_list(list, &base, &mut ds)?;
            }
            SourceKind::ClassFolders => {
                let mut dirs: Vec<PathBuf> = read_dir_sorted(&config.root)?
                    .into_iter()
                    .filter(|p| p.is_dir())
                    .collect();
                dirs.sort();
                for (label, dir) in dirs.iter().enumerate() {
                    let mut visited = Vec::new();
                    let before = ds.entries.len();
                    walk(dir, config, label as i64, &mut ds, &mut visited);
                    if ds.entries.len() == before {
                        ds.warnings.push(format!(
                            "class folder {} holds no image files",
                            dir.display()
                        ));
                    }
                    ds.classes
                        .push(dir.file_name().map(OsStr::to_os_string).unwrap_or_default());
                }
            }
            SourceKind::Flat | SourceKind::Auto => {
                for p in read_dir_sorted(&config.root)? {
                    // Anything but a folder: a broken symlink or a FIFO is listed and then
                    // reported when it fails to read, as in class folders.
                    if !p.is_dir() && has_extension(&p, &config.extensions) {
                        ds.entries.push(Entry { path: p, label: -1 });
                    }
                }
            }
        }
        if ds.entries.is_empty() {
            let where_ = config
                .list
                .as_ref()
                .unwrap_or(&config.root)
                .display()
                .to_string();
            return Err(Error::Dataset(format!(
                "no image files found in {where_} (extensions: {})",
                config.extensions.join(", ")
            )));
        }
        Ok(ds)
    }
}

fn io_err(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn read_dir_sorted(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io_err(dir, e))? {
        let entry = entry.map_err(|e| io_err(dir, e))?;
        out.push(entry.path());
    }
    // Byte order of the file names, whatever their encoding.
    out.sort();
    Ok(out)
}

fn has_subfolders(dir: &Path) -> Result<bool, Error> {
    Ok(read_dir_sorted(dir)?.iter().any(|p| p.is_dir()))
}

fn has_extension(path: &Path, extensions: &[String]) -> bool {
    path.extension()
        .map(|e| {
            let e = e.to_string_lossy().to_ascii_lowercase();
            extensions.contains(&e)
        })
        .unwrap_or(false)
}

/// Recursive, sorted walk of one class folder, following symlinks but not loops.
fn walk(
    dir: &Path,
    config: &ReaderConfig,
    label: i64,
    ds: &mut Dataset,
    visited: &mut Vec<PathBuf>,
) {
    let canonical = match std::fs::canonicalize(dir) {
        Ok(c) => c,
        Err(e) => {
            ds.warnings.push(format!("skipped {}: {e}", dir.display()));
            return;
        }
    };
    if visited.contains(&canonical) {
        ds.warnings
            .push(format!("skipped {}: symlink loop", dir.display()));
        return;
    }
    visited.push(canonical);
    let items = match read_dir_sorted(dir) {
        Ok(v) => v,
        Err(e) => {
            ds.warnings.push(format!("skipped {e}"));
            return;
        }
    };
    for p in items {
        if p.is_dir() {
            walk(&p, config, label, ds, visited);
        } else if has_extension(&p, &config.extensions) {
            ds.entries.push(Entry { path: p, label });
        }
    }
    visited.pop();
}

fn bytes_to_path(bytes: &[u8]) -> PathBuf {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        PathBuf::from(OsStr::from_bytes(bytes))
    }
    #[cfg(not(unix))]
    {
        PathBuf::from(String::from_utf8_lossy(bytes).into_owned())
    }
}

/// Parses a list file: `path label` per line; the label is the last whitespace-separated
/// field when it is an integer (else the whole line is a path with label -1). Blank lines
/// and lines starting with `#` are skipped. File names are taken as raw bytes.
fn read_list(list: &Path, base: &Path, ds: &mut Dataset) -> Result<(), Error> {
    let bytes = std::fs::read(list).map_err(|e| io_err(list, e))?;
    for (lineno, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        let trimmed = trim_ascii(line);
        if trimmed.is_empty() || trimmed[0] == b'#' {
            continue;
        }
        let (path_bytes, label) = match trimmed.iter().rposition(|b| b.is_ascii_whitespace()) {
            Some(pos) => {
                let last = &trimmed[pos + 1..];
                match std::str::from_utf8(last)
                    .ok()
                    .and_then(|s| s.parse::<i64>().ok())
                {
                    Some(l) => (trim_ascii(&trimmed[..pos]), l),
                    None => (trimmed, -1),
                }
            }
            None => (trimmed, -1),
        };
        if path_bytes.is_empty() {
            ds.warnings
                .push(format!("{}:{}: no path", list.display(), lineno + 1));
            continue;
        }
        let p = bytes_to_path(path_bytes);
        let path = if p.is_absolute() { p } else { base.join(p) };
        ds.entries.push(Entry { path, label });
    }
    Ok(())
}

fn trim_ascii(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &b[start..end]
}

/// The sample indices this shard reads in `epoch`, in order.
///
/// All shards shuffle the whole dataset the same way (from `seed` and `epoch`), pad the order
/// by wrapping around to a multiple of `num_shards`, and take every `num_shards`-th index from
/// `shard_id` (PyTorch DistributedSampler's scheme): shards are disjoint up to the padding and
/// equally long.
pub fn epoch_order(
    n: usize,
    seed: u64,
    epoch: u64,
    shuffle: bool,
    shard_id: usize,
    num_shards: usize,
) -> Vec<usize> {
    if n == 0 {
        return Vec::new();
    }
    let mut order: Vec<usize> = (0..n).collect();
    if shuffle {
        SampleRng::from_key(key(&[domain::SHUFFLE, seed, epoch])).shuffle(&mut order);
    }
    let per_shard = n.div_ceil(num_shards);
    (0..per_shard)
        .map(|k| order[(k * num_shards + shard_id) % n])
        .collect()
}

#[cfg(test)]
mod tests;
