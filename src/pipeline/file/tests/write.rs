//! Writing pipeline files, and round trips through the text (properties).

use proptest::prelude::*;

use super::*;
use crate::ops::ArgValue;
use crate::pipeline::spec::{BatchMemory, DeviceChoice, OnError, OpSpec, Settings};

#[test]
fn to_toml_writes_a_readable_file() {
    let spec = PipelineSpec::builder()
        .batch(16)
        .seed(7)
        .outputs(&["images"])
        .op(OpSpec::new("file_reader")
            .output("jpegs")
            .arg("root", "C:\\data \"x\"\n"))
        .op(OpSpec::new("decode")
            .named("dec")
            .input("jpegs")
            .output("images")
            .arg("scale", 1.0)
            .arg("odd key", [1, 2]));
    let text = to_toml(&spec);
    assert_eq!(
        text,
        r#"[pipeline]
batch = 16
threads = 0
prefetch = 2
seed = 7
epochs = 1
on_error = "skip"
device = "auto"
device_id = 0
batch_memory = "auto"
outputs = ["images"]

[[op]]
kind = "file_reader"
output = "jpegs"
root = "C:\\data \"x\"\n"

[[op]]
kind = "decode"
name = "dec"
input = "jpegs"
output = "images"
"odd key" = [1, 2]
scale = 1.0
"#
    );
    assert_eq!(ok(&text).spec, spec);
    // Unbounded epochs have no file form: a comment, read back as the default.
    let text = to_toml(&spec.clone().forever());
    assert!(text.contains("# epochs: unbounded"));
    assert_eq!(ok(&text).spec.settings.epochs, Some(1));
}

const RESERVED: &[&str] = &[
    "kind", "name", "input", "inputs", "output", "outputs", "device",
];

fn arg_value() -> impl Strategy<Value = ArgValue> {
    let float = prop_oneof![
        prop::num::f64::NORMAL | prop::num::f64::SUBNORMAL | prop::num::f64::ZERO,
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        (-1000i32..1000).prop_map(f64::from),
    ];
    let leaf = prop_oneof![
        any::<bool>().prop_map(ArgValue::Bool),
        any::<i64>().prop_map(ArgValue::Int),
        float.prop_map(ArgValue::Float),
        any::<String>().prop_map(ArgValue::Str),
    ];
    leaf.prop_recursive(2, 8, 4, |inner| {
        prop::collection::vec(inner, 0..4).prop_map(ArgValue::List)
    })
}

fn edge() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z][a-z0-9_]{0,6}",
        1 => any::<String>(),
    ]
}

fn op_spec() -> impl Strategy<Value = OpSpec> {
    let arg_name =
        "[a-z][a-z0-9_. -]{0,8}".prop_filter("reserved", |n| !RESERVED.contains(&n.as_str()));
    (
        "[a-z_]{1,12}",
        prop::option::of(edge()),
        prop::collection::vec(edge(), 0..3),
        prop::collection::vec(edge(), 0..3),
        prop::collection::btree_map(arg_name, arg_value(), 0..4),
    )
        .prop_map(|(kind, name, inputs, outputs, args)| OpSpec {
            kind,
            name,
            inputs,
            outputs,
            args,
        })
}

fn pipeline_spec() -> impl Strategy<Value = PipelineSpec> {
    let settings = (
        1usize..100_000,
        prop::option::of(1usize..512),
        1usize..16,
        0..=i64::MAX as u64,
        1u64..1000,
        prop_oneof![Just(OnError::Skip), Just(OnError::Fail)],
        prop_oneof![
            Just(DeviceChoice::Auto),
            Just(DeviceChoice::Cpu),
            Just(DeviceChoice::Gpu)
        ],
        0usize..8,
        prop_oneof![
            Just(BatchMemory::Auto),
            Just(BatchMemory::Gpu),
            Just(BatchMemory::Emu),
            Just(BatchMemory::Pinned),
            Just(BatchMemory::EmuPinned)
        ],
    )
        .prop_map(
            |(
                batch,
                threads,
                prefetch,
                seed,
                epochs,
                on_error,
                device,
                device_id,
                batch_memory,
            )| {
                Settings {
                    batch,
                    threads,
                    prefetch,
                    seed,
                    epochs: Some(epochs),
                    on_error,
                    device,
                    device_id,
                    batch_memory,
                }
            },
        );
    (
        settings,
        prop::collection::vec(op_spec(), 0..4),
        prop::collection::vec(edge(), 1..4),
    )
        .prop_map(|(settings, ops, outputs)| PipelineSpec {
            settings,
            ops,
            outputs,
            file: None,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn round_trip_through_toml(spec in pipeline_spec()) {
        let text = to_toml(&spec);
        let back = parse(&text, Path::new(FILE)).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(back.spec, spec);
    }

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        let _ = parse(&text, Path::new(FILE));
    }

    #[test]
    fn toml_like_text_never_panics(text in "[\\[\\]a-z_ =\"'{},.#0-9\n-]{0,80}") {
        let _ = parse(&text, Path::new(FILE));
        let mut with_header = String::from("[pipeline]\noutputs = [\"x\"]\n[[op]]\n");
        with_header.push_str(&text);
        let _ = parse(&with_header, Path::new(FILE));
    }

    #[test]
    fn a_stray_table_is_reported_on_its_line(spec in pipeline_spec(), at in any::<prop::sample::Index>()) {
        let text = to_toml(&spec);
        let mut lines: Vec<&str> = text.lines().collect();
        let i = at.index(lines.len() + 1);
        lines.insert(i, "[stray_table]");
        let (line, column, message, help) = config_err(&lines.join("\n"));
        prop_assert_eq!((line, column), (i + 1, 2), "{}", message);
        prop_assert!(help.is_some());
    }

    #[test]
    fn an_unknown_key_is_reported_on_its_line(spec in pipeline_spec(), at in any::<prop::sample::Index>()) {
        let text = to_toml(&spec);
        let mut lines: Vec<&str> = text.lines().collect();
        // Top level and [pipeline]: everything before the first [[op]] (after it, an
        // unknown key is an operator argument, checked by the validator).
        let end = lines.iter().position(|l| *l == "[[op]]").unwrap_or(lines.len());
        let i = at.index(end + 1);
        lines.insert(i, "bogus_key = 1");
        let (line, column, message, help) = config_err(&lines.join("\n"));
        prop_assert_eq!((line, column), (i + 1, 1), "{}", message);
        prop_assert!(help.is_some());
    }
}

#[test]
fn arg_names_in_round_trip_skip_reserved_keys() {
    // The generator's filter matters: a reserved name can't be an argument in a file.
    let spec = PipelineSpec::builder()
        .outputs(&["x"])
        .op(OpSpec::new("k").arg("device", 1));
    let text = to_toml(&spec);
    assert!(parse(&text, Path::new(FILE)).is_err());
}
