//! The pipeline-file docs (`docs/pipeline-file.md`), generated from the settings
//! declarations in [`crate::pipeline::settings`] and the operator schemas in
//! [`crate::pipeline::registry`].
//!
//! [`OP_KEYS`] and [`OUTPUTS`], like the settings, are also what the pipeline-file parser
//! ([`crate::pipeline::file`]) accepts, so the docs and the parser can't disagree.

use std::fmt::Write;

use crate::pipeline::registry::schemas as registry;
use crate::pipeline::settings::SETTINGS;
use crate::schema::{ArgSpec, OpSchema, OPTIONAL};

/// Where the generated docs are kept in the repository, and how to regenerate them.
pub const PATH: &str = "docs/pipeline-file.md";

/// One documented key of a pipeline file.
#[derive(Debug, Clone, Copy)]
pub struct KeyDoc {
    /// The key as written in the file.
    pub name: &'static str,
    /// Its type, in words.
    pub ty: &'static str,
    /// Its default as written in the file, or "required" / "—".
    pub default: &'static str,
    /// What it means.
    pub doc: &'static str,
}

/// The one key of `[pipeline]` that is not a setting: the edges handed to the consumer.
pub const OUTPUTS: KeyDoc = KeyDoc {
    name: "outputs",
    ty: "array of strings",
    default: "required",
    doc: "edge names handed to the consumer, in order (at least one)",
};

/// The reserved keys of an `[[op]]` table; every other key is an argument of the operator.
pub const OP_KEYS: &[KeyDoc] = &[
    KeyDoc {
        name: "kind",
        ty: "string",
        default: "required",
        doc: "the operator (see below)",
    },
    KeyDoc {
        name: "name",
        ty: "string",
        default: "first output",
        doc: "unique name; also keys the operator's random choices",
    },
    KeyDoc {
        name: "input",
        ty: "string",
        default: "—",
        doc: "the one input edge (or use `inputs`, not both)",
    },
    KeyDoc {
        name: "inputs",
        ty: "array of strings",
        default: "[]",
        doc: "input edges, in port order",
    },
    KeyDoc {
        name: "output",
        ty: "string",
        default: "—",
        doc: "the one output edge (or use `outputs`, not both)",
    },
    KeyDoc {
        name: "outputs",
        ty: "array of strings",
        default: "[]",
        doc: "output edges, in port order",
    },
];

/// A key an `[[op]]` table may not have: the pipeline's `device` setting decides where every
/// operator runs, and a file that asks for one operator's device is refused (with
/// [`OP_DEVICE_HELP`]) rather than run elsewhere. Nor is it an operator argument.
pub const OP_DEVICE: &str = "device";

/// What to do about an operator's `device`.
pub const OP_DEVICE_HELP: &str = "remove this line; to run the pipeline on the GPU, set \
     `device = \"gpu\"` (or \"auto\") under [pipeline], or pass --device gpu";

/// The pipeline-file docs in Markdown: the `[pipeline]` settings, the reserved keys of
/// `[[op]]`, then every operator kind with its ports and arguments. Deterministic.
pub fn markdown() -> String {
    let mut out = String::new();
    out.push_str("# Pipeline files\n\n");
    let _ = writeln!(
        out,
        "<!-- Generated from the settings and operator schemas; do not edit. Regenerate with \
         `STOKEHOLD_BLESS=1 cargo test --test docs`. -->\n"
    );
    out.push_str(
        "A pipeline file is TOML: one `[pipeline]` table of settings and one `[[op]]` table \
         per operator, joined by named edges. `stokehold check FILE` reports every problem \
         it finds with its line, column and what to change.\n\n",
    );
    out.push_str("## `[pipeline]`\n\n");
    out.push_str(
        "Every setting can be overridden on the command line of `stokehold run`, `bench` \
         and `tune` by the flag in its row.\n\n",
    );
    out.push_str("| key | type | default | flag | meaning |\n|---|---|---|---|---|\n");
    for s in SETTINGS {
        let _ = writeln!(
            out,
            "| `{}` | {} | `{}` | `--{}` | {} |",
            s.name(),
            cell(&s.type_doc()),
            cell(s.spec.default.unwrap_or("")),
            s.flag.long,
            cell(s.spec.doc)
        );
    }
    let k = OUTPUTS;
    let _ = writeln!(
        out,
        "| `{}` | {} | {} | — | {} |",
        k.name,
        cell(k.ty),
        code_or_word(k.default),
        cell(k.doc)
    );
    out.push_str("\n## `[[op]]`\n\n");
    out.push_str(
        "Reserved keys are below; every other key of an `[[op]]` table is an argument of the \
         operator (a boolean, number, string, or array of those).\n\n",
    );
    key_table(&mut out, OP_KEYS);
    let _ = writeln!(
        out,
        "\nAn operator has no `{OP_DEVICE}`: the `[pipeline]` setting `device` decides where \
         every operator runs (on the GPU path nvJPEG decodes and one fused kernel runs every \
         operator after the decoder; there is no per-operator split). A `{OP_DEVICE}` key in \
         an `[[op]]` table is an error that says to remove it and set `device` under \
         `[pipeline]` (or pass `--device`)."
    );
    out.push_str("\n## Operators\n");
    for schema in registry() {
        operator_section(&mut out, schema);
    }
    out
}

fn key_table(out: &mut String, keys: &[KeyDoc]) {
    out.push_str("| key | type | default | meaning |\n|---|---|---|---|\n");
    for k in keys {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} |",
            k.name,
            cell(k.ty),
            code_or_word(k.default),
            cell(k.doc)
        );
    }
}

fn operator_section(out: &mut String, schema: &OpSchema) {
    let _ = writeln!(out, "\n### `{}`\n", schema.kind);
    let _ = writeln!(out, "{}\n", schema.doc);
    let backends = match schema.backends {
        crate::ops::Backends::CpuOnly => "CPU",
        crate::ops::Backends::CpuAndGpu => "CPU, GPU",
    };
    let _ = writeln!(out, "Runs on: {backends}.\n");
    ports(out, "Inputs", schema.inputs);
    ports(out, "Outputs", schema.outputs);
    if schema.args.is_empty() {
        out.push_str("No arguments.\n");
        return;
    }
    out.push_str("\n| argument | type | default | meaning |\n|---|---|---|---|\n");
    for a in schema.args {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} |",
            a.name,
            cell(&a.ty.to_string()),
            arg_default(a),
            cell(a.doc)
        );
    }
    if !schema.aliases.is_empty() {
        let names: Vec<String> = schema
            .aliases
            .iter()
            .map(|a| format!("`{}` for `{}`", a.alias, a.name))
            .collect();
        let _ = writeln!(out, "\nOther names accepted: {}.", names.join(", "));
    }
}

fn ports(out: &mut String, title: &str, ports: &[crate::ops::PortSpec]) {
    if ports.is_empty() {
        let _ = writeln!(out, "{title}: none.\n");
        return;
    }
    let _ = writeln!(out, "{title}:\n");
    for (i, p) in ports.iter().enumerate() {
        let _ = writeln!(out, "{}. `{}`: {}", i + 1, p.name, p.doc);
    }
    out.push('\n');
}

fn arg_default(a: &ArgSpec) -> String {
    match a.default {
        None => "required".to_string(),
        d if d == OPTIONAL => "optional".to_string(),
        Some(d) => format!("`{}`", cell(d)),
    }
}

fn code_or_word(s: &str) -> String {
    match s {
        "required" | "—" | "first output" => s.to_string(),
        _ => format!("`{}`", cell(s)),
    }
}

/// Escapes what would break a Markdown table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_list_every_setting_key_and_operator() {
        let md = markdown();
        for s in SETTINGS {
            assert!(
                md.contains(&format!("| `{}` | {} |", s.name(), s.type_doc())),
                "{}",
                s.name()
            );
            assert!(md.contains(&format!("`--{}`", s.flag.long)), "{}", s.name());
        }
        for k in OP_KEYS.iter().chain([&OUTPUTS]) {
            assert!(md.contains(&format!("| `{}` |", k.name)), "{}", k.name);
        }
        for s in registry() {
            assert!(md.contains(&format!("### `{}`\n", s.kind)), "{}", s.kind);
            for a in s.args {
                assert!(
                    md.contains(&format!("| `{}` | {} |", a.name, a.ty)),
                    "{}",
                    a.name
                );
            }
            for a in s.aliases {
                let said = format!("`{}` for `{}`", a.alias, a.name);
                assert!(md.contains(&said), "{said}");
            }
        }
        assert_eq!(md, markdown(), "output must be deterministic");
    }

    #[test]
    fn argument_defaults_are_rendered() {
        let md = markdown();
        // flip's arguments have TOML defaults; the reader section says when it has none.
        assert!(
            md.contains("| `horizontal` | number in [0, 1] | `0.5` |"),
            "{md}"
        );
        assert!(md.contains("| `vertical` | number in [0, 1] | `0.0` |"));
    }

    #[test]
    fn table_cells_are_escaped() {
        assert_eq!(cell("a|b\nc"), "a\\|b c");
        let a = ArgSpec {
            name: "x",
            ty: crate::ops::ArgType::Str,
            default: None,
            doc: "",
        };
        assert_eq!(arg_default(&a), "required");
        let b = ArgSpec {
            default: OPTIONAL,
            ..a
        };
        assert_eq!(arg_default(&b), "optional");
    }
}
