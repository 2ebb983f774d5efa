//! Reading a pipeline file's TOML into a [`PipelineSpec`] and the places its parts were
//! written, going on past each problem so one read reports all of them.

use std::cell::RefCell;
use std::ops::Range;
use std::path::Path;

use toml::de::{DeString, DeTable, DeValue};
use toml::Spanned;

use super::docs::{OP_DEVICE, OP_DEVICE_HELP, OP_KEYS, OUTPUTS};
use super::located::{LoadedSpec, Pos, SpecLocations};
use crate::error::Error;
use crate::ops::ArgValue;
use crate::pipeline::settings;
use crate::pipeline::spec::{OpSpec, PipelineSpec, Settings, SpecPointer};
use crate::schema::closest;

/// A pipeline file read as far as it goes.
#[derive(Debug)]
pub(super) struct Parsed {
    /// The definition: settings that were wrong keep their defaults, unreadable parts are
    /// left out.
    pub loaded: LoadedSpec,
    /// Every problem, in the order met.
    pub errors: Vec<Error>,
    /// Operators (by index) not read whole: checking them further would mislead.
    pub broken_ops: Vec<usize>,
    /// False when the file's shape is wrong (no `[pipeline]`, no `outputs`, a stray table),
    /// so the graph read is not the one meant.
    pub sound: bool,
}

/// Parses `text`, going on past problems; `file` names the file in errors.
pub(super) fn parse_all(text: &str, file: &Path) -> Parsed {
    let cx = Cx::new(text, file);
    let mut parsed = Parsed {
        loaded: LoadedSpec {
            spec: PipelineSpec::default(),
            locations: SpecLocations::default(),
        },
        errors: Vec::new(),
        broken_ops: Vec::new(),
        sound: true,
    };
    let root = match DeTable::parse(text) {
        Ok(t) => t.into_inner(),
        Err(e) => {
            parsed.errors.push(cx.syntax_error(&e));
            parsed.sound = false;
            return parsed;
        }
    };
    let locations = &mut parsed.loaded.locations;
    let spec = &mut parsed.loaded.spec;
    let top = sorted(&root);

    // Unknown top-level keys first, so a stray table is reported where it was written
    // even when it swallowed keys that other checks would then miss.
    for (k, v) in &top {
        let name: &str = k.get_ref();
        if name != "pipeline" && name != "op" {
            cx.report(cx.unknown_top_level(k, v));
            parsed.sound = false;
        }
    }

    match top.iter().find(|(k, _)| k.get_ref() == "pipeline") {
        Some((_, v)) => match cx.settings(v, locations) {
            (settings, Some(outputs)) => {
                spec.settings = settings;
                spec.outputs = outputs;
            }
            (settings, None) => {
                spec.settings = settings;
                parsed.sound = false;
            }
        },
        None => {
            cx.report(
                cx.err_at(
                    (1, 1),
                    "the pipeline file has no [pipeline] table",
                    Some(
                        "add a [pipeline] table with at least `outputs = [\"...\"]`, the edges \
                     handed to the consumer"
                            .to_string(),
                    ),
                ),
            );
            parsed.sound = false;
        }
    }

    if let Some((k, v)) = top.iter().find(|(k, _)| k.get_ref() == "op") {
        match v.get_ref() {
            DeValue::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let (op, whole) = cx.op(i, item, locations);
                    if !whole {
                        parsed.broken_ops.push(i);
                    }
                    spec.ops.push(op);
                }
            }
            DeValue::Table(_) => {
                cx.report(cx.err(
                    k.span(),
                    "`op` must be an array of tables, but [op] is a single table",
                    Some("write each operator under its own [[op]] header (double brackets)"),
                ));
                parsed.sound = false;
            }
            other => {
                cx.report(cx.err(
                    v.span(),
                    format!("`op` must be an array of tables, got {}", kind_of(other)),
                    Some("write each operator under its own [[op]] header (double brackets)"),
                ));
                parsed.sound = false;
            }
        }
    }
    parsed.errors = cx.errors.into_inner();
    parsed
}

/// Parsing context: the text (for positions) and the file name (for errors).
struct Cx<'a> {
    text: &'a str,
    file: &'a Path,
    line_starts: Vec<usize>,
    /// Problems found so far, in the order met.
    errors: RefCell<Vec<Error>>,
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
            errors: RefCell::new(Vec::new()),
        }
    }

    /// Records a problem and goes on.
    fn report(&self, e: Error) {
        self.errors.borrow_mut().push(e);
    }

    /// The value, or `None` after recording its error.
    fn ok<T>(&self, r: Result<T, Error>) -> Option<T> {
        r.map_err(|e| self.report(e)).ok()
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
        let key = e.span().and_then(|s| self.text.get(s)).map(str::trim);
        let help = match key {
            // `[op]` after `[[op]]`: one table where the file makes a list of them.
            Some("op" | "[op]") if message.starts_with("duplicate key") => {
                "write each operator as `[[op]]` (two pairs of brackets: one entry of the list \
                 of operators)"
                    .to_string()
            }
            Some(key) if message.starts_with("duplicate key") && !key.is_empty() => {
                format!("`{key}` appears twice: keep one")
            }
            _ => "mend the TOML syntax here: strings in double quotes, lists in [ ], one \
                  `key = value` a line"
                .to_string(),
        };
        self.err_at(at, format!("invalid TOML: {message}"), Some(help))
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
        } else if settings::find(name).is_some() || name == OUTPUTS.name {
            format!("settings belong under [pipeline]: move `{name}` below the [pipeline] header")
        } else if OP_KEYS.iter().any(|s| s.name == name) {
            format!("`{name}` belongs in an [[op]] table")
        } else {
            "a pipeline file holds one [pipeline] table and [[op]] tables, nothing else".to_string()
        };
        self.err_help(k.span(), message, help)
    }

    /// The `[pipeline]` table: the settings (defaults where a value is wrong) and the
    /// outputs, `None` when they are missing or unusable.
    fn settings(
        &self,
        v: &Spanned<DeValue<'_>>,
        locs: &mut SpecLocations,
    ) -> (Settings, Option<Vec<String>>) {
        let mut s = Settings::default();
        let DeValue::Table(t) = v.get_ref() else {
            self.report(self.err(
                v.span(),
                format!("`pipeline` must be a table, got {}", kind_of(v.get_ref())),
                Some("write the settings under a [pipeline] header"),
            ));
            return (s, None);
        };
        let header = self.pos(v.span().start);
        locs.pipeline_header = Some(header);
        let mut outputs = None;
        let mut outputs_given = false;
        for (k, val) in sorted(t) {
            let name: &str = k.get_ref();
            locs.points.insert(
                SpecPointer::Setting(name.to_string()),
                self.pos(val.span().start),
            );
            if name == OUTPUTS.name {
                outputs_given = true;
                outputs = self.outputs(val, locs);
                continue;
            }
            let Some(setting) = settings::find(name) else {
                let mut known = settings::names();
                known.push(OUTPUTS.name);
                let help = match closest(name, &known) {
                    Some(c) => format!("did you mean `{c}`? (settings: {})", known.join(", ")),
                    None if OP_KEYS.iter().any(|o| o.name == name) => {
                        format!("`{name}` belongs in an [[op]] table")
                    }
                    None => format!("settings of [pipeline]: {}", known.join(", ")),
                };
                self.report(self.err_help(
                    k.span(),
                    format!("unknown setting `{name}` in [pipeline]"),
                    help,
                ));
                continue;
            };
            let value = match val.get_ref() {
                DeValue::Table(_) | DeValue::Datetime(_) => Err(self.err_help(
                    val.span(),
                    format!(
                        "`{name}` must be {}, got {}",
                        setting.type_doc(),
                        kind_of(val.get_ref())
                    ),
                    format!(
                        "write e.g. `{name} = {}`",
                        setting.spec.default.unwrap_or("1")
                    ),
                )),
                _ => self.arg(val, name),
            };
            if let Some(value) = self.ok(value) {
                if let Err(e) = setting.apply(&mut s, &value) {
                    self.report(self.err_help(val.span(), e.message, e.help));
                }
            }
        }
        if !outputs_given {
            self.report(
                self.err_at(
                    header,
                    "[pipeline] has no `outputs`",
                    Some(
                        "add `outputs = [\"...\"]` naming the edges handed to the consumer, e.g. \
                     `outputs = [\"images\", \"labels\"]`"
                            .to_string(),
                    ),
                ),
            );
        }
        (s, outputs)
    }

    /// The `outputs` of `[pipeline]`; `None` after reporting what is wrong with them.
    fn outputs(&self, val: &Spanned<DeValue<'_>>, locs: &mut SpecLocations) -> Option<Vec<String>> {
        let edges = self.ok(self.strings(val, "outputs"))?;
        if edges.is_empty() {
            self.report(self.err(
                val.span(),
                "`outputs` is empty: the pipeline would hand out nothing",
                Some("name at least one edge, e.g. `outputs = [\"images\"]`"),
            ));
            return None;
        }
        let mut names = Vec::with_capacity(edges.len());
        for (j, (e, at)) in edges.into_iter().enumerate() {
            locs.points.insert(SpecPointer::Output(j), at);
            names.push(e);
        }
        Some(names)
    }

    /// Operator `i`, and whether it was read whole (kind, name, edges and every argument).
    fn op(
        &self,
        i: usize,
        item: &Spanned<DeValue<'_>>,
        locs: &mut SpecLocations,
    ) -> (OpSpec, bool) {
        let mut op = OpSpec::new("");
        let DeValue::Table(t) = item.get_ref() else {
            self.report(self.err(
                item.span(),
                format!(
                    "operator #{} must be a table, got {}",
                    i + 1,
                    kind_of(item.get_ref())
                ),
                Some("write each operator under its own [[op]] header"),
            ));
            return (op, false);
        };
        let header = self.pos(item.span().start);
        locs.points.insert(SpecPointer::Op(i), header);
        let mut whole = true;
        let mut has_kind = false;
        let mut input_key: Option<&str> = None;
        let mut output_key: Option<&str> = None;
        for (k, v) in sorted(t) {
            let name: &str = k.get_ref();
            let at = self.pos(v.span().start);
            match name {
                "kind" => {
                    has_kind = true;
                    locs.points.insert(SpecPointer::OpKind(i), at);
                    match self.ok(self.string(v, "kind")) {
                        Some(kind) => op.kind = kind,
                        None => whole = false,
                    }
                }
                "name" => {
                    locs.points.insert(SpecPointer::OpName(i), at);
                    match self.ok(self.string(v, "name")) {
                        Some(n) => op.name = Some(n),
                        None => whole = false,
                    }
                }
                "input" | "inputs" | "output" | "outputs" => {
                    let is_input = name.starts_with("in");
                    let (seen, one, many) = if is_input {
                        (&mut input_key, "input", "inputs")
                    } else {
                        (&mut output_key, "output", "outputs")
                    };
                    if let Some(prev) = seen {
                        self.report(self.err_help(
                            k.span(),
                            format!("operator #{} has both `{prev}` and `{name}`", i + 1),
                            format!(
                                "write `{one} = \"edge\"` for one edge or `{many} = [\"a\", \
                                 \"b\"]` for several, not both"
                            ),
                        ));
                        whole = false;
                        continue;
                    }
                    *seen = Some(name);
                    let edges = if name == one {
                        self.string(v, one).map(|e| vec![(e, at)])
                    } else {
                        self.strings(v, many)
                    };
                    let Some(edges) = self.ok(edges) else {
                        whole = false;
                        continue;
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
                OP_DEVICE => {
                    // Refused rather than ignored: a file that says an operator runs on a
                    // device must not run it elsewhere without a word.
                    self.report(self.err_help(
                        k.span(),
                        format!(
                            "operator #{} has a `device` key, but operators have none: the \
                             pipeline's `device` setting decides where every operator runs",
                            i + 1
                        ),
                        OP_DEVICE_HELP.to_string(),
                    ));
                    whole = false;
                }
                _ => {
                    locs.points.insert(
                        SpecPointer::OpArgName(i, name.to_string()),
                        self.pos(k.span().start),
                    );
                    locs.points.insert(
                        SpecPointer::OpArg(i, name.to_string()),
                        self.pos(v.span().start),
                    );
                    match self.ok(self.arg(v, name)) {
                        Some(value) => {
                            op.args.insert(name.to_string(), value);
                        }
                        None => whole = false,
                    }
                }
            }
        }
        if !has_kind {
            let kinds: Vec<&str> = crate::pipeline::registry::schemas()
                .map(|s| s.kind)
                .collect();
            self.report(self.err_at(
                header,
                format!("operator #{} has no `kind`", i + 1),
                Some(format!(
                    "add `kind = \"...\"`, one of: {}",
                    kinds.join(", ")
                )),
            ));
            whole = false;
        }
        (op, whole)
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

    fn string(&self, v: &Spanned<DeValue<'_>>, name: &str) -> Result<String, Error> {
        match v.get_ref() {
            DeValue::String(s) => Ok(s.to_string()),
            other => {
                let help = match (other, name) {
                    // Several edges go in the plural key.
                    (DeValue::Array(_), "input" | "output") => {
                        format!("for several, write `{name}s = [...]`; for one, `{name} = \"...\"`")
                    }
                    _ => format!("quote it: `{name} = \"...\"`"),
                };
                Err(self.err_help(
                    v.span(),
                    format!("`{name}` must be a string, got {}", kind_of(other)),
                    help,
                ))
            }
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
