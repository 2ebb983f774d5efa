//! The CUDA layer of the GPU path: the device seam ([`GpuDevice`]) with its real
//! ([`RealDevice`]: cudarc and nvJPEG) and emulated ([`EmuDevice`]) devices, probing, the
//! kernels' table ([`kernel`]: entry points, modules, grid rules), the kernel module cache
//! (NVRTC → cubin, cached on disk), the stage's memory pools ([`pool`]), the pinned host
//! batches handed to consumers ([`pinned_pool`]), a real device's measured costs that the
//! emulated device can take its time from ([`timing_model`]), the kernel descriptors
//! ([`desc`]) and the fused chain's composition and launch rules ([`chain`]). Kernels are
//! launched in one place per device: the seam's `launch`.
//!
//! All `unsafe` of the GPU path except nvJPEG lives in this folder; every block says why it
//! is sound. Nothing here needs CUDA at build time: the driver and NVRTC are loaded at run
//! time, and [`probe`] reports their absence as an error instead of panicking.
//!
//! Kernel sources are in `kernels/` (see `build.rs`); each operator offers its piece of the
//! fused chain from the `gpu.rs` file of its folder (implementing `crate::ops::GpuOperator`),
//! and [`chain::ChainSteps`] composes them. This folder knows no operator: operators use it,
//! never the reverse.

pub mod chain;
pub mod desc;
mod driver;
pub mod emu;
pub mod gpu_device;
pub mod kernel;
pub mod module;
pub mod pinned_pool;
pub mod pool;
pub mod real;
pub mod staging;
pub mod timing_model;

#[cfg(test)]
mod chroma_tests;
#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;

pub use chain::FusedSample;
pub(crate) use driver::cuda_err;
pub use driver::{driver_present, nvrtc_present, probe, GpuInfo};
pub use emu::{EmuDevice, EmuOptions};
pub use gpu_device::{GpuDevice, StreamId};
pub use kernel::{Kernel, KernelModule};
pub use real::RealDevice;
pub use timing_model::TimingModel;
