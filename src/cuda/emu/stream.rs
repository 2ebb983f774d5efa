//! Emulated streams and events: each stream is a thread that runs its queued work in order,
//! asynchronously to the host; an event is a flag its stream sets when it gets there.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::order::Clock;

/// How often a blocked wait checks whether the device failed or is shutting down.
const RECHECK: Duration = Duration::from_millis(5);

/// What every stream and event shares: the sticky fault and the shutdown flag.
#[derive(Debug, Default)]
pub(crate) struct Health {
    fault: Mutex<Option<String>>,
    shutdown: AtomicBool,
}

impl Health {
    /// The sticky fault, if the device failed.
    pub(crate) fn fault(&self) -> Option<String> {
        self.fault.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Marks the device failed (the first fault stays).
    pub(crate) fn fail(&self, why: String) {
        let mut f = self.fault.lock().unwrap_or_else(|p| p.into_inner());
        if f.is_none() {
            tracing::warn!("emulated device failed: {why}");
            *f = Some(why);
        }
    }

    pub(crate) fn shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    pub(crate) fn shut_down(&self) {
        self.shutdown.store(true, Ordering::Release);
    }
}

/// An emulated event: complete once its stream has run everything queued before it.
#[derive(Debug, Default)]
pub(crate) struct EmuEvent {
    /// When the stream got there (`None`: not yet).
    reached: Mutex<Option<Instant>>,
    cv: Condvar,
    /// The work it stands for, as the check of stream order counts it (set when recorded).
    clock: Mutex<Clock>,
}

impl EmuEvent {
    /// Sets the work the event stands for (when it is recorded).
    pub(crate) fn set_clock(&self, clock: Clock) {
        *self.clock.lock().unwrap_or_else(|p| p.into_inner()) = clock;
    }

    /// The work the event stands for.
    pub(crate) fn clock(&self) -> Clock {
        self.clock.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Not complete (before it is recorded again; nobody else holds it).
    pub(crate) fn reset(&self) {
        *self.reached.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    fn set(&self) {
        *self.reached.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        self.cv.notify_all();
    }

    /// When it completed, if it has.
    pub(crate) fn reached(&self) -> Option<Instant> {
        *self.reached.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until complete; `Err` when the device fails or shuts down first.
    pub(crate) fn wait(&self, health: &Health) -> Result<(), String> {
        let mut r = self.reached.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if r.is_some() {
                return Ok(());
            }
            if let Some(f) = health.fault() {
                return Err(f);
            }
            if health.shutting_down() {
                return Err("the device was shut down".into());
            }
            r = self
                .cv
                .wait_timeout(r, RECHECK)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// Work queued on a stream: runs on the stream's thread; an `Err` is a device fault.
pub(crate) type Work = Box<dyn FnOnce() -> Result<(), String> + Send>;

#[derive(Default)]
struct Queue {
    work: VecDeque<Work>,
    closed: bool,
}

/// One emulated stream: a thread running its queue in order.
pub(crate) struct EmuStream {
    queue: Arc<(Mutex<Queue>, Condvar)>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl EmuStream {
    /// Starts the stream's thread.
    pub(crate) fn start(name: String, health: Arc<Health>) -> std::io::Result<EmuStream> {
        let queue: Arc<(Mutex<Queue>, Condvar)> = Arc::default();
        let q = queue.clone();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || run(&q, &health))?;
        Ok(EmuStream {
            queue,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queues `work`.
    pub(crate) fn push(&self, work: Work) {
        let (m, cv) = &*self.queue;
        let mut q = m.lock().unwrap_or_else(|p| p.into_inner());
        if !q.closed {
            q.work.push_back(work);
            cv.notify_all();
        }
    }

    /// An event recorded now.
    pub(crate) fn record(&self) -> Arc<EmuEvent> {
        let ev = Arc::new(EmuEvent::default());
        self.record_into(ev.clone());
        ev
    }

    /// Records `ev` (not complete: reset by the caller) now.
    pub(crate) fn record_into(&self, ev: Arc<EmuEvent>) {
        self.push(Box::new(move || {
            ev.set();
            Ok(())
        }));
    }

    /// Stops the thread once its queue is empty (or at once when the device failed).
    pub(crate) fn stop(&self) {
        {
            let (m, cv) = &*self.queue;
            m.lock().unwrap_or_else(|p| p.into_inner()).closed = true;
            cv.notify_all();
        }
        let handle = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = handle {
            let _ = t.join();
        }
    }
}

impl Drop for EmuStream {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(queue: &(Mutex<Queue>, Condvar), health: &Health) {
    let (m, cv) = queue;
    loop {
        let work = {
            let mut q = m.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if let Some(w) = q.work.pop_front() {
                    break w;
                }
                if q.closed {
                    return;
                }
                q = cv.wait(q).unwrap_or_else(|p| p.into_inner());
            }
        };
        // After a fault nothing more runs (as on a device with a sticky error); events are
        // not set, and waiting on them reports the fault.
        if health.fault().is_some() {
            continue;
        }
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))
            .unwrap_or_else(|_| Err("emulated work panicked".into()));
        if let Err(e) = outcome {
            health.fail(e);
        }
    }
}
