//! A pipeline given as a Python dict of the same structure as a pipeline file
//! (`{"pipeline": {...}, "op": [{...}, ...]}`): written out as pipeline-file text, so that
//! the one pipeline-file parser checks it, with each line remembering which part of the dict
//! it came from so that errors point at the dict, not at text the user never saw.

use std::fmt::Write as _;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::errors::pipeline_err;

/// Pipeline-file text made from a dict, and which part of the dict each line came from.
pub struct DictText {
    /// The text.
    pub text: String,
    /// For line `i + 1` of `text`, the dict part written there (e.g. `["op"][2]["size"]`).
    pub origins: Vec<String>,
}

impl DictText {
    /// Where line `line` (1-based) came from, in words.
    pub fn origin(&self, line: usize) -> &str {
        line.checked_sub(1)
            .and_then(|i| self.origins.get(i))
            .map_or("the pipeline dict", String::as_str)
    }

    fn line(&mut self, text: &str, origin: String) {
        self.text.push_str(text);
        self.text.push('\n');
        self.origins.push(origin);
    }
}

/// A TOML key: bare when it can be, else quoted.
fn key(k: &str) -> String {
    let bare = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        k.to_string()
    } else {
        toml::Value::String(k.to_string()).to_string()
    }
}

/// A dict's keys as strings (a pipeline file's keys are strings), in the dict's order.
fn entries<'py>(d: &Bound<'py, PyDict>, at: &str) -> PyResult<Vec<(String, Bound<'py, PyAny>)>> {
    let py = d.py();
    d.iter()
        .map(|(k, v)| match k.cast::<PyString>() {
            Ok(s) => Ok((s.to_cow()?.into_owned(), v)),
            Err(_) => Err(pipeline_err(
                py,
                format!("{at}: the key {} is not a string", k.repr()?),
                Some("pipeline keys are names, as in a pipeline file"),
            )),
        })
        .collect()
}

/// A Python value as a TOML value; `at` says where it is, for errors.
fn value(v: &Bound<'_, PyAny>, at: &str) -> PyResult<toml::Value> {
    let py = v.py();
    if let Ok(b) = v.cast::<PyBool>() {
        return Ok(toml::Value::Boolean(b.is_true()));
    }
    if v.is_instance_of::<PyInt>() {
        let i: i64 = v.extract().map_err(|_| {
            pipeline_err(
                py,
                format!(
                    "{at}: {} is out of range",
                    v.repr().map(|r| r.to_string()).unwrap_or_default()
                ),
                None,
            )
        })?;
        return Ok(toml::Value::Integer(i));
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(toml::Value::Float(v.extract()?));
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(toml::Value::String(s.to_cow()?.into_owned()));
    }
    if v.hasattr("__fspath__")? {
        let p = v.call_method0("__fspath__")?;
        return value(&p, at);
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let items = v
            .try_iter()?
            .enumerate()
            .map(|(i, item)| value(&item?, &format!("{at}[{i}]")))
            .collect::<PyResult<Vec<_>>>()?;
        return Ok(toml::Value::Array(items));
    }
    if let Ok(d) = v.cast::<PyDict>() {
        let mut t = toml::Table::new();
        for (k, item) in entries(d, at)? {
            let inner = value(&item, &format!("{at}[{k:?}]"))?;
            t.insert(k, inner);
        }
        return Ok(toml::Value::Table(t));
    }
    let help = if v.is_none() {
        "leave the key out to take its default"
    } else {
        "use a bool, int, float, str, path, list or dict"
    };
    Err(pipeline_err(
        py,
        format!(
            "{at}: {} has no pipeline-file form",
            v.repr().map(|r| r.to_string()).unwrap_or_default()
        ),
        Some(help),
    ))
}

/// `key = value` for one entry of a table.
fn entry_line(k: &str, v: &Bound<'_, PyAny>, at: &str) -> PyResult<String> {
    let v = value(v, at)?;
    // A nested table is written inline, like any other value.
    let text = match &v {
        toml::Value::Table(t) => inline_table(t),
        other => other.to_string(),
    };
    Ok(format!("{} = {text}", key(k)))
}

fn inline_table(t: &toml::Table) -> String {
    let mut out = String::from("{ ");
    for (i, (k, v)) in t.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let text = match v {
            toml::Value::Table(inner) => inline_table(inner),
            other => other.to_string(),
        };
        let _ = write!(out, "{} = {text}", key(k));
    }
    out.push_str(" }");
    out
}

/// Writes `d` as pipeline-file text.
pub fn to_text(d: &Bound<'_, PyDict>) -> PyResult<DictText> {
    let py = d.py();
    let mut out = DictText {
        text: String::new(),
        origins: Vec::new(),
    };
    let top = entries(d, "the pipeline dict")?;
    // Plain values first: in TOML they can't follow a table. The parser then says what is
    // wrong with them, at their line.
    let is_table = |k: &str, v: &Bound<'_, PyAny>| {
        v.is_instance_of::<PyDict>() || (k == "op" && v.is_instance_of::<PyList>())
    };
    for (k, v) in &top {
        if !is_table(k, v) {
            let at = format!("[{k:?}]");
            let line = entry_line(k, v, &at)?;
            out.line(&line, at);
        }
    }
    for (k, v) in &top {
        if let Ok(table) = v.cast::<PyDict>() {
            let at = format!("[{k:?}]");
            out.line(&format!("[{}]", key(k)), at.clone());
            for (ik, iv) in entries(table, &at)? {
                let inner_at = format!("{at}[{ik:?}]");
                let line = entry_line(&ik, &iv, &inner_at)?;
                out.line(&line, inner_at);
            }
        } else if k == "op" && v.is_instance_of::<PyList>() {
            for (i, op) in v.try_iter()?.enumerate() {
                let op = op?;
                let at = format!("[\"op\"][{i}]");
                let Ok(op) = op.cast::<PyDict>() else {
                    return Err(pipeline_err(
                        py,
                        format!("{at}: an operator must be a dict, got {}", op.repr()?),
                        Some("write each operator as {\"kind\": ..., \"input\": ..., \"output\": ...}"),
                    ));
                };
                out.line("[[op]]", at.clone());
                for (ik, iv) in entries(op, &at)? {
                    let inner_at = format!("{at}[{ik:?}]");
                    let line = entry_line(&ik, &iv, &inner_at)?;
                    out.line(&line, inner_at);
                }
            }
        }
    }
    Ok(out)
}

/// A message or help line of the pipeline-file checks told in a dict's terms: the
/// `` `key = value` `` examples written as the dict's `"key": value`, and the file's tables
/// (`[pipeline]`, `[[op]]`) named as the dict's keys.
pub fn in_dict_terms(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('`') {
        let Some(len) = rest[open + 1..].find('`') else {
            break;
        };
        let quoted = &rest[open + 1..open + 1 + len];
        out.push_str(&rest[..open]);
        out.push('`');
        out.push_str(&as_dict_entry(quoted));
        out.push('`');
        rest = &rest[open + 2 + len..];
    }
    out.push_str(rest);
    out.replace("[[op]]", "\"op\"")
        .replace("[pipeline]", "\"pipeline\"")
}

/// `key = value` (TOML) as `"key": value` (Python); anything else as it is.
fn as_dict_entry(toml_text: &str) -> String {
    let Some((k, v)) = toml_text.split_once(" = ") else {
        return toml_text.to_string();
    };
    if key(k) != k {
        return toml_text.to_string();
    }
    // TOML's booleans are Python's capitalised; strings and numbers are written alike.
    fn flush(word: &mut String, python: &mut String) {
        python.push_str(match word.as_str() {
            "true" => "True",
            "false" => "False",
            w => w,
        });
        word.clear();
    }
    let (mut python, mut word, mut in_string) = (String::new(), String::new(), false);
    for c in v.chars() {
        if in_string {
            python.push(c);
            in_string = c != '"';
        } else if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            flush(&mut word, &mut python);
            python.push(c);
            in_string = c == '"';
        }
    }
    flush(&mut word, &mut python);
    format!("\"{k}\": {python}")
}
