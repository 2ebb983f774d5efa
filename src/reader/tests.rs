use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::fs;

use proptest::prelude::*;

use super::dataset::Dataset;
use super::schedule::*;
use super::*;

fn config(root: &Path) -> ReaderConfig {
    ReaderConfig {
        root: root.to_path_buf(),
        list: None,
        source: SourceKind::Auto,
        extensions: vec!["jpg".into(), "jpeg".into(), "png".into()],
        shuffle: true,
        rank: 0,
        world_size: 1,
        last_batch: LastBatch::Partial,
        shards: None,
    }
}

fn touch(p: &Path) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, b"x").unwrap();
}

#[test]
fn class_folders_sorted_labels_recursive() {
    let d = tempfile::tempdir().unwrap();
    touch(&d.path().join("zebra/b.jpg"));
    touch(&d.path().join("zebra/a.JPG"));
    touch(&d.path().join("ant/sub/deep.png"));
    touch(&d.path().join("ant/notes.txt"));
    touch(&d.path().join("top-level.jpg")); // ignored, like ImageFolder
    let ds = Dataset::list(&config(d.path())).unwrap();
    let got: Vec<(String, i64)> = ds
        .entries
        .iter()
        .map(|e| {
            let rel = e.path.strip_prefix(d.path()).unwrap();
            (rel.to_string_lossy().into_owned(), e.label)
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("ant/sub/deep.png".to_string(), 0),
            ("zebra/a.JPG".to_string(), 1),
            ("zebra/b.jpg".to_string(), 1)
        ]
    );
    assert_eq!(
        ds.classes,
        vec![OsString::from("ant"), OsString::from("zebra")]
    );
}

#[test]
fn flat_folder_has_no_labels_and_odd_names() {
    let d = tempfile::tempdir().unwrap();
    let names = [
        "with space.jpg",
        "quote's \"x\".jpeg",
        "ünïcode.png",
        "skip.gif",
    ];
    for n in names {
        touch(&d.path().join(n));
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        touch(&d.path().join(OsStr::from_bytes(b"bad\xff\xfeutf8.jpg")));
    }
    let ds = Dataset::list(&config(d.path())).unwrap();
    assert_eq!(ds.entries.len(), if cfg!(unix) { 4 } else { 3 });
    assert!(ds.entries.iter().all(|e| e.label == -1 && e.path.exists()));
}

/// The data set a list file gives, and its (path, label) pairs.
fn listed(list: &Path) -> (Dataset, Vec<(PathBuf, i64)>) {
    let mut c = config(Path::new(""));
    c.list = Some(list.to_path_buf());
    let ds = Dataset::list(&c).unwrap();
    let got = ds
        .entries
        .iter()
        .map(|e| (e.path.to_path_buf(), e.label))
        .collect();
    (ds, got)
}

#[test]
fn list_file_with_spaces_comments_and_missing_labels() {
    let d = tempfile::tempdir().unwrap();
    let list = d.path().join("train.txt");
    let mut text =
        b"# comment\n\nimgs/a b.jpg 3\r\n/abs/path.jpg   7\nno_label.jpg\nweird 12x.jpg\n".to_vec();
    text.extend_from_slice(b"raw\xffname.jpg 1\n");
    fs::write(&list, text).unwrap();
    let (_, got) = listed(&list);
    assert_eq!(got[0], (d.path().join("imgs/a b.jpg"), 3));
    assert_eq!(got[1], (PathBuf::from("/abs/path.jpg"), 7));
    assert_eq!(got[2], (d.path().join("no_label.jpg"), -1));
    assert_eq!(got[3], (d.path().join("weird 12x.jpg"), -1));
    assert_eq!(got[4].1, 1);
    assert_eq!(got.len(), 5);
}

#[test]
fn empty_and_missing_folders_are_clear_errors() {
    let d = tempfile::tempdir().unwrap();
    let e = Dataset::list(&config(d.path())).unwrap_err().to_string();
    assert!(e.contains("no image files found"), "{e}");
    assert!(!e.contains("shard"), "{e}");
    // A folder of tar shards given to the file reader says which reader reads it.
    std::fs::write(d.path().join("train-000000.tar"), [0u8; 1024]).unwrap();
    let e = Dataset::list(&config(d.path())).unwrap_err().to_string();
    assert!(
        e.contains("it holds tar shards: read them with a shard_reader"),
        "{e}"
    );
    let e = Dataset::list(&config(&d.path().join("nope")))
        .unwrap_err()
        .to_string();
    assert!(e.contains("nope"), "{e}");
    let mut c = config(d.path());
    c.list = Some(d.path().join("missing.txt"));
    let e = Dataset::list(&c).unwrap_err().to_string();
    assert!(e.contains("missing.txt"), "{e}");
}

#[test]
fn list_labels_that_cant_be_labels_are_said_and_their_lines_left_out() {
    let d = tempfile::tempdir().unwrap();
    for name in [
        "a.jpg", "b.jpg", "c.jpg", "d.jpg", "e.jpg", "f.jpg", "g.jpg",
    ] {
        touch(&d.path().join(name));
    }
    let list = d.path().join("train.txt");
    fs::write(
        &list,
        "a.jpg 0\nb.jpg abc\nc.jpg -5\nd.jpg 99999999999999999999\ne.jpg\nf.jpg +2\ng.jpg -1\n",
    )
    .unwrap();
    let (ds, got) = listed(&list);
    let at = |name: &str, label| (d.path().join(name), label);
    assert_eq!(
        got,
        [
            at("a.jpg", 0),
            at("e.jpg", -1),
            at("f.jpg", 2),
            at("g.jpg", -1)
        ]
    );
    let w = ds.warnings.join("\n");
    for part in [
        "train.txt:2: the label 'abc' is not an integer",
        "train.txt:3: the label -5 is negative",
        "train.txt:4: the label 99999999999999999999 is out of range",
        // An explicit -1 is no missing label.
        "train.txt: 1 line gives no label (the first: line 5)",
    ] {
        assert!(w.contains(part), "{part:?} in:\n{w}");
    }
}

#[test]
fn files_beside_class_folders_are_said_not_read() {
    let d = tempfile::tempdir().unwrap();
    touch(&d.path().join("cls/a.jpg"));
    let warnings = || Dataset::list(&config(d.path())).unwrap().warnings;
    assert!(warnings().is_empty(), "{:?}", warnings());
    touch(&d.path().join("stray.jpg"));
    let w = warnings();
    assert!(
        w.len() == 1 && w[0].contains("the 1 image file beside them is not read: move it"),
        "{w:?}"
    );
    for n in 0..2 {
        std::fs::write(d.path().join(format!("train-{n:06}.tar")), [0u8; 1024]).unwrap();
    }
    let w = warnings();
    assert!(
        w.len() == 1
            && w[0].contains("the 1 image file and 2 tar shards beside them are not read")
            && w[0].contains("give a folder that holds only them"),
        "{w:?}"
    );
    // Only the class folder's image is listed.
    assert_eq!(Dataset::list(&config(d.path())).unwrap().entries.len(), 1);
}

#[cfg(unix)]
#[test]
fn symlink_loop_is_skipped_not_followed_forever() {
    let d = tempfile::tempdir().unwrap();
    touch(&d.path().join("cls/a.jpg"));
    std::os::unix::fs::symlink(d.path().join("cls"), d.path().join("cls/loop")).unwrap();
    let ds = Dataset::list(&config(d.path())).unwrap();
    assert_eq!(ds.entries.len(), 1);
    assert!(
        ds.warnings.iter().any(|w| w.contains("symlink loop")),
        "{:?}",
        ds.warnings
    );
}

#[cfg(unix)]
#[test]
fn links_to_what_is_listed_otherwise_are_skipped_and_said() {
    use std::os::unix::fs::symlink;
    let d = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    touch(&d.path().join("c1/a.jpg"));
    touch(&d.path().join("c1/sub/b.jpg"));
    touch(&d.path().join("c2/c.jpg"));
    touch(&outside.path().join("d.jpg"));
    // Back to the data folder, into another class's folder, twice to one folder outside:
    // none may read an image twice or under another class's label.
    symlink(d.path(), d.path().join("c2/all")).unwrap();
    symlink(d.path().join("c1/sub"), d.path().join("c2/borrowed")).unwrap();
    symlink(outside.path(), d.path().join("c2/more")).unwrap();
    symlink(outside.path(), d.path().join("c2/more-again")).unwrap();
    // A link that sorts before the folder it leads to: the folder is read by its own name.
    symlink(d.path().join("c1/sub"), d.path().join("c1/a-link")).unwrap();
    let ds = Dataset::list(&config(d.path())).unwrap();
    let names: Vec<(String, i64)> = ds
        .entries
        .iter()
        .map(|e| {
            (
                e.path.file_name().unwrap().to_string_lossy().into(),
                e.label,
            )
        })
        .collect();
    let expected = [("a.jpg", 0), ("b.jpg", 0), ("c.jpg", 1), ("d.jpg", 1)];
    let expected: Vec<(String, i64)> = expected.iter().map(|(n, l)| (n.to_string(), *l)).collect();
    assert_eq!(names, expected, "{:?}", ds.warnings);
    let said = |what: &str| ds.warnings.iter().any(|w| w.contains(what));
    assert!(
        said("c2/all: a link to the data folder"),
        "{:?}",
        ds.warnings
    );
    assert!(
        said("c2/borrowed: a link into the class folder"),
        "{:?}",
        ds.warnings
    );
    assert!(
        said("c2/more-again: a link to ") && said("listed already"),
        "{:?}",
        ds.warnings
    );
    assert!(said("c1/a-link: a link to "), "{:?}", ds.warnings);
    assert!(
        ds.entries[1].path.ends_with("c1/sub/b.jpg"),
        "{:?}",
        ds.entries
    );
    assert_eq!(ds.warnings.len(), 4, "{:?}", ds.warnings);
    // A class folder that is such a link is not read; the other classes keep their labels
    // and images.
    symlink(d.path(), d.path().join("0all")).unwrap();
    symlink(d.path().join("c1/sub"), d.path().join("0sub")).unwrap();
    symlink(d.path().join(".."), d.path().join("0up")).unwrap();
    // A second name for c2 that sorts first: c2 is read by its own name.
    symlink(d.path().join("c2"), d.path().join("b-c2")).unwrap();
    let ds = Dataset::list(&config(d.path())).unwrap();
    let labels: Vec<i64> = ds.entries.iter().map(|e| e.label).collect();
    assert_eq!(labels, [4, 4, 5, 5], "{:?}", ds.warnings);
    assert_eq!(
        ds.classes,
        ["0all", "0sub", "0up", "b-c2", "c1", "c2"],
        "{:?}",
        ds.warnings
    );
    for (class, why) in [
        ("0all", "a link to the data folder"),
        ("0sub", "(read as its class)"),
        ("0up", "which holds the data folder"),
        ("b-c2", "(read as its class)"),
    ] {
        assert!(
            ds.warnings
                .iter()
                .any(|w| w.contains(&format!("{class} not read: ")) && w.contains(why)),
            "{class}: {:?}",
            ds.warnings
        );
    }
}

#[test]
fn order_is_deterministic_and_changes_per_epoch() {
    let a = epoch_order(100, 7, 0, true, 0, 1);
    assert_eq!(a, epoch_order(100, 7, 0, true, 0, 1));
    assert_ne!(a, epoch_order(100, 7, 1, true, 0, 1));
    assert_ne!(a, epoch_order(100, 8, 0, true, 0, 1));
    assert_eq!(epoch_order(5, 7, 3, false, 0, 1), vec![0, 1, 2, 3, 4]);
}

#[test]
fn positions_print_and_parse() {
    let p = Position {
        seed: 3,
        epoch: 2,
        sample: 17,
        batch: 4,
        batch_size: 4,
        rank: 1,
        world_size: 2,
    };
    assert_eq!(p.to_string(), "3:2:17:4:4:1:2");
    assert_eq!("3:2:17:4:4:1:2".parse::<Position>().unwrap(), p);
    // Printed before the batch size, or the ranks, were recorded: not known, so not checked.
    let unranked = Position {
        rank: 0,
        world_size: 0,
        ..p
    };
    assert_eq!("3:2:17:4:4".parse::<Position>().unwrap(), unranked);
    let old = "3:2:17:4".parse::<Position>().unwrap();
    assert_eq!(
        old,
        Position {
            batch_size: 0,
            ..unranked
        }
    );
    for bad in [
        "3:2:17",
        "a:b:c:d",
        "3:2:17:4:4:1",
        "3:2:17:4:4:1:2:0",
        "3:2:-1:4",
        "",
    ] {
        let e = bad.parse::<Position>().unwrap_err();
        assert!(
            e.to_string()
                .contains("seed:epoch:sample:batch:batch_size:rank:world_size"),
            "{e}"
        );
        // A typed error the library's `?` carries.
        let _: crate::Error = e.into();
    }
}

#[test]
fn the_schedule_walks_each_epoch_then_its_end_and_resumes_mid_epoch() {
    let mut c = config(Path::new(""));
    c.shuffle = false;
    let start = Position {
        seed: 1,
        ..Position::default()
    };
    let mut s = Schedule::new(c.epoch_order(1), 3, Some(2), start);
    let steps: Vec<Step> = std::iter::from_fn(|| s.next_step()).collect();
    assert_eq!(steps.len(), 8, "3 samples and an end, twice");
    assert_eq!(steps[3], Step::EpochEnd { seq: 3, epoch: 0 }, "{steps:?}");
    assert_eq!(
        steps[5],
        Step::Sample {
            seq: 5,
            epoch: 1,
            pos: 1,
            index: 1
        }
    );
    let mut resumed = Schedule::new(
        c.epoch_order(1),
        3,
        Some(2),
        Position {
            epoch: 1,
            sample: 1,
            ..start
        },
    );
    let rest: Vec<Step> = std::iter::from_fn(|| resumed.next_step()).collect();
    assert_eq!(rest.len(), 3, "{rest:?}");
    let three_ranks = ReaderConfig { world_size: 3, ..c };
    assert_eq!(three_ranks.epoch_order(1).samples_per_epoch(10), 4);
}

#[test]
fn rank_padding_evens_out_batch_counts_only_when_needed() {
    let by = |world_size, rank, batch, last_batch| EpochOrder {
        shuffle: false,
        rank,
        world_size,
        batch,
        last_batch,
    };
    // 11 samples, 2 ranks, batches of 3: parts of 6 and 5, 2 batches each, no padding.
    assert_eq!(
        by(2, 1, 3, LastBatch::Partial).of(11, 1, 0),
        vec![6, 7, 8, 9, 10]
    );
    // 10 samples, 3 ranks, batches of 3: parts 4 | 3 | 3; the 3s pad to 2 batches.
    assert_eq!(
        by(3, 0, 3, LastBatch::Partial).of(10, 1, 0),
        vec![0, 1, 2, 3]
    );
    assert_eq!(
        by(3, 1, 3, LastBatch::Partial).of(10, 1, 0),
        vec![4, 5, 6, 4]
    );
    assert_eq!(by(3, 2, 3, LastBatch::Partial).batches_per_epoch(10), 2);
    // Under "drop", 3 samples already make the one batch 4 make: no padding.
    assert_eq!(by(3, 1, 3, LastBatch::Drop).padding(10), 0);
    // 2 samples, 3 ranks: the rank with an empty part reads a repeat of the epoch's first sample.
    assert_eq!(by(3, 2, 1, LastBatch::Partial).of(2, 1, 0), vec![0]);
    assert_eq!(by(3, 2, 1, LastBatch::Partial).samples_per_epoch(2), 0);
}

proptest! {
    /// The split over ranks (issue 18): parts of the shuffled order that are contiguous,
    /// disjoint, cover the dataset and differ by at most one sample; every rank has as many
    /// batches; padding (a repeat of the rank's own first sample, flagged by its position past
    /// the real samples) only where a rank would otherwise have a batch fewer.
    #[test]
    fn rank_parts_are_disjoint_cover_and_have_equal_batch_counts(
        n in 1usize..300,
        ranks in 1usize..9,
        batch in 1usize..40,
        last in 0usize..3,
        seed: u64,
        epoch in 0u64..5,
    ) {
        let last_batch = [LastBatch::Partial, LastBatch::Drop, LastBatch::Pad][last];
        let by = |rank| EpochOrder { shuffle: true, rank, world_size: ranks, batch, last_batch };
        let whole = epoch_order(n, seed, epoch, true, 0, 1);
        let mut real = Vec::new();
        let mut start = 0;
        for s in 0..ranks {
            let order = by(s).of(n, seed, epoch);
            let own = by(s).samples_per_epoch(n);
            // Contiguous parts of the one shuffled order, in rank order.
            prop_assert_eq!(&order[..own], &whole[start..start + own]);
            prop_assert_eq!(&epoch_order(n, seed, epoch, true, s, ranks)[..], &order[..own]);
            start += own;
            prop_assert!(own == n / ranks || own == n / ranks + 1);
            prop_assert_eq!(order.len(), own + by(s).padding(n));
            if let Some(&pad) = order.get(own) {
                // A repeat of a sample of its own (of the epoch's first, for an empty part).
                prop_assert_eq!(pad, *order.first().unwrap_or(&whole[0]));
                prop_assert!(own < n.div_ceil(ranks));
            }
            real.extend_from_slice(&order[..own]);
            prop_assert_eq!(by(s).batches_per_epoch(n), by(0).batches_per_epoch(n));
        }
        prop_assert_eq!(start, n);
        // Real samples: disjoint, and together the whole dataset.
        prop_assert_eq!(real.len(), n);
        prop_assert_eq!(real.iter().copied().collect::<BTreeSet<usize>>().len(), n);
        // Padding only where it buys the missing batch.
        for s in 0..ranks {
            if by(s).padding(n) == 1 {
                let own = by(s).samples_per_epoch(n);
                let batches = |k: usize| match last_batch {
                    LastBatch::Drop => k / batch,
                    _ => k.div_ceil(batch),
                };
                prop_assert!(batches(own) < batches(own + 1));
            }
        }
    }

    #[test]
    fn each_epoch_is_a_permutation(n in 1usize..500, seed: u64, epoch in 0u64..100) {
        let mut o = epoch_order(n, seed, epoch, true, 0, 1);
        o.sort_unstable();
        prop_assert_eq!(o, (0..n).collect::<Vec<_>>());
    }
}
