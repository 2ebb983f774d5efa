//! What the command line prints: lines on stdout that end quietly when their reader goes
//! away (`stokehold run … | head`), and errors on stderr, each said once.

use std::fmt;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use super::logs;

/// Writes one line to stdout, returning an [`io::Result`]: a closed pipe travels up as an
/// error that [`report`] ends the program on quietly.
macro_rules! outln {
    ($($t:tt)*) => {
        $crate::cli::output::line(format_args!($($t)*))
    };
}
pub(crate) use outln;

/// One line on stdout (see [`outln!`]).
pub fn line(args: fmt::Arguments<'_>) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_fmt(args)?;
    out.write_all(b"\n")?;
    out.flush()
}

/// Every problem found in a pipeline file, to be reported one by one.
#[derive(Debug)]
pub struct Problems {
    /// The pipeline file.
    pub file: PathBuf,
    /// Each problem, with its location and help line.
    pub errors: Vec<crate::Error>,
}

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.errors.len();
        let s = if n == 1 { "" } else { "s" };
        write!(f, "{}: {n} problem{s} found", self.file.display())
    }
}

impl std::error::Error for Problems {}

/// Prints `e` on stderr (nothing for a closed stdout) and gives the exit status.
pub fn report(e: &anyhow::Error) -> ExitCode {
    if is_closed_pipe(e) {
        return ExitCode::SUCCESS;
    }
    let error = logs::label(tracing::Level::ERROR);
    if let Some(p) = e.downcast_ref::<Problems>() {
        for problem in &p.errors {
            eprintln!("{error}: {problem}");
        }
        if p.errors.len() > 1 {
            eprintln!("{error}: {p}");
        }
    } else {
        eprintln!("{error}: {}", message(e));
    }
    ExitCode::FAILURE
}

/// The error and its causes, leaving out a cause the text already says (an I/O error
/// whose message already ends with the OS error).
fn message(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let part = cause.to_string();
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

fn is_closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_said_is_not_repeated() {
        let io = io::Error::new(io::ErrorKind::NotFound, "No such file (os error 2)");
        let e = anyhow::Error::new(crate::Error::Io {
            path: "p.toml".into(),
            source: io,
        });
        assert_eq!(message(&e), "p.toml: No such file (os error 2)");
        let e = anyhow::anyhow!("inner").context("outer");
        assert_eq!(message(&e), "outer: inner");
    }

    #[test]
    fn a_closed_pipe_is_recognised_through_context() {
        let e = anyhow::Error::new(io::Error::from(io::ErrorKind::BrokenPipe)).context("writing");
        assert!(is_closed_pipe(&e));
        assert!(!is_closed_pipe(&anyhow::anyhow!("other")));
    }
}
