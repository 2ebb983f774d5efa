//! The nodes of a graph ([`Node`]): what one is, and laying them out, the per-sample
//! operators in run order, each with its edges and, for each input, whether it is that edge's
//! last reader (so its value can be moved, not cloned).

use std::sync::Arc;

use crate::ops::Operator;
use crate::rng::hash_str;
use crate::schema::Args;

use super::super::spec::PipelineSpec;
use super::edges::Edges;
use super::operators::Operators;

/// A built operator node, ready to run.
#[derive(Debug)]
pub struct Node {
    /// Index of the operator in the spec.
    pub spec_index: usize,
    /// Operator kind.
    pub kind: &'static str,
    /// Unique name (keys its randomness).
    pub name: Arc<str>,
    /// Hash of the name, the operator key of its random stream.
    pub key: u64,
    /// The built operator.
    pub op: Box<dyn Operator>,
    /// Input edges (indices into [`Graph::edge_names`](super::Graph::edge_names)).
    pub inputs: Vec<usize>,
    /// Output edges.
    pub outputs: Vec<usize>,
    /// For each input, whether this node is the edge's last reader (the value can be moved).
    pub last_use: Vec<bool>,
    /// The validated arguments the operator was built from (defaults filled in); for a
    /// fused node, the first fused operator's.
    pub args: Args,
    /// For a node that fuses several operators ([`crate::fusion`]), those operators as
    /// built on their own, in order (each with its own operator, name, key, arguments and
    /// edges); empty otherwise. The GPU path runs these, not the fused CPU operator.
    pub fused: Vec<Node>,
    /// For a fused node whose results differ from its operators' on purpose (an opt-in
    /// approximation), what differs.
    pub fusion_note: Option<&'static str>,
}

impl Node {
    /// What differs, on purpose, between this fused node's results and its operators' run
    /// one by one (`None` for nodes that are not fused, or give the same results).
    pub fn fusion_differs(&self) -> Option<&'static str> {
        self.fusion_note
    }

    /// The operators this node runs, as built on their own: its fused operators, or
    /// itself.
    pub fn parts(&self) -> Vec<&Node> {
        if self.fused.is_empty() {
            vec![self]
        } else {
            self.fused.iter().collect()
        }
    }
}

/// The nodes of every operator but the reader, in `order`, taking the built operators and
/// their arguments out of `ops`.
pub(super) fn lay_out(
    spec: &PipelineSpec,
    ops: &mut Operators,
    edges: &Edges,
    order: &[usize],
) -> Vec<Node> {
    let mut remaining_uses = vec![0usize; edges.names.len()];
    for op in &spec.ops {
        for e in &op.inputs {
            remaining_uses[edges.of(e)] += 1;
        }
    }
    for &s in &edges.outputs {
        remaining_uses[s] += 1;
    }
    let mut nodes = Vec::new();
    for &i in order {
        if i == ops.reader.0 {
            continue;
        }
        let op = &spec.ops[i];
        let inputs: Vec<usize> = op.inputs.iter().map(|e| edges.of(e)).collect();
        let last_use = inputs
            .iter()
            .map(|&s| {
                remaining_uses[s] -= 1;
                remaining_uses[s] == 0
            })
            .collect();
        let name: Arc<str> = op.effective_name(i).into();
        nodes.push(Node {
            spec_index: i,
            kind: ops.schemas[i].kind,
            key: hash_str(&name),
            name,
            op: ops.built[i].take().expect("every operator is built, once"),
            inputs,
            outputs: op.outputs.iter().map(|e| edges.of(e)).collect(),
            last_use,
            args: std::mem::take(&mut ops.args[i]),
            fused: Vec::new(),
            fusion_note: None,
        });
    }
    nodes
}
