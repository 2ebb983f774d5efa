//! Where each part of a pipeline file was written, and errors placed there.

use super::*;
use crate::pipeline::spec::SpecPointer;

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
  color = "gray"
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
    assert_eq!(at(SpecPointer::OpArg(0, "root".into())), (8, 8));
    assert_eq!(at(SpecPointer::OpArgName(0, "root".into())), (8, 1));
    assert_eq!(at(SpecPointer::Op(1)), (10, 1));
    assert_eq!(at(SpecPointer::OpKind(1)), (11, 10));
    assert_eq!(at(SpecPointer::OpInput(1, 0)), (12, 11));
    assert_eq!(at(SpecPointer::OpOutput(1, 0)), (13, 12));
    assert_eq!(at(SpecPointer::OpArg(1, "color".into())), (14, 11));
    assert_eq!(at(SpecPointer::OpArgName(1, "color".into())), (14, 3));
    assert_eq!(at(SpecPointer::OpArg(1, "odd key".into())), (15, 15));
    assert_eq!(at(SpecPointer::OpArgName(1, "odd key".into())), (15, 3));
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
            assert_eq!((line, column), (8, 8));
            assert_eq!(message, "no such folder");
            assert_eq!(help.as_deref(), Some("check the path"));
        }
        other => panic!("{other:?}"),
    }
    let shown = config_error(
        Path::new("p.toml"),
        &l,
        SpecError::new(SpecPointer::OpArg(1, "color".into()), "no such colour"),
    )
    .to_string();
    assert_eq!(shown, "p.toml:14:11: no such colour");
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
    // Not text: where it stops being UTF-8 (`mistakes.rs` has the help).
    std::fs::write(&path, [0xff, 0xfe, b'\n']).expect("write");
    assert!(matches!(
        load(&path),
        Err(Error::Config {
            line: 1,
            column: 1,
            ..
        })
    ));
    std::fs::write(&path, "[pipeline]\nbatch = 0\noutputs = [\"x\"]\n").expect("write");
    match load(&path) {
        Err(Error::Config { file, line, .. }) => {
            assert_eq!(file, path);
            assert_eq!(line, 2);
        }
        other => panic!("{other:?}"),
    }
}

/// `stokehold check`'s columns: a wrong value at the value, an unknown argument at its name.
#[test]
fn a_wrong_value_points_at_the_value_and_an_unknown_argument_at_its_name() {
    let text = "[pipeline]\noutputs = [\"images\"]\n\n[[op]]\nkind = \"file_reader\"\n\
                output = \"jpegs\"\nroot = \"/data\"\n\n[[op]]\nkind = \"decode\"\n\
                input = \"jpegs\"\noutput = \"decoded\"\n\n[[op]]\nkind = \"resize\"\n\
                input = \"decoded\"\noutput = \"images\"\nsize = \"224\"\nsiz = 3\n";
    let errors = crate::pipeline::file::Draft::parse(text, Path::new("p.toml"))
        .finish()
        .unwrap_err();
    let shown: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(shown.len(), 2, "{shown:?}");
    assert!(
        shown[0].starts_with("p.toml:18:8: argument 'size'"),
        "{shown:?}"
    );
    assert!(
        shown[1].starts_with("p.toml:19:1: unknown argument 'siz'"),
        "{shown:?}"
    );
}
