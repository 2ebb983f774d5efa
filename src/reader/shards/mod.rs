//! WebDataset tar shards: the `shard_reader` schema, and reading shards from local files or
//! http(s) ([`tar`], [`http`], [`open`]), their samples ([`samples`]), which shards a data set
//! is ([`list`], [`index`], [`set`]), each epoch's plan for a rank ([`plan`]), the stream the
//! reader threads take samples from ([`stream`]), and writing shards ([`pack`]).
//!
//! See `docs/shards.md` for the formats accepted, the shuffle, resume and rank semantics.

use std::path::PathBuf;
use std::time::Duration;

use crate::ops::{ArgError, ArgSpec, ArgType, Args, Backends, OpSchema, Operator, PortSpec};
use crate::value::{Value, ValueType};

pub mod http;
pub mod index;
pub mod list;
pub mod open;
pub mod pack;
pub mod plan;
pub mod samples;
pub mod set;
pub mod stream;
pub mod tar;

use http::Retry;
use plan::RankSplit;
use samples::LabelFrom;
use set::ShardConfig;

/// The shard reader's operator kind.
pub const KIND: &str = "shard_reader";

/// Schema of the shard reader.
pub static SCHEMA: OpSchema = OpSchema {
    kind: KIND,
    doc: "Reads WebDataset tar shards (local files or http(s) URLs): members sharing a key \
          (`n0123.jpg`, `n0123.cls`) are one sample, its image the member with one of the \
          `extensions`, its label from the `.cls` member or a field of the `.json` member. \
          Each epoch the shard order is reshuffled from (seed, epoch) and the samples pass \
          through a shuffle buffer; with several ranks each reads an equal, contiguous part \
          of the epoch's samples. Damaged members cost their samples only. The `labels` \
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
            ty: ArgType::Choice(crate::reader::schedule::LastBatch::NAMES),
            default: Some("\"partial\""),
            doc: "the last, incomplete batch of an epoch: partial = smaller batch, drop = left out, pad = filled by repeating its last sample",
        },
    ],
    backends: Backends::CpuOnly,
    build,
};

/// Reads the shard settings from validated arguments.
pub fn config_from_args(args: &Args) -> Result<ShardConfig, ArgError> {
    let rank = args.int("rank") as usize;
    let world_size = args.int("world_size") as usize;
    if rank >= world_size {
        return Err(ArgError::arg(
            "rank",
            format!("rank = {rank} but world_size = {world_size}"),
        )
        .with_help("rank counts from 0 and must be less than world_size"));
    }
    let label = match args.str("label").trim().trim_start_matches('.') {
        "" => LabelFrom::None,
        "json" => {
            let field = args.str("label_field").trim();
            if field.is_empty() {
                return Err(ArgError::arg("label_field", "no field named")
                    .with_help("write e.g. label_field = \"label\""));
            }
            LabelFrom::Json(field.to_string())
        }
        ext => LabelFrom::Text(ext.to_ascii_lowercase()),
    };
    Ok(ShardConfig {
        shards: args.str("shards").to_string(),
        base: PathBuf::new(),
        index: args.str("index").trim().to_string(),
        label,
        shuffle_buffer: args.int("shuffle_buffer") as usize,
        read_ahead: args.int("read_ahead") as usize,
        retry: Retry {
            attempts: args.int("retries") as u32,
            backoff: Duration::from_millis(200),
        },
        split: RankSplit {
            shuffle: args.bool("shuffle"),
            rank,
            world_size,
        },
    })
}

/// The reader node as an [`Operator`], for type inference only; it never runs per sample.
#[derive(Debug)]
struct ShardReaderNode;

fn build(args: &Args) -> Result<Box<dyn Operator>, ArgError> {
    config_from_args(args)?;
    Ok(Box::new(ShardReaderNode))
}

impl Operator for ShardReaderNode {
    fn infer(&self, _: &[ValueType]) -> Result<Vec<ValueType>, String> {
        Ok(vec![ValueType::Encoded, ValueType::Label])
    }

    fn run_cpu(
        &self,
        _: Vec<Value>,
        ctx: &mut crate::ops::SampleContext<'_>,
    ) -> Result<Vec<Value>, crate::SampleErrorKind> {
        Err(ctx.error("the reader runs on the reader threads"))
    }
}

#[cfg(test)]
mod tests;
