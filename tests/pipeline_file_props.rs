//! Property tests: invalid pipeline files made from the valid shipped ones by one mutation
//! (unknown key, wrong type, out-of-range value, dangling edge, renamed edge, duplicated
//! operator, cycle, removed required argument or `kind`, garbage line). Each must give
//! exactly one `Error::Config` (parser or validator) whose line lies in the file, whose column
//! is at least 1 and whose message is not empty; never `Ok`, never a panic. Where the
//! mutation touched one line, the error must point at that line.

mod common;

use std::path::Path;

use proptest::prelude::*;
use stokehold::pipeline::file;
use stokehold::pipeline::graph::Graph;
use stokehold::schema::ArgType;
use stokehold::Error;

const FILES: [&str; 2] = ["resnet50-train.toml", "resnet50-eval.toml"];

/// One `key = value` line of a table.
#[derive(Debug, Clone)]
struct KeyLine {
    line: usize,
    key: String,
    value: String,
}

/// An `[[op]]` block: its header line, its lines and kind.
#[derive(Debug, Clone)]
struct Block {
    header: usize,
    end: usize,
    kind: String,
    keys: Vec<KeyLine>,
}

/// A shipped file split into lines and blocks.
#[derive(Debug, Clone)]
struct Doc {
    lines: Vec<String>,
    pipeline: Block,
    ops: Vec<Block>,
}

const EDGE_KEYS: [&str; 4] = ["input", "inputs", "output", "outputs"];

fn doc(name: &str) -> Doc {
    let text = std::fs::read_to_string(common::shipped(name)).unwrap();
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut blocks: Vec<Block> = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim();
        if t == "[pipeline]" || t == "[[op]]" {
            if let Some(b) = blocks.last_mut() {
                b.end = i;
            }
            blocks.push(Block {
                header: i,
                end: lines.len(),
                kind: String::new(),
                keys: Vec::new(),
            });
        } else if let (Some(b), Some((k, v))) = (blocks.last_mut(), t.split_once(" = ")) {
            if !t.starts_with('#') {
                if k == "kind" {
                    b.kind = v.trim_matches('"').to_string();
                }
                b.keys.push(KeyLine {
                    line: i,
                    key: k.to_string(),
                    value: v.to_string(),
                });
            }
        }
    }
    let pipeline = blocks.remove(0);
    assert_eq!(lines[pipeline.header], "[pipeline]");
    Doc {
        lines,
        pipeline,
        ops: blocks,
    }
}

fn text_of(lines: &[String]) -> String {
    let mut s = lines.join("\n");
    s.push('\n');
    s
}

/// Parses and validates; the error (if any) as the parser or the validator reports it.
fn check(text: &str) -> Result<(), Error> {
    let path = Path::new("mutated.toml");
    let loaded = file::parse(text, path)?;
    Graph::build(&loaded.spec)
        .map(|_| ())
        .map_err(|e| file::config_error(path, &loaded.locations, e))
}

/// The mutations; indices are reduced modulo what the file has.
#[derive(Debug, Clone)]
enum Mutation {
    UnknownKey { op: Option<usize>, name: String },
    WrongType { op: Option<usize>, key: usize },
    OutOfRange { op: Option<usize>, key: usize },
    DanglingEdge { op: usize, suffix: String },
    RenamedEdge { op: usize, suffix: String },
    DuplicatedOp { op: usize },
    Cycle { op: usize, later: usize },
    RemovedRequired { op: usize },
    Garbage { at: usize, text: String },
}

/// Garbage lines start with a character no TOML line may start with, and hold no bracket or
/// quote (which would open an array or string that swallows the following lines, moving the
/// error away from the garbage).
fn mutation() -> impl Strategy<Value = Mutation> {
    let op = proptest::option::of(0usize..16);
    prop_oneof![
        (op.clone(), "[a-z]{2,8}_[a-z]{1,4}").prop_map(|(op, name)| Mutation::UnknownKey {
            op,
            name: format!("zz{name}")
        }),
        (op.clone(), 0usize..16).prop_map(|(op, key)| Mutation::WrongType { op, key }),
        (op, 0usize..16).prop_map(|(op, key)| Mutation::OutOfRange { op, key }),
        (0usize..16, "[a-z0-9_]{1,6}")
            .prop_map(|(op, suffix)| Mutation::DanglingEdge { op, suffix }),
        (0usize..16, "[a-z0-9_]{1,6}")
            .prop_map(|(op, suffix)| Mutation::RenamedEdge { op, suffix }),
        (0usize..16).prop_map(|op| Mutation::DuplicatedOp { op }),
        (0usize..16, 0usize..16).prop_map(|(op, later)| Mutation::Cycle { op, later }),
        (0usize..16).prop_map(|op| Mutation::RemovedRequired { op }),
        (0usize..64, "[%@!$^&*(=][a-zA-Z0-9 %@!$^&*()=+-]{0,12}")
            .prop_map(|(at, text)| Mutation::Garbage { at, text }),
    ]
}

/// A number clearly past the bound `b` in direction `dir` (±1), even for huge bounds.
fn beyond(b: f64, dir: f64) -> f64 {
    b + dir * b.abs().max(1.0)
}

/// The value of type `ty` that is out of range, if there is one.
fn out_of_range(ty: &ArgType) -> Option<String> {
    Some(match *ty {
        ArgType::Int { min, max } => {
            if min > i64::MIN {
                (min - 1).to_string()
            } else if max < i64::MAX {
                (max + 1).to_string()
            } else {
                return None;
            }
        }
        ArgType::Float { max, .. } if max.is_finite() => format!("{:?}", beyond(max, 1.0)),
        ArgType::Size { .. } => "0".to_string(),
        ArgType::Range { min, max } if min.is_finite() && max.is_finite() => {
            format!("[{:?}, {:?}]", max, beyond(min, -1.0))
        }
        ArgType::Floats { min, .. } if min.is_finite() => format!("[{:?}]", beyond(min, -1.0)),
        ArgType::Choice(_) => "\"no-such-choice\"".to_string(),
        _ => return None,
    })
}

/// A value of the wrong type for what `value` is now.
fn wrong_type(value: &str) -> String {
    if value.starts_with('"') {
        "3.5".to_string()
    } else if value.starts_with('[') {
        "\"a list\"".to_string()
    } else {
        "\"7\"".to_string()
    }
}

fn arg_lines(b: &Block) -> Vec<&KeyLine> {
    b.keys
        .iter()
        .filter(|k| k.key != "kind" && k.key != "name" && !EDGE_KEYS.contains(&k.key.as_str()))
        .collect()
}

/// Applies `m` to `d`; returns the new lines and the line (0-based) the error must be on,
/// when the mutation touched exactly one line. `None` when the mutation does not apply.
fn apply(d: &Doc, m: &Mutation) -> Option<(Vec<String>, Option<usize>)> {
    let mut lines = d.lines.clone();
    let n = d.ops.len();
    let block = |op: &Option<usize>| match op {
        None => &d.pipeline,
        Some(i) => &d.ops[i % n],
    };
    match m {
        Mutation::UnknownKey { op, name } => {
            let b = block(op);
            let at = b.header + 1;
            lines.insert(at, format!("{name} = 1"));
            Some((lines, Some(at)))
        }
        Mutation::WrongType { op, key } => {
            let b = block(op);
            let keys: Vec<&KeyLine> = if op.is_none() {
                b.keys.iter().collect()
            } else {
                arg_lines(b)
            };
            let k = keys.get(key % keys.len().max(1))?;
            lines[k.line] = format!("{} = {}", k.key, wrong_type(&k.value));
            Some((lines, Some(k.line)))
        }
        Mutation::OutOfRange { op, key } => {
            let b = block(op);
            let (k, bad) = match op {
                None => {
                    let ranged = [
                        ("batch", "0"),
                        ("prefetch", "0"),
                        ("seed", "-1"),
                        ("on_error", "\"ignore\""),
                        ("device", "\"tpu\""),
                    ];
                    let (name, bad) = ranged[key % ranged.len()];
                    (b.keys.iter().find(|k| k.key == name)?, bad.to_string())
                }
                Some(_) => {
                    let schema = stokehold::pipeline::registry::find(&b.kind)?;
                    let keys: Vec<(&KeyLine, String)> = arg_lines(b)
                        .into_iter()
                        .filter_map(|k| {
                            let spec = schema.args.iter().find(|a| a.name == k.key)?;
                            Some((k, out_of_range(&spec.ty)?))
                        })
                        .collect();
                    let (k, bad) = keys.get(key % keys.len().max(1))?.clone();
                    (k, bad)
                }
            };
            lines[k.line] = format!("{} = {}", k.key, bad);
            Some((lines, Some(k.line)))
        }
        Mutation::DanglingEdge { op, suffix } => {
            // An input edge that nothing produces.
            let b = &d.ops[op % n];
            let k = b.keys.iter().find(|k| k.key == "input")?;
            lines[k.line] = format!("input = \"nowhere_{suffix}\"");
            Some((lines, Some(k.line)))
        }
        Mutation::RenamedEdge { op, suffix } => {
            // Rename an output: its consumer (or the pipeline's outputs) now dangles.
            let b = &d.ops[op % n];
            let k = b
                .keys
                .iter()
                .find(|k| k.key == "output" || k.key == "outputs")?;
            let renamed = k.value.replacen('"', &format!("\"renamed_{suffix}_"), 1);
            lines[k.line] = format!("{} = {}", k.key, renamed);
            Some((lines, None))
        }
        Mutation::DuplicatedOp { op } => {
            let b = &d.ops[op % n];
            let copy: Vec<String> = d.lines[b.header..b.end].to_vec();
            let mut copy = copy;
            if copy.last().is_some_and(|l| !l.trim().is_empty()) {
                copy.push(String::new());
            }
            lines.splice(b.end..b.end, copy);
            Some((lines, None))
        }
        Mutation::Cycle { op, later } => {
            // An operator takes its input from one downstream of it.
            let i = 1 + op % (n - 1);
            if i + 1 >= n {
                return None;
            }
            let j = i + 1 + later % (n - i - 1);
            let inp = d.ops[i].keys.iter().find(|k| k.key == "input")?;
            let out = d.ops[j].keys.iter().find(|k| k.key == "output")?;
            lines[inp.line] = format!("input = {}", out.value);
            Some((lines, None))
        }
        Mutation::RemovedRequired { op } => {
            let b = &d.ops[op % n];
            let schema = stokehold::pipeline::registry::find(&b.kind)?;
            // A required argument, else the `kind` line itself.
            let k = b
                .keys
                .iter()
                .find(|k| {
                    schema
                        .args
                        .iter()
                        .any(|a| a.name == k.key && a.default.is_none())
                })
                .or_else(|| b.keys.iter().find(|k| k.key == "kind"))?;
            lines.remove(k.line);
            Some((lines, None))
        }
        Mutation::Garbage { at, text } => {
            let at = at % (lines.len() + 1);
            lines.insert(at, text.clone());
            Some((lines, Some(at)))
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn every_mutation_is_one_located_config_error(which in 0usize..2, m in mutation()) {
        let d = doc(FILES[which]);
        let Some((lines, expected_line)) = apply(&d, &m) else {
            return Ok(());
        };
        let text = text_of(&lines);
        match check(&text) {
            Ok(()) => prop_assert!(false, "{m:?} is accepted:\n{text}"),
            Err(Error::Config { line, column, message, .. }) => {
                prop_assert!(
                    (1..=lines.len()).contains(&line),
                    "{m:?}: line {line} of {}: {message}\n{text}",
                    lines.len()
                );
                prop_assert!(column >= 1);
                prop_assert!(!message.trim().is_empty(), "{m:?}: empty message");
                if let Some(l) = expected_line {
                    prop_assert_eq!(line, l + 1, "{:?}: {}\n{}", m, message, text);
                }
            }
            Err(other) => prop_assert!(false, "{m:?}: not a config error: {other}"),
        }
    }
}

/// Every mutation kind applies to both shipped files at least once (the generator is not
/// silently skipping a kind).
#[test]
fn each_mutation_kind_applies() {
    for name in FILES {
        let d = doc(name);
        let samples = [
            Mutation::UnknownKey {
                op: Some(2),
                name: "zzfoo".into(),
            },
            Mutation::UnknownKey {
                op: None,
                name: "zzbar".into(),
            },
            Mutation::WrongType {
                op: Some(2),
                key: 0,
            },
            Mutation::WrongType { op: None, key: 0 },
            Mutation::OutOfRange {
                op: Some(2),
                key: 0,
            },
            Mutation::OutOfRange { op: None, key: 0 },
            Mutation::DanglingEdge {
                op: 2,
                suffix: "x".into(),
            },
            Mutation::RenamedEdge {
                op: 0,
                suffix: "x".into(),
            },
            Mutation::DuplicatedOp { op: 1 },
            Mutation::Cycle { op: 0, later: 1 },
            Mutation::RemovedRequired { op: 2 },
            Mutation::Garbage {
                at: 3,
                text: "%% nope".into(),
            },
        ];
        for m in &samples {
            let (lines, _) = apply(&d, m).unwrap_or_else(|| panic!("{name}: {m:?} does not apply"));
            let text = text_of(&lines);
            assert!(check(&text).is_err(), "{name}: {m:?} accepted");
        }
    }
}
