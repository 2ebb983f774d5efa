//! Pointing a pipeline definition at its data: the file reader's folder or list file, or
//! tar shards (the reader then becomes a shard reader with the same settings).

use std::path::Path;

use crate::reader::shards::list::{is_url, looks_like_shards};
use crate::reader::shards::KIND as SHARD_READER;
use crate::reader::{is_reader_kind, RANK_ALIASES};
use crate::schema::{ArgValue, READER_KIND};

use super::spec::PipelineSpec;

impl PipelineSpec {
    /// Points the pipeline's reader at `data`: a folder of images (the file reader's
    /// `root`), a list file of `path label` lines (its `list`), or tar shards — a folder of
    /// `.tar` files, a brace pattern, one shard's path or URL, or a list of shard paths or
    /// URLs — for which the reader becomes a `shard_reader` keeping its shuffle, last-batch,
    /// extension and rank settings (both readers take the same names for those). A relative path is taken from the current folder.
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
                    for file_only in ["root", "list", "source"] {
                        op.args.remove(file_only);
                    }
                }
                op.args.insert("shards".into(), abs_text.clone().into());
            } else {
                if op.kind == SHARD_READER {
                    op.kind = READER_KIND.to_string();
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

    /// Sets the rank and the number of ranks on the pipeline's reader (its `rank` and
    /// `world_size`, in place of their aliases `shard_id` and `num_shards` where those were
    /// given).
    ///
    /// ```
    /// use stokehold::pipeline::{OpSpec, PipelineSpec};
    /// use stokehold::schema::ArgValue;
    /// let mut spec = PipelineSpec::builder()
    ///     .op(OpSpec::new("file_reader").output("jpegs").arg("shard_id", 0i64));
    /// spec.set_rank(1, 4);
    /// assert_eq!(spec.ops[0].args["rank"], ArgValue::Int(1));
    /// assert_eq!(spec.ops[0].args["world_size"], ArgValue::Int(4));
    /// assert!(!spec.ops[0].args.contains_key("shard_id"));
    /// ```
    pub fn set_rank(&mut self, rank: usize, world_size: usize) {
        for op in self.ops.iter_mut().filter(|o| is_reader_kind(&o.kind)) {
            for a in RANK_ALIASES {
                op.args.remove(a.alias);
            }
            op.args.insert("rank".into(), ArgValue::Int(rank as i64));
            op.args
                .insert("world_size".into(), ArgValue::Int(world_size as i64));
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
