//! Single-thread JPEG decode speed on a folder of JPEGs: zune-jpeg vs stokehold's decoder
//! (libjpeg-turbo), full decodes and random-resized-crop windows, then decode + crop to 224
//! unfused vs fused ([`decode_and_crop`]), full and window decodes with libjpeg-turbo's own
//! entropy decoding (progressive and sequential) instead of ours, alternating rounds and printing medians (img/s,
//! and MP/s of the full image size). Times are on-CPU time of the thread (Linux schedstat),
//! which a busy shared machine disturbs less than wall time.
//!
//! `cargo run --release --example decode_speed -- /work/shared/data/imagenet-400 7`

use std::time::Instant;

use stokehold::decode::{decode, decode_window, probe, DecodeOptions, EntropyDecoder};
use stokehold::fusion::{decode_and_crop, decode_and_crop_scaled};
use stokehold::ops::random_resized_crop::{choose_window, RandomResizedCrop};
use stokehold::ops::resize::{resize_image, Interp};
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

/// Nanoseconds this thread has spent on a CPU (Linux `/proc/thread-self/schedstat`), so
/// that time waiting for a core on a shared machine is not counted; falls back to wall time.
struct Clock(Instant, Option<u64>);

fn oncpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

impl Clock {
    fn now() -> Clock {
        Clock(Instant::now(), oncpu_ns())
    }
    fn elapsed(&self) -> std::time::Duration {
        match (self.1, oncpu_ns()) {
            (Some(a), Some(b)) => std::time::Duration::from_nanos(b - a),
            _ => self.0.elapsed(),
        }
    }
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
    let (mut tu, mut tf, mut ts) = (Vec::new(), Vec::new(), Vec::new());
    let (mut tl, mut tlw) = (Vec::new(), Vec::new());
    let rrc = RandomResizedCrop {
        height: 224,
        width: 224,
        scale: (0.08, 1.0),
        ratio: (0.75, 4.0 / 3.0),
        interp: Interp::Bilinear,
        antialias: true,
        dct_downscale: false,
    };
    // The window a random resized crop draws for file `i` in round `r`.
    let rrc_window = |f: &[u8], r: usize, i: usize| {
        let info = probe(f, &opts).unwrap();
        let mut rng = SampleRng::from_key((r * 100_000 + i) as u64);
        choose_window(
            info.height,
            info.width,
            (0.08, 1.0),
            (0.75, 4.0 / 3.0),
            &mut rng,
        )
    };
    for r in 0..rounds {
        let s = Clock::now();
        let z: usize = files.iter().map(|f| zune(f)).sum();
        tz.push(s.elapsed().as_secs_f64());
        let s = Clock::now();
        let t: usize = files.iter().map(|f| decode(f, &opts).unwrap().width).sum();
        tt.push(s.elapsed().as_secs_f64());
        let s = Clock::now();
        let mut wsum = 0;
        for (i, f) in files.iter().enumerate() {
            let win = rrc_window(f, r, i);
            wsum += decode_window(f, &opts, win).unwrap().width;
        }
        tw.push(s.elapsed().as_secs_f64());
        // The same two with libjpeg-turbo's own entropy decoding (progressive and
        // sequential).
        let libjpeg = DecodeOptions {
            sequential_decoder: EntropyDecoder::Libjpeg,
            progressive_decoder: EntropyDecoder::Libjpeg,
            ..opts
        };
        let s = Clock::now();
        files.iter().for_each(|f| {
            decode(f, &libjpeg).unwrap();
        });
        tl.push(s.elapsed().as_secs_f64());
        let s = Clock::now();
        for (i, f) in files.iter().enumerate() {
            let win = rrc_window(f, r, i);
            decode_window(f, &libjpeg, win).unwrap();
        }
        tlw.push(s.elapsed().as_secs_f64());
        let s = Clock::now();
        for (i, f) in files.iter().enumerate() {
            let im = decode(f, &opts).unwrap();
            let mut rng = SampleRng::from_key(i as u64);
            let win = rrc.choose(im.height, im.width, &mut rng);
            resize_image(&im, win, 224, 224, Interp::Bilinear, true).unwrap();
        }
        tu.push(s.elapsed().as_secs_f64());
        let s = Clock::now();
        for (i, f) in files.iter().enumerate() {
            let mut rng = SampleRng::from_key(i as u64);
            decode_and_crop(f, &opts, &rrc, &mut rng).unwrap();
        }
        tf.push(s.elapsed().as_secs_f64());
        let s = Clock::now();
        for (i, f) in files.iter().enumerate() {
            let mut rng = SampleRng::from_key(i as u64);
            decode_and_crop_scaled(f, &opts, &rrc, &mut rng).unwrap();
        }
        ts.push(s.elapsed().as_secs_f64());
        println!(
            "round {r}: zune {:.3} s, turbo {:.3} s, turbo window {:.3} s, unfused {:.3} s, \
             fused {:.3} s ({z} {t} {wsum})",
            tz[r], tt[r], tw[r], tu[r], tf[r]
        );
    }
    for (name, t) in [
        ("zune-jpeg full", tz),
        ("stokehold full", tt),
        ("stokehold rrc window", tw),
        ("full, libjpeg-turbo alone", tl),
        ("window, libjpeg-turbo alone", tlw),
        ("decode + rrc 224 (unfused)", tu),
        ("decode_and_crop 224 (fused)", tf),
        ("decode_and_crop_scaled 224 (opt-in)", ts),
    ] {
        let m = median(t);
        println!(
            "{name:>36}: {:6.0} img/s  {:6.1} MP/s (median of {rounds})",
            n / m,
            mp / m
        );
    }
}
