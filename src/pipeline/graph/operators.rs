//! The first pass: each operator of the spec, in order, found by its kind, its arguments
//! checked against its schema, built, and its ports counted; the reader's configuration
//! taken from the one reader.

use crate::ops::Operator;
use crate::reader::ReaderConfig;
use crate::schema::{closest, ArgError, Args, OpSchema};

use super::super::registry;
use super::super::spec::{OnError, PipelineSpec, SpecError, SpecPointer};

/// The operators of a spec, each found, checked and built (by spec index).
pub(super) struct Operators {
    /// The schema of each operator.
    pub(super) schemas: Vec<&'static OpSchema>,
    /// Each operator built; `None` for the reader, which is no per-sample operator.
    pub(super) built: Vec<Option<Box<dyn Operator>>>,
    /// The validated arguments of each (defaults filled in).
    pub(super) args: Vec<Args>,
    /// The reader's spec index and configuration.
    pub(super) reader: (usize, ReaderConfig),
}

/// Finds, checks and builds every operator of `spec`, in spec order: the first problem is
/// that of the first operator at fault.
pub(super) fn build_operators(spec: &PipelineSpec) -> Result<Operators, SpecError> {
    let n = spec.ops.len();
    let mut schemas = Vec::with_capacity(n);
    let mut built = Vec::with_capacity(n);
    let mut arg_sets = Vec::with_capacity(n);
    let mut reader: Option<(usize, ReaderConfig)> = None;
    for (i, op) in spec.ops.iter().enumerate() {
        let schema = find_kind(i, &op.kind)?;
        let op_arg_error = |e: ArgError| arg_error(i, e.named_as_given(schema, &op.args));
        let args = Args::validate(schema, &op.args).map_err(op_arg_error)?;
        let node = match registry::builder(schema.kind) {
            Some(build) => Some(build(&args).map_err(op_arg_error)?),
            None => None,
        };
        if registry::is_reader(schema.kind) {
            if let Some((prev, _)) = reader {
                return Err(SpecError::new(
                    SpecPointer::OpKind(i),
                    format!(
                        "a pipeline has one file_reader (or shard_reader); operator #{} is one already",
                        prev + 1
                    ),
                ));
            }
            let config = ReaderConfig::from_node(schema.kind, &args).map_err(op_arg_error)?;
            if config.shards.is_some() && spec.settings.on_error == OnError::Replace {
                return Err(SpecError::new(
                    SpecPointer::Setting("on_error".into()),
                    "on_error = \"replace\" needs random access to the samples, which a shard_reader does not have",
                )
                .help("use on_error = \"skip\" (bad samples are reported and left out) or \"fail\""));
            }
            reader = Some((i, config));
        }
        check_ports(spec, i, schema)?;
        schemas.push(schema);
        built.push(node);
        arg_sets.push(args);
    }
    let reader = reader.ok_or_else(|| {
        SpecError::new(SpecPointer::Whole, "the pipeline has no file_reader (or shard_reader)")
            .help("add an operator with kind = \"file_reader\" (or \"shard_reader\") that outputs the encoded files")
    })?;
    Ok(Operators {
        schemas,
        built,
        args: arg_sets,
        reader,
    })
}

/// The schema of operator `i`'s `kind`, or an error that names the kinds there are.
fn find_kind(i: usize, kind: &str) -> Result<&'static OpSchema, SpecError> {
    registry::find(kind).ok_or_else(|| {
        let kinds: Vec<&str> = registry::schemas().map(|s| s.kind).collect();
        let help = match closest(kind, &kinds) {
            Some(c) => format!("did you mean '{c}'? (operators: {})", kinds.join(", ")),
            None => format!("operators: {}", kinds.join(", ")),
        };
        SpecError::new(
            SpecPointer::OpKind(i),
            format!("unknown operator kind '{kind}'"),
        )
        .help(help)
    })
}

/// An argument error of operator `i`, pointing at the argument when it names one.
fn arg_error(i: usize, e: ArgError) -> SpecError {
    let at = SpecPointer::of_arg_error(i, &e);
    SpecError {
        at,
        message: e.message,
        help: e.help,
    }
}

/// The outputs of the operators before `i` that no operator reads and the pipeline doesn't
/// hand out: where a missing input most likely comes from. A reader's labels are left out
/// (no operator takes labels).
fn unread_edges(spec: &PipelineSpec, i: usize) -> Vec<&str> {
    let read = |e: &str| {
        spec.ops.iter().any(|o| o.inputs.iter().any(|x| x == e))
            || spec.outputs.iter().any(|x| x == e)
    };
    spec.ops[..i]
        .iter()
        .flat_map(|o| {
            let n = if registry::is_reader(&o.kind) {
                1
            } else {
                o.outputs.len()
            };
            o.outputs.iter().take(n).map(String::as_str)
        })
        .filter(|e| !read(e))
        .collect()
}

/// Operator `i` has as many inputs and outputs as its schema's ports (the reader's labels
/// output is optional).
fn check_ports(spec: &PipelineSpec, i: usize, schema: &OpSchema) -> Result<(), SpecError> {
    let op = &spec.ops[i];
    let want_in = schema.inputs.len();
    if op.inputs.len() != want_in {
        let names: Vec<&str> = schema.inputs.iter().map(|p| p.name).collect();
        let at = if op.inputs.len() > want_in {
            SpecPointer::OpInput(i, want_in)
        } else {
            SpecPointer::Op(i)
        };
        let help = if want_in == 0 {
            format!("'{}' takes no inputs: remove `input`", schema.kind)
        } else if op.inputs.len() > want_in {
            format!(
                "give {want_in} input edge(s), for its input(s) {}",
                names.join(", ")
            )
        } else {
            let unread = unread_edges(spec, i);
            let quoted: Vec<String> = unread.iter().map(|e| format!("\"{e}\"")).collect();
            match (quoted.last(), want_in) {
                (None, _) => format!(
                    "give {want_in} input edge(s) (outputs of earlier operators), for its \
                     input(s) {}",
                    names.join(", ")
                ),
                (Some(last), 1) => format!(
                    "add `input = {last}` (the latest output no operator reads yet), or another \
                     earlier operator's output"
                ),
                _ => format!(
                    "give {want_in} input edge(s), for its input(s) {}; edges no operator \
                     reads yet: {}",
                    names.join(", "),
                    quoted.join(", ")
                ),
            }
        };
        return Err(SpecError::new(
            at,
            format!(
                "'{}' takes {want_in} input(s), {} given",
                schema.kind,
                op.inputs.len()
            ),
        )
        .help(help));
    }
    let max_out = schema.outputs.len();
    let min_out = if registry::is_reader(schema.kind) {
        1
    } else {
        max_out
    };
    if op.outputs.len() < min_out || op.outputs.len() > max_out {
        let names: Vec<&str> = schema.outputs.iter().map(|p| p.name).collect();
        let at = if op.outputs.len() > max_out {
            SpecPointer::OpOutput(i, max_out)
        } else {
            SpecPointer::Op(i)
        };
        return Err(SpecError::new(
            at,
            format!(
                "'{}' has {max_out} output(s), {} given",
                schema.kind,
                op.outputs.len()
            ),
        )
        .help(format!("name its outputs: {}", names.join(", "))));
    }
    Ok(())
}
