//! Writing WebDataset shards from a class-folder data set: `<key>.<ext>` (the image) and
//! `<key>.cls` (its class index) per sample, shards cut at a size, and an `index.json` of
//! sample counts beside them.

use std::collections::HashSet;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::reader::dataset::Dataset;
use crate::reader::schedule::LastBatch;
use crate::reader::{ReaderConfig, SourceKind};
use crate::rng::{key, SampleRng};

use super::index::{IndexEntry, ShardIndex, INDEX_NAME};
use super::tar::TarWriter;

/// How [`pack`] writes shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackOptions {
    /// A shard is closed once it holds this many bytes (a shard holds at least one sample).
    pub shard_size: u64,
    /// Shard file names: `{prefix}-000000.tar`, …
    pub prefix: String,
    /// Image extensions to take from the folders.
    pub extensions: Vec<String>,
    /// Write the samples in an order shuffled from this seed (recommended: a reader's
    /// shuffle buffer then mixes classes from the start), or `None` for the listing's order.
    pub shuffle_seed: Option<u64>,
    /// Files over this many bytes are left out.
    pub max_file_bytes: u64,
    /// The labels are the class folders': a folder without sub-folders is refused. With
    /// `false`, every sample's label is -1 (`stokehold pack --no-labels`).
    pub labels: bool,
}

impl Default for PackOptions {
    fn default() -> PackOptions {
        PackOptions {
            shard_size: 1_000_000_000,
            prefix: "train".into(),
            extensions: ["jpg", "jpeg", "jpe", "jfif", "png"]
                .map(String::from)
                .to_vec(),
            shuffle_seed: Some(0),
            max_file_bytes: crate::decode::Limits::default().max_file_bytes,
            labels: true,
        }
    }
}

/// What [`pack`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct PackReport {
    /// The index written (shards with their sample counts, class names).
    pub index: ShardIndex,
    /// Samples written.
    pub samples: usize,
    /// Files left out, with why.
    pub left_out: Vec<(PathBuf, String)>,
}

/// Refuses an output folder that would mix these shards with others: one that already
/// holds `{prefix}-*.tar` files or an index (a reader lists every shard in the folder, so
/// old shards would be read as well), or one inside the data set being packed (its next
/// listing would take the folder for a class).
fn refuse_to_mix(folder: &Path, out: &Path, prefix: &str) -> Result<(), Error> {
    let within = match (folder.canonicalize(), std::path::absolute(out)) {
        (Ok(f), Ok(o)) => o.canonicalize().unwrap_or(o).starts_with(f),
        _ => false,
    };
    if within {
        return Err(Error::Dataset(format!(
            "{} is inside the data set {}: pack into a folder outside it",
            out.display(),
            folder.display()
        )));
    }
    let Ok(entries) = std::fs::read_dir(out) else {
        return Ok(());
    };
    let mut old: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n == INDEX_NAME || (n.starts_with(&format!("{prefix}-")) && n.ends_with(".tar"))
        })
        .collect();
    if old.is_empty() {
        return Ok(());
    }
    old.sort();
    Err(Error::Dataset(format!(
        "{} already holds shards ({} files: {}{}): a reader would read them beside the new \
         ones; pack into an empty folder, or remove them first",
        out.display(),
        old.len(),
        old[..old.len().min(3)].join(", "),
        if old.len() > 3 { ", …" } else { "" }
    )))
}

/// Packs the class-folder data set in `folder` (listed as the file reader lists it; labels
/// are the classes' indices in sorted order) into WebDataset shards in `out`, with an
/// `index.json` of their sample counts. A folder without class sub-folders is refused unless
/// [`PackOptions::labels`] is off (then every label is -1), and so is an `out` that holds
/// shards already or lies inside `folder`. `progress` is told (samples done, samples in all,
/// bytes written) after each sample.
///
/// ```
/// # fn main() -> Result<(), stokehold::Error> {
/// use stokehold::reader::shards::pack::{pack, PackOptions};
/// let data = stokehold::builtin_data::ensure(&stokehold::builtin_data::default_dir())?;
/// let out = std::env::temp_dir().join(format!("stokehold-pack-doc-{}", std::process::id()));
/// let options = PackOptions { shard_size: 200_000, ..PackOptions::default() };
/// let report = pack(&data, &out, &options, &mut |_, _, _| {})?;
/// assert!(report.index.shardlist.len() > 1);
/// assert_eq!(report.index.shardlist.iter().map(|s| s.nsamples).sum::<usize>(), report.samples);
/// # std::fs::remove_dir_all(&out).ok();
/// # Ok(()) }
/// ```
pub fn pack(
    folder: &Path,
    out: &Path,
    options: &PackOptions,
    progress: &mut dyn FnMut(usize, usize, u64),
) -> Result<PackReport, Error> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    let config = ReaderConfig {
        root: folder.to_path_buf(),
        list: None,
        source: SourceKind::Auto,
        extensions: options.extensions.clone(),
        shuffle: false,
        rank: 0,
        world_size: 1,
        last_batch: LastBatch::Partial,
        shards: None,
    };
    let ds = Dataset::list(&config)?;
    // First: what the listing left out bears on the refusals below.
    for w in &ds.warnings {
        tracing::warn!("{w}");
    }
    if options.labels && ds.classes.is_empty() {
        return Err(Error::Dataset(format!(
            "{} has no class sub-folders, so its samples have no labels: put the images in one \
             sub-folder per class, or pack them without labels (--no-labels; every label is -1)",
            folder.display()
        )));
    }
    if !options.labels && !ds.classes.is_empty() {
        // The labels would be lost for good; a pipeline that doesn't want them leaves its
        // labels output out.
        return Err(Error::Dataset(format!(
            "{} has {}: packed without labels, every sample's label would \
             be -1; pack it with its labels (leave out --no-labels: a pipeline that doesn't \
             need them leaves the reader's labels output out)",
            folder.display(),
            match ds.classes.len() {
                1 => "a class sub-folder".to_string(),
                n => format!("{n} class sub-folders"),
            }
        )));
    }
    refuse_to_mix(folder, out, &options.prefix)?;
    std::fs::create_dir_all(out).map_err(io(out))?;
    let mut order: Vec<usize> = (0..ds.entries.len()).collect();
    if let Some(seed) = options.shuffle_seed {
        SampleRng::from_key(key(&[crate::rng::domain::SHUFFLE, seed, u64::MAX]))
            .shuffle(&mut order);
    }
    let mut keys = HashSet::new();
    let mut shards: Vec<IndexEntry> = Vec::new();
    let mut writer: Option<(PathBuf, TarWriter<BufWriter<File>>, usize)> = None;
    let mut left_out = Vec::new();
    let mut written = 0u64;
    let mut samples = 0;
    let finish = |w: (PathBuf, TarWriter<BufWriter<File>>, usize),
                  shards: &mut Vec<IndexEntry>|
     -> Result<u64, Error> {
        let (path, tw, n) = w;
        let size = tw.written() + 1024;
        tw.finish().map_err(io(&path))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        shards.push(IndexEntry {
            url: name,
            nsamples: n,
            filesize: size,
        });
        Ok(size)
    };
    for (done, &i) in order.iter().enumerate() {
        let e = &ds.entries[i];
        let bytes = match crate::reader::file_io::read_file(&e.path, options.max_file_bytes) {
            Ok(b) => b,
            Err(why) => {
                tracing::warn!("left out {}: {why}", e.path.display());
                left_out.push((e.path.to_path_buf(), why.to_string()));
                progress(done + 1, order.len(), written);
                continue;
            }
        };
        let rel = e.path.strip_prefix(folder).unwrap_or(&e.path);
        let (key, ext) = sample_key(rel, i, &mut keys);
        let cls = if options.labels { e.label } else { -1 }.to_string();
        let need = 3 * 512 + bytes.len() as u64 + 512;
        if writer
            .as_ref()
            .is_some_and(|w| w.2 > 0 && w.1.written() + need > options.shard_size)
        {
            finish(writer.take().expect("checked"), &mut shards)?;
            written += 1024;
        }
        if writer.is_none() {
            let path = out.join(format!("{}-{:06}.tar", options.prefix, shards.len()));
            let f = File::create(&path).map_err(io(&path))?;
            writer = Some((path, TarWriter::new(BufWriter::new(f)), 0));
        }
        let w = writer.as_mut().expect("opened above");
        let before = w.1.written();
        w.1.append(&format!("{key}.{ext}"), &bytes)
            .and_then(|_| w.1.append(&format!("{key}.cls"), cls.as_bytes()))
            .map_err(io(&w.0))?;
        w.2 += 1;
        samples += 1;
        written += w.1.written() - before;
        progress(done + 1, order.len(), written);
    }
    if let Some(w) = writer.take() {
        finish(w, &mut shards)?;
    }
    let classes = if options.labels {
        ds.classes
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect()
    } else {
        Vec::new()
    };
    let name = folder
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let index = ShardIndex::new(&name, shards, classes);
    index.write(&out.join(INDEX_NAME))?;
    Ok(PackReport {
        index,
        samples,
        left_out,
    })
}

/// A sample's key (its path in the folder without the extension; dots in the file name,
/// which would split the key, become `_`; unique) and its image member's extension (`jpg` for any JPEG name).
fn sample_key(rel: &Path, i: usize, taken: &mut HashSet<String>) -> (String, String) {
    let ext = rel
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let ext = match ext.as_str() {
        "jpeg" | "jpe" | "jfif" => "jpg".to_string(),
        _ => ext,
    };
    let stem = rel.with_extension("");
    let parent = stem
        .parent()
        .map(|p| p.to_string_lossy().replace('\\', "/"));
    let base = stem
        .file_name()
        .map(|b| b.to_string_lossy().replace('.', "_"))
        .unwrap_or_default();
    let mut key = match parent.filter(|p| !p.is_empty()) {
        Some(p) => format!("{p}/{base}"),
        None => base,
    };
    if !taken.insert(key.clone()) {
        key = format!("{key}_{i}");
        taken.insert(key.clone());
    }
    (key, ext)
}
