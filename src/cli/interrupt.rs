//! Ctrl-C on `run`: the first asks the run to stop cleanly (the loop finishes the batch in
//! hand, then prints the summary and where to resume); a second, a moment later, quits at
//! once, saying where to resume from as far as the batches handed out went. (`tune` stops
//! the same way after the trial in hand, and advises on the trials run.)

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
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
    requested: Arc<AtomicBool>,
    position: Arc<Mutex<Option<Position>>>,
}

impl Interrupt {
    /// Installs the handler (once per process) for `run`.
    pub fn install() -> Result<Interrupt> {
        Self::install_stopping("this batch")
    }

    /// Installs the handler (once per process): the first Ctrl-C says it stops after `what`.
    pub fn install_stopping(what: &'static str) -> Result<Interrupt> {
        let requested = Arc::new(AtomicBool::new(false));
        let position = Arc::new(Mutex::new(None::<Position>));
        let (seen, last) = (requested.clone(), position.clone());
        let mut first: Option<Instant> = None;
        ctrlc::set_handler(move || {
            match first {
                None => first = Some(Instant::now()),
                Some(t) if t.elapsed() < SAME_PRESS => return,
                Some(_) => {
                    if std::io::stderr().is_terminal() {
                        // Clears the progress bar's line.
                        eprint!("\r\x1b[2K");
                    }
                    let at = last.lock().ok().and_then(|p| *p);
                    match at {
                        Some(p) => eprintln!(
                            "interrupted again: quitting now; to continue after the last batch \
                             handed out, run the same command with --resume {p}"
                        ),
                        None => eprintln!("interrupted again: quitting now"),
                    }
                    std::process::exit(EXIT_STATUS.into());
                }
            }
            seen.store(true, Ordering::SeqCst);
            eprintln!("\ninterrupted: stopping after {what} (Ctrl-C again to quit now)");
        })
        .context("installing the Ctrl-C handler")?;
        Ok(Interrupt {
            requested,
            position,
        })
    }

    /// True once Ctrl-C was pressed.
    pub fn requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }

    /// Notes where to resume from after the batch just handed out.
    pub fn handed_out(&self, position: Position) {
        if let Ok(mut p) = self.position.lock() {
            *p = Some(position);
        }
    }
}
