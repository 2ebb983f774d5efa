//! A graph in readable forms: the listing `stokehold check` prints, and Graphviz dot.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::super::registry;
use super::Graph;

impl Graph {
    /// A readable listing of the graph, for `stokehold check`.
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
                "  {} [{}] {} -> {}",
                n.name,
                n.kind,
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
