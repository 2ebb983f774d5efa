//! The `stokehold` command line (the commands are in the library's `cli` module, which the
//! Python package's `stokehold` command runs too).

use stokehold::cli::heap::CountingAllocator;

/// The system allocator, counting for `bench --stats` (`stokehold::cli::heap`).
#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn main() -> std::process::ExitCode {
    stokehold::cli::main(std::env::args_os())
}
