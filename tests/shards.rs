//! WebDataset tar shards end to end: ranks, determinism, resume, damage, the shipped
//! pipelines on packed shards, and interplay with the `webdataset` Python package (from the
//! venv `scripts/test.sh` makes). Shards over http are in `shards_http.rs`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use common::shards::{jpeg, run, run_from, set_reader_arg, spec, write_shards};
use stokehold::pipeline::Pipeline;
use stokehold::reader::shards::tar::TarWriter;

#[test]
fn ranks_get_equal_batches_disjoint_samples_and_together_the_whole_set() {
    let d = tempfile::tempdir().unwrap();
    let sizes = [13, 2, 29, 7, 1, 18, 9];
    let total: usize = sizes.iter().sum();
    write_shards(d.path(), &sizes, true);
    for world in [1usize, 2, 3, 8] {
        for epoch in 0..2u64 {
            let mut counts = BTreeSet::new();
            let mut seen: Vec<i64> = Vec::new();
            for rank in 0..world {
                let mut s = spec(&d.path().to_string_lossy(), 4, 2);
                s.set_rank(rank, world);
                s.settings.epochs = Some(epoch + 1);
                let (batches, errors) = run(s);
                assert!(errors.is_empty(), "{errors:?}");
                let this_epoch = &batches[batches.len() - total.div_ceil(world).div_ceil(4)..];
                counts.insert(this_epoch.len());
                seen.extend(this_epoch.iter().flatten());
            }
            assert_eq!(counts.len(), 1, "{world} ranks: batch counts {counts:?}");
            let distinct: BTreeSet<i64> = seen.iter().copied().collect();
            assert_eq!(
                distinct,
                (0..total as i64).collect(),
                "{world} ranks: union"
            );
            // Disjoint but for the padding that evens the ranks out.
            assert_eq!(seen.len(), total.div_ceil(world) * world);
            assert!(seen.len() - distinct.len() < world);
        }
    }
}

#[test]
fn order_is_the_same_whatever_the_threads_and_read_ahead_and_changes_per_epoch() {
    let d = tempfile::tempdir().unwrap();
    write_shards(d.path(), &[11, 5, 17, 3], false);
    let mut a = spec(&d.path().to_string_lossy(), 5, 1);
    a.settings.epochs = Some(2);
    set_reader_arg(&mut a, "read_ahead", 1);
    let mut b = spec(&d.path().to_string_lossy(), 5, 3);
    b.settings.epochs = Some(2);
    set_reader_arg(&mut b, "read_ahead", 4);
    let (ra, _) = run(a);
    let (rb, _) = run(b);
    assert_eq!(ra, rb);
    let first: Vec<i64> = ra[..ra.len() / 2].concat();
    let second: Vec<i64> = ra[ra.len() / 2..].concat();
    assert_ne!(first, second, "each epoch is reshuffled");
    assert_ne!(first, (0..36).collect::<Vec<i64>>(), "shuffled at all");
}

#[test]
fn resuming_mid_epoch_gives_the_same_remaining_batches() {
    let d = tempfile::tempdir().unwrap();
    write_shards(d.path(), &[9, 14, 6, 21], true);
    let mut s = spec(&d.path().to_string_lossy(), 4, 2);
    s.settings.epochs = Some(2);
    s.set_rank(1, 2);
    let mut p = Pipeline::new(s.clone()).unwrap();
    let mut all = Vec::new();
    let mut resume_points = Vec::new();
    for b in &mut p {
        let b = b.unwrap();
        all.push(b.labels("labels").unwrap().to_vec());
        resume_points.push(b.resume);
    }
    for k in [0, 2, 4, 7] {
        let (rest, _) = run_from(s.clone(), Some(resume_points[k]));
        assert_eq!(rest, all[k + 1..].to_vec(), "resumed after batch {k}");
    }
}

/// Shards written by hand with damage in them; the index counts what was meant.
#[test]
fn damage_costs_only_the_named_samples() {
    let d = tempfile::tempdir().unwrap();
    let paths = write_shards(d.path(), &[6, 6, 6, 6], true);
    // Shard 0: a broken header (sample 2's image header, one byte of its size flipped).
    let mut b = std::fs::read(&paths[0]).unwrap();
    let at = find(&b, b"s00002.jpg");
    b[at + 124] ^= 0x01;
    std::fs::write(&paths[0], &b).unwrap();
    // Shard 1: truncated inside sample 9's image.
    let b = std::fs::read(&paths[1]).unwrap();
    let at = find(&b, b"s00009.jpg");
    std::fs::write(&paths[1], &b[..at + 700]).unwrap();
    // Shard 2: sample 14 without its .cls.
    rewrite(&paths[2], |name| name != "s00014.cls");
    // Shard 3: gone.
    std::fs::remove_file(&paths[3]).unwrap();

    // A pattern names the missing shard (a folder's listing would not).
    let pattern = format!("{}/part-{{000..003}}.tar", d.path().display());
    let mut s = spec(&pattern, 4, 2);
    set_reader_arg(&mut s, "shuffle", false);
    let (batches, errors) = run(s);
    let got: BTreeSet<i64> = batches.concat().into_iter().collect();
    let lost: BTreeSet<i64> = [2, 9, 10, 11, 14, 18, 19, 20, 21, 22, 23].into();
    let want: BTreeSet<i64> = (0..24).filter(|n| !lost.contains(n)).collect();
    assert_eq!(got, want, "errors: {errors:#?}");
    let has = |needle: &str| errors.iter().any(|e| e.contains(needle));
    assert!(
        has("part-000.tar:s00002.jpg: read failed: broken tar header"),
        "{errors:#?}"
    );
    assert!(
        has("part-001.tar:s00009.jpg") && has("truncated"),
        "{errors:#?}"
    );
    assert!(
        has("part-002.tar:s00014.jpg: read failed: no .cls member"),
        "{errors:#?}"
    );
    assert!(
        has("part-003.tar") && has("could not be opened"),
        "{errors:#?}"
    );
    assert_eq!(errors.len(), 1 + 3 + 1 + 6, "{errors:#?}");
}

/// A truncated shard, with an index: each sample the index lists and the shard no longer
/// holds is a bad sample named by shard and item, so a run's images and skips add up to the
/// index's count. Without one: the shard counts the items it holds (the cut one a bad
/// sample), and the warning says where it is cut and that the rest can't be counted.
#[test]
fn a_truncated_shard_is_counted_with_its_index_and_named_without_one() {
    for index in [true, false] {
        let d = tempfile::tempdir().unwrap();
        let paths = write_shards(d.path(), &[6, 9, 5], index);
        let b = std::fs::read(&paths[1]).unwrap();
        let at = find(&b, b"s00009.jpg");
        std::fs::write(&paths[1], &b[..at + 700]).unwrap();
        let mut s = spec(&d.path().to_string_lossy(), 4, 2);
        set_reader_arg(&mut s, "shuffle", false);
        let p = Pipeline::new(s.clone()).unwrap();
        let warnings = p.source().warnings().to_vec();
        drop(p);
        let (batches, errors) = run(s);
        let images = batches.concat().len();
        assert_eq!(images, 6 + 3 + 5, "index {index}: {errors:#?}");
        let cut = "part-001.tar:s00009.jpg: read failed: tar stream truncated at byte";
        assert_eq!(
            errors.iter().filter(|e| e.contains(cut)).count(),
            1,
            "{errors:#?}"
        );
        if index {
            assert_eq!(images + errors.len(), 20, "{errors:#?}");
            for k in 4..9 {
                let named = format!("part-001.tar:#{k}: read failed: sample missing");
                assert!(
                    errors.iter().any(|e| e.contains(&named)),
                    "{named}: {errors:#?}"
                );
            }
            assert!(errors
                .iter()
                .all(|e| !e.contains("sample missing") || e.contains("the index lists 9")));
            assert!(warnings.is_empty(), "{warnings:?}");
        } else {
            assert_eq!(errors.len(), 1, "nothing counted is missing: {errors:#?}");
            assert_eq!(warnings.len(), 1, "{warnings:?}");
            let w = &warnings[0];
            for part in [
                "part-001.tar: the shard is truncated (s00009.jpg: tar stream truncated at byte",
                "its 3 samples before the cut are read",
                "can't be counted without an index",
                "stokehold pack",
            ] {
                assert!(w.contains(part), "{part:?} in {w}");
            }
        }
    }
}

/// A shard that grew after its index was written (samples appended) is counted by reading
/// it, with a warning: its new samples are read, not silently left out.
#[test]
fn a_shard_larger_than_its_index_says_is_counted_and_the_index_called_out_of_date() {
    let d = tempfile::tempdir().unwrap();
    write_shards(d.path(), &[6, 9, 5], true);
    let grown = tempfile::tempdir().unwrap();
    let paths = write_shards(grown.path(), &[6, 12, 5], false);
    std::fs::copy(&paths[1], d.path().join("part-001.tar")).unwrap();
    let s = spec(&d.path().to_string_lossy(), 4, 2);
    let p = Pipeline::new(s.clone()).unwrap();
    assert_eq!(p.samples_per_epoch(), 23);
    let warnings = p.source().warnings().to_vec();
    drop(p);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("part-001.tar: the shard has ")
            && warnings[0].contains("the index is out of date"),
        "{warnings:?}"
    );
    let (batches, errors) = run(s);
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(batches.concat().len(), 23);
}

/// A shard cut short early can lack a thousand samples: the log names the first and says the
/// rest are missing for the same reason (once, over the epochs), and the summary counts them.
#[test]
fn a_shard_cut_short_is_logged_once_not_once_a_sample() {
    let d = tempfile::tempdir().unwrap();
    let paths = write_shards(d.path(), &[6, 9, 5], true);
    let b = std::fs::read(&paths[1]).unwrap();
    let at = find(&b, b"s00007.jpg");
    std::fs::write(&paths[1], &b[..at + 700]).unwrap();
    let out = common::stokehold()
        .args(["run", "pipelines/resnet50-eval.toml", "--batch", "4"])
        .args([
            "--threads",
            "2",
            "--device",
            "cpu",
            "--epochs",
            "2",
            "--data",
        ])
        .arg(d.path())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    let missing: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("sample missing"))
        .collect();
    assert_eq!(missing.len(), 1, "{stderr}");
    assert!(
        missing[0].contains("part-001.tar:#2: read failed: sample missing: the shard is cut short")
            && missing[0].contains("the shard's other samples missing for the same reason"),
        "{stderr}"
    );
    // The cut item and the 7 samples after it, each epoch.
    let last = stdout.lines().last().unwrap_or_default();
    assert!(last.starts_with("images=24 skipped=16 "), "{last}");
}

/// Shards that don't exist, or no tar at all: the error says so, not just "no samples".
#[test]
fn missing_shards_or_a_file_that_is_no_tar_are_named_with_the_cause() {
    let d = tempfile::tempdir().unwrap();
    let error = |shards: &str| match Pipeline::new(spec(shards, 4, 1)) {
        Ok(_) => panic!("{shards} runs"),
        Err(e) => e.to_string(),
    };
    let one = d.path().join("train-000.tar");
    let e = error(&one.to_string_lossy());
    assert!(e.contains("train-000.tar: not found"), "{e}");
    let e = error(&format!("{}/train-{{000..003}}.tar", d.path().display()));
    assert!(
        e.contains("none could be read, e.g.")
            && e.contains("train-000.tar: not found (no such file) (and 3 more)"),
        "{e}"
    );
    std::fs::write(
        &one,
        "<!DOCTYPE html>\n<html><body>a web page, long enough to fill one tar block".repeat(20),
    )
    .unwrap();
    let e = error(&one.to_string_lossy());
    assert!(
        e.contains("not a tar shard") && e.contains("<!DOCTYPE html>"),
        "{e}"
    );
    std::fs::write(&one, "short").unwrap();
    let e = error(&one.to_string_lossy());
    assert!(
        e.contains("not a tar shard") && e.contains("\"short\""),
        "{e}"
    );
}

fn find(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).position(|w| w == needle).unwrap()
}

/// Rewrites a shard keeping only the members `keep` accepts.
fn rewrite(path: &Path, keep: impl Fn(&str) -> bool) {
    let bytes = std::fs::read(path).unwrap();
    let mut r = stokehold::reader::shards::tar::TarReader::new(std::io::Cursor::new(bytes));
    let mut w = TarWriter::new(Vec::new());
    while let Some(m) = r.next_member().unwrap() {
        let data = r.read_data(u64::MAX).unwrap().unwrap();
        if keep(&m.name) {
            w.append(&m.name, &data).unwrap();
        }
    }
    std::fs::write(path, w.finish().unwrap()).unwrap();
}

#[test]
fn shipped_pipelines_run_on_packed_shards_with_the_folders_samples() {
    let (_d, data) = common::samples();
    let out = tempfile::tempdir().unwrap();
    let options = stokehold::reader::shards::pack::PackOptions {
        shard_size: 300_000,
        ..Default::default()
    };
    let report =
        stokehold::reader::shards::pack::pack(&data, out.path(), &options, &mut |_, _, _| {})
            .unwrap();
    assert!(report.index.shardlist.len() >= 3);
    let outcome = |data: &Path| -> BTreeMap<i64, usize> {
        let s = common::spec_for("resnet50-eval.toml", data, 16, 2, 1);
        let mut m = BTreeMap::new();
        for b in Pipeline::new(s).unwrap() {
            for l in b.unwrap().labels("labels").unwrap() {
                *m.entry(*l).or_default() += 1;
            }
        }
        m
    };
    let folder = outcome(&data);
    assert_eq!(outcome(out.path()), folder);
    // The class names travel in the index: the same, label for label, as the folder's.
    let names = |data: &Path| {
        let s = common::spec_for("resnet50-eval.toml", data, 16, 2, 1);
        Pipeline::new(s).unwrap().class_names()
    };
    assert_eq!(names(out.path()), names(&data));
    assert_eq!(names(&data).len(), 4);
    let pattern = format!(
        "{}/train-{{000000..{:06}}}.tar",
        out.path().display(),
        report.index.shardlist.len() - 1
    );
    assert_eq!(outcome(Path::new(&pattern)), folder);
    // A list of shard paths, one per line, is told apart from a `path label` list.
    let list = out.path().join("list.txt");
    let lines: Vec<String> = report
        .index
        .shardlist
        .iter()
        .map(|e| out.path().join(&e.url).display().to_string())
        .collect();
    std::fs::write(&list, lines.join("\n")).unwrap();
    assert_eq!(outcome(&list), folder);
}

/// The venv `scripts/test.sh` makes (`.dev/venv`, also the Python package's) with
/// `webdataset` in it; `None` (after saying so) when it is missing, which fails the test when
/// `CI` is set.
fn webdataset_python() -> Option<PathBuf> {
    let py = Path::new(env!("CARGO_MANIFEST_DIR")).join(".dev/venv/bin/python");
    let ok = py.exists()
        && std::process::Command::new(&py)
            .args(["-c", "import webdataset"])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    if ok {
        return Some(py);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{} with webdataset is needed on CI (scripts/test.sh makes it)",
        py.display()
    );
    common::skip::skip(
        common::skip::Need::Python("webdataset"),
        format!(
            "no webdataset venv at {} (scripts/test.sh makes it)",
            py.display()
        ),
    );
    None
}

#[test]
fn shards_written_by_webdatasets_shardwriter_read_with_the_same_samples_and_labels() {
    let Some(py) = webdataset_python() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let script = r#"
import sys, webdataset as wds
sys.path.insert(0, sys.argv[2])
out = sys.argv[1]
with wds.ShardWriter(out + "/wds-%06d.tar", maxcount=7) as sink:
    for n in range(20):
        img = open(sys.argv[2] + "/img%02d.jpg" % n, "rb").read()
        sample = {"__key__": "dir/k%03d" % n, "jpg": img, "json": {"label": n * 3, "name": "x"}}
        if n % 2 == 0:
            sample = {"__key__": "dir/k%03d" % n, "jpg": img, "cls": n * 3}
        sink.write(sample)
"#;
    let imgs = d.path().join("imgs");
    std::fs::create_dir_all(&imgs).unwrap();
    for n in 0..20 {
        std::fs::write(imgs.join(format!("img{n:02}.jpg")), jpeg(n)).unwrap();
    }
    let st = std::process::Command::new(&py)
        .args([
            "-c",
            script,
            &d.path().to_string_lossy(),
            &imgs.to_string_lossy(),
        ])
        .status()
        .unwrap();
    assert!(st.success());
    // Labels from .cls for the even samples; the odd ones have only JSON.
    let pattern = format!("{}/wds-{{000000..000002}}.tar", d.path().display());
    let mut s = spec(&pattern, 4, 2);
    set_reader_arg(&mut s, "shuffle", false);
    let (batches, errors) = run(s);
    assert_eq!(
        batches.concat(),
        (0..20).step_by(2).map(|n| n * 3).collect::<Vec<i64>>()
    );
    assert_eq!(errors.len(), 10, "{errors:#?}");
    assert!(
        errors[0].contains("wds-000000.tar:dir/k001.jpg: read failed: no .cls member"),
        "{errors:#?}"
    );
    // Labels from the JSON field: every sample, each image its own.
    let mut s = spec(&pattern, 4, 2);
    set_reader_arg(&mut s, "shuffle", false);
    set_reader_arg(&mut s, "label", "json");
    let mut p = Pipeline::new(s).unwrap();
    let mut got = Vec::new();
    for b in &mut p {
        let b = b.unwrap();
        for (info, l) in b.samples.iter().zip(b.labels("labels").unwrap()) {
            got.push((
                info.path
                    .to_string_lossy()
                    .rsplit(':')
                    .next()
                    .unwrap()
                    .to_string(),
                *l,
            ));
        }
    }
    let want: Vec<(String, i64)> = (1..20)
        .step_by(2)
        .map(|n| (format!("dir/k{n:03}.jpg"), n as i64 * 3))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn shards_written_by_pack_are_read_by_webdataset() {
    let Some(py) = webdataset_python() else {
        return;
    };
    let (_d, data) = common::samples();
    let out = tempfile::tempdir().unwrap();
    let options = stokehold::reader::shards::pack::PackOptions {
        shard_size: 200_000,
        ..Default::default()
    };
    let report =
        stokehold::reader::shards::pack::pack(&data, out.path(), &options, &mut |_, _, _| {})
            .unwrap();
    let n = report.index.shardlist.len();
    let script = r#"
import sys, hashlib, webdataset as wds
ds = wds.WebDataset(sys.argv[1], shardshuffle=False)
for s in ds:
    image = s.get("jpg", s.get("png"))
    print(s["__key__"], int(s["cls"]), hashlib.sha256(image).hexdigest())
"#;
    let pattern = format!(
        "{}/train-{{000000..{:06}}}.tar",
        out.path().display(),
        n - 1
    );
    let o = std::process::Command::new(&py)
        .args(["-c", script, &pattern])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut from_python: Vec<(String, i64, String)> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0].to_string(), f[1].parse().unwrap(), f[2].to_string())
        })
        .collect();
    from_python.sort();
    // What went in: every listed file, its class index, its bytes.
    let mut listed = Vec::new();
    let mut classes: Vec<PathBuf> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    classes.sort();
    for (label, c) in classes.iter().enumerate() {
        for f in std::fs::read_dir(c).unwrap() {
            let f = f.unwrap().path();
            let bytes = std::fs::read(&f).unwrap();
            let key = f
                .strip_prefix(&data)
                .unwrap()
                .with_extension("")
                .to_string_lossy()
                .into_owned();
            listed.push((key, label as i64, sha256_hex(&py, &bytes)));
        }
    }
    listed.sort();
    assert_eq!(from_python.len(), report.samples);
    assert_eq!(from_python, listed);
}

/// SHA-256 of `bytes` in hex, by the venv's Python (no hashing crate for one test).
fn sha256_hex(py: &Path, bytes: &[u8]) -> String {
    let mut child = std::process::Command::new(py)
        .args([
            "-c",
            "import sys,hashlib;print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let mut s = String::new();
    child.stdout.take().unwrap().read_to_string(&mut s).unwrap();
    child.wait().unwrap();
    s.trim().to_string()
}

#[test]
fn tars_written_by_pythons_tarfile_in_gnu_ustar_and_pax_formats_read_alike() {
    let d = tempfile::tempdir().unwrap();
    let script = r#"
import io, sys, tarfile
names = ["a.jpg", "d" * 120 + "/long.jpg", "ünï/cödé.cls", "x" * 99 + ".jpg"]
for fmt, tag in [(tarfile.GNU_FORMAT, "gnu"), (tarfile.PAX_FORMAT, "pax"), (tarfile.USTAR_FORMAT, "ustar")]:
    with tarfile.open(sys.argv[1] + "/" + tag + ".tar", "w", format=fmt) as t:
        for i, n in enumerate(names):
            if fmt == tarfile.USTAR_FORMAT and len(n.encode()) > 100 and "/" not in n:
                continue
            data = bytes([i]) * (i * 300 + 1)
            info = tarfile.TarInfo(n)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
"#;
    let python = match std::process::Command::new("python3")
        .args(["-c", script, &d.path().to_string_lossy()])
        .status()
    {
        Ok(s) => s,
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "python3 is needed on CI: {e}"
            );
            common::skip::skip(
                common::skip::Need::Tool("python3"),
                format!("python3 not found ({e})"),
            );
            return;
        }
    };
    assert!(python.success());
    for tag in ["gnu", "pax", "ustar"] {
        let bytes = std::fs::read(d.path().join(format!("{tag}.tar"))).unwrap();
        let mut r = stokehold::reader::shards::tar::TarReader::new(std::io::Cursor::new(bytes));
        let mut got = Vec::new();
        while let Some(m) = r.next_member().unwrap() {
            let data = r.read_data(u64::MAX).unwrap().unwrap();
            got.push((m.name, data.len()));
        }
        let mut want = vec![
            ("a.jpg".to_string(), 1),
            ("d".repeat(120) + "/long.jpg", 301),
        ];
        want.push(("ünï/cödé.cls".to_string(), 601));
        want.push(("x".repeat(99) + ".jpg", 901));
        if tag == "ustar" {
            want.retain(|(n, _)| n.len() <= 100 || n.contains('/'));
        }
        assert_eq!(got, want, "{tag}");
    }
}

/// `stokehold pack` a folder, then `stokehold run --data` the shards as one rank of two, by
/// flag or by torchrun's variables; a rank without a world size is refused.
#[test]
fn the_command_line_packs_a_folder_and_runs_its_shards_by_rank() {
    let stokehold = || {
        let mut c = common::stokehold();
        c.env_remove("RANK").env_remove("WORLD_SIZE");
        c
    };
    let d = tempfile::tempdir().unwrap();
    let data = stokehold::builtin_data::ensure(&d.path().join("data")).unwrap();
    let shards = d.path().join("shards");
    let out = stokehold()
        .arg("pack")
        .arg(&data)
        .arg(&shards)
        .args(["--shard-size", "100kB"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("64 samples in "), "{stdout}");
    assert!(shards.join("index.json").is_file());
    let run = |extra: &[&str], env: &[(&str, &str)]| {
        let mut c = stokehold();
        c.args(["run", "pipelines/resnet50-eval.toml", "--batch", "8"])
            .args(["--threads", "2", "--device", "cpu", "--data"])
            .arg(&shards)
            .args(extra);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    for out in [
        run(&["--rank", "1", "--world-size", "2"], &[]),
        run(&[], &[("RANK", "1"), ("WORLD_SIZE", "2")]),
        // The flags win over the variables.
        run(&["--rank", "1"], &[("RANK", "0"), ("WORLD_SIZE", "2")]),
    ] {
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let last = stdout.lines().last().unwrap_or_default();
        assert!(last.starts_with("images=32 skipped=0 "), "{last}");
    }
    let out = run(&["--rank", "1"], &[]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("without a world size"), "{stderr}");
}

/// A folder without class sub-folders has no labels: `pack` refuses it, unless told
/// `--no-labels` (then every `.cls` is -1 and the index names no classes); told so, it
/// refuses a folder of class sub-folders.
#[test]
fn pack_refuses_a_flat_folder_unless_told_it_has_no_labels() {
    let d = tempfile::tempdir().unwrap();
    let flat = d.path().join("flat");
    std::fs::create_dir(&flat).unwrap();
    for n in 0..5 {
        std::fs::write(flat.join(format!("p{n}.jpg")), jpeg(n)).unwrap();
    }
    let out = common::stokehold()
        .arg("pack")
        .arg(&flat)
        .arg(d.path().join("refused"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("has no class sub-folders") && stderr.contains("--no-labels"),
        "{stderr}"
    );
    assert!(!d.path().join("refused").join("index.json").exists());
    let shards = d.path().join("shards");
    let out = common::stokehold()
        .arg("pack")
        .arg(&flat)
        .arg(&shards)
        .arg("--no-labels")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (batches, errors) = run(spec(&shards.to_string_lossy(), 5, 1));
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(batches.concat(), vec![-1; 5]);
    let index = std::fs::read_to_string(shards.join("index.json")).unwrap();
    assert!(!index.contains("classes"), "{index}");
    // A folder of class sub-folders would lose its labels: refused.
    std::fs::create_dir(flat.join("a")).unwrap();
    std::fs::rename(flat.join("p0.jpg"), flat.join("a").join("p0.jpg")).unwrap();
    let out = common::stokehold()
        .arg("pack")
        .arg(&flat)
        .arg(d.path().join("lost"))
        .arg("--no-labels")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("has a class sub-folder: packed without labels")
            && stderr.contains("leave out --no-labels"),
        "{stderr}"
    );
}

/// Old shards beside new ones would be read too (the reader lists the folder), and a folder
/// inside the data set would become a class of its next listing: `pack` refuses both.
#[test]
fn pack_refuses_a_folder_holding_shards_or_inside_the_data_set() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("data");
    for (c, n) in [("a", 0), ("a", 1), ("b", 2)] {
        std::fs::create_dir_all(data.join(c)).unwrap();
        std::fs::write(data.join(c).join(format!("p{n}.jpg")), jpeg(n)).unwrap();
    }
    let pack = |out: &std::path::Path| {
        common::stokehold()
            .arg("pack")
            .arg(&data)
            .arg(out)
            .output()
            .unwrap()
    };
    let shards = d.path().join("shards");
    assert!(pack(&shards).status.success());
    let again = pack(&shards);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("already holds shards (2 files: index.json, train-000000.tar)"),
        "{stderr}"
    );
    let inside = pack(&data.join("shards"));
    let stderr = String::from_utf8_lossy(&inside.stderr);
    assert_eq!(inside.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("is inside the data set"), "{stderr}");
    assert!(!data.join("shards").exists());
}
