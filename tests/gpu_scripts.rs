//! `scripts/gpu-check.sh` runs the GPU stage's real-device tests by name (its `STAGE_TESTS`):
//! every name exists in the sources and is listed in docs/gpu.md, and every real-device test
//! of the GPU stage (a `gpu_` test in `src/pipeline/run/`) is in the list, so that none is
//! left out on a GPU machine.

use std::path::Path;

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The `.rs` files under `dir`, in its subfolders too.
fn rust_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// The test paths between `STAGE_TESTS=(` and `)` in gpu-check.sh.
fn stage_tests() -> Vec<String> {
    let script = read("scripts/gpu-check.sh");
    let start = script
        .find("STAGE_TESTS=(")
        .expect("STAGE_TESTS in gpu-check.sh");
    let body = &script[start + "STAGE_TESTS=(".len()..];
    let end = body.find(')').expect("the list ends");
    body[..end].split_whitespace().map(str::to_string).collect()
}

#[test]
fn gpu_check_runs_every_real_device_test_of_the_gpu_stage() {
    let listed = stage_tests();
    assert!(!listed.is_empty());
    let docs = read("docs/gpu.md");
    for path in &listed {
        let parts: Vec<&str> = path.split("::").collect();
        let [.., module, name] = parts[..] else {
            panic!("{path}: module::test");
        };
        let dir = parts[..parts.len() - 2].join("/");
        let source = read(&format!("src/{dir}/{module}.rs"));
        assert!(
            source.contains(&format!("fn {name}()")),
            "{path}: no such test in src/{dir}/{module}.rs"
        );
        assert!(docs.contains(name), "docs/gpu.md does not name {name}");
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/pipeline/run");
    for path in rust_files(&dir) {
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for (k, line) in lines.iter().enumerate() {
            // A test: `#[test]` right above.
            let Some(rest) = line.strip_prefix("fn gpu_") else {
                continue;
            };
            if k == 0 || lines[k - 1] != "#[test]" {
                continue;
            }
            let name = format!("gpu_{}", rest.split('(').next().unwrap());
            assert!(
                listed.iter().any(|p| p.ends_with(&format!("::{name}"))),
                "{name} ({}) is not in gpu-check.sh's STAGE_TESTS",
                path.display()
            );
        }
    }
}
