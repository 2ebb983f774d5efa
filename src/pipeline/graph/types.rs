//! Checking types: each operator's output types inferred from its inputs', in run order, so
//! that an operator given what it can't take is named before anything runs; then the sizes
//! known in advance ([`super::limits`]) and what the consumer may be handed.

use crate::ops::Operator;
use crate::value::ValueType;

use super::super::spec::{PipelineSpec, SpecError, SpecPointer};
use super::edges::Edges;
use super::limits;

/// The type of every edge of `spec` (by edge index), inferring each operator's outputs from
/// its inputs in `order`; `built` holds the operators by spec index (`None`: the reader).
pub(super) fn check_types(
    spec: &PipelineSpec,
    built: &[Option<Box<dyn Operator>>],
    edges: &Edges,
    order: &[usize],
) -> Result<Vec<ValueType>, SpecError> {
    let mut types: Vec<Option<ValueType>> = vec![None; edges.names.len()];
    for &i in order {
        let op = &spec.ops[i];
        let ins: Vec<ValueType> = op
            .inputs
            .iter()
            .map(|e| types[edges.of(e)].expect("producer ran first"))
            .collect();
        let outs = match built[i].as_ref() {
            Some(node) => node.infer(&ins).map_err(|m| {
                let name = op.effective_name(i);
                match node.argument_at_fault(&ins) {
                    Some(arg) => SpecError::new(SpecPointer::OpArg(i, arg.into()), m)
                        .help(format!("or change what feeds operator '{name}'")),
                    None => SpecError::new(SpecPointer::OpInput(i, 0), m)
                        .help(format!("check what feeds '{name}'")),
                }
            })?,
            None => crate::reader::OUTPUT_TYPES.to_vec(),
        };
        for (j, e) in op.outputs.iter().enumerate() {
            types[edges.of(e)] = outs.get(j).copied();
        }
    }
    let types: Vec<ValueType> = types
        .into_iter()
        .map(|t| t.unwrap_or(ValueType::Label))
        .collect();
    limits::check_output_sizes(spec, order, |e| edges.of(e), &types)?;
    for (k, &s) in edges.outputs.iter().enumerate() {
        if types[s] == ValueType::Encoded {
            return Err(SpecError::new(
                SpecPointer::Output(k),
                format!("output '{}' carries encoded file bytes", edges.names[s]),
            )
            .help("decode them first: add a decode operator and output its images"));
        }
    }
    Ok(types)
}
