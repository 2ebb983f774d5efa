//! The `stokehold` command line (the commands are in the library's `cli` module, which the
//! Python package's `stokehold` command runs too).

fn main() -> std::process::ExitCode {
    stokehold::cli::main(std::env::args_os())
}
