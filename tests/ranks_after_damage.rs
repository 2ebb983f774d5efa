//! Data-parallel ranks yield exactly `batches_per_epoch` batches whatever bad samples cost
//! them (a rank a batch short leaves the others waiting in their next collective for ever):
//! the shortfall is made up with padding, flagged, on both devices and under every
//! last-batch policy.

mod common;

use std::collections::{BTreeSet, HashMap};

use common::*;
use stokehold::pipeline::{Batch, DeviceChoice, Pipeline, PipelineSpec};

/// 12 files, 2 ranks of 6 (the eval pipeline reads them in order), batches of 3: rank 1's
/// files 6–9 are not JPEGs, so it has 2 good samples where rank 0 has 6.
const FILES: usize = 12;
const BAD: [usize; 4] = [6, 7, 8, 9];

fn spec(d: &std::path::Path, rank: i64, last_batch: &str, device: DeviceChoice) -> PipelineSpec {
    let mut s = spec_for("resnet50-eval.toml", d, 3, 2, 2);
    let r = s.ops.iter_mut().find(|o| o.kind == "file_reader").unwrap();
    r.args.insert("world_size".into(), 2i64.into());
    r.args.insert("rank".into(), rank.into());
    r.args.insert("last_batch".into(), last_batch.into());
    s.settings.device = device;
    s
}

/// Every batch of a run, checked for what holds of any batch: padding last, each padding
/// sample a copy of a real one of the same run (same file, same parameters, same pixels).
fn run(s: PipelineSpec) -> (usize, Vec<Batch>) {
    let p = Pipeline::new(s).unwrap();
    let per_epoch = p.batches_per_epoch();
    let batches: Vec<Batch> = p.map(|b| b.unwrap()).collect();
    let mut real = HashMap::new();
    for b in &batches {
        let images = b.images_on_host("images").unwrap().unwrap();
        let sample = |i: usize| {
            let n = images.shapes[i].iter().product::<usize>();
            let from = images.offsets[i] * images.dtype.size();
            images.as_bytes()[from..from + n * images.dtype.size()].to_vec()
        };
        for i in 0..b.len() - b.padded {
            real.insert(b.samples[i].index, (b.samples[i].clone(), sample(i)));
        }
        for i in b.len() - b.padded..b.len() {
            let (info, pixels) = real
                .get(&b.samples[i].index)
                .expect("padding repeats a real sample handed out before");
            assert_eq!(&b.samples[i], info, "the repeat's file and parameters");
            assert!(&sample(i) == pixels, "the repeat's pixels");
        }
    }
    (per_epoch, batches)
}

fn check_policy(last_batch: &str, device: DeviceChoice) {
    let d = small_folder(FILES, &BAD);
    let runs: Vec<(usize, Vec<Batch>)> = (0..2)
        .map(|r| run(spec(d.path(), r, last_batch, device)))
        .collect();
    let what = format!("last_batch = {last_batch:?} on {device:?}");
    assert_eq!(runs[0].0, runs[1].0, "{what}: len() agrees");
    for (rank, (per_epoch, batches)) in runs.iter().enumerate() {
        let counts: Vec<usize> = (0..2)
            .map(|e| batches.iter().filter(|b| b.epoch == e).count())
            .collect();
        assert_eq!(counts, [*per_epoch; 2], "{what}: rank {rank}'s batches");
        for b in batches {
            let last = b.index + 1 == *per_epoch;
            assert!(
                last || b.len() == 3,
                "{what}: only an epoch's last batch is short"
            );
        }
    }
    for epoch in 0..2 {
        let epoch_batches = || runs.iter().flat_map(|r| &r.1).filter(|b| b.epoch == epoch);
        let real: Vec<usize> = epoch_batches()
            .flat_map(|b| b.samples[..b.len() - b.padded].iter().map(|s| s.index))
            .collect();
        let good: BTreeSet<usize> = (0..FILES).filter(|i| !BAD.contains(i)).collect();
        if last_batch != "drop" {
            assert_eq!(real.len(), good.len(), "{what}: each good sample once");
            assert_eq!(
                real.iter().copied().collect::<BTreeSet<_>>(),
                good,
                "{what}"
            );
        }
        let listed: BTreeSet<usize> = epoch_batches()
            .flat_map(|b| b.skipped.iter().map(|e| e.index))
            .collect();
        assert_eq!(
            listed,
            BAD.into_iter().collect(),
            "{what}: every skip listed in a batch"
        );
    }
}

#[test]
fn a_rank_short_of_good_samples_pads_to_as_many_batches_as_the_others() {
    for policy in ["partial", "drop", "pad"] {
        check_policy(policy, DeviceChoice::Cpu);
    }
    // Rank 1 under "partial": its 2 good samples padded to a whole batch (only the last batch
    // of an epoch may be short), then a batch of padding alone.
    let d = small_folder(FILES, &BAD);
    let (_, batches) = run(spec(d.path(), 1, "partial", DeviceChoice::Cpu));
    let shape: Vec<(usize, usize)> = batches
        .iter()
        .filter(|b| b.epoch == 0)
        .map(|b| (b.len(), b.padded))
        .collect();
    assert_eq!(shape, [(3, 1), (3, 3)]);
}

#[test]
fn the_gpu_path_pads_a_short_rank_alike() {
    for policy in ["partial", "drop", "pad"] {
        check_policy(policy, DeviceChoice::Emu);
    }
}

#[test]
fn a_single_process_is_not_padded_beyond_its_good_samples() {
    // Without ranks to agree with, bad samples cost batches as before.
    let d = small_folder(FILES, &BAD);
    let mut s = spec_for("resnet50-eval.toml", d.path(), 3, 2, 1);
    s.settings.device = DeviceChoice::Cpu;
    let p = Pipeline::new(s).unwrap();
    assert_eq!(p.batches_per_epoch(), 4);
    let batches: Vec<Batch> = p.map(|b| b.unwrap()).collect();
    let shape: Vec<(usize, usize)> = batches.iter().map(|b| (b.len(), b.padded)).collect();
    assert_eq!(shape, [(3, 0), (3, 0), (2, 0)]);
}

#[test]
fn a_run_resumed_inside_the_padding_still_yields_every_batch() {
    let d = small_folder(FILES, &BAD);
    let s = || spec(d.path(), 1, "partial", DeviceChoice::Cpu);
    let (per_epoch, batches) = run(s());
    let first = &batches[0];
    assert_eq!((first.index, first.epoch), (0, 0));
    let p = Pipeline::resume(s(), first.resume).unwrap();
    let rest: Vec<Batch> = p.map(|b| b.unwrap()).collect();
    let in_epoch = rest.iter().filter(|b| b.epoch == 0).count();
    assert_eq!(first.index + 1 + in_epoch, per_epoch);
    assert_eq!(rest.iter().filter(|b| b.epoch == 1).count(), per_epoch);
}

#[test]
fn a_rank_with_no_good_sample_to_pad_with_stops_with_the_reason() {
    // Rank 1's files are all bad: it can't yield the batches rank 0 does, and says so
    // instead of ending its epoch early (which would hang rank 0 in its next collective).
    let d = small_folder(FILES, &[6, 7, 8, 9, 10, 11]);
    let p = Pipeline::new(spec(d.path(), 1, "partial", DeviceChoice::Cpu)).unwrap();
    let results: Vec<_> = p.collect();
    let err = results
        .iter()
        .find_map(|r| r.as_ref().err())
        .expect("an error, not an early end");
    let msg = err.to_string();
    assert!(
        msg.contains("rank 1 of 2") && msg.contains("no sample"),
        "{msg}"
    );
}
