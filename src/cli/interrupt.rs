//! Ctrl-C on `run`: the first asks the run to stop cleanly (the loop finishes the batch in
//! hand, then prints the summary and where to resume); the second quits at once.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};

/// The exit status of a run stopped by Ctrl-C (128 + SIGINT, as shells report it).
pub const EXIT_STATUS: u8 = 130;

/// Whether Ctrl-C was pressed.
pub struct Interrupt {
    requested: Arc<AtomicBool>,
}

impl Interrupt {
    /// Installs the handler (once per process).
    pub fn install() -> Result<Interrupt> {
        let requested = Arc::new(AtomicBool::new(false));
        let seen = requested.clone();
        ctrlc::set_handler(move || {
            if seen.swap(true, Ordering::SeqCst) {
                if std::io::stderr().is_terminal() {
                    // Clears the progress bar's line.
                    eprint!("\r\x1b[2K");
                }
                eprintln!("interrupted again: quitting now");
                std::process::exit(EXIT_STATUS.into());
            }
            eprintln!("\ninterrupted: stopping after this batch (Ctrl-C again to quit now)");
        })
        .context("installing the Ctrl-C handler")?;
        Ok(Interrupt { requested })
    }

    /// True once Ctrl-C was pressed.
    pub fn requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }
}
