//! Where an http shard ends when the server doesn't give its length up front: a first reply
//! without one (chunked, cut off), then Range replies whose total is `*`, so the reader
//! learns the end only from a 416 — after a jump past the end, a jump to exactly the end,
//! or a reconnection exactly at the end.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use super::http::{HttpShard, Retry};
use super::tar::ShardRead;

/// How the test server answers.
#[derive(Clone, Copy)]
struct Answers {
    /// The first (unranged) reply is chunked and cut off after this many bytes.
    first_cut: usize,
    /// Range replies give the shard's length (`bytes a-b/LEN`), else `bytes a-b/*`.
    total_in_206: bool,
    /// A Range request at or past the end gets `content-range: bytes */LEN` with its 416.
    total_in_416: bool,
}

/// Answers at most 20 requests on 127.0.0.1 with `reply(range start)`'s bytes (the
/// connection then closes); returns the URL.
fn serve_with(reply: impl Fn(Option<usize>) -> Vec<u8> + Send + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/a.tar", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().take(20) {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut from = None;
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                if let Some(r) = line.to_ascii_lowercase().strip_prefix("range: bytes=") {
                    from = r.trim().trim_end_matches('-').parse::<usize>().ok();
                }
                line.clear();
            }
            let _ = stream.write_all(&reply(from));
            let _ = stream.flush();
        }
    });
    url
}

/// A 416 reply, with `content-range: bytes */LEN` where `len` is given.
fn refused(len: Option<usize>) -> Vec<u8> {
    let range = len.map_or(String::new(), |l| format!("content-range: bytes */{l}\r\n"));
    format!("HTTP/1.1 416 Range Not Satisfiable\r\n{range}content-length: 0\r\n\r\n").into_bytes()
}

/// Serves `body` as `answers` say; returns the URL.
fn serve(body: Vec<u8>, answers: Answers) -> String {
    serve_with(move |from| {
        let len = body.len();
        let (head, bytes) = match from {
            None => {
                // Chunked, no length, cut off: the client sees a broken body.
                let cut = answers.first_cut.min(len);
                let head =
                    format!("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n{cut:x}\r\n");
                (head, &body[..cut])
            }
            Some(f) if f >= len => return refused(answers.total_in_416.then_some(len)),
            Some(f) => {
                let total = if answers.total_in_206 {
                    len.to_string()
                } else {
                    "*".into()
                };
                let head = format!(
                    "HTTP/1.1 206 Partial Content\r\ncontent-length: {}\r\n\
                     content-range: bytes {f}-{}/{total}\r\nconnection: close\r\n\r\n",
                    len - f,
                    len - 1
                );
                (head, &body[f..])
            }
        };
        [head.as_bytes(), bytes].concat()
    })
}

fn body(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

fn retry() -> Retry {
    Retry {
        attempts: 2,
        backoff: Duration::from_millis(5),
        read_timeout: Duration::from_secs(5),
    }
}

/// Opens the shard and reads its first `n` bytes (the cut first reply, then a Range reply:
/// from then on the server is known to take ranges).
fn opened(url: &str, n: usize) -> HttpShard {
    let mut shard = HttpShard::open(url, retry()).unwrap();
    let mut head = vec![0u8; n];
    shard.read_exact(&mut head).unwrap();
    assert_eq!(head, body(n));
    shard
}

fn at_end(shard: &mut HttpShard) {
    let mut rest = Vec::new();
    shard.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "{} bytes after the end", rest.len());
}

#[test]
fn a_jump_past_an_unsaid_end_counts_the_bytes_to_where_the_server_says_it_ends() {
    for total_in_416 in [true, false] {
        let answers = Answers {
            first_cut: 3000,
            total_in_206: false,
            total_in_416,
        };
        let url = serve(body(10_000), answers);
        let mut shard = opened(&url, 5000);
        // 5 MiB on: a Range jump, far past the end.
        let skipped = shard.skip(5 << 20).unwrap();
        assert_eq!(skipped, 5000, "416 with its total: {total_in_416}");
        at_end(&mut shard);
    }
}

#[test]
fn a_jump_to_exactly_the_end_is_the_end_not_an_error() {
    let len = (5 << 20) + 4000;
    for total_in_206 in [true, false] {
        let answers = Answers {
            first_cut: 1000,
            total_in_206,
            total_in_416: true,
        };
        let url = serve(body(len), answers);
        let mut shard = opened(&url, 2000);
        assert_eq!(
            shard.skip((len - 2000) as u64).unwrap(),
            (len - 2000) as u64
        );
        at_end(&mut shard);
    }
}

#[test]
fn a_416_before_the_length_the_server_gave_is_an_error_not_the_end() {
    // The first reply says 10,000 bytes and is cut at 5,000; the reconnection at byte 5,000
    // is answered 416 (with no length, or with 5,000): the rest is lost, and says so.
    for total_in_416 in [false, true] {
        let url = serve_with(move |from| match from {
            Some(_) => refused(total_in_416.then_some(5000)),
            None => {
                let head = b"HTTP/1.1 200 OK\r\ncontent-length: 10000\r\n\r\n";
                [&head[..], &body(5000)].concat()
            }
        });
        let mut shard = HttpShard::open(&url, retry()).unwrap();
        let mut got = Vec::new();
        let e = shard.read_to_end(&mut got).unwrap_err();
        assert_eq!(got, body(5000), "what came is delivered");
        assert!(e.to_string().contains("10000 bytes"), "{e}");
    }
}

#[test]
fn a_connection_lost_exactly_at_an_unsaid_end_ends_the_shard_cleanly() {
    // The first reply delivers every byte, but no end of its chunked body: the reconnection
    // at byte 10,000 gets a 416.
    for total_in_416 in [true, false] {
        let answers = Answers {
            first_cut: 10_000,
            total_in_206: false,
            total_in_416,
        };
        let url = serve(body(10_000), answers);
        let mut shard = HttpShard::open(&url, retry()).unwrap();
        let mut all = Vec::new();
        shard.read_to_end(&mut all).unwrap();
        assert_eq!(all, body(10_000));
    }
}
