//! How a reader hands samples on: in schedule order, every one, a few at once where it
//! holds the credits to read them together, and never waiting to fill a handful.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{bounded, unbounded, Receiver, Sender};

use super::*;
use crate::pipeline::run::stats::Stats;
use crate::reader::schedule::{LastBatch, Position};
use crate::reader::source::{Source, Walk};
use crate::reader::{ReaderConfig, SourceKind};

/// A reader over `n` one-byte files, for `epochs`, handing on at most `hold` at once and
/// holding them as long as it takes, started with `credits` credits; the sender of more and
/// what it hands on. Its thread ends with the schedule.
fn reader(
    dir: &Path,
    (n, epochs): (usize, u64),
    hold: &Hold,
    credits: usize,
) -> (Sender<usize>, Receiver<LoadedGroup>) {
    for i in 0..n {
        std::fs::write(dir.join(format!("{i:03}.jpg")), b"x").unwrap();
    }
    let config = ReaderConfig {
        root: dir.to_path_buf(),
        list: None,
        source: SourceKind::Auto,
        extensions: vec!["jpg".into()],
        shuffle: false,
        rank: 0,
        world_size: 1,
        last_batch: LastBatch::Partial,
        shards: None,
    };
    let source = Source::open(&config).unwrap();
    let (stop_tx, stop) = bounded::<()>(0);
    let steps = source.steps(
        &config,
        Walk {
            batch: 8,
            max_bytes: 1 << 20,
            labels: false,
            epochs: Some(epochs),
            start: Position::default(),
            stop: stop.clone(),
        },
    );
    let (credit_tx, credit_rx) = unbounded();
    credit_tx.send(credits).unwrap();
    let (out, handed) = unbounded();
    let stage = ReadStage {
        steps: Arc::new(Mutex::new(steps)),
        credits: StageInput {
            items: credit_rx,
            shutdown: stop,
        },
        out,
        stats: Arc::new(Stats::new(0)),
        max_bytes: 1 << 20,
        hold: hold.clone(),
        hold_for: Duration::from_secs(600),
    };
    std::thread::spawn(move || {
        stage.run();
        drop(stop_tx);
    });
    (credit_tx, handed)
}

/// The sequence numbers of what was handed on at once (an epoch's end counts as one).
fn seqs(handful: &[Loaded]) -> Vec<u64> {
    handful
        .iter()
        .map(|l| match l {
            Loaded::Sample { seq, .. } | Loaded::EpochEnd { seq, .. } => *seq,
        })
        .collect()
}

#[test]
fn with_the_credits_at_hand_a_reader_hands_on_a_few_samples_at_once_in_order() {
    let d = tempfile::tempdir().unwrap();
    let (_credits, handed) = reader(d.path(), (40, 1), &Hold::new(GPU_PATH_HOLD), 64);
    // 40 samples and the epoch's end, then the schedule ends and the reader with it.
    let got: Vec<Vec<u64>> = handed.iter().map(|h| seqs(&h)).collect();
    let sizes: Vec<usize> = got.iter().map(Vec::len).collect();
    assert_eq!(sizes, [16, 16, 9], "{got:?}");
    let all: Vec<u64> = got.concat();
    assert!(all.windows(2).all(|w| w[0] < w[1]), "{all:?}");
}

#[test]
fn a_reader_hands_on_what_its_credits_let_it_read_without_waiting_for_more() {
    let d = tempfile::tempdir().unwrap();
    let (credits, handed) = reader(d.path(), (40, 1), &Hold::new(GPU_PATH_HOLD), 3);
    let wait = Duration::from_secs(60);
    assert_eq!(handed.recv_timeout(wait).unwrap().len(), 3);
    credits.send(1).unwrap();
    assert_eq!(handed.recv_timeout(wait).unwrap().len(), 1);
    // Nothing more without credits.
    assert!(handed.recv_timeout(Duration::from_millis(50)).is_err());
}

#[test]
fn an_epochs_last_samples_go_at_once() {
    let d = tempfile::tempdir().unwrap();
    let (_credits, handed) = reader(d.path(), (10, 2), &Hold::new(GPU_PATH_HOLD), 64);
    let got: Vec<LoadedGroup> = handed.iter().collect();
    assert_eq!(got.len(), 2);
    for h in &got {
        assert_eq!(h.len(), 11);
        assert!(matches!(h.last(), Some(Loaded::EpochEnd { .. })));
    }
}

#[test]
fn where_the_workers_are_the_slow_stage_a_reader_hands_on_one_sample_at_a_time() {
    let d = tempfile::tempdir().unwrap();
    // The CPU path's, or the GPU path's once the worker gate opened.
    let hold = Hold::new(GPU_PATH_HOLD);
    hold.one_at_a_time();
    let (_credits, handed) = reader(d.path(), (10, 1), &hold, 64);
    let got: Vec<Vec<u64>> = handed.iter().map(|h| seqs(&h)).collect();
    assert_eq!(got.len(), 11, "{got:?}");
    assert!(got.iter().all(|h| h.len() == 1));
}

#[test]
fn a_message_of_credits_is_spent_a_step_each_then_the_reader_waits_for_the_next() {
    let d = tempfile::tempdir().unwrap();
    let (credits, handed) = reader(d.path(), (40, 1), &Hold::new(1), 5);
    let wait = Duration::from_secs(60);
    for _ in 0..5 {
        assert_eq!(handed.recv_timeout(wait).unwrap().len(), 1);
    }
    assert!(handed.recv_timeout(Duration::from_millis(50)).is_err());
    credits.send(2).unwrap();
    let next: Vec<u64> = (0..2)
        .flat_map(|_| seqs(&handed.recv_timeout(wait).unwrap()))
        .collect();
    assert_eq!(next, [5, 6]);
    assert!(handed.recv_timeout(Duration::from_millis(50)).is_err());
}
