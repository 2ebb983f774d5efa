//! Pipeline files (TOML): parsing into a [`PipelineSpec`] while remembering where every
//! part was written, so that any later error (from this parser or from the graph
//! validator) is reported as `file:line:column` with a suggestion.
//!
//! ```toml
//! [pipeline]
//! batch = 64
//! outputs = ["images", "labels"]
//!
//! [[op]]
//! kind = "file_reader"
//! outputs = ["jpegs", "labels"]
//! root = "/data/train"
//!
//! [[op]]
//! kind = "decode"
//! input = "jpegs"
//! output = "images"
//! ```
//!
//! The top level holds only `[pipeline]` (the keys of
//! [`reference::SETTINGS`](crate::pipeline::reference::SETTINGS)) and `[[op]]` tables. In an
//! `[[op]]` table the keys of [`reference::OP_KEYS`](crate::pipeline::reference::OP_KEYS)
//! are reserved and every other key is an argument of the operator. This module checks the
//! file's shape and the settings; operator kinds, argument names and types and the graph
//! are checked by the validator, whose [`SpecError`]s [`config_error`] places in the file.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::ops::Range;
use std::path::Path;

use toml::de::{DeString, DeTable, DeValue};
use toml::Spanned;

use super::reference::{OP_KEYS, SETTINGS};
use super::spec::{
    DeviceChoice, OnError, OpSpec, PipelineSpec, Placement, Settings, SpecError, SpecPointer,
};
use crate::error::Error;
use crate::schema::closest;
use crate::schema::ArgValue;

#[cfg(test)]
mod tests;

/// A 1-based (line, column) position; columns count characters.
type Pos = (usize, usize);

/// Where each part of a pipeline definition was written in its file, for error messages.
#[derive(Debug, Clone, Default)]
pub struct SpecLocations {
    points: HashMap<SpecPointer, Pos>,
    pipeline_header: Option<Pos>,
    op_inputs_key: HashMap<usize, Pos>,
    op_outputs_key: HashMap<usize, Pos>,
}

impl SpecLocations {
    /// The 1-based (line, column) of `at` in the file.
    ///
    /// A setting or output edge points at its value, an argument at its key, an input or
    /// output edge of an operator at its entry in `input(s)`/`output(s)`, a placement at
    /// the operator's `device` value. Parts that were not written fall back to the nearest
    /// enclosing part that was: a missing argument or edge to the operator's `kind` (or its
    /// `inputs`/`outputs` key when there is one), a missing setting to the `[pipeline]`
    /// header, and anything else to 1:1.
    pub fn locate(&self, at: &SpecPointer) -> (usize, usize) {
        if let Some(p) = self.points.get(at) {
            return *p;
        }
        let get = |p: SpecPointer| self.points.get(&p).copied();
        let op = |i: usize| get(SpecPointer::OpKind(i)).or_else(|| get(SpecPointer::Op(i)));
        let found = match at {
            SpecPointer::Setting(_) => self.pipeline_header,
            SpecPointer::Output(_) => {
                get(SpecPointer::Setting("outputs".to_string())).or(self.pipeline_header)
            }
            SpecPointer::Op(i) | SpecPointer::OpKind(i) => get(SpecPointer::Op(*i)),
            SpecPointer::OpArg(i, _) | SpecPointer::OpPlacement(i) => op(*i),
            SpecPointer::OpInput(i, _) => self.op_inputs_key.get(i).copied().or_else(|| op(*i)),
            SpecPointer::OpOutput(i, _) => self.op_outputs_key.get(i).copied().or_else(|| op(*i)),
            SpecPointer::Whole => None,
        };
        found.unwrap_or((1, 1))
    }
}

/// A pipeline definition read from a file, with the locations of its parts.
#[derive(Debug, Clone)]
pub struct LoadedSpec {
    /// The definition (not yet validated against the operator schemas).
    pub spec: PipelineSpec,
    /// Where each part was written.
    pub locations: SpecLocations,
}

/// Reads and parses the pipeline file at `file`; sets `spec.file`.
///
/// An unreadable file (or one that is not UTF-8) is [`Error::Io`]; anything wrong inside it
/// is [`Error::Config`] at the offending line and column.
pub fn load(file: &Path) -> Result<LoadedSpec, Error> {
    let text = std::fs::read_to_string(file).map_err(|source| Error::Io {
        path: file.to_path_buf(),
        source,
    })?;
    let mut loaded = parse(&text, file)?;
    loaded.spec.file = Some(file.to_path_buf());
    Ok(loaded)
}

/// Parses the text of a pipeline file; `file` is only used in error messages (the
/// returned `spec.file` is `None`, see [`load`]).
///
/// Checks TOML syntax, the top-level tables, every `[pipeline]` setting (type and range)
/// and the shape of each `[[op]]` table. The first problem found is returned as
/// [`Error::Config`].
pub fn parse(text: &str, file: &Path) -> Result<LoadedSpec, Error> {
    let cx = Cx::new(text, file);
    let root = match DeTable::parse(text) {
        Ok(t) => t.into_inner(),
        Err(e) => return Err(cx.syntax_error(&e)),
    };
    let mut locations = SpecLocations::default();
    let top = sorted(&root);

    // Unknown top-level keys first, so a stray table is reported where it was written
    // even when it swallowed keys that other checks would then miss.
    for (k, v) in &top {
        let name: &str = k.get_ref();
        if name != "pipeline" && name != "op" {
            return Err(cx.unknown_top_level(k, v));
        }
    }

    let mut spec = PipelineSpec::default();
    match top.iter().find(|(k, _)| k.get_ref() == "pipeline") {
        Some((_, v)) => {
            let (settings, outputs) = cx.settings(v, &mut locations)?;
            spec.settings = settings;
            spec.outputs = outputs;
        }
        None => {
            return Err(cx.err_at(
                (1, 1),
                "the pipeline file has no [pipeline] table",
                Some(
                    "add a [pipeline] table with at least `outputs = [\"...\"]`, the edges \
                     handed to the consumer"
                        .to_string(),
                ),
            ))
        }
    }

    if let Some((k, v)) = top.iter().find(|(k, _)| k.get_ref() == "op") {
        match v.get_ref() {
            DeValue::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    spec.ops.push(cx.op(i, item, &mut locations)?);
                }
            }
            DeValue::Table(_) => {
                return Err(cx.err(
                    k.span(),
                    "`op` must be an array of tables, but [op] is a single table",
                    Some("write each operator under its own [[op]] header (double brackets)"),
                ))
            }
            other => {
                return Err(cx.err(
                    v.span(),
                    format!("`op` must be an array of tables, got {}", kind_of(other)),
                    Some("write each operator under its own [[op]] header (double brackets)"),
                ))
            }
        }
    }
    Ok(LoadedSpec { spec, locations })
}

/// Turns a validator error about a spec loaded from `file` into an [`Error::Config`]
/// at the place the offending part was written.
pub fn config_error(file: &Path, locations: &SpecLocations, e: SpecError) -> Error {
    let (line, column) = locations.locate(&e.at);
    Error::Config {
        file: file.to_path_buf(),
        line,
        column,
        message: e.message,
        help: e.help,
    }
}

/// Writes `spec` as a pipeline file that [`parse`] reads back into an equal spec
/// (`file` aside). Every setting is written out explicitly; arguments in name order.
///
/// Not every spec has a file form: unbounded `epochs` (`None`) is written as a comment
/// and reads back as 1; a `seed` above `i64::MAX`, empty `outputs`, an argument whose
/// name is a reserved `[[op]]` key, or a NaN argument in a list compared for equality do
/// not survive the round trip (the first three are errors when read back).
pub fn to_toml(spec: &PipelineSpec) -> String {
    let s = &spec.settings;
    let mut out = String::new();
    out.push_str("[pipeline]\n");
    let _ = writeln!(out, "batch = {}", s.batch);
    let _ = writeln!(out, "threads = {}", s.threads.unwrap_or(0));
    let _ = writeln!(out, "prefetch = {}", s.prefetch);
    let _ = writeln!(out, "seed = {}", s.seed);
    match s.epochs {
        Some(n) => {
            let _ = writeln!(out, "epochs = {n}");
        }
        None => out.push_str("# epochs: unbounded (has no pipeline-file form)\n"),
    }
    let on_error = s.on_error.name();
    let device = match s.device {
        DeviceChoice::Auto => "auto",
        DeviceChoice::Cpu => "cpu",
        DeviceChoice::Gpu => "gpu",
    };
    let _ = writeln!(out, "on_error = {}", quote(on_error));
    let _ = writeln!(out, "device = {}", quote(device));
    let _ = writeln!(out, "device_id = {}", s.device_id);
    let _ = writeln!(out, "outputs = {}", string_list(&spec.outputs));
    for op in &spec.ops {
        out.push_str("\n[[op]]\n");
        let _ = writeln!(out, "kind = {}", quote(&op.kind));
        if let Some(name) = &op.name {
            let _ = writeln!(out, "name = {}", quote(name));
        }
        match op.inputs.as_slice() {
            [] => {}
            [one] => {
                let _ = writeln!(out, "input = {}", quote(one));
            }
            many => {
                let _ = writeln!(out, "inputs = {}", string_list(many));
            }
        }
        match op.outputs.as_slice() {
            [] => {}
            [one] => {
                let _ = writeln!(out, "output = {}", quote(one));
            }
            many => {
                let _ = writeln!(out, "outputs = {}", string_list(many));
            }
        }
        match op.placement {
            Some(Placement::Cpu) => out.push_str("device = \"cpu\"\n"),
            Some(Placement::Gpu) => out.push_str("device = \"gpu\"\n"),
            None => {}
        }
        for (name, value) in &op.args {
            let _ = writeln!(out, "{} = {}", key(name), arg_toml(value));
        }
    }
    out
}

/// Parsing context: the text (for positions) and the file name (for errors).
struct Cx<'a> {
    text: &'a str,
    file: &'a Path,
    line_starts: Vec<usize>,
}

type Entry<'r, 'i> = (&'r Spanned<DeString<'i>>, &'r Spanned<DeValue<'i>>);

/// A table's entries in the order they were written (the parser keeps them sorted by key).
fn sorted<'r, 'i>(t: &'r DeTable<'i>) -> Vec<Entry<'r, 'i>> {
    let mut v: Vec<Entry<'r, 'i>> = t.iter().collect();
    v.sort_by_key(|(k, _)| k.span().start);
    v
}

impl<'a> Cx<'a> {
    fn new(text: &'a str, file: &'a Path) -> Cx<'a> {
        let mut line_starts = vec![0];
        line_starts.extend(
            text.bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i + 1),
        );
        Cx {
            text,
            file,
            line_starts,
        }
    }

    /// 1-based (line, column) of a byte offset; the column counts characters.
    fn pos(&self, offset: usize) -> Pos {
        let mut offset = offset.min(self.text.len());
        // The end of a file that ends with a newline is reported at the end of its last
        // line, not on a line after it (e.g. an unterminated string at the end of the file).
        if offset == self.text.len() {
            let trimmed = self.text.strip_suffix('\n').unwrap_or(self.text);
            offset = trimmed.strip_suffix('\r').unwrap_or(trimmed).len();
        }
        let line = self.line_starts.partition_point(|&s| s <= offset).max(1);
        let start = self.line_starts[line - 1];
        let column = self.text.as_bytes()[start..offset]
            .iter()
            .filter(|b| (**b & 0xC0) != 0x80)
            .count()
            + 1;
        (line, column)
    }

    fn err_at(
        &self,
        (line, column): Pos,
        message: impl Into<String>,
        help: Option<String>,
    ) -> Error {
        Error::Config {
            file: self.file.to_path_buf(),
            line,
            column,
            message: message.into(),
            help,
        }
    }

    fn err(&self, span: Range<usize>, message: impl Into<String>, help: Option<&str>) -> Error {
        self.err_at(self.pos(span.start), message, help.map(str::to_string))
    }

    fn err_help(&self, span: Range<usize>, message: impl Into<String>, help: String) -> Error {
        self.err_at(self.pos(span.start), message, Some(help))
    }

    fn syntax_error(&self, e: &toml::de::Error) -> Error {
        let message = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
        let at = e.span().map(|s| self.pos(s.start)).unwrap_or((1, 1));
        self.err_at(at, format!("invalid TOML: {message}"), None)
    }

    fn unknown_top_level(&self, k: &Spanned<DeString<'_>>, v: &Spanned<DeValue<'_>>) -> Error {
        let name: &str = k.get_ref();
        let message = match v.get_ref() {
            DeValue::Table(_) => format!("unknown table [{name}]"),
            DeValue::Array(a) if !a.is_empty() && a.iter().all(|x| x.get_ref().is_table()) => {
                format!("unknown table [[{name}]]")
            }
            _ => format!("unknown top-level key `{name}`"),
        };
        let help = if let Some(c) = closest(name, &["pipeline", "op"]) {
            if c == "op" {
                "did you mean [[op]]?".to_string()
            } else {
                "did you mean [pipeline]?".to_string()
            }
        } else if SETTINGS.iter().any(|s| s.name == name) {
            format!("settings belong under [pipeline]: move `{name}` below the [pipeline] header")
        } else if OP_KEYS.iter().any(|s| s.name == name) {
            format!("`{name}` belongs in an [[op]] table")
        } else {
            "a pipeline file holds one [pipeline] table and [[op]] tables, nothing else".to_string()
        };
        self.err_help(k.span(), message, help)
    }

    fn settings(
        &self,
        v: &Spanned<DeValue<'_>>,
        locs: &mut SpecLocations,
    ) -> Result<(Settings, Vec<String>), Error> {
        let DeValue::Table(t) = v.get_ref() else {
            return Err(self.err(
                v.span(),
                format!("`pipeline` must be a table, got {}", kind_of(v.get_ref())),
                Some("write the settings under a [pipeline] header"),
            ));
        };
        let header = self.pos(v.span().start);
        locs.pipeline_header = Some(header);
        let mut s = Settings::default();
        let mut outputs = None;
        for (k, val) in sorted(t) {
            let name: &str = k.get_ref();
            match name {
                "batch" => s.batch = self.count(val, name, 1)?,
                "threads" => s.threads = Some(self.count(val, name, 0)?).filter(|&n| n > 0),
                "prefetch" => s.prefetch = self.count(val, name, 1)?,
                "seed" => s.seed = self.uint(val, name, 0)?,
                "epochs" => s.epochs = Some(self.uint(val, name, 1)?),
                "device_id" => s.device_id = self.count(val, name, 0)?,
                "on_error" => {
                    let c = self.choice(val, name, OnError::NAMES)?;
                    s.on_error = OnError::from_name(c).unwrap_or_default();
                }
                "device" => {
                    let c = self.choice(val, name, DeviceChoice::NAMES)?;
                    s.device = DeviceChoice::from_name(c).unwrap_or_default();
                }
                "outputs" => {
                    let edges = self.strings(val, "outputs")?;
                    if edges.is_empty() {
                        return Err(self.err(
                            val.span(),
                            "`outputs` is empty: the pipeline would hand out nothing",
                            Some("name at least one edge, e.g. `outputs = [\"images\"]`"),
                        ));
                    }
                    let mut names = Vec::with_capacity(edges.len());
                    for (j, (e, at)) in edges.into_iter().enumerate() {
                        locs.points.insert(SpecPointer::Output(j), at);
                        names.push(e);
                    }
                    outputs = Some(names);
                }
                _ => {
                    let known: Vec<&str> = SETTINGS.iter().map(|s| s.name).collect();
                    let help = match closest(name, &known) {
                        Some(c) => format!("did you mean `{c}`? (settings: {})", known.join(", ")),
                        None if OP_KEYS.iter().any(|o| o.name == name) => {
                            format!("`{name}` belongs in an [[op]] table")
                        }
                        None => format!("settings of [pipeline]: {}", known.join(", ")),
                    };
                    return Err(self.err_help(
                        k.span(),
                        format!("unknown setting `{name}` in [pipeline]"),
                        help,
                    ));
                }
            }
            locs.points.insert(
                SpecPointer::Setting(name.to_string()),
                self.pos(val.span().start),
            );
        }
        let outputs = outputs.ok_or_else(|| {
            self.err_at(
                header,
                "[pipeline] has no `outputs`",
                Some(
                    "add `outputs = [\"...\"]` naming the edges handed to the consumer, e.g. \
                     `outputs = [\"images\", \"labels\"]`"
                        .to_string(),
                ),
            )
        })?;
        Ok((s, outputs))
    }

    fn op(
        &self,
        i: usize,
        item: &Spanned<DeValue<'_>>,
        locs: &mut SpecLocations,
    ) -> Result<OpSpec, Error> {
        let DeValue::Table(t) = item.get_ref() else {
            return Err(self.err(
                item.span(),
                format!(
                    "operator #{} must be a table, got {}",
                    i + 1,
                    kind_of(item.get_ref())
                ),
                Some("write each operator under its own [[op]] header"),
            ));
        };
        let header = self.pos(item.span().start);
        locs.points.insert(SpecPointer::Op(i), header);
        let mut op = OpSpec::new("");
        let mut has_kind = false;
        let mut input_key: Option<&str> = None;
        let mut output_key: Option<&str> = None;
        for (k, v) in sorted(t) {
            let name: &str = k.get_ref();
            let at = self.pos(v.span().start);
            match name {
                "kind" => {
                    op.kind = self.string(v, "kind")?;
                    has_kind = true;
                    locs.points.insert(SpecPointer::OpKind(i), at);
                }
                "name" => op.name = Some(self.string(v, "name")?),
                "input" | "inputs" | "output" | "outputs" => {
                    let is_input = name.starts_with("in");
                    let (seen, one, many) = if is_input {
                        (&mut input_key, "input", "inputs")
                    } else {
                        (&mut output_key, "output", "outputs")
                    };
                    if let Some(prev) = seen {
                        return Err(self.err_help(
                            k.span(),
                            format!("operator #{} has both `{prev}` and `{name}`", i + 1),
                            format!(
                                "write `{one} = \"edge\"` for one edge or `{many} = [\"a\", \
                                 \"b\"]` for several, not both"
                            ),
                        ));
                    }
                    *seen = Some(name);
                    let edges = if name == one {
                        vec![(self.string(v, one)?, at)]
                    } else {
                        self.strings(v, many)?
                    };
                    let key_at = self.pos(k.span().start);
                    for (j, (e, at)) in edges.into_iter().enumerate() {
                        if is_input {
                            locs.points.insert(SpecPointer::OpInput(i, j), at);
                            op.inputs.push(e);
                        } else {
                            locs.points.insert(SpecPointer::OpOutput(i, j), at);
                            op.outputs.push(e);
                        }
                    }
                    if is_input {
                        locs.op_inputs_key.insert(i, key_at);
                    } else {
                        locs.op_outputs_key.insert(i, key_at);
                    }
                }
                "device" => {
                    let c = self.choice(v, "device", &["cpu", "gpu"])?;
                    op.placement = Some(if c == "gpu" {
                        Placement::Gpu
                    } else {
                        Placement::Cpu
                    });
                    locs.points.insert(SpecPointer::OpPlacement(i), at);
                }
                _ => {
                    let value = self.arg(v, name)?;
                    op.args.insert(name.to_string(), value);
                    locs.points.insert(
                        SpecPointer::OpArg(i, name.to_string()),
                        self.pos(k.span().start),
                    );
                }
            }
        }
        if !has_kind {
            let kinds: Vec<&str> = crate::pipeline::registry::schemas()
                .map(|s| s.kind)
                .collect();
            return Err(self.err_at(
                header,
                format!("operator #{} has no `kind`", i + 1),
                Some(format!(
                    "add `kind = \"...\"`, one of: {}",
                    kinds.join(", ")
                )),
            ));
        }
        Ok(op)
    }

    /// An argument value: booleans, numbers, strings and (nested) arrays of those.
    fn arg(&self, v: &Spanned<DeValue<'_>>, name: &str) -> Result<ArgValue, Error> {
        Ok(match v.get_ref() {
            DeValue::Boolean(b) => ArgValue::Bool(*b),
            DeValue::Integer(_) => ArgValue::Int(self.int(v)?),
            DeValue::Float(f) => ArgValue::Float(parse_float(f.as_str()).ok_or_else(|| {
                self.err(v.span(), format!("`{}` is not a float", f.as_str()), None)
            })?),
            DeValue::String(s) => ArgValue::Str(s.to_string()),
            DeValue::Array(items) => ArgValue::List(
                items
                    .iter()
                    .map(|x| self.arg(x, name))
                    .collect::<Result<_, _>>()?,
            ),
            DeValue::Table(_) => {
                return Err(self.err(
                    v.span(),
                    format!("argument `{name}` can't be a table"),
                    Some(
                        "arguments are booleans, numbers, strings, or arrays of those; \
                         write the value directly instead of `{ ... }` or a dotted key",
                    ),
                ))
            }
            DeValue::Datetime(_) => {
                return Err(self.err(
                    v.span(),
                    format!("argument `{name}` can't be a date or time"),
                    Some("if you meant text, quote it: \"...\""),
                ))
            }
        })
    }

    fn int(&self, v: &Spanned<DeValue<'_>>) -> Result<i64, Error> {
        match v.get_ref() {
            DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix()).map_err(|_| {
                self.err(
                    v.span(),
                    format!("integer {i} is out of range"),
                    Some("integers must fit in 64 bits (signed)"),
                )
            }),
            other => Err(self.err(
                v.span(),
                format!("expected an integer, got {}", kind_of(other)),
                None,
            )),
        }
    }

    /// A non-negative integer setting, at least `min`.
    fn uint(&self, v: &Spanned<DeValue<'_>>, name: &str, min: i64) -> Result<u64, Error> {
        let example = SETTINGS
            .iter()
            .find(|s| s.name == name)
            .map_or("1", |s| s.default);
        if !matches!(v.get_ref(), DeValue::Integer(_)) {
            return Err(self.err_help(
                v.span(),
                format!(
                    "`{name}` must be an integer ≥ {min}, got {}",
                    kind_of(v.get_ref())
                ),
                format!("write a whole number without quotes, e.g. `{name} = {example}`"),
            ));
        }
        let n = self.int(v)?;
        if n < min {
            return Err(self.err_help(
                v.span(),
                format!("`{name}` = {n} is out of range: it must be at least {min}"),
                format!("use an integer ≥ {min}, e.g. `{name} = {example}`"),
            ));
        }
        u64::try_from(n).map_err(|_| self.err(v.span(), format!("`{name}` is negative"), None))
    }

    /// [`Cx::uint`] as a `usize`.
    fn count(&self, v: &Spanned<DeValue<'_>>, name: &str, min: i64) -> Result<usize, Error> {
        let n = self.uint(v, name, min)?;
        usize::try_from(n)
            .map_err(|_| self.err(v.span(), format!("`{name}` = {n} is too large"), None))
    }

    fn string(&self, v: &Spanned<DeValue<'_>>, name: &str) -> Result<String, Error> {
        match v.get_ref() {
            DeValue::String(s) => Ok(s.to_string()),
            other => Err(self.err_help(
                v.span(),
                format!("`{name}` must be a string, got {}", kind_of(other)),
                format!("quote it: `{name} = \"...\"`"),
            )),
        }
    }

    /// An array of strings, each with its position.
    fn strings(&self, v: &Spanned<DeValue<'_>>, name: &str) -> Result<Vec<(String, Pos)>, Error> {
        let DeValue::Array(items) = v.get_ref() else {
            return Err(self.err_help(
                v.span(),
                format!(
                    "`{name}` must be an array of strings, got {}",
                    kind_of(v.get_ref())
                ),
                format!("write `{name} = [\"a\", \"b\"]`"),
            ));
        };
        items
            .iter()
            .enumerate()
            .map(|(j, x)| match x.get_ref() {
                DeValue::String(s) => Ok((s.to_string(), self.pos(x.span().start))),
                other => Err(self.err_help(
                    x.span(),
                    format!(
                        "`{name}` must be an array of strings, but entry #{} is {}",
                        j + 1,
                        kind_of(other)
                    ),
                    "edge names are strings: quote them".to_string(),
                )),
            })
            .collect()
    }

    /// A string that must be one of `choices`.
    fn choice<'c>(
        &self,
        v: &Spanned<DeValue<'_>>,
        name: &str,
        choices: &[&'c str],
    ) -> Result<&'c str, Error> {
        let quoted: Vec<String> = choices.iter().map(|c| format!("\"{c}\"")).collect();
        let list = quoted.join(", ");
        let DeValue::String(s) = v.get_ref() else {
            return Err(self.err_help(
                v.span(),
                format!("`{name}` must be a string, got {}", kind_of(v.get_ref())),
                format!("use one of {list}"),
            ));
        };
        if let Some(c) = choices.iter().find(|c| **c == s.as_ref()) {
            return Ok(c);
        }
        let help = match closest(s, choices) {
            Some(c) => format!("did you mean \"{c}\"? (choices: {list})"),
            None => format!("use one of {list}"),
        };
        Err(self.err_help(
            v.span(),
            format!("`{name}` = \"{s}\" is not one of {list}"),
            help,
        ))
    }
}

/// "a string", "an integer", ... for messages.
fn kind_of(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date/time",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// A TOML float's text (underscores already removed by the parser) as `f64`.
fn parse_float(s: &str) -> Option<f64> {
    match s.trim_start_matches('+') {
        "nan" | "-nan" => Some(f64::NAN),
        "inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        t => t.parse().ok(),
    }
}

/// A TOML basic string.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() && (c as u32) < 0x10000 => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\U{:08X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A key, bare when TOML allows it.
fn key(s: &str) -> String {
    let bare = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        s.to_string()
    } else {
        quote(s)
    }
}

fn string_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| quote(s)).collect();
    format!("[{}]", quoted.join(", "))
}

fn arg_toml(v: &ArgValue) -> String {
    match v {
        ArgValue::Bool(b) => b.to_string(),
        ArgValue::Int(i) => i.to_string(),
        ArgValue::Float(x) if x.is_nan() => "nan".to_string(),
        ArgValue::Float(x) if x.is_infinite() => if *x > 0.0 { "inf" } else { "-inf" }.to_string(),
        // Debug prints the shortest text that reads back exactly, always with a `.` or
        // an exponent, which is what makes it a TOML float rather than an integer.
        ArgValue::Float(x) => format!("{x:?}"),
        ArgValue::Str(s) => quote(s),
        ArgValue::List(items) => {
            let parts: Vec<String> = items.iter().map(arg_toml).collect();
            format!("[{}]", parts.join(", "))
        }
    }
}
