//! The `--stats` report: per-stage times, queue depth, consumer wait, per-epoch summaries,
//! the JPEG decoder's SIMD and peak memory.

use std::io;
use std::time::Duration;

use crate::pipeline::StatsSnapshot;

use super::output::outln;

/// Prints `st` for a run of `secs` wall seconds.
pub fn print(st: &StatsSnapshot, secs: f64) -> io::Result<()> {
    let pct = |d: Duration| 100.0 * d.as_secs_f64() / secs.max(1e-9);
    outln!("stage times (summed over threads; % of wall time):")?;
    // The CPU path's operator stages; on the GPU path they run only the samples its chain
    // can't take, and a stage that ran none is left out.
    let gpu_path = st
        .gpu
        .as_ref()
        .is_some_and(|g| !g.pinned_only && !g.uploads_only);
    let ops: Vec<_> = st
        .ops
        .iter()
        .filter(|(_, d)| !gpu_path || !d.is_zero())
        .collect();
    let w = ops.iter().map(|(n, _)| n.len()).fold(9, usize::max);
    outln!(
        "  {:<w$} {:>9.3} s  {:>6.1}%  ({:.1} MB)",
        "read",
        st.read.as_secs_f64(),
        pct(st.read),
        st.read_bytes as f64 / 1e6
    )?;
    for (name, d) in ops {
        outln!("  {name:<w$} {:>9.3} s  {:>6.1}%", d.as_secs_f64(), pct(*d))?;
    }
    outln!(
        "  {:<w$} {:>9.3} s  {:>6.1}%  ({} of {} images written in place by the workers)",
        "assemble",
        st.assemble.as_secs_f64(),
        pct(st.assemble),
        st.in_place,
        st.batch_images
    )?;
    outln!(
        "  consumer waited {:.3} s ({:.1}% of the run)",
        st.consumer_wait.as_secs_f64(),
        pct(st.consumer_wait)
    )?;
    outln!(
        "  batches={} dropped={} padded={} replaced={}; {:.2} batches ready on average when asked",
        st.batches,
        st.dropped,
        st.padded,
        st.replaced,
        st.mean_queue_depth
    )?;
    // Epochs alike in a row share a line.
    let counts =
        |e: &crate::pipeline::EpochSummary| (e.images, e.batches, e.skipped, e.replaced, e.dropped);
    let mut k = 0;
    while k < st.epochs.len() {
        let e = &st.epochs[k];
        let alike = st.epochs[k..]
            .iter()
            .take_while(|o| counts(o) == counts(e))
            .count();
        let (epochs, each) = match alike {
            1 => (format!("epoch {}", e.epoch), ""),
            n => (
                format!("epochs {}–{}", e.epoch, st.epochs[k + n - 1].epoch),
                " each",
            ),
        };
        outln!(
            "  {epochs}: {} images in {} {}{each}, {} skipped, {} replaced, {} dropped",
            e.images,
            e.batches,
            if e.batches == 1 { "batch" } else { "batches" },
            e.skipped,
            e.replaced,
            e.dropped
        )?;
        k += alike;
    }
    if let Some(g) = &st.gpu {
        // The CPU path's uploads and pinned batches (`batch_memory`) decode nothing and run
        // no kernels.
        if g.pinned_only {
            outln!("batches pinned by the CPU path: {}", g.device)?;
        } else if g.uploads_only {
            outln!("batches uploaded by the CPU path: {}", g.device)?;
        } else {
            outln!("GPU path on {}:", g.device)?;
            outln!(
                "  prepare (host) {:>9.3} s  decode (device) {:.3} s  kernels (device) {:.3} s",
                g.prepare.as_secs_f64(),
                g.decode.as_secs_f64(),
                g.kernels.as_secs_f64()
            )?;
        }
        outln!(
            "  device memory {:.1} MB now, {:.1} MB at most; pinned {:.1} MB now, {:.1} MB at most",
            g.memory.device as f64 / 1e6,
            g.memory.device_peak as f64 / 1e6,
            g.memory.pinned as f64 / 1e6,
            g.memory.pinned_peak as f64 / 1e6
        )?;
        if !g.uploads_only {
            for (source, n) in &g.sources {
                outln!("  {n:>8} decoded by {source}")?;
            }
            let d = &g.decoders;
            let rate = |n: u64, t: std::time::Duration| {
                if t.is_zero() {
                    "-".to_string()
                } else {
                    format!("{:.0} img/s", n as f64 / t.as_secs_f64())
                }
            };
            if g.workers_parked > 0 {
                outln!(
                    "  workers: {} running, {} parked (they run where the JPEG engines take almost none of the photos)",
                    g.workers_running,
                    g.workers_parked
                )?;
            }
            outln!(
            "  decoders: JPEG engines {} images, {} of the feeding thread's time ({:.3} s busy); \
             CPU (the split's share, now {:.0}%{}) {} images, {} per worker thread ({:.3} s busy)",
            d.engine_images,
            rate(d.engine_images, d.engine_busy),
            d.engine_busy.as_secs_f64(),
            100.0 * d.cpu_share,
            ceiling(d),
            d.cpu_images,
            rate(d.cpu_images, d.cpu_busy),
            d.cpu_busy.as_secs_f64()
        )?;
            if let Some(f) = d.engine_feed.filter(|f| f.calls > 0) {
                let per_image =
                    |t: std::time::Duration| t.as_secs_f64() * 1e6 / f.engine_images.max(1) as f64;
                outln!(
                    "  feeding thread in the decoder: {} calls; waiting for a staging slot {:.3} s, \
                     copying {:.3} s ({} images read in place from the workers' copies), support \
                     checks {:.3} s ({:.1} µs an image), the engines' call {:.3} s ({:.1} µs an \
                     image), one by one {:.3} s",
                    f.calls,
                    f.slot_wait.as_secs_f64(),
                    f.staging.as_secs_f64(),
                    f.pinned_images,
                    f.checks.as_secs_f64(),
                    per_image(f.checks),
                    f.engines_call.as_secs_f64(),
                    per_image(f.engines_call),
                    f.decoupled.as_secs_f64()
                )?;
            }
            outln!(
                "  batches in flight: max {}; host waits for a decode area: {}; past the settled sizes, groups decoded in parts {} and batches' chroma rebuilt in parts {}; images decoded on the CPU uploaded from their worker's pinned copy: {} of {}",
                g.batches_in_flight,
                g.decode_area_waits,
                g.decode_groups_split,
                g.chroma_rebuilt_in_parts,
                g.host_images_pinned_by_workers,
                g.sources
                    .iter()
                    .filter(|(k, _)| k.starts_with("cpu-decoder:"))
                    .map(|(_, n)| n)
                    .sum::<u64>()
            )?;
        }
        let c = &g.counters;
        match &g.after_warm_up {
            Some(w) => outln!(
                "  allocations after warm-up: {} ({} device, {} device frees, {} pinned, {} events created; since the start: {} device, {} pinned, {} events)",
                w.total(),
                w.device_allocs,
                w.device_frees,
                w.pinned_allocs + w.pinned_frees,
                w.events_created,
                c.device_allocs,
                c.pinned_allocs,
                c.events_created
            )?,
            None => outln!(
                "  allocations after warm-up: not known yet, the warm-up (the first epoch, at least 16 batches, the decoders' split settled) goes on; {} device, {} pinned, {} events so far",
                c.device_allocs,
                c.pinned_allocs,
                c.events_created
            )?,
        }
    }
    let simd = crate::decode::jpeg_simd();
    match crate::decode::jpeg_simd_warning() {
        None => outln!("  JPEG decoder SIMD: {simd}")?,
        Some(w) => outln!("  JPEG decoder SIMD: {simd} ({w})")?,
    }
    if let Some(peak) = peak_rss_bytes() {
        outln!("  peak resident memory {:.1} MB", peak as f64 / 1e6)?;
    }
    Ok(())
}

/// The split's ceiling since the warm-up, as `, at most N%` (with how many estimates it
/// lowered and how many samples the CPU's byte budget sent to the engines), or nothing
/// before the warm-up ended.
fn ceiling(d: &crate::pipeline::DecoderStats) -> String {
    let Some(c) = d.cpu_share_ceiling else {
        return String::new();
    };
    let mut held = Vec::new();
    if d.estimates_capped > 0 {
        let n = d.estimates_capped;
        held.push(format!(
            "{n} estimate{} wanted more",
            if n == 1 { "" } else { "s" }
        ));
    }
    if d.over_budget > 0 {
        held.push(format!(
            "{} over the byte budget to the engines",
            d.over_budget
        ));
    }
    if held.is_empty() {
        format!(", at most {:.0}%", 100.0 * c)
    } else {
        format!(", at most {:.0}%: {}", 100.0 * c, held.join(", "))
    }
}

/// Peak resident set size of this process (Linux: VmHWM), if known.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
