//! The `stokehold` command line (placeholder).
fn main() {}
