//! Every problem of a pipeline file in one pass, as a compiler reports them: the parser's,
//! the settings', each operator's arguments, then the graph's, each at its line and column.
//!
//! The validator ([`Graph::build`]) stops at its first problem. To find the next one, the
//! draft is mended where the problem was (a wrong setting back to its default, a wrong
//! operator left out) and validated again. Problems the graph could only have because
//! something was left out (an edge nobody produces any more) are not reported.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::located::{config_error, read, LoadedSpec};
use super::parse::{parse_all, Parsed};
use crate::error::Error;
use crate::pipeline::graph::Graph;
use crate::pipeline::registry;
use crate::pipeline::settings;
use crate::pipeline::spec::{OpSpec, PipelineSpec, SpecError, SpecPointer};
use crate::schema::{self, ArgError, ArgValue, Args, OpSchema};

/// A pipeline file read as far as it goes, to be adjusted (command-line overrides) and then
/// checked as a whole with [`Draft::finish`].
///
/// ```
/// use std::path::Path;
/// use stokehold::pipeline::file::Draft;
///
/// let text = r#"
/// [pipeline]
/// batch = 0
/// prefetch = "2"
/// outputs = ["images"]
///
/// [[op]]
/// kind = "file_reader"
/// output = "jpegs"
///
/// [[op]]
/// kind = "decode"
/// input = "jpegs"
/// output = "images"
/// "#;
/// let errors = Draft::parse(text, Path::new("p.toml")).finish().unwrap_err();
/// let shown: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
/// assert_eq!(shown.len(), 2, "{shown:?}");
/// assert!(shown[0].starts_with("p.toml:3:9: `batch` = 0 is out of range"), "{shown:?}");
/// assert!(shown[1].starts_with("p.toml:4:12: `prefetch` must be an integer"), "{shown:?}");
/// assert!(shown.iter().all(|e| e.contains("\n  help: ")));
/// ```
#[derive(Debug)]
pub struct Draft {
    file: PathBuf,
    parsed: Parsed,
}

/// A pipeline file that passed every check: its definition and the validated graph.
#[derive(Debug)]
pub struct Checked {
    /// The definition (with any adjustments), and where its parts were written.
    pub loaded: LoadedSpec,
    /// The validated, built graph.
    pub graph: Graph,
}

impl Draft {
    /// Reads the pipeline file at `file` (an unreadable one is [`Error::Io`], once).
    pub fn load(file: &Path) -> Result<Draft, Error> {
        let mut draft = Draft::parse(&read(file)?, file);
        draft.parsed.loaded.spec.file = Some(file.to_path_buf());
        Ok(draft)
    }

    /// Parses the text of a pipeline file named `file` in errors (`spec.file` stays `None`).
    pub fn parse(text: &str, file: &Path) -> Draft {
        Draft {
            file: file.to_path_buf(),
            parsed: parse_all(text, file),
        }
    }

    /// The definition as read: settings that were wrong hold their defaults, and parts that
    /// could not be read are left out.
    pub fn spec(&self) -> &PipelineSpec {
        &self.parsed.loaded.spec
    }

    /// The definition, to adjust before [`Draft::finish`] checks it.
    pub fn spec_mut(&mut self) -> &mut PipelineSpec {
        &mut self.parsed.loaded.spec
    }

    /// Checks everything: the problems the parser met, every setting, every operator, then
    /// the graph. Returns the validated graph, or every problem found, in file order.
    pub fn finish(self) -> Result<Checked, Vec<Error>> {
        let Parsed {
            loaded,
            mut errors,
            broken_ops,
            sound,
        } = self.parsed;
        let spec_errors = match diagnose(&loaded.spec, &broken_ops, !sound) {
            Ok(graph) if errors.is_empty() => return Ok(Checked { loaded, graph }),
            Ok(_) => Vec::new(),
            Err(e) => e,
        };
        errors.extend(
            spec_errors
                .into_iter()
                .map(|e| config_error(&self.file, &loaded.locations, e)),
        );
        errors.sort_by_key(|e| match e {
            Error::Config { line, column, .. } => (*line, *column),
            _ => (0, 0),
        });
        errors.dedup_by(|a, b| a.to_string() == b.to_string());
        Err(errors)
    }
}

/// Validates `spec` again and again, mending it after each problem, and returns the graph
/// or every problem found (pointing into `spec`). `broken` operators were not read whole
/// and are left out; `incomplete` says the spec lacks parts the file meant to have. In
/// either case problems of the graph as a whole are not reported.
fn diagnose(
    spec: &PipelineSpec,
    broken: &[usize],
    incomplete: bool,
) -> Result<Graph, Vec<SpecError>> {
    let mut errors = Vec::new();
    let mut spec = spec.clone();
    for e in settings::validate(&spec.settings) {
        if let SpecPointer::Setting(name) = &e.at {
            if let Some(s) = settings::find(name) {
                s.reset(&mut spec.settings);
            }
        }
        errors.push(e);
    }
    // `original[i]`: where operator `i` of the mended spec is in `spec`.
    let mut original: Vec<usize> = (0..spec.ops.len()).collect();
    for &i in broken.iter().rev() {
        if i < spec.ops.len() {
            spec.ops.remove(i);
            original.remove(i);
        }
    }
    let mut trimmed = incomplete || !broken.is_empty();
    // Each round mends one operator or one setting, so this many rounds are enough.
    for _ in 0..=spec.ops.len() + settings::SETTINGS.len() + 1 {
        let e = match Graph::build(&spec) {
            Ok(graph) if errors.is_empty() && !trimmed => return Ok(graph),
            Ok(_) => return Err(errors),
            Err(e) => e,
        };
        let at = |p: &SpecPointer| renumber(p, &original);
        // Edges nobody uses: the last check, each independent of the others: all at once.
        if matches!(e.at, SpecPointer::OpOutput(..)) && !trimmed {
            let unused = crate::pipeline::graph::unused_edge_errors(&spec);
            if unused.iter().any(|u| u.at == e.at) {
                errors.extend(unused.into_iter().map(|u| SpecError { at: at(&u.at), ..u }));
                break;
            }
        }
        match e.at.clone() {
            // An operator's own problems don't depend on the other operators.
            SpecPointer::OpKind(i) | SpecPointer::OpArg(i, _) | SpecPointer::OpArgName(i, _) => {
                let own = argument_errors(&spec.ops[i]);
                if own.is_empty() {
                    errors.push(SpecError { at: at(&e.at), ..e });
                } else {
                    errors.extend(own.into_iter().map(|e| SpecError {
                        at: SpecPointer::of_arg_error(original[i], &e),
                        message: e.message,
                        help: e.help,
                    }));
                }
                spec.ops.remove(i);
                original.remove(i);
                trimmed = true;
            }
            SpecPointer::Setting(name) if settings::find(&name).is_some() => {
                errors.push(e);
                if let Some(s) = settings::find(&name) {
                    s.reset(&mut spec.settings);
                }
            }
            // Ports and edges: once something was left out, these may be its echoes.
            SpecPointer::Op(i)
            | SpecPointer::OpName(i)
            | SpecPointer::OpInput(i, _)
            | SpecPointer::OpOutput(i, _) => {
                if !trimmed {
                    errors.push(SpecError { at: at(&e.at), ..e });
                }
                spec.ops.remove(i);
                original.remove(i);
                trimmed = true;
            }
            SpecPointer::Setting(_) | SpecPointer::Output(_) | SpecPointer::Whole => {
                if !trimmed {
                    errors.push(e);
                }
                break;
            }
        }
    }
    Err(errors)
}

/// `p` with its operator index mapped through `original`.
fn renumber(p: &SpecPointer, original: &[usize]) -> SpecPointer {
    let o = |i: &usize| original.get(*i).copied().unwrap_or(*i);
    match p {
        SpecPointer::Op(i) => SpecPointer::Op(o(i)),
        SpecPointer::OpKind(i) => SpecPointer::OpKind(o(i)),
        SpecPointer::OpName(i) => SpecPointer::OpName(o(i)),
        SpecPointer::OpArg(i, a) => SpecPointer::OpArg(o(i), a.clone()),
        SpecPointer::OpArgName(i, a) => SpecPointer::OpArgName(o(i), a.clone()),
        SpecPointer::OpInput(i, j) => SpecPointer::OpInput(o(i), *j),
        SpecPointer::OpOutput(i, j) => SpecPointer::OpOutput(o(i), *j),
        other => other.clone(),
    }
}

/// Every argument of `op` that is wrong on its own (unknown, wrong type, out of range),
/// and every required one that is missing, by argument name. Each argument is checked
/// with the required others set to valid examples, so one problem doesn't hide the next.
fn argument_errors(op: &OpSpec) -> Vec<ArgError> {
    let Some(schema) = registry::find(&op.kind) else {
        return Vec::new();
    };
    let required = required_examples(schema);
    let mut found = Vec::new();
    let mut check = |given: BTreeMap<String, ArgValue>| {
        if let Err(e) = Args::validate(schema, &given) {
            found.push(e);
        }
    };
    for (name, value) in &op.args {
        let mut given = required.clone();
        given.insert(name.clone(), value.clone());
        check(given);
    }
    for name in required.keys().filter(|n| !op.args.contains_key(*n)) {
        let mut given = required.clone();
        given.remove(name);
        check(given);
    }
    found
}

/// A valid value for each argument of `schema` that has no default.
fn required_examples(schema: &OpSchema) -> BTreeMap<String, ArgValue> {
    schema
        .args
        .iter()
        .filter(|a| a.default.is_none())
        .filter_map(|a| {
            let table: toml::Table = format!("v = {}", a.ty.example()).parse().ok()?;
            Some((a.name.to_string(), schema::from_toml(&table["v"])))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(text: &str) -> Vec<String> {
        match Draft::parse(text, Path::new("p.toml")).finish() {
            Ok(_) => Vec::new(),
            Err(errors) => errors.iter().map(|e| e.to_string()).collect(),
        }
    }

    const GOOD: &str = r#"[pipeline]
batch = 4
outputs = ["images", "labels"]

[[op]]
kind = "file_reader"
outputs = ["jpegs", "labels"]
root = "data"

[[op]]
kind = "decode"
input = "jpegs"
output = "decoded"

[[op]]
kind = "random_resized_crop"
input = "decoded"
output = "cropped"
size = 224
antialias = true

[[op]]
kind = "flip"
input = "cropped"
output = "images"
horizontal = 0.5
"#;

    #[test]
    fn a_good_file_has_no_problems() {
        assert_eq!(problems(GOOD), Vec::<String>::new());
    }

    #[test]
    fn every_unused_edge_is_reported_at_once_and_only_labels_called_optional() {
        let text = GOOD
            .replace(r#"outputs = ["images", "labels"]"#, r#"outputs = ["flipped"]"#)
            .replace(
                "output = \"images\"",
                "output = \"images\"\n\n[[op]]\nkind = \"flip\"\nname = \"again\"\ninput = \"images\"\noutput = \"flipped\"\n\n[[op]]\nkind = \"flip\"\nname = \"unused\"\ninput = \"decoded\"\noutput = \"spare\"",
            );
        let p = problems(&text);
        assert_eq!(p.len(), 2, "{p:#?}");
        assert!(
            p[0].contains("edge 'labels' is produced but never used"),
            "{p:#?}"
        );
        assert!(p[0].contains("labels output is optional"), "{p:#?}");
        assert!(
            p[1].contains("edge 'spare' is produced but never used"),
            "{p:#?}"
        );
        assert!(!p[1].contains("labels output"), "{p:#?}");
    }

    #[test]
    fn every_problem_is_reported_in_file_order_with_help() {
        let text = GOOD
            .replace("batch = 4", "batch = 0\nprefetch = \"2\"\nbach = 3")
            .replace("size = 224", "size = \"224\"")
            .replace("antialias = true", "antialias = 1")
            .replace("horizontal = 0.5", "horizontal = 5");
        let p = problems(&text);
        let starts: Vec<&str> = p.iter().map(|e| e.split(": ").next().unwrap()).collect();
        assert_eq!(
            starts,
            [
                "p.toml:2:9",
                "p.toml:3:12",
                "p.toml:4:1",
                "p.toml:21:8",
                "p.toml:22:13",
                "p.toml:28:14"
            ],
            "{p:#?}"
        );
        assert!(p.iter().all(|e| e.contains("\n  help: ")), "{p:#?}");
        assert!(
            p[3].contains("argument 'size' must be an integer or [height, width]"),
            "{}",
            p[3]
        );
        assert!(
            p[3].contains("help: write it without quotes, e.g. `size = 224`"),
            "{}",
            p[3]
        );
        assert!(
            p[4].contains("help: write e.g. `antialias = true`"),
            "{}",
            p[4]
        );
        // Said once, not "argument 'horizontal': argument 'horizontal' = 5".
        assert_eq!(p[5].matches("horizontal").count(), 1, "{}", p[5]);
    }

    #[test]
    fn unknown_kinds_and_missing_arguments_do_not_hide_later_operators() {
        let text = GOOD
            .replace("kind = \"decode\"", "kind = \"decoder\"")
            .replace("size = 224\n", "")
            .replace("horizontal = 0.5", "horizontal = -1");
        let p = problems(&text);
        assert_eq!(p.len(), 3, "{p:#?}");
        assert!(p[0].contains("unknown operator kind 'decoder'"), "{}", p[0]);
        assert!(p[0].contains("did you mean 'decode'?"), "{}", p[0]);
        assert!(p[1].contains("needs argument 'size'"), "{}", p[1]);
        assert!(p[2].contains("'horizontal' = -1"), "{}", p[2]);
        // No "no operator produces edge 'decoded'" echo of the left-out decoder.
        assert!(
            p.iter().all(|e| !e.contains("no operator produces")),
            "{p:#?}"
        );
    }

    #[test]
    fn graph_problems_are_reported_when_nothing_was_left_out() {
        let p = problems(&GOOD.replace("input = \"cropped\"", "input = \"croped\""));
        assert_eq!(p.len(), 1, "{p:#?}");
        assert!(
            p[0].contains("no operator produces edge 'croped'"),
            "{}",
            p[0]
        );
        assert!(p[0].contains("did you mean 'cropped'?"), "{}", p[0]);
        // A wrong setting doesn't hide a graph problem.
        let p = problems(
            &GOOD
                .replace("batch = 4", "batch = -4")
                .replace("input = \"cropped\"", "input = \"croped\""),
        );
        assert_eq!(p.len(), 2, "{p:#?}");
    }

    #[test]
    fn problems_of_an_alias_point_at_the_alias() {
        // `shard_id` and `num_shards` are the file reader's other names for `rank` and
        // `world_size`: what is wrong with them is placed where they were written.
        let with =
            |lines: &str| GOOD.replace("root = \"data\"", &format!("root = \"data\"\n{lines}"));
        let p = problems(&with("shard_id = 2\nnum_shards = 2"));
        assert_eq!(p.len(), 1, "{p:#?}");
        assert!(
            p[0].starts_with("p.toml:9:12: rank = 2 but world_size = 2"),
            "{}",
            p[0]
        );
        let p = problems(&with("num_shards = 2\nshard_id = -1"));
        assert_eq!(p.len(), 1, "{p:#?}");
        assert!(
            p[0].starts_with("p.toml:10:12: argument 'rank' = -1 is out of range"),
            "{}",
            p[0]
        );
        let p = problems(&with("rank = 0\nshard_id = 0"));
        assert_eq!(p.len(), 1, "{p:#?}");
        assert!(
            p[0].starts_with("p.toml:10:1: 'shard_id' is another name for 'rank'"),
            "{}",
            p[0]
        );
        assert_eq!(
            problems(&with("shard_id = 1\nnum_shards = 2")),
            Vec::<String>::new()
        );
    }

    #[test]
    fn parse_problems_come_with_the_rest() {
        let text = GOOD
            .replace("root = \"data\"", "root = \"data\"\nwhen = 1979-05-27")
            .replace("horizontal = 0.5", "horizontal = 5");
        let p = problems(&text);
        assert_eq!(p.len(), 2, "{p:#?}");
        assert!(p[0].contains("can't be a date"), "{}", p[0]);
        assert!(p[1].contains("'horizontal' = 5"), "{}", p[1]);
    }

    #[test]
    fn settings_changed_after_reading_are_checked_too() {
        let mut d = Draft::parse(GOOD, Path::new("p.toml"));
        d.spec_mut().settings.prefetch = 0;
        let p: Vec<String> = d
            .finish()
            .unwrap_err()
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(p.len(), 1, "{p:#?}");
        assert!(p[0].starts_with("p.toml:1:1: `prefetch` = 0"), "{}", p[0]);
    }

    #[test]
    fn replace_with_a_shard_reader_is_refused_with_help_and_the_rest_still_checked() {
        let text = GOOD
            .replace("batch = 4", "batch = 4\non_error = \"replace\"")
            .replace("kind = \"file_reader\"", "kind = \"shard_reader\"")
            .replace("root = \"data\"", "shards = \"train-{0..3}.tar\"")
            .replace("horizontal = 0.5", "horizontal = 5");
        let p = problems(&text);
        assert_eq!(p.len(), 2, "{p:#?}");
        assert!(p[0].starts_with("p.toml:3:12: "), "{}", p[0]);
        assert!(p[0].contains("a shard_reader does not have"), "{}", p[0]);
        assert!(p[0].contains("help: use on_error = \"skip\""), "{}", p[0]);
        assert!(p[1].contains("'horizontal' = 5"), "{}", p[1]);
        // The same pipeline reading files may replace.
        let files = GOOD.replace("batch = 4", "batch = 4\non_error = \"replace\"");
        assert_eq!(problems(&files), Vec::<String>::new());
    }

    #[test]
    fn every_required_argument_has_a_valid_example() {
        for schema in registry::schemas() {
            let examples = required_examples(schema);
            for a in schema.args.iter().filter(|a| a.default.is_none()) {
                let v = examples.get(a.name).unwrap_or_else(|| panic!("{}", a.name));
                assert!(
                    a.check(v.clone()).is_ok(),
                    "{}.{}: {v}",
                    schema.kind,
                    a.name
                );
            }
        }
    }
}
