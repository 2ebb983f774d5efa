//! Fusing: runs of adjacent nodes that a rule of [`crate::fusion`] matches become one node
//! (same results, one pass over the data instead of several).

use crate::fusion::{self, Part};

use super::nodes::Node;

/// Replaces runs of adjacent nodes by the fused operator a rule of [`crate::fusion`] builds
/// for them, left to right, taking the longest rule that matches.
pub(super) fn fuse_adjacent(nodes: &mut Vec<Node>, outputs: &[usize]) {
    let mut k = 0;
    while k < nodes.len() {
        // The run from `k` in which each node feeds the next alone.
        let mut run = 1;
        while k + run < nodes.len() && feeds_alone(&nodes[k + run - 1], &nodes[k + run], outputs) {
            run += 1;
        }
        let parts: Vec<Part<'_>> = nodes[k..k + run]
            .iter()
            .map(|n| Part {
                kind: n.kind,
                name: &n.name,
                key: n.key,
                args: &n.args,
            })
            .collect();
        if let Some(f) = fusion::fuse(&parts) {
            let group: Vec<Node> = nodes.drain(k..k + f.len).collect();
            let (first, last) = (&group[0], &group[group.len() - 1]);
            let names: Vec<&str> = group.iter().map(|n| &*n.name).collect();
            let node = Node {
                spec_index: first.spec_index,
                kind: first.kind,
                name: names.join("+").into(),
                key: first.key,
                op: f.op,
                inputs: first.inputs.clone(),
                outputs: last.outputs.clone(),
                last_use: first.last_use.clone(),
                args: first.args.clone(),
                fusion_note: f.differs,
                fused: group,
            };
            nodes.insert(k, node);
        }
        k += 1;
    }
}

/// Whether `b` is the only reader of `a`'s single output, which isn't a pipeline output (so
/// the edge between them can disappear).
fn feeds_alone(a: &Node, b: &Node, outputs: &[usize]) -> bool {
    a.outputs.len() == 1
        && b.inputs == a.outputs
        && b.last_use == [true]
        && !outputs.contains(&a.outputs[0])
}
