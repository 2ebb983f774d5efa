//! The split's arithmetic: the balance of the two decoders, how it follows the engines as
//! they slow, its ceiling and budget, the picks, and the modelled limit.

use super::*;

#[test]
fn the_share_balances_the_two_decoders() {
    let s = DecoderSplit::new(16, 32, 256);
    // The H100's figures: 53 µs per engine image, 30 µs to prepare, 1.25 ms to decode.
    s.prepared.store(1000, Ordering::Relaxed);
    s.prepare_ns.store(30_000_000, Ordering::Relaxed);
    s.cpu_images.store(100, Ordering::Relaxed);
    s.cpu_ns.store(125_000_000, Ordering::Relaxed);
    let call = Duration::from_micros(53 * ADAPT_EVERY);
    s.submitted(ADAPT_EVERY as usize, 0, (call, call));
    let share = s.cpu_share();
    assert!((share - 0.39).abs() < 0.01, "{share}");
    // Both finish together: W / (p + s·d) = 1 / ((1 − s)·e).
    let (w, p, d, e) = (16.0, 30.0, 1250.0, 53.0);
    let cpu = w / (p + share * d);
    let engines = 1.0 / ((1.0 - share) * e);
    assert!((cpu / engines - 1.0).abs() < 0.02, "{cpu} {engines}");
    // Fast engines, few workers: nothing for the CPU.
    let t = DecoderSplit::new(1, 32, 256);
    t.prepared.store(10, Ordering::Relaxed);
    t.prepare_ns.store(1_000_000, Ordering::Relaxed);
    let call = Duration::from_micros(ADAPT_EVERY);
    t.submitted(ADAPT_EVERY as usize, 0, (call, call));
    assert_eq!(t.cpu_share(), 0.0);
}

#[test]
fn the_modelled_limit_is_the_timed_spans_not_the_warm_ups() {
    let model = crate::cuda::TimingModel::named("h100").unwrap();
    let s = DecoderSplit::new(2, 2, 256);
    let count = |prepared: u64, prepare_ms: u64, cpu: u64, cpu_ms: u64, engine: u64| {
        s.prepared.fetch_add(prepared, Ordering::Relaxed);
        s.prepare_ns
            .fetch_add(prepare_ms * 1_000_000, Ordering::Relaxed);
        s.cpu_images.fetch_add(cpu, Ordering::Relaxed);
        s.cpu_ns.fetch_add(cpu_ms * 1_000_000, Ordering::Relaxed);
        s.engine_images.fetch_add(engine, Ordering::Relaxed);
        s.engine_kpx.fetch_add(engine * 200, Ordering::Relaxed);
    };
    // A warm-up where the CPU decoded half of 1,000 images at 1.25 ms each...
    count(1000, 30, 500, 625, 500);
    let warm = s.modelled_counts(model, 256);
    // ...then 2,000 images all to the engines, 30 µs each to prepare.
    count(2000, 60, 0, 0, 2000);
    let now = s.modelled_counts(model, 256);
    let timed = now.limit_since(Some(&warm)).unwrap();
    // Over the timed span: the device's limit for 0.2 MP images, or 2 workers at 30 µs.
    let expected = model.device_limit(0.2, 256, 4.0).min(2.0 * 1e6 / 30.0);
    assert!((timed / expected - 1.0).abs() < 1e-9, "{timed} {expected}");
    // Since the start, the warm-up's CPU decodes bind the workers: 3,000 samples in
    // 715 ms of two workers' time.
    let whole = now.limit_since(None).unwrap();
    let workers_whole = 2.0 * 3000.0 / 0.715;
    assert!(
        (whole / workers_whole - 1.0).abs() < 1e-9,
        "{whole} {workers_whole}"
    );
    assert!(whole < timed / 2.0, "{whole} {timed}");
    // Nothing to the engines in the span: no limit.
    assert_eq!(now.limit_since(Some(&now)), None);
}

/// One estimate's window: 1,000 samples prepared at `prepare_us` each, a tenth of them
/// decoded on the CPU at 1.25 ms, and engine images at `engine_us` until an estimate is
/// due. Returns the share.
fn window(s: &DecoderSplit, prepare_us: u64, engine_us: u64) -> f64 {
    window_on_core(s, prepare_us, engine_us, 1.0)
}

/// [`window`], the feeding thread on a core for `on_core` of its call.
fn window_on_core(s: &DecoderSplit, prepare_us: u64, engine_us: u64, on_core: f64) -> f64 {
    let engine = engine_us as f64;
    window_of(s, prepare_us, (100, 1250), (engine, engine * on_core))
}

/// One estimate's window: 1,000 samples prepared at `prepare_us` each, `decodes` of
/// them decoded on the CPU at `decode_us`, and engine images at `engine` µs of the
/// feeding thread's wall and CPU time each until an estimate is due. Returns the share.
fn window_of(
    s: &DecoderSplit,
    prepare_us: u64,
    (decodes, decode_us): (u64, u64),
    engine: (f64, f64),
) -> f64 {
    let n = 1000;
    s.prepared.fetch_add(n, Ordering::Relaxed);
    s.prepare_ns
        .fetch_add(n * prepare_us * 1000, Ordering::Relaxed);
    s.cpu_images.fetch_add(decodes, Ordering::Relaxed);
    s.cpu_ns
        .fetch_add(decodes * decode_us * 1000, Ordering::Relaxed);
    // Enough engine images to make the next estimate due.
    let due = s.next_estimate.load(Ordering::Relaxed);
    let k = due
        .saturating_sub(s.engine_images.load(Ordering::Relaxed))
        .max(1);
    let us = |per: f64| Duration::from_secs_f64(per * k as f64 / 1e6);
    s.submitted(k as usize, 0, (us(engine.0), us(engine.1)));
    s.cpu_share()
}

#[test]
fn the_share_follows_the_engines_when_they_slow_down() {
    // 4 workers; the engines' call at 55 µs (alone), then 250 µs (beside a training
    // loop): the H200's figures.
    let s = DecoderSplit::new(4, 32, 256);
    let balanced = |e: f64| (4.0 * e - 30.0) / (4.0 * e + 1250.0);
    let mut share = 0.0;
    for _ in 0..8 {
        share = window(&s, 30, 55);
    }
    assert!((share - balanced(55.0)).abs() < 0.01, "{share}");
    let before = share;
    for _ in 0..6 {
        share = window(&s, 30, 250);
    }
    // Within 2% of the balance at the new speed after six windows, whatever the run's
    // average (which would still be at 55 µs for most of its images).
    assert!((share - balanced(250.0)).abs() < 0.02, "{before} {share}");
}

#[test]
fn a_split_the_engines_take_too_little_for_does_not_hold_up_the_warm_up() {
    // Nothing for the engines (no engines, or photos they don't take): nothing to settle.
    let s = DecoderSplit::new(4, 32, 256);
    s.prepared.store(1000, Ordering::Relaxed);
    assert!(!s.settled() && s.settled_or_idle());
    // One in 16 of the samples theirs: the warm-up waits for two estimates, however few
    // images that is so far (small batches), then not.
    let call = Duration::from_micros(55 * ADAPT_EVERY / 4);
    s.submitted((ADAPT_EVERY / 4) as usize, 0, (call, call));
    assert!(!s.settled() && !s.settled_or_idle());
    s.submitted((ADAPT_EVERY / 4) as usize, 0, (call, call));
    assert!(s.settled() && s.settled_or_idle());
    // Fewer than one in 16: idle.
    let few = DecoderSplit::new(4, 32, 256);
    few.prepared.store(1100, Ordering::Relaxed);
    few.submitted(68, 0, (call, call));
    assert!(!few.settled() && few.settled_or_idle());
}

#[test]
fn after_the_hold_the_share_rises_to_its_headroom_and_no_higher() {
    let s = DecoderSplit::new(4, 32, 256);
    for _ in 0..8 {
        window(&s, 30, 55);
    }
    assert!(s.settled());
    let most = s.cpu_share();
    s.decoded_pixels(256 * 1000, 256);
    s.hold();
    // Engines 20 times slower: the balance is far above the most the warm-up saw; the
    // share rises to the balance at SLOWDOWN times the warm-up's engines (above twice
    // the most and a quarter more here), not beyond, and says its estimates were capped.
    let balanced = |e: f64| (4.0 * e - 30.0) / (4.0 * e + 1250.0);
    for _ in 0..10 {
        window(&s, 30, 1100);
    }
    let (ceiling, capped, _) = s.ceiling();
    let ceiling = ceiling.expect("held");
    assert!(
        (s.cpu_share() - ceiling).abs() < 1e-6,
        "{most} {}",
        s.cpu_share()
    );
    assert!(
        (ceiling - balanced(55.0 * SLOWDOWN)).abs() < 1e-3,
        "{most} {ceiling}"
    );
    assert!(ceiling > most + 0.25, "{most} {ceiling}");
    assert!(capped >= 9, "{capped}");
    // Lower still follows the measurements.
    for _ in 0..10 {
        window(&s, 30, 40);
    }
    assert!(s.cpu_share() < most, "{most} {}", s.cpu_share());
}

#[test]
fn workers_count_only_where_the_cores_have_room_beside_the_feeding_thread() {
    // 2 workers on 3 cores (one the consumer's), the engines' call at 250 µs: spinning,
    // it takes a core (one worker is left); waiting (a fifth of it on a core), 1.8
    // workers are. On 2 cores, spinning, none: the CPU takes no share.
    let balanced = |w: f64| (w * 250.0 - 30.0) / (w * 250.0 + 1250.0);
    let spinning = DecoderSplit::new(2, 3, 256);
    let waiting = DecoderSplit::new(2, 3, 256);
    let full = DecoderSplit::new(2, 2, 256);
    let roomy = DecoderSplit::new(2, 16, 256);
    // One core (a cgroup's limit): none either, however slow the engines.
    let one = DecoderSplit::new(4, 1, 256);
    let (mut a, mut b, mut c, mut d, mut e) = (0.0, 0.0, 0.0, 1.0, 1.0);
    for _ in 0..4 {
        a = window_on_core(&spinning, 30, 250, 1.0);
        b = window_on_core(&waiting, 30, 250, 0.2);
        c = window_on_core(&roomy, 30, 250, 1.0);
        d = window_on_core(&full, 30, 250, 1.0);
        e = window_on_core(&one, 30, 2000, 1.0);
    }
    assert_eq!((d, e), (0.0, 0.0));
    assert!((a - balanced(1.0)).abs() < 0.01, "{a}");
    assert!((b - balanced(1.8)).abs() < 0.01, "{b}");
    assert!((c - balanced(2.0)).abs() < 0.01, "{c}");
}

#[test]
fn a_guess_of_the_cpus_decode_time_does_not_raise_the_headroom() {
    // The first estimate guesses the CPU's decode time (20 times a sample's prepare: a
    // share of 0.23 here); only measured estimates count towards the headroom.
    let s = DecoderSplit::new(4, 32, 256);
    s.prepared.store(1000, Ordering::Relaxed);
    s.prepare_ns.store(30_000_000, Ordering::Relaxed);
    let call = Duration::from_micros(55 * ADAPT_EVERY / 4);
    s.submitted((ADAPT_EVERY / 4) as usize, 0, (call, call));
    assert!(s.cpu_share() > 0.2, "{}", s.cpu_share());
    assert_eq!(s.most_ppm.load(Ordering::Relaxed), 0);
    // Measured (1.25 ms a decode): 0.13, and that is the most.
    let measured = window(&s, 30, 55);
    assert!((measured - 0.13).abs() < 0.01, "{measured}");
    assert_eq!(s.most_ppm.load(Ordering::Relaxed), (measured * 1e6) as u32);
}

#[test]
fn the_budget_leaves_room_for_the_headroom_within_its_cap_and_not_for_a_fixed_share() {
    // A warm-up that reached 10% of a batch of 100 images of 10 kB: 100 kB a batch. The
    // headroom, 35%, at a quarter more: 437,500 bytes.
    let s = DecoderSplit::new(4, 32, 100);
    s.most_ppm.store(100_000, Ordering::Relaxed);
    s.carried(100_000, 10, 0);
    s.decoded_pixels(900_000, 90);
    let b = s.hold();
    assert_eq!(
        b,
        Budget {
            per_batch: 437_500,
            above_warm_up: 337_500,
            forced: 0,
            carried: 100_000
        }
    );
    assert_eq!(s.ceiling_ppm.load(Ordering::Relaxed), 350_000);
    // Large images: the headroom's bytes are capped, never below what a batch carried.
    let big = DecoderSplit::new(4, 32, 256);
    big.most_ppm.store(400_000, Ordering::Relaxed);
    big.carried(300 << 20, 100, 0);
    big.decoded_pixels(256 * (3 << 20), 256);
    assert_eq!(big.hold().per_batch, 300 << 20);
    let capped = DecoderSplit::new(4, 32, 256);
    capped.most_ppm.store(200_000, Ordering::Relaxed);
    capped.carried(100 << 20, 50, 0);
    capped.decoded_pixels(256 * (3 << 20), 256);
    assert_eq!(capped.hold().per_batch, MAX_BUDGET_BYTES);
    // A fixed share keeps what the warm-up carried, and its ceiling.
    let fixed = DecoderSplit::with_share(4, 32, 100, Some(0.1));
    fixed.carried(100_000, 10, 0);
    fixed.decoded_pixels(900_000, 90);
    assert_eq!(
        fixed.hold(),
        Budget {
            per_batch: 100_000,
            above_warm_up: 0,
            forced: 0,
            carried: 100_000
        }
    );
    assert_eq!(fixed.ceiling_ppm.load(Ordering::Relaxed), 100_000);
}

#[test]
fn the_budget_counts_the_images_the_engines_cannot_take_once() {
    // A batch of 100 carried 600 kB from the CPU: 500 kB the engines can't take, 100 kB
    // the split sent; half the samples were the engines' (450) or the split's (50).
    let s = DecoderSplit::new(4, 32, 200);
    s.most_ppm.store(100_000, Ordering::Relaxed);
    s.carried(600_000, 60, 500_000);
    s.decoded_pixels(1_000_000, 200);
    s.prepared.store(1000, Ordering::Relaxed);
    s.engine_images.store(450, Ordering::Relaxed);
    s.cpu_images.store(50, Ordering::Relaxed);
    // The headroom of a batch of 200 at the mean image's size (the 260 counted), a
    // quarter more, of the split's; the forced bytes come on top, once.
    let b = s.hold();
    let ceiling = f64::from(s.ceiling_ppm.load(Ordering::Relaxed)) / 1e6;
    let room = (ceiling * 200.0 * (1_600_000.0 / 260.0) * 1.25) as usize;
    assert_eq!(
        b,
        Budget {
            per_batch: room,
            above_warm_up: room - 100_000,
            forced: 500_000,
            carried: 600_000
        }
    );
    assert_eq!(b.rise(), room + room / 4 + 500_000 - 600_000);
    // A device without engines: nothing of the split's, and no room to rise into.
    let idle = DecoderSplit::new(4, 32, 100);
    idle.carried(600_000, 60, 600_000);
    idle.decoded_pixels(1_000_000, 100);
    idle.prepared(Duration::from_micros(30));
    let b = idle.hold();
    assert_eq!((b.per_batch, b.forced, b.rise()), (0, 600_000, 0));
}

#[test]
fn the_headroom_is_twice_the_share_a_quarter_more_or_the_slowed_balance() {
    assert_eq!(headroom(0, 0), 250_000);
    assert_eq!(headroom(100_000, 0), 350_000);
    assert_eq!(headroom(400_000, 0), 800_000);
    assert_eq!(headroom(600_000, 0), 900_000);
    assert_eq!(headroom(950_000, 0), 950_000);
    assert_eq!(headroom(4_000, 370_000), 370_000);
    assert_eq!(headroom(100_000, 990_000), 900_000);
}

#[test]
fn a_warm_up_with_idle_sms_leaves_room_for_a_training_loop_beside_the_engines() {
    // The H200 beside ResNet-50 (2026-11-27): 4 workers, ~200 µs to prepare a sample,
    // 1.6 ms to decode one; the engines' call 55 µs during the warm-up (share ~0.01),
    // then 246 µs a call's image (the wait not on a core). The balance then is ~0.30;
    // the old headroom (a quarter more) held the share at 0.25 and the loop at 93%.
    let s = DecoderSplit::new(4, 16, 256);
    let feed = |s: &DecoderSplit, wall_us: f64| window_of(s, 200, (10, 1600), (wall_us, 55.0));
    for _ in 0..8 {
        feed(&s, 55.0);
    }
    let warm = s.cpu_share();
    assert!(warm < 0.05, "{warm}");
    s.decoded_pixels(256 * 300_000, 256);
    s.hold();
    let mut share = 0.0;
    for _ in 0..10 {
        share = feed(&s, 246.0);
    }
    let balanced = (4.0 * 246.0 - 200.0) / (4.0 * 246.0 + 1600.0);
    assert!((share - balanced).abs() < 0.01, "{warm} {share} {balanced}");
    assert_eq!(s.ceiling().1, 0, "the ceiling did not bind");
    // Then the engines give the feeding thread the rate the loop needs (4.7k img/s).
    assert!(1e6 / ((1.0 - share) * 246.0) > 4700.0, "{share}");
}

#[test]
fn after_the_hold_a_batch_decodes_on_the_cpu_no_more_bytes_than_its_budget() {
    let s = DecoderSplit::new(4, 32, 10);
    s.cpu_ppm.store(1_000_000, Ordering::Relaxed);
    // Before the hold: no budget.
    assert!((0..10).all(|i| s.to_cpu(7, (0, i, i), 1000)));
    s.carried(2500, 3, 0);
    s.carried(1500, 2, 0);
    // The headroom of a share of 0 is 0.25 of a batch of 10 images of 800 bytes, a
    // quarter more: 2,500 bytes, as much as the most a batch carried.
    assert_eq!(
        s.hold(),
        Budget {
            per_batch: 2500,
            above_warm_up: 0,
            forced: 0,
            carried: 2500
        }
    );
    // The hold brought the share down to its ceiling; every sample to the CPU again, to
    // see the bytes' budget alone.
    assert_eq!(s.cpu_ppm.load(Ordering::Relaxed), 250_000);
    s.cpu_ppm.store(1_000_000, Ordering::Relaxed);
    // Batch 0 of epoch 1 (positions 0..10): two samples of 1000 fit, a third does not;
    // a smaller one still does.
    let picks: Vec<bool> = (0..4).map(|i| s.to_cpu(7, (1, i, i), 1000)).collect();
    assert_eq!(picks, [true, true, false, false]);
    assert!(s.to_cpu(7, (1, 4, 4), 500));
    // The next batch has a budget of its own; a batch a ring's length behind has none.
    assert!(s.to_cpu(7, (1, 10, 10), 2500));
    let far = 10 * (BUDGET_BATCHES + 1);
    assert!(s.to_cpu(7, (1, far, far), 100));
    assert!(!s.to_cpu(7, (1, 15, 15), 100));
    // Each sample the share picked and the budget sent to the engines is counted.
    assert_eq!(s.ceiling().2, 3);
}

#[test]
fn which_sample_goes_where_depends_on_the_sample_alone() {
    let s = DecoderSplit::new(4, 32, 256);
    s.cpu_ppm.store(300_000, Ordering::Relaxed);
    let picks: Vec<bool> = (0..1000).map(|i| s.to_cpu(7, (1, i, i), 100)).collect();
    let again: Vec<bool> = (0..1000).map(|i| s.to_cpu(7, (1, i, i), 100)).collect();
    assert_eq!(picks, again);
    let n = picks.iter().filter(|&&b| b).count();
    assert!((250..350).contains(&n), "{n} of 1000 at a share of 0.3");
}
