//! The library's log lines (a bad file skipped, an epoch's summary, a device falling back)
//! as records of Python's `logging`, logger `"stokehold"`: without it a Python user saw none
//! of them. With `logging` left unconfigured, Python prints warnings and worse on stderr,
//! as the command line does; `logging.getLogger("stokehold").setLevel(logging.INFO)` adds
//! the epochs' summaries.
//!
//! The pipeline's threads never take the GIL (see `pipeline.rs`'s locking rule): they queue
//! each line, and the thread that holds the GIL hands the queue to `logging` ([`flush`])
//! when it next asks for a batch, as an epoch's loop ends (its summary, where the threads
//! have closed the epoch), in `stats()` and `close()`, and when the pipeline is dropped. The
//! pipeline works ahead: a bad file's line can come before the batch it is missing from.
//!
//! The start's warnings are left out here: Python has them as `stokehold.DataWarning`s
//! (and `PerformanceWarning`s) through `warnings`.
//!
//! While a `stokehold` command runs in the process ([`during_command`]), the lines go to
//! the command line's own log instead (stderr, `STOKEHOLD_LOG`), as in a process of its
//! own.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, Once, OnceLock, PoisonError};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Dispatch, Event, Level, Metadata};

/// Lines kept for `logging` at most; past it the newest are counted and said, not kept (a
/// consumer that never asks for a batch while a million bad files go by).
const QUEUE_LIMIT: usize = 10_000;

/// Python's name for the logger the lines go to.
const LOGGER: &str = "stokehold";

/// Lines waiting for the GIL, and how many did not fit.
static QUEUE: Mutex<VecDeque<Line>> = Mutex::new(VecDeque::new());
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Whether [`QUEUE`] may hold anything: a batch's [`flush`] reads this, not the lock.
static WAITING: AtomicBool = AtomicBool::new(false);
/// The logger's effective level (a Python level number: it passes on lines at least this
/// severe), read from Python at each flush.
static WANTED: AtomicU32 = AtomicU32::new(30);

/// Whether a `stokehold` command runs in this process, and its log.
static COMMAND: AtomicBool = AtomicBool::new(false);
static COMMAND_LOG: OnceLock<Dispatch> = OnceLock::new();

/// Runs `f`, a `stokehold` command, with the library's lines on the command line's log, then
/// hands on what was queued before. The library's log is taken first, so that pipelines made
/// before or after a command log alike.
pub fn during_command<R>(py: Python<'_>, f: impl FnOnce() -> R + Send) -> R
where
    R: Send,
{
    if let Err(e) = install(py) {
        raise_later(py, e);
    }
    COMMAND_LOG.get_or_init(|| Dispatch::new(stokehold::cli::log_subscriber()));
    /// Back to `logging` however the command ends (a panic included).
    struct Running;
    impl Drop for Running {
        fn drop(&mut self) {
            COMMAND.store(false, Ordering::SeqCst);
        }
    }
    COMMAND.store(true, Ordering::SeqCst);
    let r = {
        let _running = Running;
        py.detach(f)
    };
    if let Err(e) = hand_on(py) {
        raise_later(py, e);
    }
    r
}

/// What Python raised where it can't be raised (a pipeline being dropped, a command's
/// status being returned): Ctrl-C's `KeyboardInterrupt` again at the next check, in the
/// user's code, rather than lost; anything else reported as unraisable.
pub fn raise_later(py: Python<'_>, e: PyErr) {
    if e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) {
        let again = py
            .import("_thread")
            .and_then(|t| t.call_method0("interrupt_main"));
        if let Err(e) = again {
            e.write_unraisable(py, None);
        }
    } else {
        e.write_unraisable(py, None);
    }
}

/// The command line's log, while a command runs.
fn command_log() -> Option<&'static Dispatch> {
    COMMAND
        .load(Ordering::Relaxed)
        .then(|| COMMAND_LOG.get())
        .flatten()
}

/// One log line: Python's level number and the text.
struct Line {
    level: u32,
    text: String,
}

/// Makes the library's log lines go to Python's `logging`, unless something else in this
/// process took the library's log first (a `stokehold` command run in it, which writes them
/// on stderr itself). Called when a pipeline is made.
pub fn install(py: Python<'_>) -> PyResult<()> {
    static INSTALL: Once = Once::new();
    refresh_level(py)?;
    INSTALL.call_once(|| {
        if tracing::subscriber::set_global_default(ToPython).is_err() {
            tracing::debug!("log lines stay with the subscriber already set");
        }
    });
    Ok(())
}

/// Hands the waiting lines to `logging.getLogger("stokehold")`, oldest first, then reads
/// the level it passes on now (a microsecond: `logging` caches it), so that a level set
/// while the pipeline runs applies from the next line on. A failing handler is `logging`'s
/// to report (it does); what comes back is what Python raised meanwhile — Ctrl-C's
/// `KeyboardInterrupt`, run by the first Python code after the signal — for the caller to
/// raise: swallowed, the interrupt would be lost.
pub fn flush(py: Python<'_>) -> PyResult<()> {
    hand_on(py)?;
    refresh_level(py)
}

/// Hands the waiting lines on, oldest first, without reading the level: for a pipeline
/// being dropped, where the less Python runs the better. Where Python raises meanwhile,
/// the lines after the one being handed on wait for the next flush.
pub fn hand_on(py: Python<'_>) -> PyResult<()> {
    if !WAITING.load(Ordering::Acquire) {
        return Ok(());
    }
    let lines: Vec<Line> = {
        let mut q = QUEUE.lock().unwrap_or_else(PoisonError::into_inner);
        WAITING.store(false, Ordering::Release);
        q.drain(..).collect()
    };
    let dropped = DROPPED.swap(0, Ordering::AcqRel);
    let mut lines = lines.into_iter();
    let sent = (|| {
        let logger = logger(py)?;
        for l in lines.by_ref() {
            logger.call_method1("log", (l.level, l.text.as_str()))?;
        }
        if dropped > 0 {
            let text = format!(
                "{dropped} more stokehold log lines were left out: more than {QUEUE_LIMIT} \
                 were written between two batches"
            );
            logger.call_method1("log", (30u32, text))?;
        }
        Ok(())
    })();
    if sent.is_err() {
        // Back in front of what was logged since, for the next flush; the line being handed
        // on when Python raised is not sent twice.
        let mut q = QUEUE.lock().unwrap_or_else(PoisonError::into_inner);
        for l in lines.rev() {
            q.push_front(l);
        }
        DROPPED.fetch_add(dropped, Ordering::AcqRel);
        WAITING.store(true, Ordering::Release);
    }
    sent
}

/// The `"stokehold"` logger, looked up once.
fn logger(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static LOG: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    LOG.get_or_try_init(py, || {
        let logging = py.import("logging")?;
        Ok::<_, PyErr>(logging.call_method1("getLogger", (LOGGER,))?.unbind())
    })
    .map(|l| l.bind(py))
}

/// Reads the level the logger passes on now (its own or an ancestor's), so that lines it
/// would drop are not formatted and queued.
fn refresh_level(py: Python<'_>) -> PyResult<()> {
    let level: i64 = logger(py)?.call_method0("getEffectiveLevel")?.extract()?;
    // A negative level (which Python accepts) lets everything through, as NOTSET does.
    WANTED.store(
        level.clamp(0, i64::from(u32::MAX)) as u32,
        Ordering::Relaxed,
    );
    Ok(())
}

/// Python's level number for a `tracing` level (`TRACE` below `DEBUG`).
fn python_level(level: &Level) -> u32 {
    match *level {
        Level::ERROR => 40,
        Level::WARN => 30,
        Level::INFO => 20,
        Level::DEBUG => 10,
        _ => 5,
    }
}

/// The subscriber: events become queued lines; the library opens no spans.
struct ToPython;

impl tracing::Subscriber for ToPython {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> tracing::subscriber::Interest {
        // Asked at each event: the logger's level can change while the process runs.
        tracing::subscriber::Interest::sometimes()
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        if let Some(cli) = command_log() {
            return cli.enabled(metadata);
        }
        python_level(metadata.level()) >= WANTED.load(Ordering::Relaxed)
            && metadata.target() != stokehold::pipeline::START_WARNINGS_TARGET
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        if let Some(cli) = command_log() {
            return cli.event(event);
        }
        let mut text = Text(String::new());
        event.record(&mut text);
        let line = Line {
            level: python_level(event.metadata().level()),
            text: text.0,
        };
        let mut q = QUEUE.lock().unwrap_or_else(PoisonError::into_inner);
        if q.len() >= QUEUE_LIMIT {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        } else {
            q.push_back(line);
        }
        WAITING.store(true, Ordering::Release);
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// An event's message, then its other fields as `name=value`.
struct Text(String);

impl Visit for Text {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let sep = if self.0.is_empty() { "" } else { " " };
        if field.name() == "message" {
            let _ = write!(self.0, "{sep}{value:?}");
        } else {
            let _ = write!(self.0, "{sep}{}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        let sep = if self.0.is_empty() { "" } else { " " };
        if field.name() == "message" {
            self.0.push_str(sep);
            self.0.push_str(value);
        } else {
            let _ = write!(self.0, "{sep}{}={value:?}", field.name());
        }
    }
}
