//! What the pipeline's threads cost the process: CPU time and wake-ups per thread, read from
//! `/proc/self/task` (Linux). A pipeline's threads are named `stokehold-…` (readers, workers,
//! the assembler, the GPU path's threads), so they can be told from the consumer's.
//!
//! The CPU path's workers and readers run below the consumer's priority
//! ([`WORKER_NICE`]).
//!
//! A wake-up is a voluntary context switch: the thread blocked (on a channel, a lock, a
//! condition variable, a sleep or I/O) and was later made to run again. A thread parked until
//! there is work adds none; a thread that polls adds one per poll; a thread that spins adds
//! none but burns CPU time. Counting both tells the three apart.
//!
//! ```
//! use stokehold::pipeline::run::threads;
//! let before = threads::pipeline_threads();
//! // ... run something ...
//! let used = threads::pipeline_threads().since(&before);
//! println!("{} threads, {:?} CPU, {} wake-ups", used.threads, used.cpu, used.wakeups);
//! ```

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The name every pipeline thread's name starts with.
pub const THREAD_PREFIX: &str = "stokehold-";

/// What a pipeline thread does, from its name as the kernel keeps it (15 bytes:
/// `stokehold-worke` for `stokehold-worker-3`): `"worker"`, `"reader"`, `"assembler"`, …;
/// the name without its prefix where it is none of those.
///
/// ```
/// use stokehold::pipeline::run::threads::role_of;
/// assert_eq!(role_of("stokehold-worke"), "worker");
/// assert_eq!(role_of("stokehold-feed"), "feeding thread");
/// ```
pub fn role_of(name: &str) -> &str {
    const ROLES: &[(&str, &str)] = &[
        ("worke", "worker"),
        ("read", "reader"),
        ("assem", "assembler"),
        ("gpu-p", "GPU prep worker"),
        ("feed", "feeding thread"),
        ("shard", "shard reader"),
        ("emu-s", "emulated stream"),
    ];
    let rest = name.strip_prefix(THREAD_PREFIX).unwrap_or(name);
    ROLES
        .iter()
        .find(|(start, _)| rest.starts_with(start))
        .map_or(rest, |(_, role)| role)
}

/// One thread's counters at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadCounters {
    /// The thread's name (the kernel keeps its first 15 bytes).
    pub name: String,
    /// CPU time used so far.
    pub cpu: Duration,
    /// Times it blocked and was woken (voluntary context switches).
    pub wakeups: u64,
    /// Times the scheduler took the CPU from it while it could still run.
    pub preempted: u64,
}

/// The counters of a set of threads at one moment, by thread id.
#[derive(Debug, Clone, Default)]
pub struct ThreadSnapshot {
    /// Each thread's counters, by its id.
    pub threads: BTreeMap<u32, ThreadCounters>,
    /// False where the counters can't be read (not Linux, or no `/proc`): every figure is 0.
    pub available: bool,
}

/// What a set of threads used between two snapshots.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadUse {
    /// Threads seen in the later snapshot.
    pub threads: usize,
    /// CPU time used.
    pub cpu: Duration,
    /// Wake-ups (voluntary context switches).
    pub wakeups: u64,
    /// Involuntary context switches.
    pub preempted: u64,
}

impl ThreadSnapshot {
    /// What the threads used since `earlier`; a thread started since counts in full, one
    /// that ended since is not counted.
    pub fn since(&self, earlier: &ThreadSnapshot) -> ThreadUse {
        let mut used = ThreadUse {
            threads: self.threads.len(),
            ..ThreadUse::default()
        };
        for (tid, now) in &self.threads {
            let (cpu, wakeups, preempted) = match earlier.threads.get(tid) {
                Some(then) => (then.cpu, then.wakeups, then.preempted),
                None => (Duration::ZERO, 0, 0),
            };
            used.cpu += now.cpu.saturating_sub(cpu);
            used.wakeups += now.wakeups.saturating_sub(wakeups);
            used.preempted += now.preempted.saturating_sub(preempted);
        }
        used
    }

    /// Everything the threads used since they started.
    pub fn total(&self) -> ThreadUse {
        self.since(&ThreadSnapshot::default())
    }

    /// [`ThreadSnapshot::since`] by thread name: threads of one role (`stokehold-worker-0`,
    /// `-1`, … all show as `stokehold-worke`, the kernel's 15 bytes) add up.
    pub fn since_by_name(&self, earlier: &ThreadSnapshot) -> BTreeMap<String, ThreadUse> {
        let mut named: BTreeMap<String, ThreadSnapshot> = BTreeMap::new();
        for (tid, c) in &self.threads {
            named
                .entry(c.name.clone())
                .or_default()
                .threads
                .insert(*tid, c.clone());
        }
        named
            .into_iter()
            .map(|(name, snap)| (name, snap.since(earlier)))
            .collect()
    }
}

/// The nice value the CPU path's workers and readers give themselves: below the consumer's
/// (0), so that on a core both want, the consumer gets about 90% of it (the scheduler's
/// weights: 1024 for nice 0, 110 for nice 10). Without it, a pipeline with a thread per
/// core takes a fair share of the consumer's core whenever it works (measured with
/// `stokehold bench --consumer-busy-ms`: docs/performance.md). The threads still take every
/// idle core, and a consumer that waits for a batch leaves them its own.
pub const WORKER_NICE: i32 = 10;

/// Lowers the calling thread's priority to [`WORKER_NICE`], or to
/// `$STOKEHOLD_WORKER_NICE` (0 keeps the consumer's priority). Linux only: elsewhere a nice
/// value belongs to the whole process, the consumer's thread included, so nothing changes.
pub(crate) fn below_the_consumer() {
    #[cfg(target_os = "linux")]
    {
        let nice = std::env::var("STOKEHOLD_WORKER_NICE")
            .ok()
            .and_then(|v| v.trim().parse::<i32>().ok())
            .unwrap_or(WORKER_NICE);
        if nice <= 0 {
            return;
        }
        // SAFETY: gettid and setpriority take plain integers; on Linux, setpriority on a
        // thread id changes that thread alone.
        let r = unsafe {
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice)
        };
        if r != 0 {
            tracing::debug!(
                "could not lower a pipeline thread's priority: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// The calling thread's CPU time so far, where the clock can be read (`None` elsewhere): what
/// part of a call took a core, against its wall time.
pub(crate) fn this_thread_cpu() -> Option<Duration> {
    #[cfg(unix)]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec, which `ts` is, and reads nothing else.
        let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        (r == 0).then(|| {
            Duration::new(
                ts.tv_sec.max(0) as u64,
                ts.tv_nsec.clamp(0, 999_999_999) as u32,
            )
        })
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The counters of this process's pipeline threads (every pipeline's: their names start
/// with [`THREAD_PREFIX`]).
pub fn pipeline_threads() -> ThreadSnapshot {
    threads_named(|name| name.starts_with(THREAD_PREFIX))
}

/// The counters of this process's threads whose name `keep` accepts.
pub fn threads_named(keep: impl Fn(&str) -> bool) -> ThreadSnapshot {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return ThreadSnapshot::default();
    };
    let mut threads = BTreeMap::new();
    for entry in dir.flatten() {
        let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        // A thread that ended while we read is simply left out.
        if let Some(c) = read_counters(&entry.path()).filter(|c| keep(&c.name)) {
            threads.insert(tid, c);
        }
    }
    ThreadSnapshot {
        threads,
        available: true,
    }
}

/// One thread's counters from its `/proc/self/task/TID` folder.
fn read_counters(task: &Path) -> Option<ThreadCounters> {
    let name = std::fs::read_to_string(task.join("comm")).ok()?;
    let status = std::fs::read_to_string(task.join("status")).ok()?;
    let field = |key: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))?
            .trim()
            .parse()
            .ok()
    };
    Some(ThreadCounters {
        name: name.trim_end().to_string(),
        cpu: cpu_time(task)?,
        wakeups: field("voluntary_ctxt_switches:")?,
        preempted: field("nonvoluntary_ctxt_switches:")?,
    })
}

/// A thread's CPU time: `schedstat`'s first field (nanoseconds) where the kernel has it,
/// else `stat`'s utime + stime (clock ticks, usually 10 ms).
fn cpu_time(task: &Path) -> Option<Duration> {
    if let Ok(s) = std::fs::read_to_string(task.join("schedstat")) {
        if let Some(ns) = s.split_whitespace().next().and_then(|f| f.parse().ok()) {
            return Some(Duration::from_nanos(ns));
        }
    }
    let stat = std::fs::read_to_string(task.join("stat")).ok()?;
    // The name may hold spaces and parentheses: the fields start after the last ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = u64::try_from(hz).ok().filter(|&h| h > 0)?;
    Some(Duration::from_nanos(ticks * 1_000_000_000 / hz))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_threads_cpu_clock_counts_its_work_not_its_sleep() {
        let cpu = || this_thread_cpu().expect("a Unix thread's CPU clock");
        let t0 = cpu();
        std::thread::sleep(Duration::from_millis(30));
        let slept = cpu() - t0;
        // Spin until the clock has counted 15 ms (other tests' threads may share the core),
        // within 5 s of wall time.
        let (t1, until) = (cpu(), std::time::Instant::now() + Duration::from_secs(5));
        while cpu() - t1 < Duration::from_millis(15) && std::time::Instant::now() < until {
            std::hint::spin_loop();
        }
        assert!(slept < Duration::from_millis(10), "{slept:?}");
        assert!(
            cpu() - t1 >= Duration::from_millis(15),
            "the clock did not count the spin"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_named_thread_is_seen_with_its_cpu_time_and_wake_ups() {
        // Only this test's thread: other tests run pipelines in this process meanwhile.
        let ours = |name: &str| name == format!("{THREAD_PREFIX}test");
        let before = threads_named(ours);
        assert!(before.available, "Linux has /proc/self/task");
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::Builder::new()
            .name(format!("{THREAD_PREFIX}test"))
            .spawn(move || {
                // Some CPU work, then three sleeps: each blocks the thread, three wake-ups.
                let mut x = 1u64;
                for i in 0..2_000_000u64 {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
                }
                std::hint::black_box(x);
                for _ in 0..3 {
                    std::thread::sleep(Duration::from_millis(1));
                }
                let _ = done_tx.send(());
                // Stays alive (blocked) until the test has read its counters.
                let _ = rx.recv();
            })
            .unwrap();
        done_rx.recv().unwrap();
        let used = threads_named(ours).since(&before);
        tx.send(()).unwrap();
        t.join().unwrap();
        assert_eq!(used.threads, 1, "{used:?}");
        assert!(used.cpu > Duration::ZERO, "{used:?}");
        assert!(used.wakeups >= 3, "{used:?}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_pipeline_thread_lowers_its_own_priority_only() {
        let nice_of = |tid: libc::pid_t| {
            // SAFETY: getpriority takes plain integers.
            unsafe { libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t) }
        };
        let expected = std::env::var("STOKEHOLD_WORKER_NICE")
            .ok()
            .and_then(|v| v.trim().parse::<i32>().ok())
            .unwrap_or(WORKER_NICE);
        // SAFETY: gettid has no arguments.
        let me = unsafe { libc::gettid() };
        let mine = nice_of(me);
        let theirs = std::thread::spawn(move || {
            below_the_consumer();
            // SAFETY: as above.
            nice_of(unsafe { libc::gettid() })
        })
        .join()
        .unwrap();
        if mine == 0 && expected > 0 {
            assert_eq!(theirs, expected);
        } else {
            // Started below the default already, or told to keep the priority.
            assert!(theirs >= mine, "{theirs} < {mine}");
        }
        assert_eq!(
            nice_of(me),
            mine,
            "the calling thread's own priority is unchanged"
        );
    }

    #[test]
    fn a_thread_seen_only_later_counts_in_full() {
        let c = |cpu_ms, wakeups| ThreadCounters {
            name: "stokehold-x".into(),
            cpu: Duration::from_millis(cpu_ms),
            wakeups,
            preempted: 0,
        };
        let earlier = ThreadSnapshot {
            threads: [(1, c(10, 5))].into(),
            available: true,
        };
        let later = ThreadSnapshot {
            threads: [(1, c(15, 7)), (2, c(3, 1))].into(),
            available: true,
        };
        let used = later.since(&earlier);
        assert_eq!(used.threads, 2);
        assert_eq!(used.cpu, Duration::from_millis(8));
        assert_eq!(used.wakeups, 3);
        let mut other = c(1, 1);
        other.name = "stokehold-y".into();
        let later = ThreadSnapshot {
            threads: [(1, c(15, 7)), (2, c(3, 1)), (3, other)].into(),
            available: true,
        };
        let by_name = later.since_by_name(&earlier);
        assert_eq!(by_name.len(), 2);
        assert_eq!(by_name["stokehold-x"], used);
        assert_eq!(by_name["stokehold-y"].wakeups, 1);
    }
}
