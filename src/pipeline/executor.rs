//! Executor (placeholder).
/// placeholder
pub struct Pipeline;
/// placeholder
pub struct Stats;
