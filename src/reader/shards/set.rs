//! A shard reader's settings ([`ShardConfig`]) and its data set ([`ShardSet`]): the listed
//! shards with their sample counts, from an index or counted.

use std::path::PathBuf;

use crate::error::Error;

use super::http::Retry;
use super::index::{count_items, CountProblem, ShardIndex, INDEX_NAME};
use super::list::{list_shards, Location};
use super::samples::LabelFrom;
use super::schedule::RankSplit;

/// The shard reader's operator kind.
pub const KIND: &str = "shard_reader";

/// The shard reader's validated settings (its other settings, extensions and the last-batch
/// policy, are the reader's as for the file reader).
#[derive(Debug, Clone, PartialEq)]
pub struct ShardConfig {
    /// The shards: a folder, a brace pattern, a path or URL, or a list file.
    pub shards: String,
    /// The folder relative shard paths resolve against.
    pub base: PathBuf,
    /// Where the sample counts come from: `""` = `index.json` beside the first shard if
    /// there is one, else counted; `"count"` = counted; else an index's path or URL.
    pub index: String,
    /// The label's source.
    pub label: LabelFrom,
    /// Samples in the shuffle buffer.
    pub shuffle_buffer: usize,
    /// Shards read at once, ahead of the one being taken.
    pub read_ahead: usize,
    /// Retries of a dropped connection.
    pub retry: Retry,
    /// Shard order and this rank's part.
    pub split: RankSplit,
}

/// The listed shards and how many samples each holds.
#[derive(Debug, Clone)]
pub struct ShardSet {
    /// The settings it was opened with.
    pub config: ShardConfig,
    /// The shards, in listed order.
    pub shards: Vec<Location>,
    /// Samples in each.
    pub counts: Vec<usize>,
    /// Whether each count is the index's (else the shard was counted before the run).
    pub indexed: Vec<bool>,
    /// Each shard's first sample's number (the counts before it summed).
    pub bases: Vec<usize>,
    /// Samples in all.
    pub total: usize,
    /// Class names by label, from the index.
    pub classes: Vec<String>,
    /// Problems met while listing (shards that could not be counted).
    pub warnings: Vec<String>,
}

impl ShardSet {
    /// Lists the shards of `config` and finds their sample counts.
    pub fn open(config: &ShardConfig) -> Result<ShardSet, Error> {
        let shards = list_shards(&config.shards, &config.base)?;
        let index_at = match config.index.as_str() {
            "count" => None,
            "" => Some(shards[0].sibling(INDEX_NAME)),
            other if super::list::is_url(other) => Some(Location::Url(other.to_string())),
            other => Some(Location::File(config.base.join(other))),
        };
        let index = match &index_at {
            Some(at) => {
                let found = ShardIndex::read(at);
                if !config.index.is_empty() && matches!(found, Ok(None)) {
                    return Err(Error::Dataset(format!(
                        "the index {} does not exist",
                        at.display()
                    )));
                }
                found?
            }
            None => None,
        };
        let mut set = ShardSet {
            config: config.clone(),
            shards: Vec::new(),
            counts: Vec::new(),
            indexed: Vec::new(),
            bases: Vec::new(),
            total: 0,
            classes: index
                .as_ref()
                .map(|i| i.classes.clone())
                .unwrap_or_default(),
            warnings: Vec::new(),
        };
        let mut counted = 0;
        // Shards that count nothing, and why: the error when every shard does.
        let mut unreadable = Vec::new();
        for s in &shards {
            let entry = index.as_ref().and_then(|i| i.entry_of(&s.file_name()));
            let indexed = match (entry, s) {
                // A local shard larger than indexed grew after the index was written (samples
                // added): its count is read from it instead. (One smaller than indexed is cut
                // short: the index's count says which samples it lost, each reported.)
                (Some(e), Location::File(path)) if e.filesize > 0 => {
                    match std::fs::metadata(path).map(|m| m.len()) {
                        Ok(len) if len > e.filesize => {
                            set.warnings.push(format!(
                                "{}: the shard has {len} bytes, its index entry says {}: the \
                                 index is out of date, so the shard's samples are counted by \
                                 reading it (write a new {INDEX_NAME}: `stokehold pack` \
                                 writes one)",
                                s.display(),
                                e.filesize
                            ));
                            None
                        }
                        _ => Some(e.nsamples),
                    }
                }
                (e, _) => e.map(|e| e.nsamples),
            };
            let n = match indexed {
                Some(n) => n,
                None => {
                    counted += 1;
                    let c = count_items(s, config.retry);
                    match c.problem {
                        Some(CountProblem::Unreadable(e)) => {
                            set.warnings.push(format!(
                                "{}: could not be read to count its samples ({e}); it is left out",
                                s.display()
                            ));
                            unreadable.push(format!("{}: {e}", s.display()));
                        }
                        // The cut member is an item of its own (a bad sample).
                        Some(CountProblem::Cut(at)) => set.warnings.push(format!(
                            "{}: the shard is truncated ({at}); {} before the cut {} read, \
                             but the samples after it can't be counted without an index \
                             ({INDEX_NAME} beside the shards, written while they are whole: \
                             `stokehold pack` writes one)",
                            s.display(),
                            match c.items.saturating_sub(1) {
                                1 => "its 1 sample".to_string(),
                                n => format!("its {n} samples"),
                            },
                            if c.items == 2 { "is" } else { "are" },
                        )),
                        None => {}
                    }
                    c.items
                }
            };
            set.bases.push(set.total);
            set.total += n;
            set.counts.push(n);
            set.indexed.push(indexed.is_some());
        }
        if counted > 0 {
            tracing::info!(
                "counted the samples of {counted} shards by reading their headers (an {INDEX_NAME} beside the shards, as `stokehold pack` writes, saves this)"
            );
        }
        set.shards = shards;
        if set.total == 0 {
            let why = match unreadable.as_slice() {
                [] => String::new(),
                [one] => format!(": {one}"),
                [first, rest @ ..] => format!(
                    ": none could be read, e.g. {first} (and {} more)",
                    rest.len()
                ),
            };
            return Err(Error::Dataset(format!(
                "no samples in the shards of {}{why}",
                config.shards
            )));
        }
        Ok(set)
    }
}
