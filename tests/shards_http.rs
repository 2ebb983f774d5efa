//! WebDataset tar shards over http, from a small server on 127.0.0.1 started here: ranges, a
//! dropped connection, a 404, and a server that stops sending.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::shards::{run, serve, set_reader_arg, spec, write_shards};
use stokehold::pipeline::{Pipeline, Waited};

fn http_case(ranges: bool) {
    let d = tempfile::tempdir().unwrap();
    let paths = write_shards(d.path(), &[5, 8, 6], true);
    let mut files = HashMap::new();
    for p in &paths {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        files.insert(format!("/{name}"), std::fs::read(p).unwrap());
    }
    files.insert(
        "/index.json".into(),
        std::fs::read(d.path().join("index.json")).unwrap(),
    );
    // Shard 1 drops its connection a third of the way in; shard 2 is missing (404).
    let cut = files["/part-001.tar"].len() / 3;
    files.remove("/part-002.tar");
    let server = serve(
        files,
        [("/part-001.tar".to_string(), cut)].into(),
        HashMap::new(),
        ranges,
    );
    let list = d.path().join("shards.txt");
    let mut text = String::new();
    for s in 0..3 {
        text += &format!("{}/part-{s:03}.tar\n", server.url);
    }
    std::fs::write(&list, &text).unwrap();
    let mut s = spec(&list.to_string_lossy(), 4, 2);
    set_reader_arg(&mut s, "shuffle", false);
    set_reader_arg(&mut s, "index", format!("{}/index.json", server.url));
    let (batches, errors) = run(s);
    let got: BTreeSet<i64> = batches.concat().into_iter().collect();
    assert_eq!(got, (0..13).collect(), "errors: {errors:#?}");
    assert_eq!(errors.len(), 6, "{errors:#?}");
    assert!(
        errors
            .iter()
            .all(|e| e.contains("/part-002.tar:") && e.contains("404")),
        "{errors:#?}"
    );
    assert!(server.requests.load(Ordering::Relaxed) >= 4);
    if ranges {
        assert!(
            server.ranged.load(Ordering::Relaxed) >= 1,
            "resumed with a range request"
        );
    }
}

#[test]
fn http_shards_survive_a_dropped_connection_by_range_and_lose_only_a_404s_samples() {
    http_case(true);
}

#[test]
fn http_shards_survive_a_dropped_connection_without_ranges_by_reading_again() {
    http_case(false);
}

/// A server that stops sending mid-shard (the connection left open) must not hold up
/// dropping the pipeline: the reader thread waiting for the shard's next sample gives up at
/// the stop, and the shard's thread (whose reads time out on their own) is not waited for.
#[test]
fn dropping_a_pipeline_does_not_wait_for_a_stalled_shard() {
    let d = tempfile::tempdir().unwrap();
    let paths = write_shards(d.path(), &[6], true);
    let shard = std::fs::read(&paths[0]).unwrap();
    let files: HashMap<String, Vec<u8>> = [
        ("/part-000.tar".to_string(), shard),
        (
            "/index.json".to_string(),
            std::fs::read(d.path().join("index.json")).unwrap(),
        ),
    ]
    .into();
    // The first member's header and a few bytes of its image, then silence.
    let stalled = [("/part-000.tar".to_string(), 600)].into();
    let server = serve(files, HashMap::new(), stalled, true);
    let mut s = spec(&format!("{}/part-000.tar", server.url), 2, 1);
    set_reader_arg(&mut s, "index", format!("{}/index.json", server.url));
    let mut p = Pipeline::new(s).unwrap();
    assert!(
        matches!(
            p.next_batch_timeout(Duration::from_millis(300)),
            Waited::TimedOut
        ),
        "no batch can come from a stalled shard"
    );
    let t0 = Instant::now();
    drop(p);
    let took = t0.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "dropping the pipeline took {took:?}"
    );
}

/// A URL that is missing, or a folder's page rather than a shard: the error says which.
#[test]
fn a_missing_url_or_a_folders_page_is_named_with_the_cause() {
    let page =
        "<!DOCTYPE HTML>\n<html><head><title>Directory listing for /</title></head>".repeat(10);
    let files: HashMap<String, Vec<u8>> = [("/".to_string(), page.into_bytes())].into();
    let server = serve(files, HashMap::new(), HashMap::new(), true);
    let error = |shards: &str| match Pipeline::new(spec(shards, 4, 1)) {
        Ok(_) => panic!("{shards} runs"),
        Err(e) => e.to_string(),
    };
    let e = error(&format!("{}/train-000.tar", server.url));
    assert!(e.contains("train-000.tar: HTTP 404 (not found)"), "{e}");
    let e = error(&format!("{}/", server.url));
    assert!(
        e.contains("not a tar shard") && e.contains("<!DOCTYPE HTML>"),
        "{e}"
    );
}
