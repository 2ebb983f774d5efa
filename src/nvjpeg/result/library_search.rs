//! Where libnvjpeg is looked for: `$STOKEHOLD_NVJPEG`, the loader's search path, CUDA
//! toolkits and Python wheels.

use std::path::{Path, PathBuf};

/// Library file names tried, in order, after `$STOKEHOLD_NVJPEG`.
pub const LIBRARY_NAMES: [&str; 3] = ["libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so"];

/// The candidates [`super::Nvjpeg::load`] tries, in order: `$STOKEHOLD_NVJPEG` (a path) when set;
/// the file names in [`LIBRARY_NAMES`] (searched by the dynamic loader: `LD_LIBRARY_PATH`,
/// the ld cache); the CUDA toolkit (`$CUDA_HOME`, `$CUDA_PATH`, `/usr/local/cuda`:
/// `lib64/libnvjpeg.so.13`, `.so.12`); then the pip wheel layouts (`nvidia/cu13/lib/libnvjpeg.so.13`,
/// `nvidia/nvjpeg/lib/libnvjpeg.so.12`) under every Python `site-packages` found from
/// `$VIRTUAL_ENV`, `$CONDA_PREFIX`, `$PYTHONPATH`, `~/.local` and `/usr/local`, `/usr`.
pub fn candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os("STOKEHOLD_NVJPEG") {
        if !p.is_empty() {
            out.push(PathBuf::from(p));
        }
    }
    out.extend(LIBRARY_NAMES.iter().map(PathBuf::from));
    let mut toolkits: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .collect();
    toolkits.push(PathBuf::from("/usr/local/cuda"));
    for t in toolkits {
        for name in &LIBRARY_NAMES[..2] {
            let p = t.join("lib64").join(name);
            if p.is_file() && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    for sp in site_packages() {
        for rel in [
            "nvidia/cu13/lib/libnvjpeg.so.13",
            "nvidia/nvjpeg/lib/libnvjpeg.so.12",
        ] {
            let p = sp.join(rel);
            if p.is_file() && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// Python `site-packages` / `dist-packages` folders that exist.
fn site_packages() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = Vec::new();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(v) = std::env::var_os(var) {
            roots.push(PathBuf::from(v));
        }
    }
    if let Some(h) = std::env::var_os("HOME") {
        roots.push(Path::new(&h).join(".local"));
    }
    roots.push(PathBuf::from("/usr/local"));
    roots.push(PathBuf::from("/usr"));
    let mut out = Vec::new();
    if let Some(pp) = std::env::var_os("PYTHONPATH") {
        out.extend(std::env::split_paths(&pp).filter(|p| p.is_dir()));
    }
    for r in roots {
        let Ok(rd) = std::fs::read_dir(r.join("lib")) else {
            continue;
        };
        let mut pys: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("python3"))
            })
            .collect();
        pys.sort();
        for py in pys {
            for sub in ["site-packages", "dist-packages"] {
                let d = py.join(sub);
                if d.is_dir() {
                    out.push(d);
                }
            }
        }
    }
    out
}
