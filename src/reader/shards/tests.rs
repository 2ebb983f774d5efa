use std::io::Cursor;
use std::sync::Arc;

use proptest::prelude::*;

use super::list::expand_braces;
use super::samples::{split_name, Item, LabelFrom, SampleRules, ShardItems};
use super::schedule::{replay, RankSplit, ShuffleBuffer};
use super::tar::{MemberKind, TarError, TarReader, TarWriter};

fn archive(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = TarWriter::new(Vec::new());
    for (name, data) in members {
        w.append(name, data).unwrap();
    }
    w.finish().unwrap()
}

fn names(bytes: Vec<u8>) -> Vec<Result<(String, Vec<u8>), TarError>> {
    let mut r = TarReader::new(Cursor::new(bytes));
    let mut out = Vec::new();
    loop {
        match r.next_member() {
            Ok(None) => return out,
            Ok(Some(m)) => {
                assert_eq!(m.kind, MemberKind::File);
                match r.read_data(u64::MAX) {
                    Ok(d) => out.push(Ok((m.name, d.unwrap()))),
                    Err(e) => {
                        out.push(Err(e));
                        return out;
                    }
                }
            }
            Err(e) => {
                let fatal = e.is_fatal();
                out.push(Err(e));
                if fatal {
                    return out;
                }
            }
        }
    }
}

#[test]
fn members_round_trip_and_long_names_go_through_pax() {
    let long = format!("{}/deep.jpg", "d".repeat(150));
    let bytes = archive(&[("a.jpg", b"xyz"), (&long, &[7u8; 1000]), ("a.cls", b"")]);
    assert_eq!(bytes.len() % 512, 0);
    let got: Vec<(String, Vec<u8>)> = names(bytes).into_iter().map(Result::unwrap).collect();
    assert_eq!(
        got,
        vec![
            ("a.jpg".to_string(), b"xyz".to_vec()),
            (long, vec![7u8; 1000]),
            ("a.cls".to_string(), Vec::new())
        ]
    );
}

/// A header block as GNU tar writes one (magic "ustar  ").
fn gnu_header(name: &[u8], size: u64, kind: u8) -> [u8; 512] {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name);
    h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
    h[156] = kind;
    h[257..265].copy_from_slice(b"ustar  \0");
    h[148..156].copy_from_slice(b"        ");
    let sum: u64 = h.iter().map(|&x| u64::from(x)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    h
}

fn pad(v: &mut Vec<u8>) {
    while !v.len().is_multiple_of(512) {
        v.push(0);
    }
}

#[test]
fn gnu_long_names_base256_sizes_and_folders() {
    let long = "x".repeat(300) + ".jpg";
    let mut v = gnu_header(b"././@LongLink", long.len() as u64 + 1, b'L').to_vec();
    v.extend_from_slice(long.as_bytes());
    v.push(0);
    pad(&mut v);
    v.extend_from_slice(&gnu_header(b"xxx", 5, b'0'));
    v.extend_from_slice(b"hello");
    pad(&mut v);
    v.extend_from_slice(&gnu_header(b"folder/", 0, b'5'));
    // A size in base-256 (as GNU tar writes sizes over 8 GiB).
    let mut h = gnu_header(b"big.cls", 0, b'0');
    h[124..136].copy_from_slice(&[0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3]);
    h[148..156].copy_from_slice(b"        ");
    let sum: u64 = h.iter().map(|&x| u64::from(x)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    v.extend_from_slice(&h);
    v.extend_from_slice(b"42\n");
    pad(&mut v);
    v.extend_from_slice(&[0u8; 1024]);
    let mut r = TarReader::new(Cursor::new(v));
    let m = r.next_member().unwrap().unwrap();
    assert_eq!((m.name.as_str(), m.size), (long.as_str(), 5));
    assert_eq!(r.read_data(100).unwrap().unwrap(), b"hello");
    let f = r.next_member().unwrap().unwrap();
    assert_eq!(f.kind, MemberKind::Other);
    let b = r.next_member().unwrap().unwrap();
    assert_eq!((b.name.as_str(), b.size), ("big.cls", 3));
    assert_eq!(r.read_data(100).unwrap().unwrap(), b"42\n");
    assert_eq!(r.next_member().unwrap(), None);
}

#[test]
fn a_broken_header_is_reported_by_name_and_reading_goes_on() {
    let mut bytes = archive(&[
        ("a.jpg", &[1u8; 700]),
        ("b.jpg", &[2u8; 10]),
        ("c.jpg", b"3"),
    ]);
    // b.jpg's header is the third block after a.jpg's header and two data blocks.
    bytes[3 * 512 + 130] ^= 0x04;
    let got = names(bytes);
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].as_ref().unwrap().0, "a.jpg");
    match &got[1] {
        Err(TarError::BadHeader { name, offset, why }) => {
            assert_eq!((name.as_deref(), *offset), (Some("b.jpg"), 1536));
            assert!(why.contains("checksum"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        got[2].as_ref().unwrap(),
        &("c.jpg".to_string(), b"3".to_vec())
    );
}

#[test]
fn every_truncated_prefix_ends_in_an_error_or_fewer_members_never_a_panic() {
    let bytes = archive(&[
        ("a.jpg", &[1u8; 700]),
        ("a.cls", b"1"),
        ("b.jpg", &[9u8; 300]),
    ]);
    for cut in 0..bytes.len() {
        let got = names(bytes[..cut].to_vec());
        let good = got.iter().filter(|g| g.is_ok()).count();
        assert!(good <= 3);
        // Less than the first header: no tar at all.
        if cut > 0 && cut < 512 {
            assert!(
                matches!(got.last(), Some(Err(TarError::NotTar { .. }))),
                "cut {cut}: {got:?}"
            );
        } else if cut % 512 != 0 && cut < 3 * 512 + 1024 {
            assert!(
                matches!(got.last(), Some(Err(TarError::Truncated { .. }))),
                "cut {cut}: {got:?}"
            );
        }
    }
}

#[test]
fn samples_group_by_key_with_labels_from_cls_or_json() {
    let bytes = archive(&[
        ("dir/k1.jpg", b"J1"),
        ("dir/k1.cls", b" 3\n"),
        ("dir/k1.json", br#"{"meta": {"label": 9}}"#),
        ("k2.png", b"P2"),
        ("k2.jpg", b"J2"),
        ("k2.cls", b"4"),
        ("k3.txt", b"no image"),
        ("k4.jpg", b"J4"),
        ("k4.cls", b"four"),
    ]);
    let items = |label: LabelFrom| -> Vec<Item> {
        let rules = Arc::new(SampleRules {
            extensions: vec!["jpg".into(), "png".into()],
            label,
            max_bytes: 1 << 20,
        });
        let mut it = ShardItems::new(Cursor::new(bytes.clone()), rules);
        std::iter::from_fn(|| it.next_item(true)).collect()
    };
    let by_cls = items(LabelFrom::Text("cls".into()));
    assert_eq!(by_cls.len(), 4);
    assert_eq!(
        by_cls[0],
        Item::Sample {
            member: "dir/k1.jpg".into(),
            image: b"J1".to_vec(),
            label: 3
        }
    );
    // The first extension listed wins, whatever the member order.
    assert_eq!(
        by_cls[1],
        Item::Sample {
            member: "k2.jpg".into(),
            image: b"J2".to_vec(),
            label: 4
        }
    );
    assert!(matches!(&by_cls[2], Item::Damaged { member, .. } if member == "k3"));
    assert!(
        matches!(&by_cls[3], Item::Damaged { member, kind } if member == "k4.cls" && kind.to_string().contains("not an integer"))
    );
    let by_json = items(LabelFrom::Json("meta.label".into()));
    assert!(matches!(&by_json[0], Item::Sample { label: 9, .. }));
    assert!(
        matches!(&by_json[1], Item::Damaged { kind, .. } if kind.to_string().contains("no .json member"))
    );
}

#[test]
fn names_split_and_braces_expand() {
    assert_eq!(split_name("a.b/c.d.e"), ("a.b/c", "d.e"));
    assert_eq!(
        expand_braces("x-{0..2}.tar").unwrap(),
        ["x-0.tar", "x-1.tar", "x-2.tar"]
    );
    assert!(expand_braces("x-{3..1}.tar").is_err());
    assert!(expand_braces("x-{a}.tar").is_err());
    assert!(expand_braces("x-{0..1.tar").is_err());
}

#[test]
fn replay_finds_the_buffer_a_run_had() {
    for (size, inputs, outputs) in [(1, 10, 4), (5, 20, 0), (5, 20, 7), (8, 6, 3), (4, 9, 9)] {
        let mut b = ShuffleBuffer::new(size, 3, 1, 2);
        let mut next = 0;
        for _ in 0..outputs {
            while b.wants() && next < inputs {
                b.push(next);
                next += 1;
            }
            b.draw();
        }
        assert_eq!(
            replay(size, 3, 1, 2, inputs, outputs),
            (b.items().to_vec(), next)
        );
    }
}

proptest! {
    #[test]
    fn ranks_read_equal_parts_that_cover_every_sample(
        counts in proptest::collection::vec(0usize..40, 1..12),
        world in 1usize..10,
        seed: u64,
        epoch in 0u64..4,
    ) {
        let total: usize = counts.iter().sum();
        prop_assume!(total > 0);
        let mut seen = vec![0usize; total];
        let bases: Vec<usize> = counts.iter().scan(0, |a, &c| { let b = *a; *a += c; Some(b) }).collect();
        for rank in 0..world {
            let split = RankSplit { shuffle: true, rank, world_size: world };
            let segs = split.segments(&counts, seed, epoch);
            prop_assert_eq!(segs.iter().map(|s| s.take).sum::<usize>(), total.div_ceil(world));
            for s in segs {
                prop_assert!(s.skip + s.take <= counts[s.shard]);
                for k in 0..s.take {
                    seen[bases[s.shard] + s.skip + k] += 1;
                }
            }
        }
        prop_assert!(seen.iter().all(|&n| n >= 1));
        prop_assert!(seen.iter().map(|&n| n - 1).sum::<usize>() < world);
    }
}

/// A server that sends part of a shard and then nothing, the connection left open: every
/// read gives up after the read timeout and counts as a dropped connection, so after the
/// retries the shard fails instead of holding its thread forever.
#[test]
fn a_stalled_http_body_fails_after_its_retries_never_hangs() {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::time::{Duration, Instant};

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/a.tar", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().take(10) {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n");
            let _ = stream.write_all(&[7u8; 10]);
            let _ = stream.flush();
            // Hold the connection open, silent.
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_secs(30));
                drop(stream);
            });
        }
    });
    let retry = super::http::Retry {
        attempts: 2,
        backoff: Duration::from_millis(10),
        read_timeout: Duration::from_millis(200),
    };
    let t0 = Instant::now();
    let mut shard = super::http::HttpShard::open(&url, retry).unwrap();
    let mut got = Vec::new();
    let e = shard.read_to_end(&mut got).unwrap_err();
    assert_eq!(got, [7u8; 10], "what came before the stall is delivered");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert!(e.to_string().contains("timeout"), "{e}");
}
