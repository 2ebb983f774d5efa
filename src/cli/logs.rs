//! Log lines on stderr in the look of the command line's other lines (`warning: …`), in
//! colour only on a terminal and never when `NO_COLOR` is set.

use std::fmt;
use std::io::IsTerminal;
use std::sync::OnceLock;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Whether stderr gets colour: a terminal, and `NO_COLOR` unset or empty (no-color.org).
pub fn colour() -> bool {
    static COLOUR: OnceLock<bool> = OnceLock::new();
    *COLOUR.get_or_init(|| {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        std::io::stderr().is_terminal() && !no_color
    })
}

/// The command line's log: lines on stderr at the level `STOKEHOLD_LOG` asks for (default:
/// warnings).
type Builder = tracing_subscriber::fmt::SubscriberBuilder<
    tracing_subscriber::fmt::format::DefaultFields,
    Line,
    tracing_subscriber::EnvFilter,
    fn() -> std::io::Stderr,
>;

fn builder() -> Builder {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr as fn() -> std::io::Stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("STOKEHOLD_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_ansi(colour())
        .event_format(Line)
}

/// Starts logging at the level `STOKEHOLD_LOG` asks for (default: warnings).
pub fn init() {
    // A second command line in one process (the Python package's) keeps the first's.
    builder().try_init().ok();
}

/// The command line's log as a subscriber of its own, for a process whose log went
/// elsewhere before the command ran (the Python package's, which hands it to `logging`).
pub fn subscriber() -> impl Subscriber + Send + Sync {
    builder().finish()
}

/// `error`, `warning`, … as the start of a line, coloured when [`colour`] says so.
pub fn label(level: Level) -> String {
    let (word, code) = match level {
        Level::ERROR => ("error", "1;31"),
        Level::WARN => ("warning", "1;33"),
        Level::INFO => ("info", "1;32"),
        Level::DEBUG => ("debug", "1;34"),
        Level::TRACE => ("trace", "1;35"),
    };
    if colour() {
        format!("\x1b[{code}m{word}\x1b[0m")
    } else {
        word.to_string()
    }
}

/// One event as `label: message fields`, without time stamp or target.
struct Line;

impl<S, N> FormatEvent<S, N> for Line
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        write!(writer, "{}: ", label(*event.metadata().level()))?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}
