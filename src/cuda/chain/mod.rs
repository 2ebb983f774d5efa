//! The fused chain on the GPU: one per-sample plan — window → resize with antialias → crop of
//! the resized image → flip → color jitter → normalize → cast → layout — composed from the
//! pieces each operator offers ([`plan`]), turned into kernel descriptors ([`sample`]) and
//! launched once per batch ([`launcher`]).

pub mod launcher;
pub mod plan;
pub mod sample;

#[cfg(test)]
mod tests;

pub use launcher::{resize_batch, run_fused_batch};
pub use plan::{ChainError, ChainPiece, ChainPlan, ChainStep, Resample};
pub use sample::{build_desc, FusedSample, JitterSample, Rect, SourceDims};
