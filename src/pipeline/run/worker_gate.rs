//! The GPU path's workers beyond its default count, parked until the photos show that the
//! JPEG engines take almost none of them. Beside engines the default is half the cores
//! (`start::default_workers`): the engines decode most JPEGs and the rest of the cores are
//! the training loop's. Photos the engines don't take (PNGs, progressive JPEGs) are decoded
//! on the workers, as on the CPU path, and want every core: where they are almost all the
//! data, the gate lets the parked workers go. It decides once, early in the first epoch
//! ([`DECIDE_AFTER`] samples, or the epoch's end), and the warm-up lasts
//! [`WARM_UP_AFTER_OPENING`] batches past an opening, so that the pools are sized for the
//! workers that run. A parked thread waits on a channel: no CPU time, no wake-ups.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use crossbeam_channel::{bounded, select, Receiver, Sender};

/// Samples prepared before the gate decides (or the first epoch's end, if sooner): enough
/// for the share the engines take to show on shuffled data.
pub(super) const DECIDE_AFTER: u64 = 256;

/// Batches the warm-up lasts past the gate's opening: the workers let go fill their pinned
/// slabs before the warm-up sizes them.
pub(super) const WARM_UP_AFTER_OPENING: u64 = 4;

/// Not decided yet, or decided without opening (in [`WorkerGate::opened_at`]).
const UNDECIDED: u64 = u64::MAX;
const KEPT_SHUT: u64 = u64::MAX - 1;

/// The gate of the parked workers (one per pipeline).
#[derive(Debug)]
pub(crate) struct WorkerGate {
    /// Dropped to open the gate: its receivers then return at once.
    opener: Mutex<Option<Sender<()>>>,
    gate: Receiver<()>,
    /// Workers running, and the ones parked at the start.
    running: AtomicUsize,
    parked: usize,
    /// The batches made when the gate opened, or [`UNDECIDED`], or [`KEPT_SHUT`].
    opened_at: AtomicU64,
}

impl WorkerGate {
    /// A gate for `running` workers and `parked` more.
    pub(crate) fn new(running: usize, parked: usize) -> WorkerGate {
        let (opener, gate) = bounded(0);
        WorkerGate {
            opener: Mutex::new(Some(opener)),
            gate,
            running: AtomicUsize::new(running),
            parked,
            opened_at: AtomicU64::new(if parked == 0 { KEPT_SHUT } else { UNDECIDED }),
        }
    }

    /// Workers running now.
    pub(crate) fn running(&self) -> usize {
        self.running.load(Ordering::Relaxed)
    }

    /// Workers still parked.
    pub(crate) fn parked(&self) -> usize {
        match self.opened_at.load(Ordering::Relaxed) {
            UNDECIDED | KEPT_SHUT => self.parked,
            _ => 0,
        }
    }

    /// Whether the gate opened.
    #[cfg(test)]
    fn opened(&self) -> bool {
        !matches!(
            self.opened_at.load(Ordering::Relaxed),
            UNDECIDED | KEPT_SHUT
        )
    }

    /// Parks a worker until the gate opens (`true`: go to work), the readers are done
    /// (`readers` disconnects: nothing left for it) or the pipeline shuts down (`false`).
    pub(super) fn park(&self, readers: &Receiver<()>, shutdown: &Receiver<()>) -> bool {
        select! {
            recv(self.gate) -> _ => true,
            recv(readers) -> _ => false,
            recv(shutdown) -> _ => false,
        }
    }

    /// Whether the gate has still to decide.
    pub(super) fn undecided(&self) -> bool {
        self.opened_at.load(Ordering::Relaxed) == UNDECIDED
    }

    /// Decides, once: opens the gate where the engines take almost none of the photos
    /// (`engines_idle`), after `batches` batches. Returns whether it opened now.
    pub(super) fn decide(&self, engines_idle: bool, batches: u64) -> bool {
        let to = if engines_idle { batches } else { KEPT_SHUT };
        if self
            .opened_at
            .compare_exchange(UNDECIDED, to, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
            || !engines_idle
        {
            return false;
        }
        self.running.fetch_add(self.parked, Ordering::Relaxed);
        self.opener.lock().unwrap_or_else(|p| p.into_inner()).take();
        true
    }

    /// Whether the gate lets the warm-up end after `batches` batches: decided, and
    /// [`WARM_UP_AFTER_OPENING`] batches past an opening.
    pub(super) fn lets_warm_up_end(&self, batches: u64) -> bool {
        match self.opened_at.load(Ordering::Relaxed) {
            UNDECIDED => false,
            KEPT_SHUT => true,
            at => batches >= at.saturating_add(WARM_UP_AFTER_OPENING),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parked_workers_go_once_the_gate_opens_and_leave_when_the_readers_are_done() {
        let gate = std::sync::Arc::new(WorkerGate::new(2, 3));
        let (readers_tx, readers) = bounded::<()>(0);
        let (_shutdown_tx, shutdown) = bounded::<()>(0);
        assert_eq!((gate.running(), gate.parked()), (2, 3));
        assert!(!gate.lets_warm_up_end(100), "undecided");
        let parked = {
            let (gate, readers, shutdown) = (gate.clone(), readers.clone(), shutdown.clone());
            std::thread::spawn(move || gate.park(&readers, &shutdown))
        };
        // Photos the engines take: nothing opens, a second decision changes nothing.
        assert!(!gate.decide(false, 3));
        assert!(!gate.decide(true, 4));
        assert!(!gate.opened() && gate.lets_warm_up_end(4));
        assert_eq!((gate.running(), gate.parked()), (2, 3));
        // The readers end: the parked worker leaves without working.
        drop(readers_tx);
        assert!(!parked.join().unwrap());

        let gate = WorkerGate::new(2, 3);
        assert!(gate.decide(true, 10));
        assert!(gate.opened());
        assert_eq!((gate.running(), gate.parked()), (5, 0));
        let (_readers_tx, readers) = bounded::<()>(0);
        assert!(
            gate.park(&readers, &shutdown),
            "an open gate returns at once"
        );
        assert!(!gate.lets_warm_up_end(13));
        assert!(gate.lets_warm_up_end(14));
    }

    #[test]
    fn a_gate_with_nothing_parked_has_nothing_to_decide() {
        let gate = WorkerGate::new(4, 0);
        assert!(!gate.undecided() && gate.lets_warm_up_end(0));
        assert!(!gate.decide(true, 0));
        assert_eq!(gate.running(), 4);
    }
}

#[cfg(test)]
mod pipeline_tests {
    use super::super::gpu_tests::{assert_same_runs, emu, emu_pipeline, on, run, shipped};
    use super::super::start::TEST_CORES;
    use crate::pipeline::spec::DeviceChoice;
    use crate::testutil::{encode_jpeg_opts, pattern_rgb, JpegOpts, Sub};

    /// Runs the train pipeline on 48 photos, progressive or not, on the emulated device
    /// (with engines) as on 4 cores: the workers running and parked at the end. Twice: the
    /// batches kept and checked against the CPU's, then dropped as they come and nothing
    /// allocated after the warm-up.
    fn workers_on(progressive: bool) -> (u64, u64) {
        let d = tempfile::tempdir().unwrap();
        let o = JpegOpts {
            quality: 90,
            sub: Sub::S420,
            progressive,
            exif_tiff: None,
        };
        for k in 0..48 {
            let (h, w) = (64 + k, 96);
            let jpeg = encode_jpeg_opts(&pattern_rgb(h, w), h, w, 3, &o);
            std::fs::write(d.path().join(format!("{k:02}.jpg")), jpeg).unwrap();
        }
        let mut spec = shipped("resnet50-train.toml", d.path());
        spec.settings.threads = None;
        spec.settings.batch = 8;
        spec.settings.epochs = Some(6);
        let on_4_cores = || {
            TEST_CORES.with(|c| c.set(Some(4)));
            let p = emu_pipeline(&spec, emu().expect("checked by the caller")).unwrap();
            TEST_CORES.with(|c| c.set(None));
            p
        };
        let mut p = on_4_cores();
        let got: Vec<_> = p.by_ref().collect();
        assert_same_runs(&run(&on(&spec, DeviceChoice::Cpu)), &got, "workers let go");
        let mut p = on_4_cores();
        for b in p.by_ref() {
            drop(b.unwrap());
        }
        let gpu = super::super::gpu_tests::nothing_allocated_after_warm_up(&p, "the gate");
        // The readers hand on a few samples at once while the workers only parse headers,
        // one at a time once every core's worker decodes.
        let hold = if gpu.workers_parked > 0 {
            super::super::read_stage::GPU_PATH_HOLD as u64
        } else {
            1
        };
        assert_eq!(gpu.reader_hold, hold);
        (gpu.workers_running, gpu.workers_parked)
    }

    /// Beside JPEG engines half the cores' workers run; the rest go to work where the
    /// engines take almost none of the photos (progressive JPEGs), and a finite run whose
    /// parked workers never run still ends.
    #[test]
    fn the_parked_workers_run_where_the_engines_take_almost_no_photo() {
        if emu().is_none() {
            return;
        }
        assert_eq!(
            workers_on(false),
            (2, 2),
            "baseline JPEGs: the engines take them"
        );
        assert_eq!(
            workers_on(true),
            (4, 0),
            "progressive JPEGs: the workers decode them"
        );
    }
}
