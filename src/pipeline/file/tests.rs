use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::*;
use crate::ops::ArgValue;
use crate::pipeline::spec::SpecPointer;
use crate::pipeline::spec::{DeviceChoice, OnError, OpSpec, Placement, Settings};

const FILE: &str = "pipe.toml";

/// The error `text` gives, as (line, column, message, help).
fn config_err(text: &str) -> (usize, usize, String, Option<String>) {
    match parse(text, Path::new(FILE)) {
        Err(Error::Config {
            file,
            line,
            column,
            message,
            help,
        }) => {
            assert_eq!(file, PathBuf::from(FILE));
            (line, column, message, help)
        }
        other => panic!("expected a config error, got {other:?}"),
    }
}

fn ok(text: &str) -> LoadedSpec {
    match parse(text, Path::new(FILE)) {
        Ok(l) => l,
        Err(e) => panic!("expected {text:?} to parse, got {e}"),
    }
}

/// Asserts position and that the message and help contain the given words.
#[track_caller]
fn assert_err(text: &str, line: usize, column: usize, message: &str, help: Option<&str>) {
    let (l, c, m, h) = config_err(text);
    assert_eq!((l, c), (line, column), "position of {m:?} in\n{text}");
    assert!(m.contains(message), "message {m:?} lacks {message:?}");
    match (help, h) {
        (Some(want), Some(got)) => assert!(got.contains(want), "help {got:?} lacks {want:?}"),
        (None, _) => {}
        (Some(want), None) => panic!("no help, wanted {want:?} (message {m:?})"),
    }
}

const EXAMPLE: &str = r#"[pipeline]
batch = 64            # int >= 1 (default 32)
threads = 0
prefetch = 3
seed = 1
epochs = 2
on_error = "fail"
device = "cpu"
device_id = 1
outputs = ["images", "labels"]

[[op]]
kind = "file_reader"
name = "reader"
outputs = ["jpegs", "labels"]
root = "/data/train"
shuffle = true
ratio = [0.5, 1e-3, -2]

[[op]]
kind = "decode"
input = "jpegs"
output = "images"
device = "gpu"
"#;

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
            OpSpec::new("decode")
                .input("jpegs")
                .output("images")
                .on(Placement::Gpu),
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

// ---- one test per kind of mistake: exact line and column ----

#[test]
fn syntax_error_is_placed_and_one_line() {
    let (l, c, m, h) = config_err("[pipeline]\nbatch = = 3\noutputs = [\"x\"]\n");
    assert_eq!((l, c), (2, 9), "{m}");
    assert!(m.starts_with("invalid TOML: "), "{m}");
    assert!(!m.contains('\n'), "{m}");
    assert_eq!(h, None);
    // An unterminated string, and a duplicate key (reported at the second one).
    let (l, _, m, _) = config_err("[pipeline]\noutputs = [\"x]\n");
    assert_eq!(l, 2, "{m}");
    assert_err(
        "[pipeline]\nbatch = 1\nbatch = 2\noutputs = [\"x\"]\n",
        3,
        1,
        "duplicate key",
        None,
    );
}

/// Regression: an error at the very end of a file that ends with a newline was placed on
/// the line after the last one.
#[test]
fn error_at_the_end_of_the_file_stays_inside_it() {
    for (text, col) in [
        ("[pipeline]\noutputs = \"\"\"abc\n", 17),
        ("[pipeline]\noutputs = \"\"\"abc\r\n", 17),
        ("[pipeline]\noutputs = \"\"\"abc", 17),
    ] {
        let (line, column, message, _) = config_err(text);
        assert_eq!((line, column), (2, col), "{text:?}: {message}");
    }
}

#[test]
fn unknown_top_level_table_suggests_the_right_one() {
    assert_err(
        "[pipline]\noutputs = [\"x\"]\n",
        1,
        2,
        "unknown table [pipline]",
        Some("did you mean [pipeline]?"),
    );
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\n\n[[ops]]\nkind = \"decode\"\n",
        4,
        3,
        "unknown table [[ops]]",
        Some("did you mean [[op]]?"),
    );
    assert_err(
        "batch = 3\n[pipeline]\noutputs = [\"x\"]\n",
        1,
        1,
        "unknown top-level key `batch`",
        Some("settings belong under [pipeline]"),
    );
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\n[something_else]\n",
        3,
        2,
        "unknown table [something_else]",
        Some("nothing else"),
    );
}

#[test]
fn unknown_pipeline_key_suggests_a_setting() {
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\n  bach = 3\n",
        3,
        3,
        "unknown setting `bach` in [pipeline]",
        Some("did you mean `batch`?"),
    );
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\nkind = \"decode\"\n",
        3,
        1,
        "unknown setting `kind`",
        Some("belongs in an [[op]] table"),
    );
}

#[test]
fn wrong_type_of_batch_points_at_the_value() {
    assert_err(
        "[pipeline]\nbatch = \"64\"\noutputs = [\"x\"]\n",
        2,
        9,
        "`batch` must be an integer ≥ 1, got a string",
        Some("batch = 32"),
    );
    assert_err(
        "[pipeline]\nbatch = 6.5\noutputs = [\"x\"]\n",
        2,
        9,
        "got a float",
        Some("whole number"),
    );
}

#[test]
fn out_of_range_settings_point_at_the_value() {
    assert_err(
        "[pipeline]\nbatch = 0\noutputs = [\"x\"]\n",
        2,
        9,
        "`batch` = 0 is out of range: it must be at least 1",
        Some("≥ 1"),
    );
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\nseed = -1\n",
        3,
        8,
        "`seed` = -1 is out of range",
        Some("≥ 0"),
    );
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\nepochs = 0\n",
        3,
        10,
        "`epochs` = 0",
        None,
    );
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\nprefetch = 0\n",
        3,
        12,
        "`prefetch` = 0",
        None,
    );
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\nthreads = -2\n",
        3,
        11,
        "`threads` = -2",
        None,
    );
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\non_error = \"ignore\"\n",
        3,
        12,
        "`on_error` = \"ignore\" is not one of \"skip\", \"fail\"",
        Some("use one of \"skip\", \"fail\""),
    );
}

#[test]
fn missing_outputs_points_at_the_pipeline_header() {
    assert_err(
        "# comment\n\n[pipeline]\nbatch = 4\n",
        3,
        1,
        "[pipeline] has no `outputs`",
        Some("outputs = [\"images\", \"labels\"]"),
    );
    assert_err(
        "[[op]]\nkind = \"decode\"\n",
        1,
        1,
        "no [pipeline] table",
        Some("outputs"),
    );
    assert_err(
        "[pipeline]\noutputs = []\n",
        2,
        11,
        "`outputs` is empty",
        Some("at least one edge"),
    );
}

#[test]
fn op_without_kind_points_at_its_header() {
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\n\n[[op]]\nkind = \"a\"\n\n[[op]]\ninput = \"x\"\n",
        7,
        1,
        "operator #2 has no `kind`",
        Some("file_reader"),
    );
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\n[[op]]\nkind = 3\n",
        4,
        8,
        "`kind` must be a string, got an integer",
        Some("quote it"),
    );
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\n[op]\nkind = \"a\"\n",
        3,
        2,
        "`op` must be an array of tables",
        Some("[[op]]"),
    );
}

#[test]
fn both_input_and_inputs_points_at_the_second() {
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\n[[op]]\nkind = \"a\"\ninput = \"x\"\ninputs = [\"y\"]\n",
        6,
        1,
        "operator #1 has both `input` and `inputs`",
        Some("not both"),
    );
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\n[[op]]\nkind = \"a\"\noutputs = [\"y\"]\n output = \"x\"\n",
        6,
        2,
        "has both `outputs` and `output`",
        Some("`output = \"edge\"`"),
    );
}

#[test]
fn inputs_that_are_not_strings_point_at_the_entry() {
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\n[[op]]\nkind = \"a\"\ninputs = [\"x\", 2]\n",
        5,
        16,
        "`inputs` must be an array of strings, but entry #2 is an integer",
        Some("quote"),
    );
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\n[[op]]\nkind = \"a\"\ninputs = \"x\"\n",
        5,
        10,
        "`inputs` must be an array of strings, got a string",
        Some("inputs = [\"a\", \"b\"]"),
    );
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\n[[op]]\nkind = \"a\"\ninput = [\"x\"]\n",
        5,
        9,
        "`input` must be a string, got an array",
        None,
    );
    assert_err(
        "[pipeline]\noutputs = [\"x\", true]\n",
        2,
        17,
        "entry #2 is a boolean",
        None,
    );
}

#[test]
fn unknown_device_points_at_the_value() {
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\n[[op]]\nkind = \"a\"\ndevice = \"tpu\"\n",
        5,
        10,
        "`device` = \"tpu\" is not one of \"cpu\", \"gpu\"",
        Some("\"cpu\", \"gpu\""),
    );
    assert_err(
        "[pipeline]\ndevice = \"tpu\"\noutputs = [\"x\"]\n",
        2,
        10,
        "`device` = \"tpu\" is not one of \"auto\", \"cpu\", \"gpu\"",
        Some("choices"),
    );
    assert_err(
        "[pipeline]\ndevice = \"gpuu\"\noutputs = [\"x\"]\n",
        2,
        10,
        "is not one of",
        Some("did you mean \"gpu\"?"),
    );
    assert_err(
        "[pipeline]\ndevice = 1\noutputs = [\"x\"]\n",
        2,
        10,
        "`device` must be a string, got an integer",
        Some("\"auto\""),
    );
}

#[test]
fn inline_table_argument_points_at_the_value() {
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\n[[op]]\nkind = \"a\"\nsize = { h = 1, w = 2 }\n",
        5,
        8,
        "argument `size` can't be a table",
        Some("arrays of those"),
    );
    // Inside an array, at the element.
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\n[[op]]\nkind = \"a\"\nsize = [1, {}]\n",
        5,
        12,
        "argument `size` can't be a table",
        None,
    );
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\n[[op]]\nkind = \"a\"\nwhen = 1979-05-27\n",
        5,
        8,
        "can't be a date or time",
        Some("quote"),
    );
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\n[[op]]\nkind = \"a\"\nbig = 9223372036854775808\n",
        5,
        7,
        "out of range",
        Some("64 bits"),
    );
}

#[test]
fn columns_count_characters_not_bytes() {
    assert_err(
        "[pipeline]\noutputs = [\"é\", \"ü\", 3]\n",
        2,
        22,
        "entry #3",
        None,
    );
}

// ---- locations of every pointer kind ----

const LOCATED: &str = r#"[pipeline]
batch = 8
outputs = ["images",   "labels"]

[[op]]
kind = "file_reader"
outputs = ["jpegs", "labels"]
root = "/data"

[[op]]
  kind = "decode"
  input = "jpegs"
  output = "images"
  device = "gpu"
  "odd key" = 1

[[op]]
kind = "mix"
inputs = ["images", "labels"]
"#;

#[test]
fn every_pointer_kind_has_its_place() {
    let l = ok(LOCATED).locations;
    let at = |p: SpecPointer| l.locate(&p);
    assert_eq!(at(SpecPointer::Setting("batch".into())), (2, 9));
    assert_eq!(at(SpecPointer::Setting("outputs".into())), (3, 11));
    assert_eq!(at(SpecPointer::Output(0)), (3, 12));
    assert_eq!(at(SpecPointer::Output(1)), (3, 24));
    assert_eq!(at(SpecPointer::Op(0)), (5, 1));
    assert_eq!(at(SpecPointer::OpKind(0)), (6, 8));
    assert_eq!(at(SpecPointer::OpOutput(0, 0)), (7, 12));
    assert_eq!(at(SpecPointer::OpOutput(0, 1)), (7, 21));
    assert_eq!(at(SpecPointer::OpArg(0, "root".into())), (8, 1));
    assert_eq!(at(SpecPointer::Op(1)), (10, 1));
    assert_eq!(at(SpecPointer::OpKind(1)), (11, 10));
    assert_eq!(at(SpecPointer::OpInput(1, 0)), (12, 11));
    assert_eq!(at(SpecPointer::OpOutput(1, 0)), (13, 12));
    assert_eq!(at(SpecPointer::OpPlacement(1)), (14, 12));
    assert_eq!(at(SpecPointer::OpArg(1, "odd key".into())), (15, 3));
    assert_eq!(at(SpecPointer::OpInput(2, 0)), (19, 11));
    assert_eq!(at(SpecPointer::OpInput(2, 1)), (19, 21));
    assert_eq!(at(SpecPointer::Whole), (1, 1));
}

#[test]
fn unwritten_pointers_fall_back_to_the_enclosing_part() {
    let l = ok(LOCATED).locations;
    let at = |p: SpecPointer| l.locate(&p);
    // A setting left out: the [pipeline] header.
    assert_eq!(at(SpecPointer::Setting("seed".into())), (1, 1));
    // A missing argument: the operator's kind.
    assert_eq!(at(SpecPointer::OpArg(1, "size".into())), (11, 10));
    // A missing input of an operator that has an `inputs` key: that key.
    assert_eq!(at(SpecPointer::OpInput(2, 5)), (19, 1));
    // A missing input of an operator with no input key at all: its kind.
    assert_eq!(at(SpecPointer::OpInput(0, 0)), (6, 8));
    // No placement written: the kind.
    assert_eq!(at(SpecPointer::OpPlacement(0)), (6, 8));
    // An operator or output that doesn't exist.
    assert_eq!(at(SpecPointer::Op(9)), (1, 1));
    assert_eq!(at(SpecPointer::Output(7)), (3, 11));

    let l = ok("\n\n[pipeline]\noutputs = [\"x\"]\n").locations;
    assert_eq!(l.locate(&SpecPointer::Setting("batch".into())), (3, 1));
    assert_eq!(
        SpecLocations::default().locate(&SpecPointer::Output(0)),
        (1, 1)
    );
}

#[test]
fn config_error_places_a_validator_error() {
    let l = ok(LOCATED).locations;
    let e = SpecError::new(SpecPointer::OpArg(0, "root".into()), "no such folder")
        .help("check the path");
    match config_error(Path::new("p.toml"), &l, e) {
        Error::Config {
            file,
            line,
            column,
            message,
            help,
        } => {
            assert_eq!(file, PathBuf::from("p.toml"));
            assert_eq!((line, column), (8, 1));
            assert_eq!(message, "no such folder");
            assert_eq!(help.as_deref(), Some("check the path"));
        }
        other => panic!("{other:?}"),
    }
    let shown = config_error(
        Path::new("p.toml"),
        &l,
        SpecError::new(SpecPointer::OpPlacement(1), "no GPU"),
    )
    .to_string();
    assert_eq!(shown, "p.toml:14:12: no GPU");
}

#[test]
fn load_reads_a_file_and_reports_unreadable_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("p.toml");
    std::fs::write(&path, EXAMPLE).expect("write");
    let loaded = load(&path).expect("load");
    assert_eq!(loaded.spec.file.as_deref(), Some(path.as_path()));
    assert_eq!(loaded.spec.settings.batch, 64);

    let missing = dir.path().join("missing.toml");
    match load(&missing) {
        Err(Error::Io { path, .. }) => assert_eq!(path, missing),
        other => panic!("{other:?}"),
    }
    std::fs::write(&path, [0xff, 0xfe, b'\n']).expect("write");
    assert!(matches!(load(&path), Err(Error::Io { .. })));
    std::fs::write(&path, "[pipeline]\nbatch = 0\noutputs = [\"x\"]\n").expect("write");
    match load(&path) {
        Err(Error::Config { file, line, .. }) => {
            assert_eq!(file, path);
            assert_eq!(line, 2);
        }
        other => panic!("{other:?}"),
    }
}

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
            .on(Placement::Cpu)
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
device = "cpu"
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

// ---- properties ----

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
        prop::option::of(prop_oneof![Just(Placement::Cpu), Just(Placement::Gpu)]),
        prop::collection::btree_map(arg_name, arg_value(), 0..4),
    )
        .prop_map(|(kind, name, inputs, outputs, placement, args)| OpSpec {
            kind,
            name,
            inputs,
            outputs,
            placement,
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
    )
        .prop_map(
            |(batch, threads, prefetch, seed, epochs, on_error, device, device_id)| Settings {
                batch,
                threads,
                prefetch,
                seed,
                epochs: Some(epochs),
                on_error,
                device,
                device_id,
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
