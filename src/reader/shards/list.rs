//! Which shards a dataset is: a folder of `.tar` files, a brace pattern
//! (`train-{000000..000146}.tar`), one shard's path or URL, or a text file listing shard
//! paths or URLs one per line.

use std::path::{Path, PathBuf};

use crate::error::Error;

/// Where one shard is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Location {
    /// A local file.
    File(PathBuf),
    /// An http(s) URL.
    Url(String),
}

impl Location {
    /// How errors name the shard: its path or URL.
    pub fn display(&self) -> String {
        match self {
            Location::File(p) => p.display().to_string(),
            Location::Url(u) => u.clone(),
        }
    }

    /// The shard's file name (the last path or URL segment).
    pub fn file_name(&self) -> String {
        match self {
            Location::File(p) => p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            Location::Url(u) => {
                let path = u.split(['?', '#']).next().unwrap_or(u);
                path.rsplit('/').next().unwrap_or(path).to_string()
            }
        }
    }

    /// A sibling of this shard named `name` (an index beside the shards).
    pub fn sibling(&self, name: &str) -> Location {
        match self {
            Location::File(p) => Location::File(p.with_file_name(name)),
            Location::Url(u) => {
                let path = u.split(['?', '#']).next().unwrap_or(u);
                let base = path.rsplit_once('/').map_or(path, |(b, _)| b);
                Location::Url(format!("{base}/{name}"))
            }
        }
    }
}

/// True for an http(s) URL.
pub fn is_url(s: &str) -> bool {
    s.starts_with("http://") || s.starts_with("https://")
}

/// Whether `data` (what `--data` or Python's `data=` name) may be read: an existing file or
/// folder, an http(s) URL, or a brace pattern (its shards are checked when they are listed).
///
/// ```
/// use stokehold::reader::shards::list::data_exists;
/// assert!(data_exists("https://data.example/train-000000.tar".as_ref()));
/// assert!(data_exists("/no/such/train-{000000..000009}.tar".as_ref()));
/// assert!(!data_exists("/no/such/folder".as_ref()));
/// ```
pub fn data_exists(data: &Path) -> bool {
    let text = data.to_string_lossy();
    is_url(&text) || has_braces(&text) || data.exists()
}

/// True when `s` holds a brace pattern (`{a..b}` or `{x,y}`).
pub fn has_braces(s: &str) -> bool {
    s.find('{').is_some_and(|i| s[i..].contains('}'))
}

/// Whether `--data` names shards rather than image files: a URL, a brace pattern, a `.tar`
/// file, a folder holding `.tar` files and no sub-folders, or a text file whose first entry
/// is a `.tar` path or URL.
pub fn looks_like_shards(data: &str) -> bool {
    if is_url(data) || (has_braces(data) && !Path::new(data).exists()) {
        return true;
    }
    let p = Path::new(data);
    if p.is_dir() {
        let Ok(rd) = std::fs::read_dir(p) else {
            return false;
        };
        let mut tars = false;
        for e in rd.flatten() {
            let path = e.path();
            if path.is_dir() {
                return false;
            }
            tars |= is_tar_name(&path.to_string_lossy());
        }
        return tars;
    }
    if is_tar_name(data) {
        return true;
    }
    p.is_file() && first_list_entry(p).is_some_and(|l| is_tar_name(&l))
}

fn is_tar_name(s: &str) -> bool {
    s.to_ascii_lowercase().ends_with(".tar")
}

/// The first entry of a list file (blank lines and `#` comments skipped), from its first
/// few kilobytes.
fn first_list_entry(p: &Path) -> Option<String> {
    use std::io::Read;
    let mut head = Vec::new();
    std::fs::File::open(p)
        .ok()?
        .take(64 * 1024)
        .read_to_end(&mut head)
        .ok()?;
    String::from_utf8_lossy(&head)
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
}

/// Expands brace patterns: `{000..012}` counts (zero-padded to the first bound's width),
/// `{a,b}` alternates; several braces multiply.
///
/// ```
/// use stokehold::reader::shards::list::expand_braces;
/// assert_eq!(expand_braces("s-{08..10}.tar").unwrap(), ["s-08.tar", "s-09.tar", "s-10.tar"]);
/// assert_eq!(expand_braces("{a,b}{0..1}").unwrap(), ["a0", "a1", "b0", "b1"]);
/// ```
pub fn expand_braces(pattern: &str) -> Result<Vec<String>, String> {
    let Some(open) = pattern.find('{') else {
        return Ok(vec![pattern.to_string()]);
    };
    let close = pattern[open..]
        .find('}')
        .map(|c| open + c)
        .ok_or_else(|| format!("'{pattern}': a '{{' without '}}'"))?;
    let (head, body, tail) = (
        &pattern[..open],
        &pattern[open + 1..close],
        &pattern[close + 1..],
    );
    let parts: Vec<String> = if let Some((a, b)) = body.split_once("..") {
        let (lo, hi) = (a.parse::<u64>(), b.parse::<u64>());
        let (Ok(lo), Ok(hi)) = (lo, hi) else {
            return Err(format!(
                "'{pattern}': '{{{body}}}' is not a range of numbers"
            ));
        };
        if hi < lo {
            return Err(format!("'{pattern}': the range {{{body}}} counts down"));
        }
        if hi - lo > 10_000_000 {
            return Err(format!("'{pattern}': the range {{{body}}} is too long"));
        }
        let width = a.len();
        (lo..=hi).map(|n| format!("{n:0width$}")).collect()
    } else if body.contains(',') {
        body.split(',').map(str::to_string).collect()
    } else {
        return Err(format!(
            "'{pattern}': write {{000..009}} for a range or {{a,b}} for alternatives"
        ));
    };
    let rest = expand_braces(tail)?;
    let mut out = Vec::with_capacity(parts.len() * rest.len());
    for p in &parts {
        for r in &rest {
            out.push(format!("{head}{p}{r}"));
        }
    }
    Ok(out)
}

/// One path or URL, pattern or not, into locations (relative paths against `base`).
fn entry_locations(entry: &str, base: &Path, out: &mut Vec<Location>) -> Result<(), Error> {
    for e in expand_braces(entry).map_err(Error::Dataset)? {
        if is_url(&e) {
            out.push(Location::Url(e));
        } else {
            let p = PathBuf::from(&e);
            out.push(Location::File(if p.is_absolute() {
                p
            } else {
                base.join(p)
            }));
        }
    }
    Ok(())
}

/// The shards `spec` names, in order: a URL or path (brace patterns expanded), a folder (its
/// `.tar` files in name order), or a list file of one path or URL per line (relative paths
/// against the list's folder; blank lines and `#` comments skipped). Relative paths in
/// `spec` itself resolve against `base`.
pub fn list_shards(spec: &str, base: &Path) -> Result<Vec<Location>, Error> {
    let spec = spec.trim();
    let mut out = Vec::new();
    if spec.is_empty() {
        return Err(Error::Dataset(
            "no shards given: set `shards` on the shard_reader, or give the data (`--data`, \
             `PipelineSpec::set_data`, Python's `data=`)"
                .into(),
        ));
    }
    let path = if Path::new(spec).is_absolute() {
        PathBuf::from(spec)
    } else {
        base.join(spec)
    };
    if is_url(spec) || (has_braces(spec) && !path.exists()) || is_tar_name(spec) {
        entry_locations(spec, base, &mut out)?;
    } else if path.is_dir() {
        let mut tars: Vec<PathBuf> = std::fs::read_dir(&path)
            .map_err(|source| Error::Io {
                path: path.clone(),
                source,
            })?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_file() && is_tar_name(&p.to_string_lossy()))
            .collect();
        tars.sort();
        out.extend(tars.into_iter().map(Location::File));
    } else {
        let text = std::fs::read_to_string(&path).map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        for line in text.lines().map(str::trim) {
            if !line.is_empty() && !line.starts_with('#') {
                entry_locations(line, &dir, &mut out)?;
            }
        }
    }
    if out.is_empty() {
        return Err(Error::Dataset(format!("no .tar shards found in {spec}")));
    }
    Ok(out)
}
