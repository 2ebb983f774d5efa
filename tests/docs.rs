//! The committed pipeline-file docs (docs/pipeline-file.md) are the ones generated from the
//! settings declarations and the operator schemas.
//!
//! To refresh them after changing a schema: `STOKEHOLD_BLESS=1 cargo test --test docs`.

use stokehold::pipeline::file::docs;

#[test]
fn pipeline_file_docs_match_the_schemas() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(docs::PATH);
    let generated = docs::markdown();
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != generated {
        if std::env::var_os("STOKEHOLD_BLESS").is_some() {
            std::fs::write(&path, &generated).unwrap();
            return;
        }
        panic!(
            "{} is out of date with the schemas: regenerate it with \
             `STOKEHOLD_BLESS=1 cargo test --test docs` and commit it",
            docs::PATH
        );
    }
}
