//! README.md stays true: its pipeline-file reference is the one generated from the schemas,
//! and its Rust example compiles (see `readme_doctests` in src/lib.rs).
//!
//! To refresh the reference after changing a schema: `STOKEHOLD_BLESS=1 cargo test --test readme`.

const START: &str = "<!-- reference:start -->\n";
const END: &str = "<!-- reference:end -->";

#[test]
fn readme_reference_matches_the_schemas() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
    let readme = std::fs::read_to_string(path).unwrap();
    let generated = stokehold::pipeline::reference::reference_markdown();
    let (a, b) = (
        readme
            .find(START)
            .expect("README has the reference start marker")
            + START.len(),
        readme
            .find(END)
            .expect("README has the reference end marker"),
    );
    if readme[a..b] != generated {
        if std::env::var_os("STOKEHOLD_BLESS").is_some() {
            let updated = format!("{}{}{}", &readme[..a], generated, &readme[b..]);
            std::fs::write(path, updated).unwrap();
            return;
        }
        panic!("README.md's pipeline-file reference is stale: run STOKEHOLD_BLESS=1 cargo test --test readme");
    }
}
