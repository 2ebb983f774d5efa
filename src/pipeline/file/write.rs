//! Writing a [`PipelineSpec`] as a pipeline file: settings from their declarations in
//! [`crate::pipeline::settings`], then one `[[op]]` table per operator.

use std::fmt::Write as _;

use crate::ops::ArgValue;
use crate::pipeline::settings::{Unset, SETTINGS};
use crate::pipeline::spec::PipelineSpec;

/// Writes `spec` as a pipeline file that [`parse`](super::parse) reads back into an equal spec
/// (`file` aside). Every setting is written out explicitly; arguments in name order.
///
/// Not every spec has a file form: unbounded `epochs` (`None`) and a `seed` above
/// `i64::MAX` are written as comments and read back as their defaults; empty `outputs`,
/// an argument whose name is a reserved `[[op]]` key, or a NaN argument in a list compared
/// for equality do not survive the round trip (the first two are errors when read back).
pub fn to_toml(spec: &PipelineSpec) -> String {
    let mut out = String::new();
    out.push_str("[pipeline]\n");
    for setting in SETTINGS {
        let name = setting.name();
        let _ = match (setting.value(&spec.settings), setting.unset) {
            (Some(v), _) => writeln!(out, "{name} = {}", arg_toml(&v)),
            (None, Unset::AsInt(n, _)) => writeln!(out, "{name} = {n}"),
            (None, Unset::RustOnly(meaning)) => {
                writeln!(out, "# {name}: {meaning} (has no pipeline-file form)")
            }
            (None, Unset::Never) => writeln!(out, "# {name}: no value"),
        };
    }
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
        for (name, value) in &op.args {
            let _ = writeln!(out, "{} = {}", key(name), arg_toml(value));
        }
    }
    out
}

/// A TOML basic string.
pub(super) fn quote(s: &str) -> String {
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
