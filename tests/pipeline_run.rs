//! End-to-end runs of the shipped pipelines: shapes, determinism, policies, shutdown.

mod common;

use std::collections::BTreeSet;

use common::*;
use stokehold::ops::OpParams;
use stokehold::pipeline::batch::BatchOutput;
use stokehold::pipeline::{Batch, LastBatch, OnError, Pipeline, PipelineSpec};
use stokehold::{DType, Layout};

fn collect(spec: PipelineSpec) -> Vec<Batch> {
    Pipeline::new(spec).unwrap().map(|b| b.unwrap()).collect()
}

fn set_reader(spec: &mut PipelineSpec, key: &str, v: impl Into<stokehold::ops::ArgValue>) {
    let r = spec
        .ops
        .iter_mut()
        .find(|o| o.kind == "file_reader")
        .unwrap();
    r.args.insert(key.into(), v.into());
}

#[test]
fn train_pipeline_on_builtin_samples() {
    let (_d, data) = samples();
    let batches = collect(spec_for("resnet50-train.toml", &data, 16, 2, 2));
    let n = stokehold::builtin_data::CLASSES.len() * stokehold::builtin_data::PER_CLASS;
    assert_eq!(batches.len(), 2 * n.div_ceil(16));
    let mut per_epoch = [0usize; 2];
    for b in &batches {
        let images = b.images("images").unwrap();
        assert_eq!(images.dtype, DType::F32);
        assert_eq!(images.layout, Layout::Chw);
        assert_eq!(images.shape(), Some([b.len(), 3, 224, 224]));
        assert_eq!(images.as_f32().unwrap().len(), b.len() * 3 * 224 * 224);
        let labels = b.labels("labels").unwrap();
        assert!(labels.iter().all(|&l| (0..4).contains(&l)));
        for s in &b.samples {
            assert!(s
                .params
                .iter()
                .any(|(_, p)| matches!(p, OpParams::Crop { .. })));
            assert!(s
                .params
                .iter()
                .any(|(_, p)| matches!(p, OpParams::Flip { .. })));
        }
        assert!(b.skipped.is_empty(), "{:?}", b.skipped);
        per_epoch[b.epoch as usize] += b.len();
    }
    assert_eq!(per_epoch, [n, n]);
    // Normalized ImageNet-style values stay within the representable range.
    let v = batches[0].images("images").unwrap().as_f32().unwrap();
    assert!(v.iter().all(|x| x.is_finite() && (-2.2..=2.7).contains(x)));
}

#[test]
fn same_batches_whatever_the_thread_count() {
    let (_d, data) = samples();
    let one = collect(spec_for("resnet50-train.toml", &data, 8, 1, 2));
    let three = collect(spec_for("resnet50-train.toml", &data, 8, 3, 2));
    assert_eq!(one.len(), three.len());
    for (a, b) in one.iter().zip(&three) {
        assert_eq!(a.samples, b.samples);
        assert_eq!(a.outputs, b.outputs);
    }
    // Epochs are shuffled differently, and another seed changes the crops.
    let e0: Vec<usize> = one
        .iter()
        .filter(|b| b.epoch == 0)
        .flat_map(|b| b.samples.iter().map(|s| s.index))
        .collect();
    let e1: Vec<usize> = one
        .iter()
        .filter(|b| b.epoch == 1)
        .flat_map(|b| b.samples.iter().map(|s| s.index))
        .collect();
    assert_ne!(e0, e1);
    let mut other = spec_for("resnet50-train.toml", &data, 8, 2, 1);
    other.settings.seed = 99;
    let o = collect(other);
    assert_ne!(o[0].samples, one[0].samples);
}

#[test]
fn eval_pipeline_is_ordered_and_deterministic() {
    let (_d, data) = samples();
    let a = collect(spec_for("resnet50-eval.toml", &data, 10, 2, 1));
    let idx: Vec<usize> = a
        .iter()
        .flat_map(|b| b.samples.iter().map(|s| s.index))
        .collect();
    assert_eq!(idx, (0..idx.len()).collect::<Vec<_>>());
    for b in &a {
        assert_eq!(
            b.images("images").unwrap().shape(),
            Some([b.len(), 3, 224, 224])
        );
    }
    let b = collect(spec_for("resnet50-eval.toml", &data, 10, 1, 1));
    assert_eq!(
        a.iter().map(|x| &x.outputs).collect::<Vec<_>>(),
        b.iter().map(|x| &x.outputs).collect::<Vec<_>>()
    );
}

#[test]
fn last_batch_policies() {
    let d = small_folder(10, &[]);
    let run = |policy: &str| {
        let mut s = spec_for("resnet50-eval.toml", d.path(), 4, 2, 1);
        set_reader(&mut s, "last_batch", policy);
        collect(s)
    };
    let sizes = |bs: &[Batch]| bs.iter().map(|b| (b.len(), b.padded)).collect::<Vec<_>>();
    assert_eq!(sizes(&run("partial")), vec![(4, 0), (4, 0), (2, 0)]);
    assert_eq!(sizes(&run("drop")), vec![(4, 0), (4, 0)]);
    let padded = run("pad");
    assert_eq!(sizes(&padded), vec![(4, 0), (4, 0), (4, 2)]);
    let last = &padded[2];
    assert_eq!(last.samples[1].index, last.samples[3].index);
    let _ = LastBatch::Pad;
}

#[test]
fn bad_files_are_skipped_and_batches_stay_full() {
    let d = small_folder(12, &[1, 5, 6]);
    let batches = collect(spec_for("resnet50-eval.toml", d.path(), 4, 2, 1));
    let sizes: Vec<usize> = batches.iter().map(Batch::len).collect();
    assert_eq!(sizes, vec![4, 4, 1]);
    let skipped: BTreeSet<String> = batches
        .iter()
        .flat_map(|b| {
            b.skipped
                .iter()
                .map(|e| e.path.file_name().unwrap().to_string_lossy().into_owned())
        })
        .collect();
    assert_eq!(
        skipped,
        ["img_001.jpg", "img_005.jpg", "img_006.jpg"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
    for b in &batches {
        for e in &b.skipped {
            assert!(e.to_string().contains("img_00"), "{e}");
        }
    }
}

#[test]
fn fail_policy_stops_at_the_first_bad_file() {
    let d = small_folder(12, &[5]);
    let mut s = spec_for("resnet50-eval.toml", d.path(), 4, 2, 1);
    s.settings.on_error = OnError::Fail;
    let mut p = Pipeline::new(s).unwrap();
    let first = p.next_batch().unwrap();
    assert!(first.is_ok());
    let err = p.next_batch().unwrap().unwrap_err().to_string();
    assert!(err.contains("img_005.jpg"), "{err}");
    assert!(p.next_batch().is_none());
}

#[test]
fn all_bad_gives_no_batch_and_no_hang() {
    let d = small_folder(5, &[0, 1, 2, 3, 4]);
    let p = Pipeline::new(spec_for("resnet50-eval.toml", d.path(), 4, 2, 2)).unwrap();
    let batches: Vec<_> = p.collect();
    assert!(batches.is_empty());
}

/// Each rank's real samples and its batch count, over one epoch.
fn rank_run(d: &std::path::Path, world_size: i64, rank: i64, batch: usize) -> (Vec<usize>, usize) {
    let mut s = spec_for("resnet50-train.toml", d, batch, 2, 1);
    set_reader(&mut s, "world_size", world_size);
    set_reader(&mut s, "rank", rank);
    let batches = collect(s);
    let real = batches
        .iter()
        .flat_map(|b| b.samples[..b.len() - b.padded].iter().map(|s| s.index))
        .collect();
    (real, batches.len())
}

#[test]
fn rank_parts_are_disjoint_and_equal() {
    // 11 samples, 2 ranks, batches of 3: parts of 6 and 5 samples, 2 batches each.
    let d = small_folder(11, &[]);
    let ((a, na), (b, nb)) = (rank_run(d.path(), 2, 0, 3), rank_run(d.path(), 2, 1, 3));
    assert_eq!((a.len(), b.len()), (6, 5));
    assert_eq!((na, nb), (2, 2));
    let all: BTreeSet<usize> = a.iter().chain(&b).copied().collect();
    assert_eq!(all.len(), 11);
}

#[test]
fn a_rank_a_batch_short_reads_one_flagged_repeat() {
    // 10 samples, 3 ranks, batches of 3: parts 4 | 3 | 3; the ranks with 3 would have one
    // batch where the first has two, so each reads a repeat, flagged as padding.
    let d = small_folder(10, &[]);
    let mut s = spec_for("resnet50-train.toml", d.path(), 3, 2, 1);
    set_reader(&mut s, "world_size", 3i64);
    set_reader(&mut s, "rank", 1i64);
    let p = Pipeline::new(s).unwrap();
    assert_eq!((p.samples_per_epoch(), p.batches_per_epoch()), (3, 2));
    let batches: Vec<Batch> = p.map(|b| b.unwrap()).collect();
    assert_eq!(batches.len(), 2);
    let last = &batches[1];
    assert_eq!(
        (last.len(), last.padded),
        (1, 1),
        "a batch of the padding alone"
    );
    assert_eq!(
        last.samples[0], batches[0].samples[0],
        "a repeat of the rank's first"
    );
    let runs: Vec<(Vec<usize>, usize)> = (0..3).map(|k| rank_run(d.path(), 3, k, 3)).collect();
    assert!(runs.iter().all(|(_, n)| *n == 2), "equal batch counts");
    let real: Vec<usize> = runs.iter().flat_map(|(r, _)| r.clone()).collect();
    assert_eq!(real.len(), 10, "real samples are disjoint");
    assert_eq!(
        real.iter().collect::<BTreeSet<_>>().len(),
        10,
        "and cover all"
    );
}

#[test]
fn rank_padding_and_last_batch_padding_add_up() {
    // As above under last_batch = "pad": rank 1 reads 3 samples and the repeat, and its
    // second batch is that repeat plus two more: three padding samples, all last.
    let d = small_folder(10, &[]);
    let mut s = spec_for("resnet50-train.toml", d.path(), 3, 2, 1);
    set_reader(&mut s, "world_size", 3i64);
    set_reader(&mut s, "rank", 1i64);
    set_reader(&mut s, "last_batch", "pad");
    let mut p = Pipeline::new(s).unwrap();
    let batches: Vec<Batch> = (&mut p).map(|b| b.unwrap()).collect();
    let shape: Vec<(usize, usize)> = batches.iter().map(|b| (b.len(), b.padded)).collect();
    assert_eq!(shape, vec![(3, 0), (3, 3)]);
    let st = p.stats();
    assert_eq!((st.images, st.padded), (3, 3));
}

/// The shipped training pipeline with `split` written into its file reader, pointed at `d`
/// in batches of 3, as `spec_for` sets it up.
fn train_file_with_reader_lines(d: &std::path::Path, split: &str) -> PipelineSpec {
    let reader = "kind = \"file_reader\"\n";
    let text = edited_train_text(&[(reader, &format!("{reader}{split}\n"))]);
    let path = shipped("resnet50-train.toml");
    let mut s = stokehold::pipeline::file::parse(&text, &path).unwrap().spec;
    s.set_data(d);
    s.settings.batch = 3;
    s.settings.threads = Some(2);
    s.settings.epochs = Some(1);
    s.settings.device = stokehold::pipeline::DeviceChoice::Cpu;
    s
}

#[test]
fn dali_names_shard_id_and_num_shards_split_over_ranks_as_rank_and_world_size_do() {
    // A pipeline file from before `rank`/`world_size` (or written by a DALI user) reads the
    // same rank's part, padding included.
    let d = small_folder(10, &[]);
    let run = |split: &str| {
        let p = Pipeline::new(train_file_with_reader_lines(d.path(), split)).unwrap();
        let per_epoch = (p.samples_per_epoch(), p.batches_per_epoch());
        let batches: Vec<(Vec<usize>, usize)> = p
            .map(|b| b.unwrap())
            .map(|b| (b.samples.iter().map(|s| s.index).collect(), b.padded))
            .collect();
        (per_epoch, batches)
    };
    let old = run("shard_id = 1\nnum_shards = 3");
    assert_eq!(old.0, (3, 2), "rank 1 of 3: 3 samples, 2 batches");
    assert_eq!(old, run("rank = 1\nworld_size = 3"));
    // `--rank`/`--world-size` replace the old names too.
    let mut s = train_file_with_reader_lines(d.path(), "shard_id = 0\nnum_shards = 2");
    s.set_rank(1, 3);
    let p = Pipeline::new(s).unwrap();
    assert_eq!((p.samples_per_epoch(), p.batches_per_epoch()), (3, 2));
    // A name and its alias both given: refused, naming the alias.
    let both = train_file_with_reader_lines(d.path(), "rank = 1\nshard_id = 1\nworld_size = 3");
    let Err(err) = Pipeline::new(both) else {
        panic!("a name and its alias both given must be refused")
    };
    let err = err.to_string();
    assert!(
        err.contains("'shard_id' is another name for 'rank'"),
        "{err}"
    );
}

#[test]
fn imagenet_400_both_pipelines() {
    let Some(data) = shared_data() else { return };
    let dir = data.join("imagenet-400");
    for name in ["resnet50-train.toml", "resnet50-eval.toml"] {
        let batches = collect(spec_for(name, &dir, 64, 2, 1));
        let images: usize = batches.iter().map(Batch::len).sum();
        let skipped: Vec<String> = batches
            .iter()
            .flat_map(|b| b.skipped.iter().map(|e| e.to_string()))
            .collect();
        assert_eq!(images, 400, "{name}: skipped {skipped:?}");
        for b in &batches {
            assert_eq!(
                b.images("images").unwrap().shape(),
                Some([b.len(), 3, 224, 224])
            );
            // Flat folder: no labels.
            assert!(b.labels("labels").unwrap().iter().all(|&l| l == -1));
        }
    }
}

#[test]
fn jpeg_edge_completes_with_bad_files_reported() {
    let Some(data) = shared_data() else { return };
    let dir = data.join("jpeg-edge");
    let batches = collect(spec_for("resnet50-train.toml", &dir, 4, 2, 1));
    let images: usize = batches.iter().map(Batch::len).sum();
    let skipped: Vec<String> = batches
        .iter()
        .flat_map(|b| {
            b.skipped
                .iter()
                .map(|e| e.path.file_name().unwrap().to_string_lossy().into_owned())
        })
        .collect();
    let files = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "jpg")
        })
        .count();
    assert_eq!(images + skipped.len(), files, "skipped: {skipped:?}");
    for unsupported in ["monkey12.jpg", "truncated_jpeg.jpg"] {
        assert!(
            skipped.iter().any(|s| s == unsupported),
            "{unsupported} should be reported: {skipped:?}"
        );
    }
    for good in [
        "pil_sample_cmyk.jpg",
        "hopper_gray.jpg",
        "hopper_orientation_6.jpg",
        "testorig.jpg",
        "jfif_unit_cm.jpg",
        "testimgari.jpg", // arithmetic coding: decoded by libjpeg-turbo, as by Pillow
    ] {
        assert!(!skipped.iter().any(|s| s == good), "{good} should decode");
    }
}

#[test]
fn replace_policy_keeps_every_position_filled() {
    let d = small_folder(12, &[1, 5, 6]);
    let run = |threads: usize| {
        let mut s = spec_for("resnet50-eval.toml", d.path(), 4, threads, 2);
        s.settings.on_error = OnError::Replace;
        collect(s)
    };
    let a = run(1);
    let sizes: Vec<usize> = a.iter().map(Batch::len).collect();
    assert_eq!(sizes, vec![4, 4, 4, 4, 4, 4]);
    for b in &a {
        assert!(b.samples.iter().all(|s| ![1, 5, 6].contains(&s.index)));
    }
    // Each bad file once an epoch, the scheduled one: a file that failed while standing in
    // for another counts where the epoch schedules it.
    let replaced: Vec<usize> = a
        .iter()
        .flat_map(|b| b.replaced.iter().map(|e| e.index))
        .collect();
    assert_eq!(replaced.len(), 6, "{replaced:?}");
    assert!(
        a.iter().all(|b| b.skipped.is_empty()),
        "replaced, not skipped"
    );
    let b = run(3);
    assert_eq!(
        a.iter().map(|x| &x.samples).collect::<Vec<_>>(),
        b.iter().map(|x| &x.samples).collect::<Vec<_>>()
    );
}

#[test]
fn replaced_samples_are_counted_by_cause_as_replaced_not_skipped() {
    let d = small_folder(12, &[1, 5, 6]);
    let mut s = spec_for("resnet50-eval.toml", d.path(), 4, 2, 2);
    s.settings.on_error = OnError::Replace;
    let mut p = Pipeline::new(s).unwrap();
    while let Some(b) = p.next_batch() {
        b.unwrap();
    }
    let st = p.stats();
    assert_eq!(st.skipped, 0);
    assert!(st.skipped_by_cause.is_empty(), "{:?}", st.skipped_by_cause);
    assert_eq!(st.replaced_by_cause.values().sum::<u64>(), st.replaced);
    assert_eq!(st.replaced, 6);
}

#[test]
fn a_sample_no_replacement_stands_in_for_is_skipped_with_its_own_error_and_nothing_replaced() {
    // Every file bad: each sample's replacements are bad too.
    let d = small_folder(3, &[0, 1, 2]);
    let mut s = spec_for("resnet50-eval.toml", d.path(), 4, 2, 1);
    s.settings.on_error = OnError::Replace;
    let mut p = Pipeline::new(s).unwrap();
    while let Some(b) = p.next_batch() {
        let b = b.unwrap();
        assert!(b.replaced.is_empty(), "{:?}", b.replaced);
    }
    let st = p.stats();
    assert_eq!((st.skipped, st.replaced, st.images), (3, 0, 0));
    let skipped: Vec<usize> = st.epochs[0].errors.iter().map(|e| e.index).collect();
    assert_eq!(skipped, [0, 1, 2], "each sample with its own file");
}

#[test]
fn the_counts_are_of_the_batches_handed_out_not_of_those_made_ahead() {
    // 10 good samples and 2 bad ones an epoch: batches of 4, 4 and 2.
    let d = small_folder(12, &[1, 5]);
    let mut s = spec_for("resnet50-eval.toml", d.path(), 4, 2, 3);
    s.settings.prefetch = 2;
    let mut p = Pipeline::new(s).unwrap();
    let taken: Vec<Batch> = (0..3).map(|_| p.next_batch().unwrap().unwrap()).collect();
    assert!(taken.iter().all(|b| b.epoch == 0));
    // The pipeline runs on into the next epoch, as far as its queue lets it.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while p.stats().epochs.is_empty() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    let st = p.stats();
    assert_eq!((st.batches, st.images, st.skipped), (3, 10, 2));
    assert_eq!(st.skipped_by_cause.values().sum::<u64>(), 2);
    assert_eq!(st.epochs.len(), 1, "{:?}", st.epochs);
    assert_eq!(p.epoch_summaries().len(), 1);
    // Once the run is over, everything counts.
    while let Some(b) = p.next_batch() {
        b.unwrap();
    }
    let st = p.stats();
    assert_eq!((st.batches, st.images, st.skipped), (9, 30, 6));
    assert_eq!(st.epochs.len(), 3);
}

#[test]
fn resuming_gives_the_remaining_batches() {
    let d = small_folder(23, &[4, 9]);
    let spec = || spec_for("resnet50-train.toml", d.path(), 5, 2, 3);
    let all = collect(spec());
    for stop_after in [1, 4, 5, 9] {
        let mut p = Pipeline::new(spec()).unwrap();
        let mut last = None;
        for _ in 0..stop_after {
            last = Some(p.next_batch().unwrap().unwrap());
        }
        drop(p);
        let pos = last.unwrap().resume;
        let text = pos.to_string();
        let parsed: stokehold::pipeline::Position = text.parse().unwrap();
        let rest: Vec<Batch> = Pipeline::resume(spec(), parsed)
            .unwrap()
            .map(|b| b.unwrap())
            .collect();
        assert_eq!(
            rest.len(),
            all.len() - stop_after,
            "stopped after {stop_after} at {text}"
        );
        for (x, y) in rest.iter().zip(&all[stop_after..]) {
            assert_eq!((x.epoch, x.index), (y.epoch, y.index));
            assert_eq!(x.samples, y.samples);
            assert_eq!(x.outputs, y.outputs);
        }
    }
    let mut other = spec();
    other.settings.seed = 5;
    assert!(Pipeline::resume(other, all[0].resume).is_err());
}

#[test]
fn resuming_mid_epoch_with_other_batches_or_ranks_or_past_the_epoch_is_refused() {
    let d = small_folder(23, &[]);
    let spec = |batch| spec_for("resnet50-train.toml", d.path(), batch, 2, 3);
    let mut p = Pipeline::new(spec(5)).unwrap();
    let at = p.next_batch().unwrap().unwrap().resume;
    drop(p);
    assert_eq!((at.sample, at.batch, at.batch_size), (5, 1, 5));
    let e = Pipeline::resume(spec(4), at).err().unwrap().to_string();
    assert!(
        e.contains("recorded with batches of 5, the pipeline has batches of 4")
            && e.contains("batch = 5"),
        "{e}"
    );
    // A position that does not record its batch size (printed by an older version) is taken.
    let unknown = stokehold::pipeline::Position {
        batch_size: 0,
        ..at
    };
    assert!(Pipeline::resume(spec(5), unknown).is_ok());
    let past = stokehold::pipeline::Position { sample: 24, ..at };
    let e = Pipeline::resume(spec(5), past).err().unwrap().to_string();
    assert!(e.contains("at sample 24 of its epoch, which has 23"), "{e}");
    // Mid-epoch as another rank, or among other ranks: refused.
    assert_eq!((at.rank, at.world_size), (0, 1));
    let mut two = spec(5);
    two.set_rank(1, 2);
    let e = Pipeline::resume(two.clone(), at).err().unwrap().to_string();
    assert!(
        e.contains("recorded by rank 0 of 1, the pipeline is rank 1 of 2")
            && e.contains("--rank 0 --world-size 1"),
        "{e}"
    );
    // From an epoch's start, anything goes: the epochs such a run would have given.
    let mut p = Pipeline::new(spec(5)).unwrap();
    let end = p.by_ref().take(5).last().unwrap().unwrap().resume;
    drop(p);
    assert_eq!((end.epoch, end.sample, end.batch), (1, 0, 0));
    let digests = |mut p: Pipeline, skip: usize| -> Vec<String> {
        p.by_ref()
            .skip(skip)
            .map(|b| {
                format!(
                    "{:?}",
                    b.unwrap()
                        .samples
                        .iter()
                        .map(|s| s.index)
                        .collect::<Vec<_>>()
                )
            })
            .collect()
    };
    two.settings.batch = 4;
    let fresh = digests(Pipeline::new(two.clone()).unwrap(), 3);
    let resumed = digests(Pipeline::resume(two, end).unwrap(), 0);
    assert_eq!(resumed, fresh);
    assert_eq!(
        resumed.len(),
        6,
        "rank 1 of 2 has 11 of 23 samples: 3 batches an epoch"
    );
}

#[test]
fn an_epochs_last_batch_resumes_at_the_next_epochs_start() {
    // However the epoch ends: a batch size that divides it, "drop", an even split among
    // ranks, a partial last batch. There a run may go on with another batch size.
    for (files, policy, rank) in [
        (20, "partial", None),
        (23, "drop", None),
        (20, "partial", Some(0)),
        (23, "partial", None),
    ] {
        let d = small_folder(files, &[]);
        let mut s = spec_for("resnet50-eval.toml", d.path(), 5, 2, 2);
        set_reader(&mut s, "last_batch", policy);
        if let Some(r) = rank {
            s.set_rank(r, 2);
        }
        let what = format!("{files} files, {policy}, rank {rank:?}");
        let batches: Vec<_> = Pipeline::new(s.clone())
            .unwrap()
            .map(|b| b.unwrap())
            .collect();
        let last_of_first = batches.iter().rfind(|b| b.epoch == 0).unwrap();
        let at = last_of_first.resume;
        assert_eq!((at.epoch, at.sample, at.batch), (1, 0, 0), "{what}");
        let mut other = s.clone();
        other.settings.batch = 3;
        let fresh: Vec<Vec<usize>> = Pipeline::new(other.clone())
            .unwrap()
            .map(|b| b.unwrap())
            .filter(|b| b.epoch == 1)
            .map(|b| b.samples.iter().map(|x| x.index).collect())
            .collect();
        let resumed: Vec<Vec<usize>> = Pipeline::resume(other, at)
            .unwrap()
            .map(|b| b.unwrap().samples.iter().map(|x| x.index).collect())
            .collect();
        assert_eq!(resumed, fresh, "{what}");
    }
}

#[test]
fn epoch_summaries_account_for_every_sample() {
    let d = small_folder(10, &[2]);
    let mut p = Pipeline::new(spec_for("resnet50-eval.toml", d.path(), 4, 2, 2)).unwrap();
    while let Some(b) = p.next_batch() {
        b.unwrap();
    }
    let s = p.epoch_summaries();
    assert_eq!(s.len(), 2);
    for (e, summary) in s.iter().enumerate() {
        assert_eq!(summary.epoch, e as u64);
        assert_eq!(
            (summary.images, summary.skipped, summary.batches),
            (9, 1, 3)
        );
    }
    let st = p.stats();
    assert_eq!((st.images, st.skipped), (18, 2));
    assert_eq!(st.skipped_by_cause.values().sum::<u64>(), 2);
}

#[test]
fn fused_plan_gives_the_same_batches_as_each_operator_alone() {
    use stokehold::pipeline::graph::Graph;
    let (_d, data) = samples();
    let shared = shared_data_part();
    let dirs: Vec<std::path::PathBuf> = std::iter::once(data)
        .chain(shared.iter().map(|d| d.join("jpeg-edge")))
        .chain(shared.iter().map(|d| d.join("imagenet-400")))
        .collect();
    for dir in &dirs {
        for name in ["resnet50-train.toml", "resnet50-eval.toml"] {
            let spec = spec_for(name, dir, 8, 2, 2);
            let fused = Graph::build(&spec).unwrap();
            let reference = Graph::build_unfused(&spec).unwrap();
            assert!(
                fused.nodes.len() < reference.nodes.len(),
                "{name}: nothing was fused"
            );
            let a: Vec<Batch> = Pipeline::from_graph(fused)
                .unwrap()
                .map(|b| b.unwrap())
                .collect();
            let b: Vec<Batch> = Pipeline::from_graph(reference)
                .unwrap()
                .map(|b| b.unwrap())
                .collect();
            assert_eq!(a.len(), b.len(), "{name} on {}", dir.display());
            for (x, y) in a.iter().zip(&b) {
                assert_eq!(x.samples, y.samples, "{name}");
                assert_eq!(x.outputs, y.outputs, "{name}");
                let ex: Vec<String> = x.skipped.iter().map(|e| e.to_string()).collect();
                let ey: Vec<String> = y.skipped.iter().map(|e| e.to_string()).collect();
                assert_eq!(ex, ey);
            }
        }
    }
}

#[test]
fn batches_written_in_place_equal_batches_copied_together() {
    // Workers write each final image straight into the place of a batch buffer where they
    // expect it to go; a bad file moves later samples of its epoch up a place, so those written
    // before the skip was known are moved by the assembler. The unfused plan ends in a layout
    // operator that hands its images over to be copied, so it is the reference.
    use stokehold::pipeline::graph::Graph;
    let d = small_folder(23, &[0, 4, 9, 10, 17]);
    for name in ["resnet50-train.toml", "resnet50-eval.toml"] {
        for (policy, batch, threads) in [
            ("partial", 4, 1),
            ("partial", 5, 3),
            ("pad", 4, 3),
            ("pad", 3, 1),
            ("drop", 5, 2),
        ] {
            let what = format!("{name}, last_batch {policy}, batch {batch}, {threads} threads");
            let mut spec = spec_for(name, d.path(), batch, threads, 2);
            set_reader(&mut spec, "last_batch", policy);
            let mut p = Pipeline::new(spec.clone()).unwrap();
            let placed: Vec<Batch> = p.by_ref().map(|b| b.unwrap()).collect();
            let st = p.stats();
            // How many a skip moves depends on timing: a worker learns of a skip once the
            // assembler has reached it.
            assert!(st.in_place <= st.batch_images, "{what}");
            let mut r = Pipeline::from_graph(Graph::build_unfused(&spec).unwrap()).unwrap();
            let copied: Vec<Batch> = r.by_ref().map(|b| b.unwrap()).collect();
            assert_eq!(r.stats().in_place, 0, "{what}: the reference copies");
            assert_eq!(placed.len(), copied.len(), "{what}");
            for (x, y) in placed.iter().zip(&copied) {
                assert_eq!((x.epoch, x.index, x.padded), (y.epoch, y.index, y.padded));
                assert_eq!(x.samples, y.samples, "{what}");
                assert_eq!(x.outputs, y.outputs, "{what}");
            }
        }
    }
    // Workers write only up to the batch after the last one handed on, so with a whole epoch
    // in one batch, samples before the first bad file are always in place; without bad files,
    // all are.
    let d = small_folder(23, &[20]);
    let mut p = Pipeline::new(spec_for("resnet50-eval.toml", d.path(), 32, 2, 2)).unwrap();
    while let Some(b) = p.next_batch() {
        b.unwrap();
    }
    let st = p.stats();
    assert_eq!(st.batch_images, 44);
    assert!(st.in_place >= 40, "{} of 44 in place", st.in_place);
    let d = small_folder(11, &[]);
    let mut p = Pipeline::new(spec_for("resnet50-train.toml", d.path(), 16, 2, 2)).unwrap();
    while let Some(b) = p.next_batch() {
        b.unwrap();
    }
    let st = p.stats();
    assert_eq!((st.in_place, st.batch_images), (22, 22));
}

/// What identifies a batch's content: where it is, who is in it, and every output.
fn content(
    b: &Batch,
) -> (
    u64,
    usize,
    usize,
    &[stokehold::pipeline::SampleInfo],
    &[BatchOutput],
) {
    (b.epoch, b.index, b.padded, &b.samples, &b.outputs)
}

#[test]
fn a_train_and_an_eval_pipeline_at_once_give_what_each_gives_alone() {
    let (_d, data) = samples();
    let train = || spec_for("resnet50-train.toml", &data, 16, 2, 2);
    let eval = || spec_for("resnet50-eval.toml", &data, 8, 2, 1);
    let train_alone = collect(train());
    let eval_alone = collect(eval());
    assert!(eval_alone.len() > 4);

    // Both at once, their next_batch calls interleaved; the eval pipeline is dropped after
    // three batches, while the train pipeline runs on to its end; then a second eval
    // pipeline runs beside what is left of it.
    let mut t = Pipeline::new(train()).unwrap();
    let mut e = Pipeline::new(eval()).unwrap();
    let mut train_both = Vec::new();
    let mut eval_both = Vec::new();
    for _ in 0..3 {
        train_both.push(t.next_batch().unwrap().unwrap());
        eval_both.push(e.next_batch().unwrap().unwrap());
    }
    drop(e);
    let mut e2 = Pipeline::new(eval()).unwrap();
    let mut eval_again = Vec::new();
    loop {
        let (tb, eb) = (t.next_batch(), e2.next_batch());
        if tb.is_none() && eb.is_none() {
            break;
        }
        train_both.extend(tb.map(Result::unwrap));
        eval_again.extend(eb.map(Result::unwrap));
    }

    assert_eq!(train_both.len(), train_alone.len());
    for (a, b) in train_alone.iter().zip(&train_both) {
        assert_eq!(content(a), content(b));
    }
    for (a, b) in eval_alone.iter().zip(&eval_both) {
        assert_eq!(content(a), content(b));
    }
    assert_eq!(eval_again.len(), eval_alone.len());
    for (a, b) in eval_alone.iter().zip(&eval_again) {
        assert_eq!(content(a), content(b));
    }
}
