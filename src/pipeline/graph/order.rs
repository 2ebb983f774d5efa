//! The order operators run in: each after the producers of its inputs (Kahn's algorithm,
//! stable in spec order), or the cycle that makes an order impossible.

use super::super::spec::{PipelineSpec, SpecError, SpecPointer};
use super::edges::Edges;

/// The spec indices of `spec`'s operators in an order that runs: every operator after the
/// producers of its inputs, otherwise in spec order.
pub(super) fn run_order(spec: &PipelineSpec, edges: &Edges) -> Result<Vec<usize>, SpecError> {
    let n = spec.ops.len();
    let deps: Vec<Vec<usize>> = spec
        .ops
        .iter()
        .map(|op| {
            op.inputs
                .iter()
                .map(|e| edges.producer[edges.of(e)])
                .collect()
        })
        .collect();
    let mut done = vec![false; n];
    let mut order = Vec::with_capacity(n);
    while order.len() < n {
        let next = (0..n).find(|&i| !done[i] && deps[i].iter().all(|&d| done[d] && d != i));
        let Some(i) = next else {
            let stuck = (0..n).find(|&i| !done[i]).unwrap_or(0);
            let cycle = find_cycle(stuck, &deps, &done);
            let names: Vec<String> = cycle
                .iter()
                .map(|&i| spec.ops[i].effective_name(i))
                .collect();
            return Err(SpecError::new(
                SpecPointer::Op(cycle[0]),
                format!("the operators form a cycle: {} -> {}", names.join(" -> "), names[0]),
            )
            .help("an operator can't consume an edge that depends on its own output; rename an edge to break the cycle"));
        };
        done[i] = true;
        order.push(i);
    }
    Ok(order)
}

/// Follows unfinished dependencies from `start` until a node repeats; returns the cycle.
fn find_cycle(start: usize, deps: &[Vec<usize>], done: &[bool]) -> Vec<usize> {
    let mut path = vec![start];
    let mut cur = start;
    loop {
        let next = deps[cur].iter().copied().find(|&d| !done[d]).unwrap_or(cur);
        if let Some(pos) = path.iter().position(|&p| p == next) {
            let mut cycle: Vec<usize> = path[pos..].to_vec();
            cycle.reverse();
            return cycle;
        }
        path.push(next);
        cur = next;
    }
}
