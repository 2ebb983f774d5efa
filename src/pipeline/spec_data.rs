//! Pointing a pipeline definition at its data: the file reader's folder or list file.

use std::path::Path;

use crate::schema::{ArgValue, READER_KIND};

use super::spec::PipelineSpec;

impl PipelineSpec {
    /// Points the pipeline's file reader at `data`: a folder (its `root`) or a list file
    /// (its `list`). A relative path is taken from the current folder.
    ///
    /// ```
    /// use stokehold::pipeline::{OpSpec, PipelineSpec};
    /// let mut spec = PipelineSpec::builder().op(OpSpec::new("file_reader").output("jpegs"));
    /// assert!(!spec.has_data());
    /// spec.set_data("photos/".as_ref());
    /// assert!(spec.has_data());
    /// ```
    pub fn set_data(&mut self, data: &Path) {
        let abs = if data.is_absolute() {
            data.to_path_buf()
        } else {
            std::env::current_dir().unwrap_or_default().join(data)
        };
        for op in self.ops.iter_mut().filter(|o| o.kind == READER_KIND) {
            if abs.is_file() {
                op.args
                    .insert("list".into(), abs.to_string_lossy().into_owned().into());
                op.args.insert("root".into(), "".into());
            } else {
                op.args
                    .insert("root".into(), abs.to_string_lossy().into_owned().into());
                op.args.remove("list");
            }
        }
    }

    /// True unless every file reader of the pipeline has neither `root` nor `list`.
    pub fn has_data(&self) -> bool {
        !self.ops.iter().filter(|o| o.kind == READER_KIND).all(|o| {
            let empty = |k: &str| match o.args.get(k) {
                None => true,
                Some(ArgValue::Str(s)) => s.is_empty(),
                Some(_) => false,
            };
            empty("root") && empty("list")
        })
    }
}
