//! Bad input in a real dataset: the shipped train pipeline over the built-in sample set (plus
//! ../shared/data/imagenet-400 when present) mixed with damaged and odd files. With
//! `on_error = "skip"` every good image arrives exactly once per epoch and every bad file is
//! reported with its path and cause; with `on_error = "fail"` the first bad file in epoch
//! order stops the run with that file's error. Every run has a time bound, so a hang fails
//! the test instead of stalling the suite.
//!
//! Not covered: an unreadable file. The tests run as root, and `chmod 000` does not stop
//! root from reading, so such a file is simply a good image here (the corpus checks which
//! case it is and expects accordingly).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use common::*;
use stokehold::decode::{decode, DecodeOptions};
use stokehold::pipeline::{Batch, EpochSummary, OnError, Pipeline, PipelineSpec};
use stokehold::reader::schedule::epoch_order;
use stokehold::rng::SampleRng;
use stokehold::{Error, SampleError, SampleErrorKind};

/// Longest a whole run may take before the test calls it a hang.
const TIME_BOUND: Duration = Duration::from_secs(240);

/// The dataset folder and what each file in it should give.
struct Corpus {
    _dir: tempfile::TempDir,
    root: PathBuf,
    /// Files that must be delivered, once per epoch.
    good: BTreeSet<PathBuf>,
    /// Files that must be reported, with the expected cause category.
    bad: BTreeMap<PathBuf, &'static str>,
}

/// What the decoder says about `bytes`: `None` when it decodes, else its category.
fn verdict(bytes: &[u8]) -> Option<&'static str> {
    match decode(bytes, &DecodeOptions::default()) {
        Ok(_) => None,
        Err(e) => Some(SampleErrorKind::Decode(e).category()),
    }
}

/// Sets the frame size in the first SOF0/SOF1/SOF2 segment of a JPEG.
fn patch_sof(jpeg: &mut [u8], w: u16, h: u16) {
    let at = jpeg
        .windows(2)
        .position(|m| m[0] == 0xFF && matches!(m[1], 0xC0..=0xC2))
        .expect("a frame header");
    jpeg[at + 5..at + 7].copy_from_slice(&h.to_be_bytes());
    jpeg[at + 7..at + 9].copy_from_slice(&w.to_be_bytes());
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap();
        if p.is_dir() {
            copy_tree(&p, &to.join(name));
        } else if !name.to_string_lossy().starts_with('.') {
            std::fs::copy(&p, to.join(name)).unwrap();
        }
    }
}

/// Builds the mixed dataset (class folders: the sample set's classes, `imagenet` when the
/// shared data is there, and a `damaged` class holding most of the damage).
fn corpus() -> Corpus {
    let (_samples_dir, samples) = samples();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("data");
    copy_tree(&samples, &root);
    let mut good = BTreeSet::new();
    let mut bad = BTreeMap::new();
    for class in stokehold::builtin_data::CLASSES {
        for e in std::fs::read_dir(root.join(class)).unwrap() {
            good.insert(e.unwrap().path());
        }
    }
    if let Some(data) = shared_data_part() {
        let inet = root.join("imagenet");
        std::fs::create_dir(&inet).unwrap();
        for e in std::fs::read_dir(data.join("imagenet-400")).unwrap() {
            let p = e.unwrap().path();
            let link = inet.join(p.file_name().unwrap());
            std::os::unix::fs::symlink(&p, &link).unwrap();
            good.insert(link);
        }
    }
    let dmg = root.join("damaged");
    std::fs::create_dir(&dmg).unwrap();
    let src = |class: &str, i: usize, ext: &str| {
        root.join(class)
            .join(format!("{class}_{i:02}.{ext}"))
            .canonicalize()
            .unwrap()
    };
    let mut add = |path: PathBuf, bytes: &[u8], expect: Option<&'static str>| {
        std::fs::write(&path, bytes).unwrap();
        match expect {
            None => good.insert(path),
            Some(c) => bad.insert(path, c).is_none(),
        };
    };
    // Truncation at 20 points: a baseline, a progressive and a gray JPEG (never decodable
    // once cut: the policy is to refuse a truncated JPEG) and a PNG (the decoder decides:
    // a PNG cut after its last IDAT may still be whole).
    let cut_sources = [
        (src("circles", 0, "jpg"), true),
        (src("gradients", 2, "jpg"), true),
        (src("stripes", 4, "jpg"), true),
        (src("checks", 15, "png"), false),
    ];
    for (k, (p, is_jpeg)) in cut_sources.iter().enumerate() {
        let bytes = std::fs::read(p).unwrap();
        for c in 0..20 {
            let cut = 1 + c * (bytes.len() - 2) / 19;
            let part = &bytes[..cut];
            let expect = if *is_jpeg {
                assert!(
                    verdict(part).is_some(),
                    "{} cut at {cut} decodes",
                    p.display()
                );
                // Fewer than 3 bytes hold no start-of-image marker yet.
                Some(if cut < 3 {
                    "decode:unknown-format"
                } else {
                    "decode:corrupt"
                })
            } else {
                verdict(part)
            };
            let ext = if *is_jpeg { "jpg" } else { "png" };
            add(dmg.join(format!("cut_{k}_{cut:06}.{ext}")), part, expect);
        }
    }
    // Seeded bit flips: the pipeline must agree with the decoder, whatever it decides.
    let mut rng = SampleRng::from_key(0xB17_F11B);
    for (k, p) in [
        src("circles", 1, "jpg"),
        src("gradients", 3, "jpg"),
        src("stripes", 2, "jpg"),
        src("checks", 5, "jpg"),
        src("circles", 15, "png"),
    ]
    .iter()
    .enumerate()
    {
        let orig = std::fs::read(p).unwrap();
        let ext = p.extension().unwrap().to_str().unwrap();
        for v in 0..4 {
            let mut bytes = orig.clone();
            for _ in 0..1 + rng.below(8) {
                let at = rng.below(bytes.len() as u64) as usize;
                bytes[at] ^= 1 << rng.below(8);
            }
            let expect = verdict(&bytes);
            add(dmg.join(format!("flip_{k}_{v}.{ext}")), &bytes, expect);
        }
    }
    add(dmg.join("empty.jpg"), b"", Some("decode:unknown-format"));
    add(dmg.join("empty.png"), b"", Some("decode:unknown-format"));
    // Sniffed by content, not by name.
    let png = std::fs::read(src("gradients", 15, "png")).unwrap();
    add(dmg.join("png_named.jpg"), &png, None);
    add(
        dmg.join("text.jpg"),
        b"Not an image.\nJust some text that ended up here.\n",
        Some("decode:unknown-format"),
    );
    // A decompression bomb: a valid header claiming 60000x60000.
    let mut bomb = std::fs::read(src("checks", 0, "jpg")).unwrap();
    patch_sof(&mut bomb, 60000, 60000);
    assert!(matches!(verdict(&bomb), Some("decode:limits")));
    add(dmg.join("bomb.jpg"), &bomb, Some("decode:limits"));
    // A folder named like an image is walked, not read: its image is a good sample.
    let fake_dir = dmg.join("x.jpg");
    std::fs::create_dir(&fake_dir).unwrap();
    let inner = fake_dir.join("inner.jpg");
    std::fs::copy(src("stripes", 0, "jpg"), &inner).unwrap();
    good.insert(inner);
    // Symlinks: a loop and a dangling one are read errors; one to a good file is good.
    let looped = dmg.join("loop.jpg");
    std::os::unix::fs::symlink(&looped, &looped).unwrap();
    bad.insert(looped, "read");
    let dangling = dmg.join("dangling.jpg");
    std::os::unix::fs::symlink(dmg.join("no-such-file.jpg"), &dangling).unwrap();
    bad.insert(dangling, "read");
    let alias = dmg.join("alias.jpg");
    std::os::unix::fs::symlink(src("checks", 1, "jpg"), &alias).unwrap();
    good.insert(alias);
    // Mode 000: a read error, unless we run as root (then it reads fine).
    let locked = dmg.join("locked.jpg");
    std::fs::copy(src("checks", 2, "jpg"), &locked).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    if std::fs::read(&locked).is_ok() {
        good.insert(locked);
    } else {
        bad.insert(locked, "read");
    }
    Corpus {
        _dir: dir,
        root,
        good,
        bad,
    }
}

/// Runs `spec` to the end (or its first error) in a thread; fails the test after
/// [`TIME_BOUND`]. Returns the batches, the error if any, and the pipeline's skip count.
fn run_bounded(
    spec: PipelineSpec,
    between_start_and_read: impl FnOnce() + Send + 'static,
) -> (Vec<Batch>, Option<Error>, u64, Vec<EpochSummary>) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut p = Pipeline::new(spec).expect("pipeline starts");
        between_start_and_read();
        let mut batches = Vec::new();
        let mut err = None;
        for b in p.by_ref() {
            match b {
                Ok(b) => batches.push(b),
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        let skipped = p.stats().skipped;
        let _ = tx.send((batches, err, skipped, p.epoch_summaries()));
    });
    rx.recv_timeout(TIME_BOUND)
        .unwrap_or_else(|_| panic!("the run did not finish within {TIME_BOUND:?} (hang)"))
}

#[test]
fn skip_policy_delivers_every_good_image_once_and_reports_every_bad_file() {
    let mut c = corpus();
    // Deleted between listing and reading: listed when the pipeline starts, gone before
    // any batch is taken. Epoch 0 may have read it already; later epochs must fail on it.
    let doomed = c.root.join("damaged").join("deleted.jpg");
    std::fs::copy(c.root.join("checks").join("checks_03.jpg"), &doomed).unwrap();
    let epochs = 3u64;
    let batch = 16;
    let mut spec = spec_for("resnet50-train.toml", &c.root, batch, 2, epochs);
    spec.settings.on_error = OnError::Skip;
    let d = doomed.clone();
    let (batches, err, skipped_count, summaries) =
        run_bounded(spec, move || std::fs::remove_file(&d).unwrap());
    assert!(err.is_none(), "{err:?}");

    let mut delivered: BTreeMap<u64, Vec<PathBuf>> = BTreeMap::new();
    let mut reported: Vec<&SampleError> = Vec::new();
    for b in &batches {
        assert!(
            !b.is_empty(),
            "empty batch {} of epoch {}",
            b.index,
            b.epoch
        );
        assert_eq!(b.padded, 0);
        delivered
            .entry(b.epoch)
            .or_default()
            .extend(b.samples.iter().map(|s| s.path.to_path_buf()));
        reported.extend(&b.skipped);
    }
    assert_eq!(delivered.len() as u64, epochs);
    for (epoch, paths) in &delivered {
        let mut seen = BTreeSet::new();
        for p in paths {
            assert!(
                seen.insert(p.clone()),
                "{} twice in epoch {epoch}",
                p.display()
            );
        }
        seen.remove(&doomed);
        assert_eq!(seen, c.good, "epoch {epoch}: delivered != good set");
        // Batches stay full except the last of the epoch.
        let sizes: Vec<usize> = batches
            .iter()
            .filter(|b| b.epoch == *epoch)
            .map(Batch::len)
            .collect();
        let (last, full) = sizes.split_last().unwrap();
        assert!(full.iter().all(|&s| s == batch), "epoch {epoch}: {sizes:?}");
        assert!(*last >= 1 && *last <= batch);
        // The deleted file: read in epoch 0 perhaps, never after.
        if *epoch > 0 {
            assert!(
                !paths.contains(&doomed),
                "deleted file delivered in epoch {epoch}"
            );
        }
    }
    let deleted_delivered = delivered.values().filter(|p| p.contains(&doomed)).count() as u64;
    c.bad.insert(doomed.clone(), "read");

    // Every report names a bad file, with its path in the message and the right cause.
    for e in &reported {
        let want = c
            .bad
            .get(&e.path)
            .unwrap_or_else(|| panic!("a good file was reported: {e}"));
        assert_eq!(e.kind.category(), *want, "{e}");
        assert!(e.to_string().contains(&*e.path.to_string_lossy()), "{e}");
    }
    // Every bad file is reported in every epoch's summary, with the right cause (batches
    // carry those met before the epoch's last batch).
    let reported_paths: BTreeSet<&PathBuf> = reported.iter().map(|e| &e.path).collect();
    for p in c.bad.keys() {
        assert!(reported_paths.contains(p), "{} never reported", p.display());
    }
    assert_eq!(summaries.len() as u64, epochs);
    for s in &summaries {
        let mut in_summary: BTreeSet<&PathBuf> = s.errors.iter().map(|e| &e.path).collect();
        for e in &s.errors {
            assert_eq!(Some(&e.kind.category()), c.bad.get(&e.path), "{e}");
        }
        if delivered[&s.epoch].contains(&doomed) {
            in_summary.insert(&doomed);
        }
        assert_eq!(
            in_summary,
            c.bad.keys().collect::<BTreeSet<_>>(),
            "epoch {}",
            s.epoch
        );
    }
    assert_eq!(
        skipped_count,
        epochs * c.bad.len() as u64 - deleted_delivered,
        "skip count"
    );
}

/// The first bad file in epoch 0's order stops the run, with its own error.
#[test]
fn fail_policy_stops_at_the_first_bad_file_in_epoch_order() {
    let c = corpus();
    let mut spec = spec_for("resnet50-train.toml", &c.root, 16, 2, 2);
    spec.settings.on_error = OnError::Fail;
    let p = Pipeline::new(spec.clone()).unwrap();
    let entries = p.dataset().entries.clone();
    drop(p);
    let order = epoch_order(entries.len(), spec.settings.seed, 0, true, 0, 1);
    let first_bad = order
        .iter()
        .position(|&i| c.bad.contains_key(&*entries[i].path))
        .expect("a bad file");
    let bad_path = entries[order[first_bad]].path.to_path_buf();
    let (batches, err, _, _) = run_bounded(spec, || {});
    let err = err.expect("the run fails");
    match &err {
        Error::Sample(e) => {
            assert_eq!(e.path, bad_path, "{err}");
            assert_eq!(e.kind.category(), c.bad[&bad_path], "{err}");
        }
        other => panic!("not a sample error: {other}"),
    }
    // Only the good files before it were delivered, in whole batches.
    let delivered: Vec<usize> = batches
        .iter()
        .flat_map(|b| b.samples.iter().map(|s| s.index))
        .collect();
    assert_eq!(delivered.len(), first_bad / 16 * 16);
    assert_eq!(delivered, order[..delivered.len()]);
}

/// A list file naming a missing path: reported as a read error with the path.
#[test]
fn list_file_naming_a_missing_file() {
    let d = tempfile::tempdir().unwrap();
    let mut lines = String::new();
    for i in 0..6 {
        let p = d.path().join(format!("img_{i}.jpg"));
        write_jpeg(&p, 48, 40, i as u8);
        lines.push_str(&format!("img_{i}.jpg {i}\n"));
    }
    lines.push_str("missing.jpg 9\n");
    let list = d.path().join("list.txt");
    std::fs::write(&list, lines).unwrap();
    let (batches, err, skipped, _) =
        run_bounded(spec_for("resnet50-eval.toml", &list, 4, 2, 1), || {});
    assert!(err.is_none(), "{err:?}");
    let n: usize = batches.iter().map(Batch::len).sum();
    assert_eq!(n, 6);
    assert_eq!(skipped, 1);
    let mut fail = spec_for("resnet50-eval.toml", &list, 4, 2, 1);
    fail.settings.on_error = OnError::Fail;
    let (_, err, _, _) = run_bounded(fail, || {});
    match err {
        Some(Error::Sample(e)) => {
            assert!(e.path.ends_with("missing.jpg"), "{e}");
            assert_eq!(e.kind.category(), "read");
        }
        other => panic!("expected the missing file's error, got {other:?}"),
    }
}

/// A FIFO named like an image must not hang the reader.
#[test]
fn fifo_named_like_an_image_does_not_hang() {
    let (_d, samples) = samples();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("data");
    copy_tree(&samples, &root);
    let fifo = root.join("circles").join("x.jpg");
    let ok = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        common::skip::skip(common::skip::Need::Tool("mkfifo"), "mkfifo unavailable");
        return;
    }
    let (tx, rx) = mpsc::channel();
    let spec = spec_for("resnet50-train.toml", &root, 16, 2, 1);
    std::thread::spawn(move || {
        let mut p = Pipeline::new(spec).unwrap();
        let mut n = 0;
        let mut reported = Vec::new();
        for b in p.by_ref() {
            let b = b.unwrap();
            n += b.len();
            reported.extend(b.skipped.iter().map(|e| e.path.clone()));
        }
        let _ = tx.send((n, reported, p.stats().skipped));
    });
    let (n, _reported, skipped) = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the pipeline hangs on a FIFO");
    let total = stokehold::builtin_data::CLASSES.len() * stokehold::builtin_data::PER_CLASS;
    // Either left out at listing time, or reported as a bad sample: never a hang.
    assert_eq!(n, total);
    assert!(skipped <= 1);
}

/// Bad files met after an epoch's last batch are in that epoch's summary (no batch carries
/// them), and never leak into the next epoch's first batch.
#[test]
fn skips_after_the_last_batch_are_reported() {
    let d = tempfile::tempdir().unwrap();
    for i in 0..4 {
        write_jpeg(&d.path().join(format!("a_{i}.jpg")), 48, 40, i as u8);
    }
    std::fs::write(d.path().join("z_bad.jpg"), b"not an image").unwrap();
    // Eval pipeline: no shuffle, so z_bad.jpg comes last, after the one full batch.
    let mut p = Pipeline::new(spec_for("resnet50-eval.toml", d.path(), 4, 2, 2)).unwrap();
    let batches: Vec<Batch> = p.by_ref().map(|b| b.unwrap()).collect();
    assert_eq!(batches.len(), 2);
    assert!(batches.iter().all(|b| b.skipped.is_empty()));
    let summaries = p.epoch_summaries();
    assert_eq!(summaries.len(), 2);
    for s in &summaries {
        assert_eq!(s.skipped, 1);
        assert_eq!(s.errors.len(), 1);
        assert!(s.errors[0].path.ends_with("z_bad.jpg"), "{}", s.errors[0]);
    }
}

/// Peak resident memory of this process (VmHWM) in MB.
fn peak_rss_mb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

/// A huge file named like an image is refused from its size, without reading it all.
#[test]
fn huge_file_is_refused_before_it_is_read() {
    let d = tempfile::tempdir().unwrap();
    for i in 0..4 {
        write_jpeg(&d.path().join(format!("img_{i}.jpg")), 48, 40, i as u8);
    }
    // Sparse: costs no disk, reads as 1 GiB of zeros.
    let big = std::fs::File::create(d.path().join("huge.jpg")).unwrap();
    big.set_len(1 << 30).unwrap();
    drop(big);
    let before = peak_rss_mb();
    let (batches, err, skipped, _) =
        run_bounded(spec_for("resnet50-eval.toml", d.path(), 4, 1, 1), || {});
    assert!(err.is_none());
    assert_eq!(batches.iter().map(Batch::len).sum::<usize>(), 4);
    assert_eq!(skipped, 1);
    let grown = peak_rss_mb().saturating_sub(before);
    assert!(
        grown < 256,
        "peak RSS grew by {grown} MB for a file over max_file_bytes"
    );
}
