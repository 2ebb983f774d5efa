//! The import graph of the library (`scripts/import-graph.py`): no import loops anywhere in
//! `src/`, and no operator module importing another.

use std::process::Command;

mod common;

/// Runs the script with `args`; `None` (after saying so) when there is no python3 here,
/// which fails the test when `CI` is set.
fn import_graph(args: &[&str]) -> Option<std::process::Output> {
    let root = env!("CARGO_MANIFEST_DIR");
    match Command::new("python3")
        .arg(format!("{root}/scripts/import-graph.py"))
        .args(args)
        .output()
    {
        Ok(out) => Some(out),
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "python3 is needed on CI to check the import graph: {e}"
            );
            common::skip::skip(
                common::skip::Need::Tool("python3"),
                format!("python3 not found ({e}); the import graph is not checked"),
            );
            None
        }
    }
}

#[test]
fn the_library_has_no_import_loops_and_operators_import_no_operator() {
    let Some(out) = import_graph(&["--quiet", "--report"]) else {
        return;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("import loops among the files of src/: 0 ("),
        "import loops: {stdout}"
    );
    assert!(
        stdout.contains("operator modules importing other operator modules: 0"),
        "{stdout}"
    );
}

#[test]
fn the_script_finds_a_loop_when_there_is_one() {
    // A tiny crate whose two files import each other.
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("src/pipeline");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(d.path().join("src/lib.rs"), "pub mod pipeline;\n").unwrap();
    std::fs::write(src.join("mod.rs"), "pub mod a;\npub mod b;\n").unwrap();
    std::fs::write(src.join("a.rs"), "use super::b::B;\npub struct A(B);\n").unwrap();
    std::fs::write(
        src.join("b.rs"),
        "pub struct B;\nfn f(_: crate::pipeline::a::A) {}\n",
    )
    .unwrap();
    let root = d.path().to_string_lossy().into_owned();
    let Some(out) = import_graph(&["--quiet", "--root", &root]) else {
        return;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(
        stdout.contains("src/pipeline/a.rs -> src/pipeline/b.rs -> src/pipeline/a.rs"),
        "{stdout}"
    );
    let Some(report) = import_graph(&["--quiet", "--report", "--root", &root]) else {
        return;
    };
    assert!(report.status.success());
}
