//! The fused chain on the GPU, the kernel's side: what it does to each sample — window →
//! resize with antialias → crop of the resized image → flip → color jitter → normalize →
//! cast → layout — composed from the step and the pieces each operator offers ([`steps`]),
//! turned into kernel descriptors ([`sample`]) and how a batch of them is launched
//! ([`launcher`]). The operators' side (their setups composed per sample) is
//! [`crate::fusion::chain`].

pub mod launcher;
pub mod sample;
pub mod steps;

#[cfg(test)]
pub(crate) mod on_device;
#[cfg(test)]
mod tests;

pub use sample::{build_desc, FusedSample, JitterSample, Rect, SourceDims};
pub use steps::{ChainError, ChainPiece, ChainStep, ChainSteps, Resample};
