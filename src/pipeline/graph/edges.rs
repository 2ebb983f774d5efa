//! Resolving names: each edge produced by exactly one operator, every input and pipeline
//! output an edge that exists, operator names unique, and (once the types are known) every
//! edge used.

use std::collections::HashMap;

use crate::reader::is_reader_kind;
use crate::schema::closest;

use super::super::spec::{PipelineSpec, SpecError, SpecPointer};

/// The edges of a spec: each named once, by index.
#[derive(Debug)]
pub(super) struct Edges<'s> {
    /// The name of each edge.
    pub(super) names: Vec<String>,
    /// The spec index of each edge's producer.
    pub(super) producer: Vec<usize>,
    /// The pipeline outputs, in order.
    pub(super) outputs: Vec<usize>,
    index: HashMap<&'s str, usize>,
}

impl Edges<'_> {
    /// The edge called `name` (every name used in the spec has one once resolved).
    pub(super) fn of(&self, name: &str) -> usize {
        self.index[name]
    }
}

/// The edges of `spec`: each output of an operator is a new edge, every input and pipeline
/// output names one of them, and the pipeline has outputs, each listed once.
pub(super) fn resolve_edges(spec: &PipelineSpec) -> Result<Edges<'_>, SpecError> {
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut producer: Vec<usize> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for (i, op) in spec.ops.iter().enumerate() {
        for (j, out) in op.outputs.iter().enumerate() {
            if let Some(&s) = index.get(out.as_str()) {
                return Err(SpecError::new(
                    SpecPointer::OpOutput(i, j),
                    format!(
                        "edge '{out}' is already produced by operator '{}'",
                        spec.ops[producer[s]].effective_name(producer[s])
                    ),
                )
                .help("every edge has one producer: give this output a new name"));
            }
            index.insert(out, names.len());
            producer.push(i);
            names.push(out.clone());
        }
    }
    let unknown = |name: &str| {
        let known: Vec<&str> = names.iter().map(String::as_str).collect();
        match closest(name, &known) {
            Some(c) => format!("did you mean '{c}'?"),
            None => format!("edges: {}", known.join(", ")),
        }
    };
    for (i, op) in spec.ops.iter().enumerate() {
        for (j, inp) in op.inputs.iter().enumerate() {
            if !index.contains_key(inp.as_str()) {
                return Err(SpecError::new(
                    SpecPointer::OpInput(i, j),
                    format!("no operator produces edge '{inp}'"),
                )
                .help(unknown(inp)));
            }
        }
    }
    let mut outputs = Vec::new();
    for (k, o) in spec.outputs.iter().enumerate() {
        let Some(&s) = index.get(o.as_str()) else {
            return Err(SpecError::new(
                SpecPointer::Output(k),
                format!("output '{o}' is not an edge of the pipeline"),
            )
            .help(unknown(o)));
        };
        if outputs.contains(&s) {
            return Err(SpecError::new(
                SpecPointer::Output(k),
                format!("output '{o}' is listed twice"),
            )
            .help("list each output once"));
        }
        outputs.push(s);
    }
    if outputs.is_empty() {
        return Err(SpecError::new(
            SpecPointer::Setting("outputs".into()),
            "the pipeline has no outputs",
        )
        .help("add outputs = [\"images\", \"labels\"] to [pipeline]"));
    }
    Ok(Edges {
        names,
        producer,
        outputs,
        index,
    })
}

/// Operator names are unique: they key the random streams. (Checked after the edges, since
/// a default name is the first output's and a clash there is a duplicate edge.)
pub(super) fn check_unique_names(spec: &PipelineSpec) -> Result<(), SpecError> {
    let mut names: HashMap<String, usize> = HashMap::new();
    for (i, op) in spec.ops.iter().enumerate() {
        let name = op.effective_name(i);
        if let Some(&prev) = names.get(&name) {
            // A name written is what to change; an implicit one (the first output's) is the
            // operator's.
            let at = match op.name {
                Some(_) => SpecPointer::OpName(i),
                None => SpecPointer::Op(i),
            };
            return Err(SpecError::new(
                at,
                format!(
                    "operator name '{name}' is already used by operator #{}",
                    prev + 1
                ),
            )
            .help("give one of them a different `name` (names key the random choices)"));
        }
        names.insert(name, i);
    }
    Ok(())
}

/// Every edge is an operator's input or a pipeline output: one that is neither is a
/// mistake the file should hear about.
pub(super) fn check_every_edge_used(spec: &PipelineSpec, edges: &Edges) -> Result<(), SpecError> {
    match unused_edges(spec, edges).into_iter().next() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// A problem for each edge that is produced but never used, in the order of the edges.
pub(super) fn unused_edges(spec: &PipelineSpec, edges: &Edges) -> Vec<SpecError> {
    let mut used = vec![false; edges.names.len()];
    for op in &spec.ops {
        for e in &op.inputs {
            used[edges.of(e)] = true;
        }
    }
    for &s in &edges.outputs {
        used[s] = true;
    }
    let unused = used.iter().enumerate().filter(|(_, u)| !**u);
    unused
        .map(|(s, _)| {
            let i = edges.producer[s];
            let j = spec.ops[i]
                .outputs
                .iter()
                .position(|o| *o == edges.names[s])
                .unwrap_or(0);
            let labels = j == 1 && is_reader_kind(&spec.ops[i].kind);
            let optional = if labels {
                " (the reader's labels output is optional)"
            } else {
                ""
            };
            SpecError::new(
                SpecPointer::OpOutput(i, j),
                format!("edge '{}' is produced but never used", edges.names[s]),
            )
            .help(format!(
                "use it as an input, list it in [pipeline] outputs, or remove it{optional}"
            ))
        })
        .collect()
}
