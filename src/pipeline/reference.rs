//! The pipeline-file reference (for README.md), generated from the `[pipeline]` settings
//! table below and the operator schemas in [`crate::pipeline::registry`].
//!
//! [`SETTINGS`] and [`OP_KEYS`] are also what the pipeline-file parser
//! ([`crate::pipeline::file`]) accepts, so the reference and the parser can't disagree.

use std::fmt::Write;

use crate::schema::{ArgSpec, OpSchema, OPTIONAL};

use super::registry::schemas as registry;

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

/// The keys of `[pipeline]`, in reference order.
pub const SETTINGS: &[KeyDoc] = &[
    KeyDoc {
        name: "batch",
        ty: "integer ≥ 1",
        default: "32",
        doc: "samples per batch",
    },
    KeyDoc {
        name: "threads",
        ty: "integer ≥ 0",
        default: "0",
        doc: "worker threads; 0 means one per core",
    },
    KeyDoc {
        name: "prefetch",
        ty: "integer ≥ 1",
        default: "2",
        doc: "batches prepared ahead of the consumer",
    },
    KeyDoc {
        name: "seed",
        ty: "integer ≥ 0",
        default: "0",
        doc: "seed of every random choice (same seed, same batches)",
    },
    KeyDoc {
        name: "epochs",
        ty: "integer ≥ 1",
        default: "1",
        doc: "passes over the dataset",
    },
    KeyDoc {
        name: "on_error",
        ty: "\"skip\", \"fail\" or \"replace\"",
        default: "\"skip\"",
        doc:
            "a sample that can't be read, decoded or transformed is reported (path and cause) and \
              dropped, its batch filled from the next samples (\"skip\"); or stops the run \
              (\"fail\"); or is replaced by another sample chosen from the seed (\"replace\")",
    },
    KeyDoc {
        name: "device",
        ty: "\"auto\", \"cpu\" or \"gpu\"",
        default: "\"auto\"",
        doc: "where per-sample operators run; \"auto\" uses the GPU when one is usable",
    },
    KeyDoc {
        name: "device_id",
        ty: "integer ≥ 0",
        default: "0",
        doc: "GPU ordinal for the GPU path",
    },
    KeyDoc {
        name: "outputs",
        ty: "array of strings",
        default: "required",
        doc: "edge names handed to the consumer, in order (at least one)",
    },
];

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
    KeyDoc {
        name: "device",
        ty: "\"cpu\" or \"gpu\"",
        default: "—",
        doc: "where to run this operator; left out, the pipeline's `device` decides",
    },
];

/// The pipeline-file reference in Markdown: the `[pipeline]` settings, the reserved keys
/// of `[[op]]`, then every operator kind with its ports and arguments. Deterministic.
pub fn reference_markdown() -> String {
    let mut out = String::new();
    out.push_str("## Pipeline file reference\n\n");
    out.push_str(
        "A pipeline file is TOML: one `[pipeline]` table of settings and one `[[op]]` table \
         per operator, joined by named edges.\n\n",
    );
    out.push_str("### `[pipeline]`\n\n");
    key_table(&mut out, SETTINGS);
    out.push_str("\n### `[[op]]`\n\n");
    out.push_str(
        "Reserved keys are below; every other key of an `[[op]]` table is an argument of the \
         operator (a boolean, number, string, or array of those).\n\n",
    );
    key_table(&mut out, OP_KEYS);
    out.push_str("\n### Operators\n");
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
    let _ = writeln!(out, "\n#### `{}`\n", schema.kind);
    let _ = writeln!(out, "{}\n", schema.doc);
    let backends = match schema.backends {
        crate::schema::Backends::CpuOnly => "CPU",
        crate::schema::Backends::CpuAndGpu => "CPU, GPU",
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
}

fn ports(out: &mut String, title: &str, ports: &[crate::schema::PortSpec]) {
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
    fn reference_lists_every_setting_key_and_operator() {
        let md = reference_markdown();
        for k in SETTINGS.iter().chain(OP_KEYS) {
            assert!(md.contains(&format!("| `{}` |", k.name)), "{}", k.name);
        }
        for s in registry() {
            assert!(md.contains(&format!("#### `{}`\n", s.kind)), "{}", s.kind);
            for a in s.args {
                assert!(
                    md.contains(&format!("| `{}` | {} |", a.name, a.ty)),
                    "{}",
                    a.name
                );
            }
        }
        assert_eq!(md, reference_markdown(), "output must be deterministic");
    }

    #[test]
    fn argument_defaults_are_rendered() {
        let md = reference_markdown();
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
            ty: crate::schema::ArgType::Str,
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
