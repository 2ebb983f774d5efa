//! Soak test (ignored by default; `scripts/soak.sh` runs it in release): many epochs of the
//! shipped train pipeline over ../shared/data/imagenet-400 with ~20 bad files mixed in.
//!
//! At the last batch of every epoch it records the resident memory (VmRSS), the process's thread
//! count and the sample indices delivered, and asserts:
//! - every epoch delivers exactly the good images, each once;
//! - the thread count does not change after epoch 1 (up to the last epoch, when the planner
//!   and readers are done and exit);
//! - RSS never grows more than [`RSS_BOUND_MB`] above its value at the end of epoch 5
//!   (the pipeline's buffers are bounded: anything growing with the epoch count is a leak).
//!
//! `SOAK_EPOCHS` sets the number of epochs (default 200); `SOAK_THREADS` the worker threads
//! (default 2).

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use common::*;
use stokehold::pipeline::{OnError, Pipeline};

/// Allowed RSS growth after epoch 5, in MB.
const RSS_BOUND_MB: f64 = 32.0;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// VmRSS of this process in MB.
fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

#[derive(Debug, Clone)]
struct EpochRecord {
    epoch: u64,
    rss_mb: f64,
    threads: usize,
    delivered: BTreeSet<usize>,
    delivered_count: usize,
    skipped: u64,
}

/// ~20 bad files: truncated photos, text, empty files, decompression bombs, destroyed magic
/// bytes, and two broken symlinks. Returns how many the reader lists: every one of them,
/// the broken symlinks included (they fail when read, and are reported then).
fn add_bad_files(dir: &std::path::Path, photos: &[PathBuf]) -> usize {
    let mut n = 0;
    let mut put = |name: &str, bytes: &[u8]| {
        std::fs::write(dir.join(name), bytes).unwrap();
        n += 1;
    };
    for (k, p) in photos.iter().take(8).enumerate() {
        let b = std::fs::read(p).unwrap();
        put(&format!("bad_cut_{k}.jpg"), &b[..b.len() * (k + 1) / 10]);
    }
    put("bad_empty.jpg", b"");
    put("bad_empty2.JPEG", b"");
    put("bad_text.jpg", b"hello, I am not an image\n");
    put("bad_html.JPEG", b"<html><body>404 Not Found</body></html>");
    for (k, p) in photos.iter().skip(8).take(3).enumerate() {
        // The frame header claims 60000x60000: a limits error before any allocation.
        let mut b = std::fs::read(p).unwrap();
        let at = b
            .windows(2)
            .position(|m| m[0] == 0xFF && matches!(m[1], 0xC0..=0xC2))
            .unwrap();
        b[at + 5..at + 9].copy_from_slice(&[0xEA, 0x60, 0xEA, 0x60]);
        put(&format!("bad_bomb_{k}.jpg"), &b);
    }
    for (k, p) in photos.iter().skip(11).take(3).enumerate() {
        // Magic bytes destroyed.
        let mut b = std::fs::read(p).unwrap();
        b[0] ^= 0xFF;
        b[1] ^= 0x55;
        put(&format!("bad_magic_{k}.jpg"), &b);
    }
    std::os::unix::fs::symlink(dir.join("nowhere.jpg"), dir.join("bad_dangling.jpg")).unwrap();
    let looped = dir.join("bad_loop.jpg");
    std::os::unix::fs::symlink(&looped, &looped).unwrap();
    n + 2
}

#[test]
#[ignore = "soak test: minutes; run scripts/soak.sh"]
fn soak_many_epochs_with_bad_files() {
    let Some(data) = shared_data() else { return };
    let epochs = env_or("SOAK_EPOCHS", 200);
    let threads = env_or("SOAK_THREADS", 2) as usize;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    std::fs::create_dir(&dir).unwrap();
    let mut photos: Vec<PathBuf> = std::fs::read_dir(data.join("imagenet-400"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    photos.sort();
    let mut good = BTreeSet::new();
    for p in &photos {
        let link = dir.join(p.file_name().unwrap());
        std::os::unix::fs::symlink(p, &link).unwrap();
        good.insert(link);
    }
    let bad = add_bad_files(&dir, &photos);

    let mut spec = spec_for("resnet50-train.toml", &dir, 64, threads, epochs);
    spec.settings.on_error = OnError::Skip;
    let mut pipeline = Pipeline::new(spec).unwrap();
    let good_indices: BTreeSet<usize> = pipeline
        .dataset()
        .entries
        .iter()
        .enumerate()
        .filter(|(_, e)| good.contains(&*e.path))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(good_indices.len(), photos.len());
    assert_eq!(pipeline.dataset().entries.len(), photos.len() + bad);

    let mut records: Vec<EpochRecord> = Vec::new();
    let mut current = EpochRecord {
        epoch: 0,
        rss_mb: 0.0,
        threads: 0,
        delivered: BTreeSet::new(),
        delivered_count: 0,
        skipped: 0,
    };
    let mut skipped_before = 0u64;
    let mut close = |cur: &mut EpochRecord, next_epoch: u64, skipped_now: u64| {
        cur.skipped = skipped_now - skipped_before;
        skipped_before = skipped_now;
        records.push(std::mem::replace(
            cur,
            EpochRecord {
                epoch: next_epoch,
                rss_mb: 0.0,
                threads: 0,
                delivered: BTreeSet::new(),
                delivered_count: 0,
                skipped: 0,
            },
        ));
    };
    let t0 = std::time::Instant::now();
    while let Some(b) = pipeline.next_batch() {
        let b = b.unwrap();
        if b.epoch != current.epoch {
            // Skips are counted by the assembler, which runs ahead of the consumer by the
            // prefetched batches; the per-epoch figure is close, the total is exact.
            close(&mut current, b.epoch, pipeline.stats().skipped);
        }
        assert!(!b.is_empty());
        current.delivered_count += b.len();
        current.delivered.extend(b.samples.iter().map(|s| s.index));
        // Measured at every batch, so an epoch's figures are those at its last batch, while
        // the pipeline still runs (after the last epoch its threads are gone).
        current.rss_mb = rss_mb();
        current.threads = thread_count().unwrap_or(0);
    }
    close(&mut current, epochs, pipeline.stats().skipped);
    let elapsed = t0.elapsed();
    let stats = pipeline.stats();
    let summaries = pipeline.epoch_summaries();
    drop(pipeline);

    println!(
        "soak: {epochs} epochs, {} good + {bad} bad files, {threads} worker threads, {:.1} s",
        photos.len(),
        elapsed.as_secs_f64()
    );
    println!("epoch  RSS MB  threads  delivered  skipped");
    let shown = |e: u64| e < 3 || e == 5 || e % 10 == 9 || e + 1 == epochs;
    for r in records.iter().filter(|r| shown(r.epoch)) {
        println!(
            "{:>5}  {:>6.1}  {:>7}  {:>9}  {:>7}",
            r.epoch, r.rss_mb, r.threads, r.delivered_count, r.skipped
        );
    }

    assert_eq!(records.len() as u64, epochs);
    for r in &records {
        assert_eq!(r.delivered_count, good_indices.len(), "epoch {}", r.epoch);
        assert_eq!(r.delivered, good_indices, "epoch {}", r.epoch);
    }
    assert_eq!(stats.skipped, epochs * bad as u64);
    // The last epoch is left out: its last batch may come after the planner and the readers
    // have finished their work and exited.
    if let Some(base) = records.get(1).map(|r| r.threads) {
        for r in &records[1..records.len() - 1] {
            assert_eq!(r.threads, base, "thread count changed at epoch {}", r.epoch);
        }
    }
    if let Some(base) = records.get(5).map(|r| r.rss_mb) {
        let peak = records[5..].iter().map(|r| r.rss_mb).fold(0.0, f64::max);
        println!(
            "RSS after epoch 5: {base:.1} MB, peak after: {peak:.1} MB (bound +{RSS_BOUND_MB} MB)"
        );
        for r in &records[5..] {
            assert!(
                r.rss_mb <= base + RSS_BOUND_MB,
                "RSS grew from {base:.1} MB (epoch 5) to {:.1} MB at epoch {}",
                r.rss_mb,
                r.epoch
            );
        }
    }
    // Every epoch's summary accounts for every bad file, exactly once.
    assert_eq!(summaries.len() as u64, epochs);
    for s in &summaries {
        assert_eq!(s.skipped as usize, bad, "epoch {}", s.epoch);
        assert_eq!(s.images as usize, photos.len(), "epoch {}", s.epoch);
    }
}
