//! Single-thread JPEG decode speed on a folder of JPEGs: zune-jpeg vs stokehold's decoder
//! (libjpeg-turbo), full decodes and random-resized-crop windows, alternating rounds and
//! printing medians (img/s and MP/s of the full image size).
//!
//! `cargo run --release --example decode_speed -- /work/shared/data/imagenet-400 7`

use std::time::Instant;

use stokehold::decode::{decode, decode_window, probe, DecodeOptions};
use stokehold::ops::random_resized_crop::choose_window;
use stokehold::rng::SampleRng;
use zune_core::bytestream::ZCursor;
use zune_core::colorspace::ColorSpace;
use zune_core::options::DecoderOptions;
use zune_jpeg::JpegDecoder;

fn zune(bytes: &[u8]) -> usize {
    let opts = DecoderOptions::default()
        .set_strict_mode(false)
        .jpeg_set_out_colorspace(ColorSpace::RGB);
    let mut d = JpegDecoder::new_with_options(ZCursor::new(bytes), opts);
    d.decode().map(|v| v.len()).unwrap_or(0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .unwrap_or_else(|| "/work/shared/data/imagenet-400".into());
    let rounds: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    let mut files: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .expect("folder of JPEGs")
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    files.retain(|f| decode(f, &DecodeOptions::default()).is_ok());
    let opts = DecodeOptions::default();
    let mp: f64 = files
        .iter()
        .map(|f| {
            let i = probe(f, &opts).unwrap();
            (i.width * i.height) as f64 / 1e6
        })
        .sum();
    let n = files.len() as f64;
    println!("{} files, {:.1} MP", files.len(), mp);
    let (mut tz, mut tt, mut tw) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..rounds {
        let s = Instant::now();
        let z: usize = files.iter().map(|f| zune(f)).sum();
        tz.push(s.elapsed().as_secs_f64());
        let s = Instant::now();
        let t: usize = files.iter().map(|f| decode(f, &opts).unwrap().width).sum();
        tt.push(s.elapsed().as_secs_f64());
        let s = Instant::now();
        let mut wsum = 0;
        for (i, f) in files.iter().enumerate() {
            let info = probe(f, &opts).unwrap();
            let mut rng = SampleRng::from_key((r * 100_000 + i) as u64);
            let win = choose_window(
                info.height,
                info.width,
                (0.08, 1.0),
                (0.75, 4.0 / 3.0),
                &mut rng,
            );
            wsum += decode_window(f, &opts, win).unwrap().width;
        }
        tw.push(s.elapsed().as_secs_f64());
        println!(
            "round {r}: zune {:.3} s, libjpeg-turbo {:.3} s, turbo rrc window {:.3} s ({z} {t} {wsum})",
            tz[r], tt[r], tw[r]
        );
    }
    for (name, t) in [
        ("zune-jpeg full", tz),
        ("libjpeg-turbo full", tt),
        ("libjpeg-turbo rrc window", tw),
    ] {
        let m = median(t);
        println!(
            "{name:>26}: {:6.0} img/s  {:6.1} MP/s (median of {rounds})",
            n / m,
            mp / m
        );
    }
}
