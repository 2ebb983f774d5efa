//! Validation and planning: turns a [`PipelineSpec`] into a [`Graph`] whose operators are
//! built, whose edges are typed, and whose nodes are in an order that can run — or into a
//! [`SpecError`] pointing at what to change.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;

use crate::fusion::{self, Part};
use crate::ops::Operator;
use crate::reader::ReaderConfig;
use crate::rng::hash_str;
use crate::schema::{closest, ArgError, Args, Backends, OpSchema};
use crate::value::ValueType;

use super::registry;
use super::spec::{OnError, PipelineSpec, Placement, SpecError, SpecPointer};

mod limits;

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
    /// Input edges (indices into [`Graph::edge_names`]).
    pub inputs: Vec<usize>,
    /// Output edges.
    pub outputs: Vec<usize>,
    /// For each input, whether this node is the edge's last reader (the value can be moved).
    pub last_use: Vec<bool>,
    /// Where it runs.
    pub placement: Placement,
    /// The validated arguments the operator was built from (defaults filled in); for a
    /// fused node, the first fused operator's.
    pub args: Args,
    /// For a node that fuses several operators ([`crate::fusion`]), those operators as
    /// planned on their own, in order (each with its own operator, name, key, arguments and
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

    /// The operators this node runs, as planned on their own: its fused operators, or
    /// itself.
    pub fn parts(&self) -> Vec<&Node> {
        if self.fused.is_empty() {
            vec![self]
        } else {
            self.fused.iter().collect()
        }
    }
}

/// A validated pipeline, planned for execution.
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
    /// Validates `spec` and plans it. Errors point at the part of the spec to change.
    /// Runs of adjacent operators that a rule of [`crate::fusion`] matches are fused (same
    /// results, fewer passes).
    pub fn build(spec: &PipelineSpec) -> Result<Graph, SpecError> {
        Self::build_with(spec, true)
    }

    /// As [`Graph::build`] but every operator runs on its own: the reference the fused
    /// plan is tested against.
    pub fn build_unfused(spec: &PipelineSpec) -> Result<Graph, SpecError> {
        Self::build_with(spec, false)
    }

    fn build_with(spec: &PipelineSpec, fuse: bool) -> Result<Graph, SpecError> {
        check_settings(spec)?;
        let mut schemas: Vec<&'static OpSchema> = Vec::with_capacity(spec.ops.len());
        let mut built: Vec<Option<Box<dyn Operator>>> = Vec::with_capacity(spec.ops.len());
        let mut arg_sets: Vec<Args> = Vec::with_capacity(spec.ops.len());
        let mut reader: Option<(usize, ReaderConfig)> = None;
        let mut names: HashMap<String, usize> = HashMap::new();

        for (i, op) in spec.ops.iter().enumerate() {
            let schema = registry::find(&op.kind).ok_or_else(|| {
                let kinds: Vec<&str> = registry::schemas().map(|s| s.kind).collect();
                let help = match closest(&op.kind, &kinds) {
                    Some(c) => format!("did you mean '{c}'? (operators: {})", kinds.join(", ")),
                    None => format!("operators: {}", kinds.join(", ")),
                };
                SpecError::new(
                    SpecPointer::OpKind(i),
                    format!("unknown operator kind '{}'", op.kind),
                )
                .help(help)
            })?;
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
            if let Some(p) = op.placement {
                if p == Placement::Gpu && schema.backends == Backends::CpuOnly {
                    return Err(SpecError::new(
                        SpecPointer::OpPlacement(i),
                        format!("'{}' runs on the CPU only", schema.kind),
                    )
                    .help("remove `device = \"gpu\"` from this operator"));
                }
            }
            schemas.push(schema);
            built.push(node);
            arg_sets.push(args);
        }
        let (reader_index, reader_config) = reader.ok_or_else(|| {
            SpecError::new(SpecPointer::Whole, "the pipeline has no file_reader (or shard_reader)")
                .help("add an operator with kind = \"file_reader\" (or \"shard_reader\") that outputs the encoded files")
        })?;

        // Edges: each produced exactly once.
        let mut edge_of: HashMap<&str, usize> = HashMap::new();
        let mut producer: Vec<usize> = Vec::new();
        let mut edge_names: Vec<String> = Vec::new();
        for (i, op) in spec.ops.iter().enumerate() {
            for (j, out) in op.outputs.iter().enumerate() {
                if let Some(&s) = edge_of.get(out.as_str()) {
                    return Err(SpecError::new(
                        SpecPointer::OpOutput(i, j),
                        format!(
                            "edge '{out}' is already produced by operator '{}'",
                            spec.ops[producer[s]].effective_name(producer[s])
                        ),
                    )
                    .help("every edge has one producer: give this output a new name"));
                }
                edge_of.insert(out, edge_names.len());
                producer.push(i);
                edge_names.push(out.clone());
            }
        }
        for (i, op) in spec.ops.iter().enumerate() {
            for (j, inp) in op.inputs.iter().enumerate() {
                if !edge_of.contains_key(inp.as_str()) {
                    let known: Vec<&str> = edge_names.iter().map(String::as_str).collect();
                    let help = match closest(inp, &known) {
                        Some(c) => format!("did you mean '{c}'?"),
                        None => format!("edges: {}", known.join(", ")),
                    };
                    return Err(SpecError::new(
                        SpecPointer::OpInput(i, j),
                        format!("no operator produces edge '{inp}'"),
                    )
                    .help(help));
                }
            }
        }
        let mut outputs = Vec::new();
        for (k, o) in spec.outputs.iter().enumerate() {
            let Some(&s) = edge_of.get(o.as_str()) else {
                let known: Vec<&str> = edge_names.iter().map(String::as_str).collect();
                let help = match closest(o, &known) {
                    Some(c) => format!("did you mean '{c}'?"),
                    None => format!("edges: {}", known.join(", ")),
                };
                return Err(SpecError::new(
                    SpecPointer::Output(k),
                    format!("output '{o}' is not an edge of the pipeline"),
                )
                .help(help));
            };
            if outputs.contains(&s) {
                return Err(SpecError::new(
                    SpecPointer::Output(k),
                    format!("output '{o}' is listed twice"),
                ));
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

        // Names key the random streams, so they must be unique (checked after the edges,
        // since a default name is the first output's and a clash there is a duplicate edge).
        for (i, op) in spec.ops.iter().enumerate() {
            let name = op.effective_name(i);
            if let Some(&prev) = names.get(&name) {
                return Err(SpecError::new(
                    SpecPointer::Op(i),
                    format!(
                        "operator name '{name}' is already used by operator #{}",
                        prev + 1
                    ),
                )
                .help("give one of them a different `name` (names key the random choices)"));
            }
            names.insert(name, i);
        }

        // Topological order (Kahn), stable in spec order; what remains is a cycle.
        let n = spec.ops.len();
        let deps: Vec<Vec<usize>> = spec
            .ops
            .iter()
            .map(|op| {
                op.inputs
                    .iter()
                    .map(|e| producer[edge_of[e.as_str()]])
                    .collect()
            })
            .collect();
        let mut done = vec![false; n];
        let mut order = Vec::with_capacity(n);
        while order.len() < n {
            let next = (0..n).find(|&i| !done[i] && deps[i].iter().all(|&d| done[d] && d != i));
            match next {
                Some(i) => {
                    done[i] = true;
                    order.push(i);
                }
                None => {
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
                }
            }
        }

        // Types, in order.
        let mut edge_types: Vec<Option<ValueType>> = vec![None; edge_names.len()];
        for &i in &order {
            let op = &spec.ops[i];
            let ins: Vec<ValueType> = op
                .inputs
                .iter()
                .map(|e| edge_types[edge_of[e.as_str()]].expect("producer ran first"))
                .collect();
            let outs = match built[i].as_ref() {
                Some(node) => node.infer(&ins).map_err(|m| {
                    SpecError::new(SpecPointer::OpInput(i, 0), m)
                        .help(format!("check what feeds '{}'", op.effective_name(i)))
                })?,
                None => crate::reader::OUTPUT_TYPES.to_vec(),
            };
            for (j, e) in op.outputs.iter().enumerate() {
                edge_types[edge_of[e.as_str()]] = outs.get(j).copied();
            }
        }
        let edge_types: Vec<ValueType> = edge_types
            .into_iter()
            .map(|t| t.unwrap_or(ValueType::Label))
            .collect();
        limits::check_output_sizes(spec, &order, |e| edge_of[e], &edge_types)?;
        for (k, &s) in outputs.iter().enumerate() {
            if edge_types[s] == ValueType::Encoded {
                return Err(SpecError::new(
                    SpecPointer::Output(k),
                    format!("output '{}' carries encoded file bytes", edge_names[s]),
                )
                .help("decode them first: add a decode operator and output its images"));
            }
        }

        // Dangling edges: produced, never consumed nor output.
        let mut consumed = vec![false; edge_names.len()];
        for op in &spec.ops {
            for e in &op.inputs {
                consumed[edge_of[e.as_str()]] = true;
            }
        }
        for &s in &outputs {
            consumed[s] = true;
        }
        for (s, used) in consumed.iter().enumerate() {
            if !used {
                let i = producer[s];
                let j = spec.ops[i]
                    .outputs
                    .iter()
                    .position(|o| *o == edge_names[s])
                    .unwrap_or(0);
                return Err(SpecError::new(
                    SpecPointer::OpOutput(i, j),
                    format!("edge '{}' is produced but never used", edge_names[s]),
                )
                .help(
                    "use it as an input, list it in [pipeline] outputs, or remove it (the reader's labels output is optional)",
                ));
            }
        }

        // Placement: data placed on the GPU can't come back to a CPU operator.
        let mut on_gpu = vec![false; edge_names.len()];
        let mut placements = vec![Placement::Cpu; n];
        for &i in &order {
            let op = &spec.ops[i];
            let gpu_input = op.inputs.iter().position(|e| on_gpu[edge_of[e.as_str()]]);
            let placement = match (op.placement, gpu_input) {
                (Some(Placement::Cpu), Some(j)) => {
                    let e = &op.inputs[j];
                    let p = producer[edge_of[e.as_str()]];
                    return Err(SpecError::new(
                        SpecPointer::OpPlacement(i),
                        format!(
                            "'{}' is placed on the CPU but its input '{e}' is on the GPU (produced by '{}')",
                            op.effective_name(i),
                            spec.ops[p].effective_name(p)
                        ),
                    )
                    .help("move this operator before the GPU ones, or set device = \"gpu\" on it"));
                }
                (Some(p), _) => p,
                (None, Some(_)) => Placement::Gpu,
                (None, None) => Placement::Cpu,
            };
            placements[i] = placement;
            if placement == Placement::Gpu {
                for e in &op.outputs {
                    on_gpu[edge_of[e.as_str()]] = true;
                }
            }
        }
        for (k, &s) in outputs.iter().enumerate() {
            if edge_types[s] == ValueType::Label && on_gpu[s] {
                return Err(SpecError::new(
                    SpecPointer::Output(k),
                    "labels can't be on the GPU",
                ));
            }
        }

        // Plan: nodes in order, last uses for moves.
        let reader_op = &spec.ops[reader_index];
        let reader_encoded = edge_of[reader_op.outputs[0].as_str()];
        let reader_labels = reader_op.outputs.get(1).map(|e| edge_of[e.as_str()]);
        let mut nodes = Vec::new();
        let mut remaining_uses = vec![0usize; edge_names.len()];
        for op in &spec.ops {
            for e in &op.inputs {
                remaining_uses[edge_of[e.as_str()]] += 1;
            }
        }
        for &s in &outputs {
            remaining_uses[s] += 1;
        }
        for &i in &order {
            if i == reader_index {
                continue;
            }
            let op = &spec.ops[i];
            let inputs: Vec<usize> = op.inputs.iter().map(|e| edge_of[e.as_str()]).collect();
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
                kind: schemas[i].kind,
                key: hash_str(&name),
                name,
                op: built[i].take().expect("every operator is built, once"),
                inputs,
                outputs: op.outputs.iter().map(|e| edge_of[e.as_str()]).collect(),
                last_use,
                placement: placements[i],
                args: std::mem::take(&mut arg_sets[i]),
                fused: Vec::new(),
                fusion_note: None,
            });
        }
        if fuse {
            fuse_adjacent(&mut nodes, &outputs);
        }
        Ok(Graph {
            spec: spec.clone(),
            reader: reader_config,
            reader_encoded,
            reader_labels,
            nodes,
            edge_names,
            edge_types,
            outputs,
        })
    }

    /// A readable listing of the planned graph, for `stokehold check`.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        let r = &self.spec.ops.iter().find(|o| registry::is_reader(&o.kind));
        if let Some(r) = r {
            let _ = writeln!(s, "  {} -> {}", r.kind, r.outputs.join(", "));
        }
        for n in &self.nodes {
            let ins: Vec<&str> = n
                .inputs
                .iter()
                .map(|&i| self.edge_names[i].as_str())
                .collect();
            let outs: Vec<String> = n
                .outputs
                .iter()
                .map(|&o| format!("{} ({})", self.edge_names[o], self.edge_types[o]))
                .collect();
            let _ = writeln!(
                s,
                "  {} [{}{}] {} -> {}",
                n.name,
                n.kind,
                if n.placement == Placement::Gpu {
                    ", gpu"
                } else {
                    ""
                },
                ins.join(", "),
                outs.join(", ")
            );
        }
        let outs: Vec<String> = self
            .outputs
            .iter()
            .map(|&o| format!("{}: {}", self.edge_names[o], self.edge_types[o]))
            .collect();
        let _ = writeln!(s, "  outputs: {}", outs.join("; "));
        s
    }

    /// The graph in Graphviz dot format.
    pub fn to_dot(&self) -> String {
        let mut s = String::from("digraph pipeline {\n  rankdir=LR;\n");
        let mut producer: BTreeMap<usize, String> = BTreeMap::new();
        let reader = self.reader.kind();
        producer.insert(self.reader_encoded, reader.into());
        if let Some(l) = self.reader_labels {
            producer.insert(l, reader.into());
        }
        let _ = writeln!(s, "  \"{reader}\" [shape=box];");
        for n in &self.nodes {
            let _ = writeln!(
                s,
                "  \"{}\" [shape=box, label=\"{}\\n{}\"];",
                n.name, n.name, n.kind
            );
            for &o in &n.outputs {
                producer.insert(o, n.name.to_string());
            }
        }
        for n in &self.nodes {
            for &i in &n.inputs {
                let _ = writeln!(
                    s,
                    "  \"{}\" -> \"{}\" [label=\"{}\"];",
                    producer[&i], n.name, self.edge_names[i]
                );
            }
        }
        for &o in &self.outputs {
            let _ = writeln!(
                s,
                "  \"{}\" -> \"out:{}\" [label=\"{}\"];",
                producer[&o], self.edge_names[o], self.edge_names[o]
            );
        }
        s.push_str("}\n");
        s
    }
}

/// Replaces runs of adjacent operators by the fused operator a rule of [`crate::fusion`]
/// builds for them, left to right, taking the longest rule that matches: same results, one
/// pass over the data instead of several.
fn fuse_adjacent(nodes: &mut Vec<Node>, outputs: &[usize]) {
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
                placement: first.placement,
                args: first.args.clone(),
                fusion_note: f.differs,
                fused: group,
            };
            nodes.insert(k, node);
        }
        k += 1;
    }
}

/// Whether `b` is the only reader of `a`'s single output, which isn't a pipeline output,
/// and both run on the same device (so the edge between them can disappear).
fn feeds_alone(a: &Node, b: &Node, outputs: &[usize]) -> bool {
    a.outputs.len() == 1
        && b.inputs == a.outputs
        && b.last_use == [true]
        && !outputs.contains(&a.outputs[0])
        && a.placement == b.placement
}

fn arg_error(i: usize, e: ArgError) -> SpecError {
    let at = SpecPointer::of_arg_error(i, &e);
    SpecError {
        at,
        message: e.message,
        help: e.help,
    }
}

/// The first setting out of its declared range ([`crate::pipeline::settings`]).
fn check_settings(spec: &PipelineSpec) -> Result<(), SpecError> {
    match super::settings::validate(&spec.settings).into_iter().next() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

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
        } else {
            format!("give {want_in} input edge(s): {}", names.join(", "))
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
    // The reader's second output (labels) is optional.
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

#[cfg(test)]
mod chain_tests;
#[cfg(test)]
mod tests;
