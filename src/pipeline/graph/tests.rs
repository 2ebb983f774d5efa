//! Tests of building a graph whole: errors in words, edge types, order, fusion (each pass
//! alone: `pass_tests.rs`).

use super::*;
use crate::image::{DType, Layout};
use crate::pipeline::spec::{OpSpec, SpecPointer};
use crate::value::ImageType;

fn base() -> PipelineSpec {
    PipelineSpec::builder()
        .op(OpSpec::new("file_reader")
            .output("jpegs")
            .output("labels")
            .arg("root", "x"))
        .op(OpSpec::new("decode").input("jpegs").output("decoded"))
        .op(OpSpec::new("random_resized_crop")
            .input("decoded")
            .output("cropped")
            .arg("size", [224, 200]))
        .op(OpSpec::new("flip").input("cropped").output("flipped"))
        .op(OpSpec::new("normalize")
            .input("flipped")
            .output("normalized"))
        .op(OpSpec::new("layout").input("normalized").output("images"))
        .outputs(&["images", "labels"])
}

#[test]
fn types_flow_through_the_graph() {
    let g = Graph::build(&base()).unwrap();
    let images = g.outputs[0];
    assert_eq!(
        g.edge_types[images],
        ValueType::Image(ImageType {
            dtype: DType::F32,
            layout: Layout::Chw,
            channels: Some(3),
            size: Some((224, 200)),
        })
    );
    assert_eq!(g.edge_types[g.outputs[1]], ValueType::Label);
    let names: Vec<&str> = g.nodes.iter().map(|n| &*n.name).collect();
    assert_eq!(names, ["decoded+cropped", "flipped+normalized+images"]);
    let unfused = Graph::build_unfused(&g.spec).unwrap();
    let kinds: Vec<&str> = unfused.nodes.iter().map(|n| n.kind).collect();
    assert_eq!(
        kinds,
        [
            "decode",
            "random_resized_crop",
            "flip",
            "normalize",
            "layout"
        ]
    );
    assert!(unfused.describe().contains("random_resized_crop"));
    assert!(unfused.to_dot().contains("\"file_reader\" -> \"decoded\""));
}

#[test]
fn order_follows_edges_not_the_file() {
    let mut spec = base();
    spec.ops.reverse();
    let g = Graph::build(&spec).unwrap();
    let names: Vec<&str> = g.nodes.iter().map(|n| &*n.name).collect();
    assert_eq!(names, ["decoded+cropped", "flipped+normalized+images"]);
}

#[test]
fn last_use_moves_values_only_once() {
    // Two views of one decoded image (SimCLR-style): the first reader clones, the second moves.
    let spec = PipelineSpec::builder()
        .op(OpSpec::new("file_reader").output("jpegs").arg("root", "x"))
        .op(OpSpec::new("decode").input("jpegs").output("decoded"))
        .op(OpSpec::new("random_resized_crop")
            .named("view1")
            .input("decoded")
            .output("a")
            .arg("size", 32))
        .op(OpSpec::new("random_resized_crop")
            .named("view2")
            .input("decoded")
            .output("b")
            .arg("size", 32))
        .outputs(&["a", "b"]);
    let g = Graph::build(&spec).unwrap();
    assert_eq!(g.nodes[1].last_use, vec![false]);
    assert_eq!(g.nodes[2].last_use, vec![true]);
    assert_ne!(g.nodes[1].key, g.nodes[2].key);
}

#[test]
fn builder_errors_are_described_in_words() {
    let spec = base().op(OpSpec::new("flip")
        .input("images")
        .output("more")
        .arg("horizontal", 2.0));
    let e = Graph::build(&spec).unwrap_err();
    assert_eq!(e.at, SpecPointer::OpArg(6, "horizontal".into()));
    assert_eq!(
        spec.describe(&e.at),
        "operator #7 'more' (flip), argument 'horizontal'"
    );
    let e = crate::Pipeline::new(spec).err().unwrap().to_string();
    assert!(e.contains("argument 'horizontal'"), "{e}");
}

#[test]
fn duplicate_names_and_two_readers_are_rejected() {
    let spec = base().op(OpSpec::new("flip")
        .named("flipped")
        .input("images")
        .output("x"));
    assert!(Graph::build(&spec)
        .unwrap_err()
        .message
        .contains("already used"));
    let spec = base().op(OpSpec::new("file_reader").output("more").arg("root", "y"));
    assert!(Graph::build(&spec)
        .unwrap_err()
        .message
        .contains("one file_reader"));
}

#[test]
fn settings_are_checked() {
    let spec = base().batch(0);
    assert_eq!(
        Graph::build(&spec).unwrap_err().at,
        SpecPointer::Setting("batch".into())
    );
    let spec = base().prefetch(0);
    assert_eq!(
        Graph::build(&spec).unwrap_err().at,
        SpecPointer::Setting("prefetch".into())
    );
}
