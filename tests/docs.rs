//! The docs stay true: the committed pipeline-file docs (docs/pipeline-file.md) are the ones
//! generated from the settings declarations and the operator schemas, every link of the
//! README and docs/ leads somewhere, and the README stays a front door.
//!
//! To refresh the pipeline-file docs after changing a schema:
//! `STOKEHOLD_BLESS=1 cargo test --test docs`.

use std::path::{Path, PathBuf};

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

/// The repository's Markdown files a reader follows links in.
fn markdown_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md"), root.join("python/README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The text of `markdown` outside fenced code blocks and inline code spans, line by line.
fn prose_lines(markdown: &str) -> Vec<String> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Drop `code spans`: what they hold is not a link.
        let prose: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, part)| part)
            .collect();
        lines.push(prose);
    }
    lines
}

/// The targets of the `[text](target)` links (and images) of `markdown`.
fn link_targets(markdown: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for line in prose_lines(markdown) {
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            match after.find(')') {
                Some(end) => {
                    targets.push(after[..end].trim().to_string());
                    rest = &after[end..];
                }
                None => break,
            }
        }
    }
    targets
}

/// The anchors GitHub gives the headings of `markdown`: lower case, punctuation dropped,
/// spaces as hyphens, `-1`, `-2` … after repeats.
fn anchors(markdown: &str) -> Vec<String> {
    let mut seen = std::collections::HashMap::<String, usize>::new();
    let mut anchors = Vec::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let n = seen.entry(slug.clone()).or_insert(0);
        anchors.push(if *n == 0 {
            slug.clone()
        } else {
            format!("{slug}-{n}")
        });
        *n += 1;
    }
    anchors
}

#[test]
fn every_link_in_the_readme_and_docs_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let linked = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            if !linked.exists() {
                broken.push(format!("{}: {target}: no such file", file.display()));
                continue;
            }
            if let Some(anchor) = anchor {
                let headings = anchors(&std::fs::read_to_string(&linked).unwrap_or_default());
                if !headings.iter().any(|h| h == anchor) {
                    broken.push(format!(
                        "{}: {target}: no heading with that anchor (there are: {})",
                        file.display(),
                        headings.join(", ")
                    ));
                }
            }
        }
    }
    assert!(
        checked > 10,
        "only {checked} links found: is the parser right?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_link_parser_finds_links_and_anchors() {
    let md = "# A `b` title\n\nsee [x](docs/x.md#a-b-title) and `[not](a link)`\n\
              ```\n[nor](this)\n```\n## A b title\n![img](p.png)\n";
    assert_eq!(link_targets(md), ["docs/x.md#a-b-title", "p.png"]);
    assert_eq!(anchors(md), ["a-b-title", "a-b-title-1"]);
}

/// The README is the front door: what stokehold is, the two commands, an example, the
/// current figures and links; references and history belong in docs/.
#[test]
fn the_readme_stays_a_front_door() {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let bytes = std::fs::metadata(&readme).unwrap().len();
    assert!(
        bytes <= 10 * 1024,
        "README.md is {bytes} bytes: move detail into docs/ and link to it"
    );
}

/// docs/adding-an-operator.md names the files a newcomer touches, with `flip` as the worked
/// example: every path it gives in backticks exists in the tree.
#[test]
fn adding_an_operator_names_files_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/adding-an-operator.md")).unwrap();
    let mut checked = 0;
    for (k, part) in page.split('`').enumerate() {
        // Odd parts are inside backticks; a path has a folder and no spaces.
        let looks_like_a_path = k % 2 == 1
            && !part.contains(' ')
            && ["src/", "kernels/", "tests/", "scripts/", "docs/"]
                .iter()
                .any(|p| part.starts_with(p));
        if looks_like_a_path {
            assert!(
                root.join(part).exists(),
                "docs/adding-an-operator.md names {part}, which is not in the tree"
            );
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} paths found in the page");
}
