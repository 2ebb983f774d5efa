//! Helpers of the shard tests: shards written by hand, a light pipeline over them, whole
//! runs, and a small HTTP server.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use stokehold::pipeline::{OpSpec, Pipeline, PipelineSpec, Position};
use stokehold::reader::shards::index::{IndexEntry, ShardIndex};
use stokehold::reader::shards::tar::TarWriter;

/// A tiny JPEG whose content depends on `n`.
pub fn jpeg(n: usize) -> Vec<u8> {
    let (w, h) = (8u16 + (n % 5) as u16, 8u16);
    let mut rgb = Vec::new();
    for y in 0..h as usize {
        for x in 0..w as usize {
            rgb.extend_from_slice(&[(x * 20 + n) as u8, (y * 30) as u8, (n * 7) as u8]);
        }
    }
    let mut out = Vec::new();
    jpeg_encoder::Encoder::new(&mut out, 90)
        .encode(&rgb, w, h, jpeg_encoder::ColorType::Rgb)
        .unwrap();
    out
}

/// Writes shards of the given sizes; sample `n` (numbered across shards) has label `n`.
/// Returns the shard paths; writes `index.json` when `index` is set.
pub fn write_shards(dir: &Path, sizes: &[usize], index: bool) -> Vec<PathBuf> {
    std::fs::create_dir_all(dir).unwrap();
    let mut n = 0;
    let mut paths = Vec::new();
    let mut entries = Vec::new();
    for (s, &size) in sizes.iter().enumerate() {
        let path = dir.join(format!("part-{s:03}.tar"));
        let mut w = TarWriter::new(std::fs::File::create(&path).unwrap());
        for _ in 0..size {
            w.append(&format!("s{n:05}.jpg"), &jpeg(n)).unwrap();
            w.append(&format!("s{n:05}.cls"), n.to_string().as_bytes())
                .unwrap();
            n += 1;
        }
        w.finish().unwrap();
        entries.push(IndexEntry {
            url: format!("part-{s:03}.tar"),
            nsamples: size,
            filesize: std::fs::metadata(&path).unwrap().len(),
        });
        paths.push(path);
    }
    if index {
        ShardIndex::new("test", entries, Vec::new())
            .write(&dir.join("index.json"))
            .unwrap();
    }
    paths
}

/// A light pipeline over `shards`: decode, resize to 8×8, labels.
pub fn spec(shards: &str, batch: usize, threads: usize) -> PipelineSpec {
    PipelineSpec::builder()
        .batch(batch)
        .threads(threads)
        .seed(5)
        .op(OpSpec::new("shard_reader")
            .output("jpegs")
            .output("labels")
            .arg("shards", shards)
            .arg("shuffle_buffer", 7))
        .op(OpSpec::new("decode").input("jpegs").output("decoded"))
        .op(OpSpec::new("resize")
            .input("decoded")
            .output("images")
            .arg("size", [8, 8]))
        .outputs(&["images", "labels"])
}

pub fn set_reader_arg(spec: &mut PipelineSpec, name: &str, v: impl Into<stokehold::ops::ArgValue>) {
    spec.ops[0].args.insert(name.into(), v.into());
}

/// Each batch's labels, and the errors met, for a whole run.
pub fn run(spec: PipelineSpec) -> (Vec<Vec<i64>>, Vec<String>) {
    run_from(spec, None)
}

pub fn run_from(spec: PipelineSpec, at: Option<Position>) -> (Vec<Vec<i64>>, Vec<String>) {
    let mut p = match at {
        Some(at) => Pipeline::resume(spec, at).unwrap(),
        None => Pipeline::new(spec).unwrap(),
    };
    let mut batches = Vec::new();
    let mut errors = Vec::new();
    for b in &mut p {
        let b = b.unwrap();
        batches.push(b.labels("labels").unwrap().to_vec());
        errors.extend(b.skipped.iter().map(|e| e.to_string()));
    }
    for e in p.epoch_summaries() {
        for err in e.errors {
            let s = err.to_string();
            if !errors.contains(&s) {
                errors.push(s);
            }
        }
    }
    (batches, errors)
}

/// A small HTTP/1.1 server on 127.0.0.1 serving `files`: Range requests answered with 206
/// (unless `ranges` is off), unknown paths with 404, and the first response for a path in
/// `drop_after` cut off after that many bytes of body; a response for a path in `stall_after`
/// sends that many bytes of body and then nothing more, the connection held open a minute.
/// It serves at most 500 requests.
pub struct Server {
    pub url: String,
    pub requests: Arc<AtomicUsize>,
    pub ranged: Arc<AtomicUsize>,
}

pub fn serve(
    files: HashMap<String, Vec<u8>>,
    drop_after: HashMap<String, usize>,
    stall_after: HashMap<String, usize>,
    ranges: bool,
) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(AtomicUsize::new(0));
    let ranged = Arc::new(AtomicUsize::new(0));
    let drops = Arc::new(Mutex::new(drop_after));
    let (req, rng) = (requests.clone(), ranged.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming().take(500) {
            let Ok(mut stream) = stream else { continue };
            stream
                .set_read_timeout(Some(std::time::Duration::from_secs(10)))
                .ok();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
            let mut range_from = None;
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
                    break;
                }
                let lower = h.to_ascii_lowercase();
                if let Some(r) = lower.strip_prefix("range: bytes=") {
                    range_from = r.trim().trim_end_matches('-').parse::<usize>().ok();
                }
            }
            req.fetch_add(1, Ordering::Relaxed);
            let Some(body) = files.get(&path) else {
                let _ = stream.write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                );
                continue;
            };
            let (status, from) = match range_from {
                Some(f) if ranges => {
                    rng.fetch_add(1, Ordering::Relaxed);
                    ("206 Partial Content", f.min(body.len()))
                }
                _ => ("200 OK", 0),
            };
            let mut head = format!(
                "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len() - from
            );
            if from > 0 || status.starts_with("206") {
                head += &format!(
                    "content-range: bytes {from}-{}/{}\r\n",
                    body.len() - 1,
                    body.len()
                );
            }
            head += "\r\n";
            let cut = drops.lock().unwrap().remove(&path);
            let stall = stall_after.get(&path);
            let end = cut
                .or(stall.copied())
                .map_or(body.len(), |c| (from + c).min(body.len()));
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body[from..end]);
            let _ = stream.flush();
            if stall.is_some() {
                std::thread::spawn(move || {
                    std::thread::sleep(std::time::Duration::from_secs(60));
                    drop(stream);
                });
            }
        }
    });
    Server {
        url,
        requests,
        ranged,
    }
}
