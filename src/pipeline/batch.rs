//! Batches (placeholder).
/// placeholder
pub struct Batch;
/// placeholder
pub struct BatchTensor;
/// placeholder
pub struct SampleInfo;
