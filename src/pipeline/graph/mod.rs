//! Building a [`Graph`] from a [`PipelineSpec`]: its operators built, its edges typed and
//! its nodes in an order that runs, or a [`SpecError`] pointing at what to change.
//!
//! [`Graph::build`] runs one pass after another, each in its own file and each stopping at
//! the first problem it finds:
//!
//! 1. the settings in their ranges ([`super::settings`]);
//! 2. `operators`: each operator found by its kind, its arguments checked, built, its ports
//!    counted, the one reader configured;
//! 3. `edges`: each edge produced once, every input and output an edge; then operator names
//!    unique;
//! 4. `order`: an order in which every operator runs after its inputs' producers (or the
//!    cycle);
//! 5. `types`: each edge's type inferred in that order, sizes known in advance within the
//!    limits, no encoded bytes handed to the consumer; then every edge used;
//! 6. `nodes`: the per-sample operators in that order, with the last reader of each edge;
//! 7. `fuse`: runs of adjacent nodes a rule of [`crate::fusion`] matches made one.
//!
//! Where every operator runs is not the graph's business: the pipeline's `device` setting
//! decides it for all of them ([`super::run`]).

use crate::reader::ReaderConfig;
use crate::value::ValueType;

use super::spec::{PipelineSpec, SpecError};

mod edges;
mod fuse;
mod limits;
mod listing;
mod nodes;
mod operators;
mod order;
mod types;

pub use nodes::Node;

/// A validated pipeline: its operators built, its edges typed, its nodes in an order that
/// runs.
#[derive(Debug)]
pub struct Graph {
    /// The definition it was built from.
    pub spec: PipelineSpec,
    /// The reader's configuration.
    pub reader: ReaderConfig,
    /// Edge of the reader's encoded output.
    pub reader_encoded: usize,
    /// Edge of the reader's label output, if wired.
    pub reader_labels: Option<usize>,
    /// Per-sample operators in execution order (the reader excluded).
    pub nodes: Vec<Node>,
    /// The name of each edge (an edge is identified by its index here).
    pub edge_names: Vec<String>,
    /// The type of each edge.
    pub edge_types: Vec<ValueType>,
    /// Edges of the pipeline outputs, in order.
    pub outputs: Vec<usize>,
}

impl Graph {
    /// Validates `spec` and builds its graph. Errors point at the part of the spec to change.
    /// Runs of adjacent operators that a rule of [`crate::fusion`] matches are fused (same
    /// results, fewer passes).
    pub fn build(spec: &PipelineSpec) -> Result<Graph, SpecError> {
        Self::build_with(spec, true)
    }

    /// As [`Graph::build`] but every operator runs on its own: the reference the fused
    /// graph is tested against.
    pub fn build_unfused(spec: &PipelineSpec) -> Result<Graph, SpecError> {
        Self::build_with(spec, false)
    }

    fn build_with(spec: &PipelineSpec, fuse: bool) -> Result<Graph, SpecError> {
        check_settings(spec)?;
        let mut ops = operators::build_operators(spec)?;
        let edges = edges::resolve_edges(spec)?;
        edges::check_unique_names(spec)?;
        let order = order::run_order(spec, &edges)?;
        let edge_types = types::check_types(spec, &ops.built, &edges, &order)?;
        edges::check_every_edge_used(spec, &edges)?;
        let mut nodes = nodes::lay_out(spec, &mut ops, &edges, &order);
        if fuse {
            fuse::fuse_adjacent(&mut nodes, &edges.outputs);
        }
        let (reader_index, reader) = ops.reader;
        let reader_op = &spec.ops[reader_index];
        Ok(Graph {
            spec: spec.clone(),
            reader,
            reader_encoded: edges.of(&reader_op.outputs[0]),
            reader_labels: reader_op.outputs.get(1).map(|e| edges.of(e)),
            nodes,
            edge_names: edges.names,
            edge_types,
            outputs: edges.outputs,
        })
    }
}

/// A problem for each edge of `spec` that is produced but never used (none where its edges
/// can't be resolved): the last check [`Graph::build`] makes, whose problems are independent
/// of each other, so a checker reports them all at once.
pub fn unused_edge_errors(spec: &PipelineSpec) -> Vec<SpecError> {
    edges::resolve_edges(spec)
        .map(|e| edges::unused_edges(spec, &e))
        .unwrap_or_default()
}

/// The first setting out of its declared range ([`crate::pipeline::settings`]).
fn check_settings(spec: &PipelineSpec) -> Result<(), SpecError> {
    match super::settings::validate(&spec.settings).into_iter().next() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

#[cfg(test)]
mod chain_tests;
#[cfg(test)]
mod pass_tests;
#[cfg(test)]
mod tests;
