//! A shard set's index: how many samples each shard holds (read from an `index.json` beside
//! the shards, as `stokehold pack` writes it, or counted by reading the shards' headers once).

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::Error;

use super::http::Retry;
use super::list::Location;
use super::open::open_shard;
use super::samples::{LabelFrom, SampleRules, ShardItems};

/// The index file's name, beside the shards.
pub const INDEX_NAME: &str = "index.json";

/// The index file: a list of shards with their sample counts. Its fields follow the shard
/// index of WebDataset's `wids` (`shardlist` of `url` and `nsamples`), so either can read the
/// other's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardIndex {
    /// Format tag.
    #[serde(rename = "__kind__", default = "kind")]
    pub kind: String,
    /// The data set's name.
    #[serde(default)]
    pub name: String,
    /// The shards, each with its sample count.
    pub shardlist: Vec<IndexEntry>,
    /// Class names by label, when the shards were packed from class folders.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<String>,
}

fn kind() -> String {
    "wids-shard-index-v1".into()
}

/// One shard of an index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEntry {
    /// The shard's file name (or URL), relative to the index's folder.
    pub url: String,
    /// Samples in the shard.
    pub nsamples: usize,
    /// Its size in bytes.
    #[serde(default)]
    pub filesize: u64,
}

impl ShardIndex {
    /// An index of `shards` (file name, samples, bytes).
    pub fn new(name: &str, shards: Vec<IndexEntry>, classes: Vec<String>) -> ShardIndex {
        ShardIndex {
            kind: kind(),
            name: name.to_string(),
            shardlist: shards,
            classes,
        }
    }

    /// Writes the index as JSON to `path`.
    pub fn write(&self, path: &Path) -> Result<(), Error> {
        let text = serde_json::to_string_pretty(self).expect("an index serializes");
        std::fs::write(path, text + "\n").map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Reads an index from `at`; `Ok(None)` when there is none there.
    pub fn read(at: &Location) -> Result<Option<ShardIndex>, Error> {
        let bytes = match at {
            Location::File(p) => match std::fs::read(p) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(source) => {
                    return Err(Error::Io {
                        path: p.clone(),
                        source,
                    })
                }
            },
            Location::Url(u) => match super::http::fetch_small(u, 64 << 20) {
                Ok(Some(b)) => b,
                Ok(None) => return Ok(None),
                Err(e) => return Err(Error::Dataset(format!("{u}: {e}"))),
            },
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Error::Dataset(format!("{}: not a shard index: {e}", at.display())))
    }

    /// The index's entry for a shard, by its file name.
    pub fn entry_of(&self, file_name: &str) -> Option<&IndexEntry> {
        self.shardlist
            .iter()
            .find(|e| e.url.rsplit('/').next() == Some(file_name))
    }
}

/// A shard's items as counted by reading its headers, and what was wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counted {
    /// Items found.
    pub items: usize,
    /// Why the shard could not be counted whole, if it could not: it could not be opened, is
    /// no tar file, or ends early (the member and byte where it is cut).
    pub problem: Option<CountProblem>,
}

/// Why a shard's count is short (see [`Counted`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CountProblem {
    /// It could not be opened (missing, HTTP 404, ...), or is no tar file: it counts 0.
    Unreadable(String),
    /// It ends before its end-of-archive: the items before the cut are counted.
    Cut(String),
}

/// Counts a shard's items by reading its headers (data is skipped; a local file is seeked
/// through). A shard that can't be opened or read as a tar counts 0, with the reason.
pub fn count_items(shard: &Location, retry: Retry) -> Counted {
    let rules = Arc::new(SampleRules {
        extensions: Vec::new(),
        label: LabelFrom::None,
        max_bytes: 0,
    });
    let read = match open_shard(shard, retry) {
        Ok(read) => read,
        Err(e) => {
            return Counted {
                items: 0,
                problem: Some(CountProblem::Unreadable(e)),
            }
        }
    };
    let mut items = ShardItems::new(read, rules);
    let mut n = 0;
    while items.next_item(false).is_some() {
        n += 1;
    }
    let problem = if items.not_tar() {
        n = 0;
        items.cut().map(|c| CountProblem::Unreadable(not_member(c)))
    } else {
        items.cut().map(|c| CountProblem::Cut(c.to_string()))
    };
    Counted { items: n, problem }
}

/// A cut's text without the `@0: ` that names no member.
fn not_member(cut: &str) -> String {
    cut.strip_prefix("@0: ").unwrap_or(cut).to_string()
}
