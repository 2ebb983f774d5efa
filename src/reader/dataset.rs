//! Listing a dataset: class folders (labels from the sorted sub-folder names), a flat folder,
//! or a list file of `path label` lines.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::Error;

use super::{ReaderConfig, SourceKind};

/// One sample of a dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The file (shared: a step of the schedule hands it on without copying it).
    pub path: Arc<Path>,
    /// Its label (-1 when the source has none).
    pub label: i64,
}

/// A listed dataset.
#[derive(Debug, Clone, Default)]
pub struct Dataset {
    /// Samples in their canonical (sorted) order; a sample's index is its position here.
    pub entries: Vec<Entry>,
    /// Class names by label, for class-folder sources.
    pub classes: Vec<OsString>,
    /// Problems met while listing (unreadable sub-folders, symlink loops, bad list lines).
    pub warnings: Vec<String>,
}

impl Dataset {
    /// Lists the samples described by `config`.
    pub fn list(config: &ReaderConfig) -> Result<Dataset, Error> {
        let source = match config.source {
            SourceKind::Auto if config.list.is_some() => SourceKind::List,
            SourceKind::Auto => {
                if config.root.as_os_str().is_empty() {
                    return Err(Error::Dataset(
                        "no data given: set `root` (or `list`) on the file_reader, or give the \
                         data (`--data DIR`, `PipelineSpec::set_data`, Python's `data=`)"
                            .into(),
                    ));
                }
                if has_subfolders(&config.root)? {
                    SourceKind::ClassFolders
                } else {
                    SourceKind::Flat
                }
            }
            s => s,
        };
        let mut ds = Dataset::default();
        match source {
            SourceKind::List => {
                let list = config.list.as_ref().expect("checked in from_args");
                let base = if config.root.as_os_str().is_empty() {
                    list.parent().map(Path::to_path_buf).unwrap_or_default()
                } else {
                    config.root.clone()
                };
                read_list(list, &base, &mut ds)?;
            }
            SourceKind::ClassFolders => {
                let (mut dirs, files): (Vec<PathBuf>, Vec<PathBuf>) =
                    read_dir_sorted(&config.root)?
                        .into_iter()
                        .partition(|p| p.is_dir());
                dirs.sort();
                if let Some(w) = files_beside_classes(&config.root, &files, &config.extensions) {
                    ds.warnings.push(w);
                }
                let mut links = Links::new(&config.root, &dirs);
                for (label, dir) in dirs.iter().enumerate() {
                    ds.classes
                        .push(dir.file_name().map(OsStr::to_os_string).unwrap_or_default());
                    links.class = label;
                    if let Some(why) = links.refused_class(label) {
                        // Its label stays: the other classes keep theirs.
                        ds.warnings
                            .push(format!("class folder {} not read: {why}", dir.display()));
                        continue;
                    }
                    let before = ds.entries.len();
                    walk(dir, config, label as i64, &mut ds, &mut links);
                    if ds.entries.len() == before {
                        ds.warnings.push(format!(
                            "class folder {} holds no image files",
                            dir.display()
                        ));
                    }
                }
            }
            SourceKind::Flat | SourceKind::Auto => {
                for p in read_dir_sorted(&config.root)? {
                    // Anything but a folder: a broken symlink or a FIFO is listed and then
                    // reported when it fails to read, as in class folders.
                    if !p.is_dir() && has_extension(&p, &config.extensions) {
                        ds.entries.push(Entry {
                            path: p.into(),
                            label: -1,
                        });
                    }
                }
            }
        }
        if ds.entries.is_empty() {
            let where_ = config
                .list
                .as_ref()
                .unwrap_or(&config.root)
                .display()
                .to_string();
            // A folder of tar shards given to the file reader.
            let shards = config.list.is_none()
                && crate::reader::shards::list::looks_like_shards(&config.root.to_string_lossy());
            let hint = if shards {
                "; it holds tar shards: read them with a shard_reader (`--data` and \
                 `PipelineSpec::set_data` choose the reader from the data)"
            } else {
                ""
            };
            return Err(Error::Dataset(format!(
                "no image files found in {where_} (extensions: {}){hint}",
                config.extensions.join(", ")
            )));
        }
        Ok(ds)
    }
}

/// What a folder of class folders also holds that is not read: images (not in a class) and
/// tar shards (which a file reader doesn't read), said where there are any.
fn files_beside_classes(root: &Path, files: &[PathBuf], extensions: &[String]) -> Option<String> {
    let count = |keep: &dyn Fn(&PathBuf) -> bool| files.iter().filter(|p| keep(p)).count();
    let images = count(&|p| has_extension(p, extensions));
    let tars = count(&|p| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("tar")));
    let some = |n: usize, one: &str, many: &str| match n {
        0 => None,
        1 => Some(format!("1 {one}")),
        n => Some(format!("{n} {many}")),
    };
    let what: Vec<String> = [
        some(images, "image file", "image files"),
        some(tars, "tar shard", "tar shards"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if what.is_empty() {
        return None;
    }
    let help = match (images, tars) {
        (_, 1..) => {
            "to read the shards, give a folder that holds only them (or their brace pattern)"
        }
        (1, 0) => "move it into a class folder to read it",
        _ => "move them into a class folder to read them",
    };
    Some(format!(
        "{} has class sub-folders, whose images are read; the {} beside them {} not read: \
         {help}",
        root.display(),
        what.join(" and "),
        if images + tars == 1 { "is" } else { "are" }
    ))
}

fn io_err(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn read_dir_sorted(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io_err(dir, e))? {
        let entry = entry.map_err(|e| io_err(dir, e))?;
        out.push(entry.path());
    }
    // Byte order of the file names, whatever their encoding.
    out.sort();
    Ok(out)
}

fn has_subfolders(dir: &Path) -> Result<bool, Error> {
    Ok(read_dir_sorted(dir)?.iter().any(|p| p.is_dir()))
}

fn has_extension(path: &Path, extensions: &[String]) -> bool {
    path.extension()
        .map(|e| {
            let e = e.to_string_lossy().to_ascii_lowercase();
            extensions.contains(&e)
        })
        .unwrap_or(false)
}

/// Where a walk of the class folders has been, to follow symlinks without reading a folder
/// twice: a link back up (a loop), to the data folder or above it, into another class folder
/// (whose images would be read again under this class's label), or to a folder read
/// already is skipped with a warning; so is a class folder that is itself such a link.
struct Links {
    /// The data folder, resolved.
    root: Option<PathBuf>,
    /// Each class folder, resolved, by label; `None` where it can't be, or is not read
    /// ([`Links::refused_class`]).
    classes: Vec<Option<PathBuf>>,
    /// Why a class folder is not read, by label.
    refused: Vec<Option<String>>,
    /// The label of the class being walked.
    class: usize,
    /// The folders of the walk, from the class folder down.
    stack: Vec<PathBuf>,
    /// Every folder walked.
    seen: std::collections::HashSet<PathBuf>,
}

impl Links {
    fn new(root: &Path, classes: &[PathBuf]) -> Links {
        let root = std::fs::canonicalize(root).ok();
        let resolved: Vec<Option<PathBuf>> = classes
            .iter()
            .map(|c| std::fs::canonicalize(c).ok())
            .collect();
        // A class folder that leads to the data folder (or above), to another class folder
        // or into one, is a second name for images another class has: not read.
        let at_root: Vec<Option<String>> = resolved
            .iter()
            .map(|c| holds_root(root.as_ref(), c.as_ref()?))
            .collect();
        let refused: Vec<Option<String>> = resolved
            .iter()
            .enumerate()
            .map(|(k, c)| {
                let c = c.as_ref()?;
                if let Some(why) = &at_root[k] {
                    return Some(why.clone());
                }
                let owner = resolved.iter().enumerate().find(|(j, o)| {
                    *j != k
                        && at_root[*j].is_none()
                        && o.as_ref().is_some_and(|o| {
                            // The same folder twice: its own name reads it, else the first.
                            let first = match (classes[*j].is_symlink(), classes[k].is_symlink()) {
                                (false, true) => true,
                                (true, false) => false,
                                _ => *j < k,
                            };
                            c.starts_with(o) && (c != o || first)
                        })
                });
                owner.map(|(j, _)| {
                    format!(
                        "a link to {}, in the class folder {} (read as its class)",
                        c.display(),
                        classes[j].display()
                    )
                })
            })
            .collect();
        let classes = resolved
            .into_iter()
            .zip(&refused)
            .map(|(c, r)| c.filter(|_| r.is_none()))
            .collect();
        Links {
            root,
            classes,
            refused,
            class: 0,
            stack: Vec::new(),
            seen: Default::default(),
        }
    }

    /// Why the class folder of `label` is not read, if it is not.
    fn refused_class(&self, label: usize) -> Option<&str> {
        self.refused.get(label)?.as_deref()
    }

    /// Why the folder at `canonical` is not walked here, if it is not.
    fn refuse(&self, canonical: &Path) -> Option<String> {
        if self.stack.iter().any(|s| s == canonical) {
            return Some("symlink loop".into());
        }
        if let Some(why) = holds_root(self.root.as_ref(), canonical) {
            return Some(why);
        }
        // Inside this class folder: where a link leads elsewhere, it may lead anywhere.
        let here = self.classes.get(self.class).and_then(Option::as_ref);
        if !here.is_some_and(|h| canonical.starts_with(h)) {
            let other = self.classes.iter().enumerate().find(|(k, c)| {
                *k != self.class && c.as_ref().is_some_and(|c| canonical.starts_with(c))
            });
            if let Some((_, Some(c))) = other {
                return Some(format!(
                    "a link into the class folder {}, whose images are its class's, not this \
                     one's",
                    c.display()
                ));
            }
        }
        self.seen.contains(canonical).then(|| {
            format!(
                "a link to {}, whose images are listed already (each is read once)",
                canonical.display()
            )
        })
    }
}

/// Why a folder resolved to `canonical` is not read, where it is the data folder (resolved:
/// `root`) or holds it.
fn holds_root(root: Option<&PathBuf>, canonical: &Path) -> Option<String> {
    let root = root.filter(|r| r.starts_with(canonical))?;
    Some(if root == canonical {
        "a link to the data folder, whose class folders are listed on their own".to_string()
    } else {
        format!(
            "a link to {}, which holds the data folder",
            canonical.display()
        )
    })
}

/// Recursive, sorted walk of one class folder, following symlinks but not loops, nor into
/// what the listing reads otherwise ([`Links`]).
fn walk(dir: &Path, config: &ReaderConfig, label: i64, ds: &mut Dataset, links: &mut Links) {
    let canonical = match std::fs::canonicalize(dir) {
        Ok(c) => c,
        Err(e) => {
            ds.warnings.push(format!("skipped {}: {e}", dir.display()));
            return;
        }
    };
    if let Some(why) = links.refuse(&canonical) {
        ds.warnings
            .push(format!("skipped {}: {why}", dir.display()));
        return;
    }
    links.seen.insert(canonical.clone());
    links.stack.push(canonical);
    let items = match read_dir_sorted(dir) {
        Ok(v) => v,
        Err(e) => {
            ds.warnings.push(format!("skipped {e}"));
            links.stack.pop();
            return;
        }
    };
    // Links to folders last: a folder reached both by its own name and by a link is read
    // under its own name, whichever sorts first.
    let (linked, items): (Vec<PathBuf>, Vec<PathBuf>) = items
        .into_iter()
        .partition(|p| p.is_symlink() && p.is_dir());
    for p in items.into_iter().chain(linked) {
        if p.is_dir() {
            walk(&p, config, label, ds, links);
        } else if has_extension(&p, &config.extensions) {
            ds.entries.push(Entry {
                path: p.into(),
                label,
            });
        }
    }
    links.stack.pop();
}

fn bytes_to_path(bytes: &[u8]) -> PathBuf {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        PathBuf::from(OsStr::from_bytes(bytes))
    }
    #[cfg(not(unix))]
    {
        PathBuf::from(String::from_utf8_lossy(bytes).into_owned())
    }
}

/// Parses a list file: `path label` per line; the label is the last whitespace-separated
/// field when it is an integer (else the whole line is a path with label -1). Blank lines
/// and lines starting with `#` are skipped. File names are taken as raw bytes.
fn read_list(list: &Path, base: &Path, ds: &mut Dataset) -> Result<(), Error> {
    let bytes = std::fs::read(list).map_err(|e| io_err(list, e))?;
    let resolve = |p: &[u8]| {
        let p = bytes_to_path(p);
        if p.is_absolute() {
            p
        } else {
            base.join(p)
        }
    };
    // Lines without a label, when others have one: (how many, the first's number).
    let (mut unlabelled, mut labelled) = ((0usize, 0usize), false);
    for (lineno, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        let trimmed = trim_ascii(line);
        if trimmed.is_empty() || trimmed[0] == b'#' {
            continue;
        }
        // Only a line with a problem says where it is.
        let at = || format!("{}:{}", list.display(), lineno + 1);
        let (path_bytes, label) = match trimmed.iter().rposition(|b| b.is_ascii_whitespace()) {
            Some(pos) => {
                let head = trim_ascii(&trimmed[..pos]);
                let last = String::from_utf8_lossy(&trimmed[pos + 1..]);
                match list_label(&last) {
                    Ok(Some(l)) => (head, l),
                    Err(why) => {
                        ds.warnings
                            .push(format!("{}: {why}; the line is left out", at()));
                        continue;
                    }
                    // A word that is no number: part of a file name with a space, unless
                    // only the part before it names a file.
                    Ok(None) if !resolve(trimmed).exists() && resolve(head).exists() => {
                        ds.warnings.push(format!(
                            "{}: the label '{last}' is not an integer (labels are class \
                             indices from 0); the line is left out",
                            at()
                        ));
                        continue;
                    }
                    Ok(None) => (trimmed, -1),
                }
            }
            None => (trimmed, -1),
        };
        if path_bytes.is_empty() {
            ds.warnings.push(format!("{}: no path", at()));
            continue;
        }
        // A path alone (an explicit -1 says "no label" on purpose).
        if path_bytes.len() == trimmed.len() {
            unlabelled.0 += 1;
            if unlabelled.0 == 1 {
                unlabelled.1 = lineno + 1;
            }
        } else if label >= 0 {
            labelled = true;
        }
        ds.entries.push(Entry {
            path: resolve(path_bytes).into(),
            label,
        });
    }
    if labelled && unlabelled.0 > 0 {
        let (n, first) = unlabelled;
        let lines = match n {
            1 => "1 line gives".to_string(),
            n => format!("{n} lines give"),
        };
        ds.warnings.push(format!(
            "{}: {lines} no label (the first: line {first}), so their samples' label is -1; \
             end each line with its class index",
            list.display()
        ));
    }
    Ok(())
}

/// A list line's last word as a label: `Some` for a class index (or -1, none), `None` for a
/// word that is no number (part of the path), `Err` for a number that can't be a label.
fn list_label(word: &str) -> Result<Option<i64>, String> {
    let digits = word.strip_prefix(['-', '+']).unwrap_or(word);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(None);
    }
    match word.parse::<i64>() {
        Ok(l) if l >= -1 => Ok(Some(l)),
        Ok(l) => Err(format!(
            "the label {l} is negative (labels are class indices from 0; -1 means none)"
        )),
        Err(_) => Err(format!("the label {word} is out of range")),
    }
}

fn trim_ascii(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &b[start..end]
}
