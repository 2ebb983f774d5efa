//! Ctrl-C on `run`: the first asks the run to stop cleanly (the loop finishes the batch in
//! hand, then prints the summary and where to resume); a second, a moment later, quits at
//! once, saying where to resume from as far as the batches handed out went. (`tune` stops
//! the same way after the trial in hand, and advises on the trials run; `bench` after the
//! batch in hand, and reports what it timed.)

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::reader::schedule::Position;

/// The exit status of a run stopped by Ctrl-C (128 + SIGINT, as shells report it).
pub const EXIT_STATUS: u8 = 130;

/// A second signal sooner than this after the first is the same Ctrl-C delivered twice (a
/// wrapper such as `timeout` or a launcher forwards it while the terminal signals the whole
/// process group), not a second press.
const SAME_PRESS: Duration = Duration::from_millis(700);

/// Whether Ctrl-C was pressed, and the position after the last batch handed out.
pub struct Interrupt {
    shared: &'static Shared,
}

/// What the handler and the command share. One per process: the handler can be set only
/// once, and a process (Python's, calling the command line) may run several commands.
struct Shared {
    requested: AtomicBool,
    position: Mutex<Option<Position>>,
    /// What the first Ctrl-C stops after, and when it was pressed.
    what: Mutex<(&'static str, Option<Instant>)>,
}

static SHARED: Shared = Shared {
    requested: AtomicBool::new(false),
    position: Mutex::new(None),
    what: Mutex::new(("this batch", None)),
};

impl Interrupt {
    /// Installs the handler for `run`.
    pub fn install() -> Result<Interrupt> {
        Self::install_stopping("this batch")
    }

    /// Installs the handler (set once per process, and it stays: a Python process that ran a
    /// command gets no `KeyboardInterrupt` after it; each command starts it afresh): the
    /// first Ctrl-C says it stops after `what`.
    pub fn install_stopping(what: &'static str) -> Result<Interrupt> {
        static SET: OnceLock<std::result::Result<(), String>> = OnceLock::new();
        let shared = &SHARED;
        shared.requested.store(false, Ordering::SeqCst);
        *lock(&shared.position) = None;
        *lock(&shared.what) = (what, None);
        SET.get_or_init(|| ctrlc::set_handler(on_signal).map_err(|e| e.to_string()))
            .clone()
            .map_err(anyhow::Error::msg)
            .context("installing the Ctrl-C handler")?;
        Ok(Interrupt { shared })
    }

    /// True once Ctrl-C was pressed.
    pub fn requested(&self) -> bool {
        self.shared.requested.load(Ordering::SeqCst)
    }

    /// Notes where to resume from after the batch just handed out.
    pub fn handed_out(&self, position: Position) {
        *lock(&self.shared.position) = Some(position);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The handler: the first Ctrl-C asks the command to stop; one a moment later (not the
/// same press delivered twice) quits at once.
fn on_signal() {
    let shared = &SHARED;
    let what = {
        let mut w = lock(&shared.what);
        match w.1 {
            None => w.1 = Some(Instant::now()),
            Some(t) if t.elapsed() < SAME_PRESS => return,
            Some(_) => {
                drop(w);
                if std::io::stderr().is_terminal() {
                    // Clears the progress bar's line.
                    eprint!("\r\x1b[2K");
                }
                match *lock(&shared.position) {
                    Some(p) => eprintln!(
                        "interrupted again: quitting now; to continue after the last batch \
                         handed out, run the same command with --resume {p}"
                    ),
                    None => eprintln!("interrupted again: quitting now"),
                }
                std::process::exit(EXIT_STATUS.into());
            }
        }
        w.0
    };
    shared.requested.store(true, Ordering::SeqCst);
    eprintln!("\ninterrupted: stopping after {what} (Ctrl-C again to quit now)");
}
