//! Pointing a pipeline definition at its data: the file reader's folder or list file, or
//! tar shards (the reader then becomes a shard reader with the same settings).

use std::path::Path;

use crate::reader::is_reader_kind;
use crate::reader::shards::list::{is_url, looks_like_shards};
use crate::reader::shards::KIND as SHARD_READER;
use crate::schema::{ArgValue, READER_KIND};

use super::spec::PipelineSpec;

impl PipelineSpec {
    /// Points the pipeline's reader at `data`: a folder of images (the file reader's
    /// `root`), a list file of `path label` lines (its `list`), or tar shards — a folder of
    /// `.tar` files, a brace pattern, one shard's path or URL, or a list of shard paths or
    /// URLs — for which the reader becomes a `shard_reader` keeping its shuffle, last-batch,
    /// extension and rank settings. A relative path is taken from the current folder.
    ///
    /// ```
    /// use stokehold::pipeline::{OpSpec, PipelineSpec};
    /// let mut spec = PipelineSpec::builder().op(OpSpec::new("file_reader").output("jpegs"));
    /// assert!(!spec.has_data());
    /// spec.set_data("photos/".as_ref());
    /// assert!(spec.has_data());
    /// spec.set_data("http://data.example/train-{000000..000146}.tar".as_ref());
    /// assert_eq!(spec.ops[0].kind, "shard_reader");
    /// ```
    pub fn set_data(&mut self, data: &Path) {
        let text = data.to_string_lossy();
        let shards = looks_like_shards(&text);
        let abs = if is_url(&text) || data.is_absolute() {
            data.to_path_buf()
        } else {
            std::env::current_dir().unwrap_or_default().join(data)
        };
        let abs_text = abs.to_string_lossy().into_owned();
        for op in self.ops.iter_mut().filter(|o| is_reader_kind(&o.kind)) {
            if shards {
                if op.kind == READER_KIND {
                    op.kind = SHARD_READER.to_string();
                    // The file reader's words for a rank's part of the data.
                    for (from, to) in [("shard_id", "rank"), ("num_shards", "world_size")] {
                        if let Some(v) = op.args.remove(from) {
                            op.args.insert(to.into(), v);
                        }
                    }
                    for file_only in ["root", "list", "source"] {
                        op.args.remove(file_only);
                    }
                }
                op.args.insert("shards".into(), abs_text.clone().into());
            } else {
                if op.kind == SHARD_READER {
                    op.kind = READER_KIND.to_string();
                    for (from, to) in [("rank", "shard_id"), ("world_size", "num_shards")] {
                        if let Some(v) = op.args.remove(from) {
                            op.args.insert(to.into(), v);
                        }
                    }
                    for shard_only in [
                        "shards",
                        "index",
                        "label",
                        "label_field",
                        "shuffle_buffer",
                        "read_ahead",
                        "retries",
                    ] {
                        op.args.remove(shard_only);
                    }
                }
                if abs.is_file() {
                    op.args.insert("list".into(), abs_text.clone().into());
                    op.args.insert("root".into(), "".into());
                } else {
                    op.args.insert("root".into(), abs_text.clone().into());
                    op.args.remove("list");
                }
            }
        }
    }

    /// Sets the rank and the number of ranks on the pipeline's reader (`shard_id` and
    /// `num_shards` for a file reader, `rank` and `world_size` for a shard reader). Call it
    /// after [`PipelineSpec::set_data`], which may change the reader's kind (it carries the
    /// rank over).
    ///
    /// ```
    /// use stokehold::pipeline::{OpSpec, PipelineSpec};
    /// use stokehold::schema::ArgValue;
    /// let mut spec = PipelineSpec::builder().op(OpSpec::new("shard_reader").output("jpegs"));
    /// spec.set_rank(1, 4);
    /// assert_eq!(spec.ops[0].args["rank"], ArgValue::Int(1));
    /// assert_eq!(spec.ops[0].args["world_size"], ArgValue::Int(4));
    /// ```
    pub fn set_rank(&mut self, rank: usize, world_size: usize) {
        for op in self.ops.iter_mut() {
            let (r, w) = match op.kind.as_str() {
                READER_KIND => ("shard_id", "num_shards"),
                SHARD_READER => ("rank", "world_size"),
                _ => continue,
            };
            op.args.insert(r.into(), ArgValue::Int(rank as i64));
            op.args.insert(w.into(), ArgValue::Int(world_size as i64));
        }
    }

    /// True unless every reader of the pipeline has neither `root` nor `list` (a file
    /// reader) nor `shards` (a shard reader).
    pub fn has_data(&self) -> bool {
        !self
            .ops
            .iter()
            .filter(|o| is_reader_kind(&o.kind))
            .all(|o| {
                let empty = |k: &str| match o.args.get(k) {
                    None => true,
                    Some(ArgValue::Str(s)) => s.is_empty(),
                    Some(_) => false,
                };
                empty("root") && empty("list") && empty("shards")
            })
    }
}
