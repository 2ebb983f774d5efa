//! Each pass of [`Graph::build`](super::Graph::build) alone, on the spec it is given.

use super::edges::{check_every_edge_used, check_unique_names, resolve_edges};
use super::fuse::fuse_adjacent;
use super::nodes::lay_out;
use super::operators::build_operators;
use super::order::run_order;
use super::types::check_types;
use crate::image::{DType, Layout};
use crate::pipeline::spec::{OpSpec, PipelineSpec, SpecPointer};
use crate::value::{ImageType, ValueType};

/// reader → decode → flip → normalize → layout, written in the file backwards.
fn spec() -> PipelineSpec {
    PipelineSpec::builder()
        .op(OpSpec::new("layout").input("normalized").output("images"))
        .op(OpSpec::new("normalize")
            .input("flipped")
            .output("normalized"))
        .op(OpSpec::new("flip").input("decoded").output("flipped"))
        .op(OpSpec::new("decode").input("jpegs").output("decoded"))
        .op(OpSpec::new("file_reader")
            .output("jpegs")
            .output("labels")
            .arg("root", "x"))
        .outputs(&["images", "labels"])
}

#[test]
fn operators_are_found_checked_and_built_in_spec_order() {
    let ops = build_operators(&spec()).unwrap();
    assert_eq!(ops.reader.0, 4);
    let kinds: Vec<&str> = ops.schemas.iter().map(|s| s.kind).collect();
    assert_eq!(
        kinds,
        ["layout", "normalize", "flip", "decode", "file_reader"]
    );
    assert!(ops.built[4].is_none() && ops.built[..4].iter().all(Option::is_some));
    assert_eq!(ops.args[0].str("layout"), "CHW", "defaults filled in");

    let mut bad = spec();
    bad.ops[2].kind = "flop".into();
    bad.ops[1].inputs.push("more".into());
    // The first operator at fault is named, whatever its problem.
    let e = build_operators(&bad).err().unwrap();
    assert_eq!(e.at, SpecPointer::OpInput(1, 1));
    bad.ops[1].inputs.pop();
    let e = build_operators(&bad).err().unwrap();
    assert_eq!(e.at, SpecPointer::OpKind(2));
    assert!(e.help.unwrap().contains("did you mean 'flip'?"));
    let mut readerless = spec();
    readerless.ops.pop();
    assert_eq!(
        build_operators(&readerless).err().unwrap().at,
        SpecPointer::Whole
    );
}

#[test]
fn edges_are_named_once_and_every_name_resolves() {
    let s = spec();
    let edges = resolve_edges(&s).unwrap();
    assert_eq!(
        edges.names,
        [
            "images",
            "normalized",
            "flipped",
            "decoded",
            "jpegs",
            "labels"
        ]
    );
    assert_eq!(edges.producer, [0, 1, 2, 3, 4, 4]);
    assert_eq!(edges.outputs, [edges.of("images"), edges.of("labels")]);
    assert!(check_unique_names(&s).is_ok());
    assert!(check_every_edge_used(&s, &edges).is_ok());

    let mut twice = spec();
    twice.ops[2].outputs[0] = "normalized".into();
    assert_eq!(
        resolve_edges(&twice).err().unwrap().at,
        SpecPointer::OpOutput(2, 0)
    );
    let mut unknown = spec();
    unknown.ops[1].inputs[0] = "flipd".into();
    let e = resolve_edges(&unknown).err().unwrap();
    assert_eq!(e.at, SpecPointer::OpInput(1, 0));
    assert_eq!(e.help.as_deref(), Some("did you mean 'flipped'?"));
    let mut named = spec();
    named.ops[2].name = Some("images".into());
    // Operator #3's written name clashes with an implicit one: pointed at where it is written.
    assert_eq!(
        check_unique_names(&named).err().unwrap().at,
        SpecPointer::OpName(2)
    );
    let unused = spec().outputs(&["images"]);
    let edges = resolve_edges(&unused).unwrap();
    assert_eq!(
        check_every_edge_used(&unused, &edges).err().unwrap().at,
        SpecPointer::OpOutput(4, 1)
    );
}

#[test]
fn operators_run_after_their_inputs_producers_or_the_cycle_is_named() {
    let s = spec();
    let edges = resolve_edges(&s).unwrap();
    assert_eq!(run_order(&s, &edges).unwrap(), [4, 3, 2, 1, 0]);
    let mut cycle = spec();
    cycle.ops[3].inputs[0] = "flipped".into();
    let edges = resolve_edges(&cycle).unwrap();
    let e = run_order(&cycle, &edges).err().unwrap();
    assert_eq!(e.at, SpecPointer::Op(3));
    assert_eq!(
        e.message,
        "the operators form a cycle: decoded -> flipped -> decoded"
    );
}

#[test]
fn types_are_inferred_in_run_order() {
    let s = spec();
    let ops = build_operators(&s).unwrap();
    let edges = resolve_edges(&s).unwrap();
    let order = run_order(&s, &edges).unwrap();
    let types = check_types(&s, &ops.built, &edges, &order).unwrap();
    assert_eq!(types[edges.of("jpegs")], ValueType::Encoded);
    assert_eq!(types[edges.of("labels")], ValueType::Label);
    assert_eq!(
        types[edges.of("images")],
        ValueType::Image(ImageType {
            dtype: DType::F32,
            layout: Layout::Chw,
            channels: Some(3),
            size: None,
        })
    );
    // Encoded bytes are no output.
    let encoded = spec().outputs(&["images", "labels", "jpegs"]);
    let edges = resolve_edges(&encoded).unwrap();
    let e = check_types(&encoded, &ops.built, &edges, &order)
        .err()
        .unwrap();
    assert_eq!(e.at, SpecPointer::Output(2));
}

#[test]
fn nodes_leave_the_reader_out_and_know_each_edges_last_reader() {
    // Two crops of one decoded image: the first clones it, the second moves it.
    let s = PipelineSpec::builder()
        .op(OpSpec::new("file_reader").output("jpegs").arg("root", "x"))
        .op(OpSpec::new("decode").input("jpegs").output("decoded"))
        .op(OpSpec::new("crop")
            .input("decoded")
            .output("a")
            .arg("size", 8))
        .op(OpSpec::new("crop")
            .input("decoded")
            .output("b")
            .arg("size", 4))
        .outputs(&["a", "b"]);
    let mut ops = build_operators(&s).unwrap();
    let edges = resolve_edges(&s).unwrap();
    let order = run_order(&s, &edges).unwrap();
    let nodes = lay_out(&s, &mut ops, &edges, &order);
    let names: Vec<&str> = nodes.iter().map(|n| &*n.name).collect();
    assert_eq!(names, ["decoded", "a", "b"]);
    let last: Vec<&[bool]> = nodes.iter().map(|n| n.last_use.as_slice()).collect();
    assert_eq!(last, [&[true][..], &[false], &[true]]);
    assert_eq!(nodes[2].args.size("size"), (4, 4));
}

#[test]
fn fusing_takes_runs_whose_inner_edges_nothing_else_reads() {
    let s = spec();
    let mut ops = build_operators(&s).unwrap();
    let edges = resolve_edges(&s).unwrap();
    let order = run_order(&s, &edges).unwrap();
    let nodes = lay_out(&s, &mut ops, &edges, &order);
    let mut fused = nodes;
    fuse_adjacent(&mut fused, &edges.outputs);
    let names: Vec<&str> = fused.iter().map(|n| &*n.name).collect();
    assert_eq!(names, ["decoded", "flipped+normalized+images"]);
    assert_eq!(fused[1].fused.len(), 3);
    // An edge the consumer is handed stays.
    let s = spec().outputs(&["images", "labels", "flipped"]);
    let mut ops = build_operators(&s).unwrap();
    let edges = resolve_edges(&s).unwrap();
    let mut nodes = lay_out(&s, &mut ops, &edges, &order);
    fuse_adjacent(&mut nodes, &edges.outputs);
    let names: Vec<&str> = nodes.iter().map(|n| &*n.name).collect();
    assert_eq!(names, ["decoded", "flipped", "normalized+images"]);
}
