//! One test per kind of mistake: the exact line and column it is reported at.

use super::*;

#[test]
fn syntax_error_is_placed_and_one_line() {
    let (l, c, m, h) = config_err("[pipeline]\nbatch = = 3\noutputs = [\"x\"]\n");
    assert_eq!((l, c), (2, 9), "{m}");
    assert!(m.starts_with("invalid TOML: "), "{m}");
    assert!(!m.contains('\n'), "{m}");
    assert!(h.is_some_and(|h| h.contains("TOML syntax")), "{m}");
    // An unterminated string, and a duplicate key (reported at the second one, named).
    let (l, _, m, _) = config_err("[pipeline]\noutputs = [\"x]\n");
    assert_eq!(l, 2, "{m}");
    assert_err(
        "[pipeline]\nbatch = 1\nbatch = 2\noutputs = [\"x\"]\n",
        3,
        1,
        "duplicate key",
        Some("`batch` appears twice: keep one"),
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
    // Several edges under the singular key: the plural one is named.
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\n[[op]]\nkind = \"decode\"\noutput = [\"a\", \"b\"]\n",
        5,
        10,
        "`output` must be a string, got an array",
        Some("for several, write `outputs = [...]`"),
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
    // Operators have no device: the pipeline's decides, and the file says where to put it.
    for device in ["\"gpu\"", "\"tpu\"", "1"] {
        assert_err(
            &format!("[pipeline]\noutputs = [\"x\"]\n[[op]]\nkind = \"a\"\ndevice = {device}\n"),
            5,
            1,
            "operator #1 has a `device` key, but operators have none",
            Some("set `device = \"gpu\"` (or \"auto\") under [pipeline]"),
        );
    }
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
        "[pipeline]\ndevice = \"CPU\"\noutputs = [\"x\"]\n",
        2,
        10,
        "is not one of",
        Some("did you mean \"cpu\"?"),
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

#[test]
fn a_table_written_op_after_the_list_of_operators_says_to_write_it_twice_bracketed() {
    assert_err(
        "[pipeline]\noutputs = [\"x\"]\n\n[[op]]\nkind = \"file_reader\"\noutputs = [\"x\"]\n\n\
         [op]\nkind = \"decode\"\n",
        8,
        2,
        "duplicate key",
        Some("write each operator as `[[op]]`"),
    );
}

#[test]
fn a_missing_input_suggests_the_latest_output_no_operator_reads() {
    let text = "[pipeline]\noutputs = [\"images\"]\n\n\
                [[op]]\nkind = \"file_reader\"\noutputs = [\"jpegs\", \"labels\"]\n\n\
                [[op]]\nkind = \"decode\"\ninput = \"jpegs\"\noutput = \"decoded\"\n\n\
                [[op]]\nkind = \"flip\"\ninput = \"decoded\"\noutput = \"flipped\"\n\n\
                [[op]]\nkind = \"cast\"\noutput = \"images\"\ndtype = \"f32\"\n";
    let shown = problems(text);
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(
        shown[0].starts_with(&format!("{FILE}:18:1: 'cast' takes 1 input(s), 0 given")),
        "{shown:?}"
    );
    // The flip's output is the latest unread one.
    assert!(
        shown[0]
            .contains("help: add `input = \"flipped\"` (the latest output no operator reads yet)"),
        "{shown:?}"
    );
    // Labels are never suggested: no operator takes them.
    let text = "[pipeline]\noutputs = [\"images\"]\n\n\
                [[op]]\nkind = \"file_reader\"\noutputs = [\"jpegs\", \"labels\"]\n\n\
                [[op]]\nkind = \"decode\"\noutput = \"images\"\n";
    let shown = problems(text);
    assert!(shown[0].contains("add `input = \"jpegs\"`"), "{shown:?}");
}

#[test]
fn a_file_that_is_not_utf8_text_is_placed_where_the_text_stops() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("p.toml");
    std::fs::write(&path, b"[pipeline]\nbatch = 4 # caf\xe9\n").unwrap();
    match crate::pipeline::file::Draft::load(&path) {
        Err(Error::Config {
            line,
            column,
            message,
            help,
            ..
        }) => {
            assert_eq!((line, column), (2, 16), "{message}");
            assert!(message.starts_with("not UTF-8 text"), "{message}");
            assert!(help.is_some_and(|h| h.contains(".toml")));
        }
        other => panic!("expected a config error, got {other:?}"),
    }
}

/// An argument that can't fit the images an operator is fed (3 means for gray images, 3
/// fill values for gray) is pointed at, not the operator's input.
#[test]
fn an_argument_that_does_not_fit_its_images_is_pointed_at() {
    let gray = "[pipeline]\noutputs = [\"images\"]\n\n[[op]]\nkind = \"file_reader\"\noutput = \"jpegs\"\n\n[[op]]\nkind = \"decode\"\ninput = \"jpegs\"\noutput = \"decoded\"\ncolor = \"gray\"\n\n[[op]]\n";
    let normalize =
        "kind = \"normalize\"\ninput = \"decoded\"\noutput = \"images\"\nmean = [0.5, 0.5, 0.5]\n";
    let pad =
        "kind = \"pad\"\ninput = \"decoded\"\noutput = \"images\"\ntop = 8\nfill = [1, 2, 3]\n";
    for (op, at, message) in [
        (
            normalize,
            "18:8",
            "'normalize' argument 'mean' has 3 values but its images have 1 channel (gray)",
        ),
        (
            pad,
            "19:8",
            "pad has 3 fill values but its images have 1 channel",
        ),
    ] {
        let text = format!("{gray}{op}");
        let shown = problems(&text);
        assert_eq!(shown.len(), 1, "{shown:?}");
        assert!(
            shown[0].starts_with(&format!("{FILE}:{at}: {message}")),
            "{shown:?}"
        );
        assert!(
            shown[0].contains("help: or change what feeds operator"),
            "{shown:?}"
        );
    }
}

/// A name used twice is pointed at where the second is written; an implicit one (the
/// operator's output) at the operator.
#[test]
fn a_name_used_twice_is_pointed_at() {
    let head = "[pipeline]\noutputs = [\"b\"]\n\n[[op]]\nkind = \"file_reader\"\noutput = \"jpegs\"\n\n[[op]]\nkind = \"decode\"\ninput = \"jpegs\"\noutput = \"a\"\nname = \"x\"\n\n[[op]]\nkind = \"flip\"\ninput = \"a\"\noutput = \"b\"\n";
    let text = format!("{head}name = \"x\"\n");
    let shown = problems(&text);
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(
        shown[0].starts_with(&format!(
            "{FILE}:18:8: operator name 'x' is already used by operator #2"
        )),
        "{shown:?}"
    );
}

/// Every problem `Draft::finish` finds in `text` (a graph's too), as shown.
fn problems(text: &str) -> Vec<String> {
    let errors = crate::pipeline::file::Draft::parse(text, Path::new(FILE))
        .finish()
        .unwrap_err();
    errors.iter().map(|e| e.to_string()).collect()
}
