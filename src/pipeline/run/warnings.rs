//! What a pipeline's start finds worth telling, though the pipeline runs: problems met while
//! listing the data, a data set without labels whose labels the pipeline uses, and builds
//! that make everything slower. Each is logged once per process and
//! kept for [`Pipeline::warnings`](super::Pipeline::warnings), which the Python package
//! turns into Python warnings.

use std::collections::BTreeSet;
use std::sync::Mutex;

use crate::pipeline::graph::Graph;
use crate::reader::shards::samples::LabelFrom;
use crate::reader::source::Source;

/// A warning from a pipeline's start.
///
/// It prints as its message:
/// ```
/// use stokehold::pipeline::run::StartWarning;
/// let w = StartWarning::Data("the data set has no labels".into());
/// assert_eq!(w.to_string(), "the data set has no labels");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartWarning {
    /// About the data set: a listing problem, or labels the data set doesn't have.
    Data(String),
    /// About speed: an unoptimised build, or JPEG decoding without SIMD.
    Speed(String),
}

impl StartWarning {
    /// The message.
    pub fn message(&self) -> &str {
        match self {
            StartWarning::Data(m) | StartWarning::Speed(m) => m,
        }
    }
}

impl std::fmt::Display for StartWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

/// The opt-level this crate was compiled with (`build.rs` passes cargo's `OPT_LEVEL` on).
const OPT_LEVEL: &str = env!("STOKEHOLD_OPT_LEVEL");

/// The warning for a crate compiled with `opt_level` (cargo's `OPT_LEVEL`), if it is 0: a
/// dependent's debug build, where this repository's own profile does not apply.
pub(crate) fn unoptimised_build(opt_level: &str) -> Option<String> {
    (opt_level == "0").then(|| {
        "stokehold was compiled without optimisation (opt-level 0: a debug build), which makes \
         its pipelines about 21 times slower; optimise it in your debug builds too, in your \
         Cargo.toml: [profile.dev.package.\"*\"] opt-level = 2 (or build with --release)"
            .to_string()
    })
}

/// The warnings for a pipeline of `graph` over `source`, each logged the first time in the
/// process (a long-lived process logs a listing problem that recurs once; every pipeline's
/// [`Pipeline::warnings`](super::Pipeline::warnings) has all of its own).
pub(super) fn at_start(graph: &Graph, source: &Source) -> Vec<StartWarning> {
    let mut out: Vec<StartWarning> = source
        .warnings()
        .iter()
        .map(|w| StartWarning::Data(w.clone()))
        .collect();
    if let Some(why) = missing_labels(graph, source) {
        out.push(StartWarning::Data(why));
    }
    let speed = [
        unoptimised_build(OPT_LEVEL),
        crate::decode::jpeg_simd_warning(),
    ];
    out.extend(speed.into_iter().flatten().map(StartWarning::Speed));
    for w in &out {
        if first_time(w.message()) {
            tracing::warn!(target: START_WARNINGS_TARGET, "{w}");
        }
    }
    out
}

/// The `tracing` target of the start's warnings: a subscriber that hands them on another
/// way (the Python package turns [`Pipeline::warnings`](super::Pipeline::warnings) into
/// Python warnings) can leave these lines out.
pub const START_WARNINGS_TARGET: &str = "stokehold::pipeline::start";

/// Logs `message` as a warning unless this process logged it already: `compare` starts a
/// pipeline per device and run over the same data, whose bad files and listing problems are
/// the same, as are the build's warnings for every pipeline. (Each pipeline's epoch
/// summaries are its own: logged each time.) The messages are kept for the process's life:
/// a few per bad file.
pub(super) fn warn_once(message: String) {
    if first_time(&message) {
        tracing::warn!("{message}");
    }
}

/// Whether `message` is logged for the first time in this process (and notes it).
fn first_time(message: &str) -> bool {
    static LOGGED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let mut logged = LOGGED.lock().unwrap_or_else(|e| e.into_inner());
    logged.insert(message.to_string())
}

/// Why every label will be -1 when the pipeline uses the reader's labels, if it will be.
fn missing_labels(graph: &Graph, source: &Source) -> Option<String> {
    let edge = graph.reader_labels?;
    let used =
        graph.outputs.contains(&edge) || graph.nodes.iter().any(|n| n.inputs.contains(&edge));
    if !used {
        return None;
    }
    let reader = &graph.reader;
    let why = match source {
        Source::Files(d) if d.entries.iter().all(|e| e.label < 0) => match &reader.list {
            Some(list) => format!("the list file {} gives no labels", list.display()),
            None => format!(
                "{} has no class sub-folders (a flat folder)",
                reader.root.display()
            ),
        },
        Source::Shards(s) if s.config.label == LabelFrom::None => {
            format!("the shard reader of {} has label = \"\"", s.config.shards)
        }
        _ => return None,
    };
    Some(format!(
        "the data set has no labels: {why}, so every label is -1; put the images in class \
         sub-folders (labels are their indices in sorted order) or list `path label` lines, \
         or leave the labels output out"
    ))
}
