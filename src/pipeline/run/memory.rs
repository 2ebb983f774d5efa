//! Checking, before a pipeline starts, that the batch buffers its settings imply fit in the
//! memory available, so that a batch too big for the machine is a clear error rather than an
//! aborted process.
//!
//! # The bound
//!
//! A batch buffer holds `samples` samples: the batch size, or fewer when no batch can hold
//! more (`samples = min(batch, samples per epoch)`; with `last_batch = "pad"` a batch is always
//! filled to the batch size). At most `prefetch + 4` batch buffers exist at once:
//!
//! * `prefetch` batches waiting in the queue for the consumer,
//! * 1 batch the consumer holds (the one [`Pipeline::next_batch`] returned last; a consumer
//!   that keeps more batches keeps their memory too),
//! * 1 batch the assembler is filling, or holds finished while it waits for room in the queue,
//! * 1 batch after that one, which workers may already write into (placement lets them write
//!   up to one batch past the last handed on; samples further ahead wait as sample images),
//! * 1 first batch of the next epoch, which workers may write into near an epoch's end.
//!
//! Every batch is built on its one buffer per image output (a first sample that no worker
//! placed is copied into the batch's buffer too), and dropped batches give their buffers back
//! to the pipeline's pool, which hands them out again before anything new is allocated.
//!
//! So the batches need at most
//!
//! ```text
//! needed = (prefetch + 4) × samples × bytes per sample
//! bytes per sample = Σ over fixed-size image outputs (height × width × channels × element size)
//!                  + 8 per label output + the sample's record (SampleInfo)
//! ```
//!
//! (image outputs whose size varies per sample can't be counted ahead). The pipeline refuses
//! to start when `needed` is over the memory available: Linux's `MemAvailable`, or the
//! cgroup's limit less its usage when that is lower. Where neither can be read, nothing is
//! checked; every batch buffer is still allocated fallibly, so running out of memory later
//! is an error for the consumer, never an abort.
//!
//! [`Pipeline::next_batch`]: super::Pipeline::next_batch

use crate::error::Error;
use crate::pipeline::batch::SampleInfo;
use crate::pipeline::graph::Graph;
use crate::value::ValueType;

use super::run_settings::RunSettings;

/// Batch buffers that can exist at once besides the `prefetch` queued (see the module docs).
pub(crate) const BUFFERS_BESIDES_PREFETCH: usize = 4;

/// Bytes one sample takes in a batch, over the pipeline's outputs (see the module docs).
pub(crate) fn bytes_per_sample(graph: &Graph) -> u64 {
    let outputs: u64 = graph
        .outputs
        .iter()
        .map(|&s| match graph.edge_types[s] {
            ValueType::Image(t) => match (t.size, t.channels) {
                (Some((h, w)), Some(c)) => (h as u64)
                    .saturating_mul(w as u64)
                    .saturating_mul(c as u64)
                    .saturating_mul(t.dtype.size() as u64),
                _ => 0,
            },
            ValueType::Label => 8,
            ValueType::Encoded => 0,
        })
        .fold(0, u64::saturating_add);
    outputs.saturating_add(std::mem::size_of::<SampleInfo>() as u64)
}

/// Refuses `settings` whose batch buffers (`samples` per buffer) need more than `available`
/// bytes; `None` checks nothing.
pub(crate) fn check(
    graph: &Graph,
    settings: &RunSettings,
    samples: usize,
    available: Option<u64>,
) -> Result<(), Error> {
    let Some(available) = available else {
        return Ok(());
    };
    let prefetch = settings.prefetch;
    let buffers = prefetch.saturating_add(BUFFERS_BESIDES_PREFETCH);
    let per_sample = bytes_per_sample(graph);
    let per_buffer = per_sample.saturating_mul(buffers as u64);
    let needed = per_buffer.saturating_mul(samples as u64);
    if needed <= available {
        return Ok(());
    }
    let fits = available / per_buffer.max(1);
    let help = if fits == 0 {
        format!(
            "not even one sample per batch fits: lower prefetch (now {prefetch}) or the size of \
             the image outputs"
        )
    } else {
        format!(
            "lower batch to {fits} or less (now {}), or prefetch (now {prefetch}), or the size of \
             the image outputs",
            settings.batch
        )
    };
    Err(Error::BatchMemory {
        needed,
        available,
        samples,
        per_sample,
        buffers,
        help,
    })
}

/// On the GPU path: refuses settings whose output batches alone (`prefetch + 2` of them:
/// queued, held by the consumer, being written; see `gpu_stage` for the whole bound) need
/// more than the device's `total` memory (0: unknown, nothing checked).
pub(crate) fn check_device(
    graph: &Graph,
    settings: &RunSettings,
    plan: &super::gpu_plan::GpuPlan,
    samples: usize,
    total: usize,
) -> Result<(), Error> {
    let out = graph.outputs[plan.image_output];
    let per_sample = match graph.edge_types[out] {
        ValueType::Image(t) => match (t.size, t.channels) {
            (Some((h, w)), Some(c)) => (h * w * c * t.dtype.size()) as u64,
            _ => 0,
        },
        _ => 0,
    };
    let batches = settings.prefetch as u64 + 2;
    let needed = per_sample
        .saturating_mul(samples as u64)
        .saturating_mul(batches);
    if total == 0 || needed <= total as u64 {
        return Ok(());
    }
    Err(Error::DeviceOutOfMemory {
        what: format!(
            "{batches} output batches (prefetch + 2) of {samples} samples of {per_sample} bytes \
             each (batch = {})",
            settings.batch
        ),
        bytes: needed,
        detail: format!("the device has {total} bytes: lower batch or prefetch"),
    })
}

/// Bytes of memory this process can still have: `MemAvailable`, or the cgroup's limit less
/// its usage when lower; `None` where neither is known (not Linux).
pub(crate) fn available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let system = meminfo.as_deref().and_then(mem_available);
    match (system, cgroup_room()) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb.saturating_mul(1024))
}

/// The room left under this process's cgroup memory limit (v2: `memory.max` less
/// `memory.current`; v1: `memory.limit_in_bytes` less `memory.usage_in_bytes`), if limited.
fn cgroup_room() -> Option<u64> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let read =
        |path: String| -> Option<u64> { std::fs::read_to_string(path).ok()?.trim().parse().ok() };
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let (limit, usage) = if controllers.is_empty() {
            // v2 ("max" parses as no number: no limit).
            let dirs = [
                format!("/sys/fs/cgroup{path}"),
                "/sys/fs/cgroup".to_string(),
            ];
            let found = dirs.iter().find_map(|d| {
                Some((
                    read(format!("{d}/memory.max"))?,
                    read(format!("{d}/memory.current")).unwrap_or(0),
                ))
            });
            match found {
                Some(f) => f,
                None => continue,
            }
        } else if controllers.split(',').any(|c| c == "memory") {
            let dirs = [
                format!("/sys/fs/cgroup/memory{path}"),
                "/sys/fs/cgroup/memory".to_string(),
            ];
            let found = dirs.iter().find_map(|d| {
                Some((
                    read(format!("{d}/memory.limit_in_bytes"))?,
                    read(format!("{d}/memory.usage_in_bytes")).unwrap_or(0),
                ))
            });
            match found {
                Some(f) => f,
                None => continue,
            }
        } else {
            continue;
        };
        // v1 reports "no limit" as a huge number near i64::MAX.
        if limit < (1u64 << 60) {
            return Some(limit.saturating_sub(usage));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_is_read_in_bytes() {
        let text = "MemTotal:       24684084 kB\nMemFree:        24318620 kB\nMemAvailable:   24277976 kB\n";
        assert_eq!(mem_available(text), Some(24_277_976 * 1024));
        assert_eq!(mem_available("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn this_machine_says_how_much_memory_is_left() {
        if cfg!(target_os = "linux") {
            let a = available().expect("Linux has /proc/meminfo");
            assert!(a > 0);
        }
    }
}
