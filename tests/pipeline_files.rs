//! Invalid pipeline files fail before anything runs, naming the line and column and saying
//! what to change. (Parse-level mistakes are tested next to the parser in src/pipeline/file.)

mod common;

use std::path::Path;

use stokehold::pipeline::file;
use stokehold::pipeline::graph::Graph;
use stokehold::Error;

const HEAD: &str = "[pipeline]\nbatch = 8\noutputs = [\"images\", \"labels\"]\n\n[[op]]\nkind = \"file_reader\"\noutputs = [\"jpegs\", \"labels\"]\nroot = \"data\"\n";

/// Validates `text` as the pipeline file `bad.toml`; returns (line, column, message, help).
fn error_of(text: &str) -> (usize, usize, String, Option<String>) {
    let path = Path::new("bad.toml");
    let e = match file::parse(text, path) {
        Err(e) => e,
        Ok(loaded) => match Graph::build(&loaded.spec) {
            Ok(_) => panic!("expected an error for:\n{text}"),
            Err(e) => file::config_error(path, &loaded.locations, e),
        },
    };
    match e {
        Error::Config {
            file,
            line,
            column,
            message,
            help,
        } => {
            assert_eq!(file, path);
            (line, column, message, help)
        }
        other => panic!("not a config error: {other}"),
    }
}

fn with_ops(ops: &str) -> String {
    format!("{HEAD}{ops}")
}

const DECODE_FLIP: &str = "\n[[op]]\nkind = \"decode\"\ninput = \"jpegs\"\noutput = \"decoded\"\n\n[[op]]\nkind = \"flip\"\ninput = \"decoded\"\noutput = \"images\"\n";

#[test]
fn a_valid_file_passes() {
    let text = with_ops(DECODE_FLIP);
    let loaded = file::parse(&text, Path::new("ok.toml")).unwrap();
    Graph::build(&loaded.spec).unwrap();
}

#[test]
fn shipped_pipelines_are_valid() {
    for name in [
        "resnet50-train.toml",
        "resnet50-train-dct.toml",
        "resnet50-eval.toml",
    ] {
        let loaded = file::load(&common::shipped(name)).unwrap();
        Graph::build(&loaded.spec).unwrap_or_else(|e| panic!("{name}: {e:?}"));
    }
}

#[test]
fn unknown_operator_kind() {
    let text = with_ops(&DECODE_FLIP.replace("kind = \"flip\"", "kind = \"flipp\""));
    let (line, col, msg, help) = error_of(&text);
    assert_eq!((line, col), (16, 8), "{msg}");
    assert!(msg.contains("unknown operator kind 'flipp'"), "{msg}");
    assert!(help.unwrap().contains("did you mean 'flip'"));
}

#[test]
fn unknown_argument_with_suggestion() {
    let text = with_ops(&DECODE_FLIP.replace(
        "output = \"images\"\n",
        "output = \"images\"\nhorizontl = 0.5\n",
    ));
    let (line, col, msg, help) = error_of(&text);
    assert_eq!((line, col), (19, 1), "{msg}");
    assert!(msg.contains("unknown argument 'horizontl'"), "{msg}");
    assert!(help.unwrap().contains("did you mean 'horizontal'"));
}

#[test]
fn argument_of_wrong_type_or_range() {
    let text = with_ops(&DECODE_FLIP.replace(
        "output = \"images\"\n",
        "output = \"images\"\nhorizontal = \"often\"\n",
    ));
    let (line, _, msg, _) = error_of(&text);
    assert_eq!(line, 19, "{msg}");
    assert!(msg.contains("must be"), "{msg}");
    let text = with_ops(&DECODE_FLIP.replace(
        "output = \"images\"\n",
        "output = \"images\"\nhorizontal = 1.5\n",
    ));
    let (line, _, msg, help) = error_of(&text);
    assert_eq!(line, 19, "{msg}");
    assert!(msg.contains("out of range"), "{msg}");
    assert!(help.unwrap().contains("[0, 1]"));
}

#[test]
fn missing_edge() {
    let text = with_ops(&DECODE_FLIP.replace("input = \"decoded\"", "input = \"decodd\""));
    let (line, col, msg, help) = error_of(&text);
    assert_eq!((line, col), (17, 9), "{msg}");
    assert!(msg.contains("no operator produces edge 'decodd'"), "{msg}");
    assert!(help.unwrap().contains("did you mean 'decoded'"));
}

#[test]
fn edge_produced_twice() {
    let text = with_ops(&DECODE_FLIP.replace("output = \"images\"", "output = \"decoded\""));
    let (line, _, msg, _) = error_of(&text);
    assert_eq!(line, 18, "{msg}");
    assert!(msg.contains("already produced"), "{msg}");
}

#[test]
fn dangling_edge() {
    let text = with_ops(&format!(
        "{DECODE_FLIP}\n[[op]]\nkind = \"flip\"\ninput = \"decoded\"\noutput = \"unused\"\n"
    ));
    let (line, _, msg, help) = error_of(&text);
    assert_eq!(line, 23, "{msg}");
    assert!(msg.contains("never used"), "{msg}");
    assert!(help.is_some());
}

#[test]
fn cycle() {
    let text = with_ops(
        "\n[[op]]\nkind = \"decode\"\ninput = \"jpegs\"\noutput = \"decoded\"\n\n[[op]]\nkind = \"flip\"\ninput = \"looped\"\noutput = \"images\"\n\n[[op]]\nkind = \"flip\"\nname = \"again\"\ninput = \"images\"\noutput = \"looped\"\n",
    );
    let (_, _, msg, _) = error_of(&text);
    assert!(msg.contains("cycle"), "{msg}");
}

#[test]
fn unknown_output() {
    let text = with_ops(DECODE_FLIP).replace(
        "outputs = [\"images\", \"labels\"]",
        "outputs = [\"imgs\", \"labels\"]",
    );
    let (line, col, msg, help) = error_of(&text);
    assert_eq!((line, col), (3, 12), "{msg}");
    assert!(msg.contains("'imgs'"), "{msg}");
    assert!(help.unwrap().contains("did you mean 'images'"));
}

#[test]
fn an_operators_device_is_refused_and_says_where_the_device_goes() {
    let text = with_ops(&DECODE_FLIP.replace(
        "output = \"decoded\"",
        "output = \"decoded\"\ndevice = \"gpu\"",
    ));
    let (line, col, msg, help) = error_of(&text);
    assert_eq!((line, col), (14, 1), "{msg}");
    assert!(msg.contains("operator #2 has a `device` key"), "{msg}");
    assert!(help.unwrap().contains("`device = \"gpu\"`"));
}

#[test]
fn wrong_input_type_says_where_to_move_the_operator() {
    let text = with_ops(
        "\n[[op]]\nkind = \"decode\"\ninput = \"jpegs\"\noutput = \"decoded\"\n\n[[op]]\nkind = \"normalize\"\ninput = \"decoded\"\noutput = \"normalized\"\n\n[[op]]\nkind = \"resize\"\ninput = \"normalized\"\noutput = \"images\"\nsize = 64\n",
    );
    let (line, _, msg, _) = error_of(&text);
    assert_eq!(line, 22, "{msg}");
    assert!(msg.contains("before normalize"), "{msg}");
}

#[test]
fn reader_missing_and_images_from_encoded() {
    let text = "[pipeline]\noutputs = [\"images\"]\n\n[[op]]\nkind = \"flip\"\ninput = \"x\"\noutput = \"images\"\n";
    let (_, _, msg, _) = error_of(text);
    assert!(
        msg.contains("no file_reader") || msg.contains("no operator produces"),
        "{msg}"
    );
    let text = "[pipeline]\noutputs = [\"jpegs\"]\n\n[[op]]\nkind = \"file_reader\"\noutputs = [\"jpegs\"]\n";
    let (line, _, msg, help) = error_of(text);
    assert_eq!(line, 2, "{msg}");
    assert!(help.unwrap().contains("decode"));
}

#[test]
fn missing_required_argument_points_at_the_operator() {
    let text = with_ops(
        "\n[[op]]\nkind = \"decode\"\ninput = \"jpegs\"\noutput = \"decoded\"\n\n[[op]]\nkind = \"random_resized_crop\"\ninput = \"decoded\"\noutput = \"images\"\n",
    );
    let (line, _, msg, help) = error_of(&text);
    assert!((15..=16).contains(&line), "{line}: {msg}");
    assert!(msg.contains("'size'"), "{msg}");
    assert!(help.is_some());
}
