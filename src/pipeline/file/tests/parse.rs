//! What a good pipeline file becomes.

use super::*;
use crate::ops::ArgValue;
use crate::pipeline::spec::{BatchMemory, DeviceChoice, OnError, OpSpec, Settings};

#[test]
fn parses_the_documented_example() {
    let spec = ok(EXAMPLE).spec;
    let expected = PipelineSpec {
        settings: Settings {
            batch: 64,
            threads: None,
            prefetch: 3,
            seed: 1,
            epochs: Some(2),
            on_error: OnError::Fail,
            device: DeviceChoice::Cpu,
            device_id: 1,
            batch_memory: BatchMemory::Auto,
        },
        ops: vec![
            OpSpec::new("file_reader")
                .named("reader")
                .output("jpegs")
                .output("labels")
                .arg("root", "/data/train")
                .arg("shuffle", true)
                .arg(
                    "ratio",
                    ArgValue::List(vec![
                        ArgValue::Float(0.5),
                        ArgValue::Float(1e-3),
                        ArgValue::Int(-2),
                    ]),
                ),
            OpSpec::new("decode").input("jpegs").output("images"),
        ],
        outputs: vec!["images".into(), "labels".into()],
        file: None,
    };
    assert_eq!(spec, expected);
}

#[test]
fn defaults_apply_when_settings_are_left_out() {
    let spec = ok("[pipeline]\noutputs = [\"x\"]\n").spec;
    assert_eq!(spec.settings, Settings::default());
    assert!(spec.ops.is_empty());
    let spec = ok("[pipeline]\nthreads = 6\noutputs = [\"x\"]\n").spec;
    assert_eq!(spec.settings.threads, Some(6));
}

#[test]
fn batch_memory_takes_each_of_its_values() {
    for m in [
        BatchMemory::Auto,
        BatchMemory::Gpu,
        BatchMemory::Emu,
        BatchMemory::Pinned,
        BatchMemory::EmuPinned,
    ] {
        let text = format!(
            "[pipeline]\nbatch_memory = \"{}\"\noutputs = [\"x\"]\n",
            m.name()
        );
        assert_eq!(ok(&text).spec.settings.batch_memory, m, "{text}");
    }
}

#[test]
fn argument_values_convert_to_arg_values() {
    let spec = ok(r#"[pipeline]
outputs = ["x"]
[[op]]
kind = "k"
b = false
i = 0x1F
u = 1_000
f = 2.5
e = 1e3
inf = -inf
s = 'lit\eral'
nested = [[1, 2], ["a"], []]
"#)
    .spec;
    let args = &spec.ops[0].args;
    assert_eq!(args["b"], ArgValue::Bool(false));
    assert_eq!(args["i"], ArgValue::Int(31));
    assert_eq!(args["u"], ArgValue::Int(1000));
    assert_eq!(args["f"], ArgValue::Float(2.5));
    assert_eq!(args["e"], ArgValue::Float(1000.0));
    assert_eq!(args["inf"], ArgValue::Float(f64::NEG_INFINITY));
    assert_eq!(args["s"], ArgValue::Str("lit\\eral".into()));
    assert_eq!(
        args["nested"],
        ArgValue::List(vec![
            ArgValue::List(vec![ArgValue::Int(1), ArgValue::Int(2)]),
            ArgValue::List(vec![ArgValue::Str("a".into())]),
            ArgValue::List(vec![]),
        ])
    );
    let nan = ok("[pipeline]\noutputs = [\"x\"]\n[[op]]\nkind = \"k\"\nn = nan\n").spec;
    assert!(matches!(nan.ops[0].args["n"], ArgValue::Float(x) if x.is_nan()));
}
