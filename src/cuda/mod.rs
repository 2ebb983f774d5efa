//! The CUDA layer of the GPU path: device and streams, the kernel module cache (NVRTC →
//! cubin, cached on disk), device buffer pools and pinned staging rings ([`pool`] for the
//! device seam the GPU stage uses, [`memory`] for the one-stream [`Device`]) and batch
//! descriptors. Kernels are launched in two places: `launch.rs` for the one-stream
//! [`Device`] (the operators' own launchers and the kernel tests), and the device seam's
//! [`RealDevice`] for the pipeline's GPU stage.
//!
//! All `unsafe` of the GPU path except nvJPEG lives in this folder; every block says why it
//! is sound. Nothing here needs CUDA at build time: the driver and NVRTC are loaded at run
//! time, and [`probe`] reports their absence as an error instead of panicking.
//!
//! Kernel sources are in `kernels/` (see `build.rs`); operator launchers are the `gpu.rs`
//! files of the operator folders (each implementing `crate::ops::GpuOperator`), and
//! [`chain::run_fused_batch`] runs the fused crop → resize → flip → color jitter → normalize
//! → cast → layout chain over a batch, as composed by [`chain::ChainSteps`]. This folder knows
//! no operator: operators use it, never the reverse.

pub mod batch;
pub mod chain;
pub mod desc;
mod device;
mod driver;
pub mod emu;
pub mod gpu_device;
pub(crate) mod launch;
pub mod memory;
pub mod module;
pub mod pool;
pub mod real;
pub mod run;

#[cfg(test)]
mod chroma_tests;
#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;

pub use batch::{DeviceBatch, DeviceImage};
pub use chain::{run_fused_batch, FusedSample};
pub use device::Device;
pub(crate) use driver::{cuda_err, record_blocking_event};
pub use driver::{driver_present, nvrtc_present, probe, GpuInfo};
pub use emu::{EmuDevice, EmuOptions};
pub use gpu_device::{GpuDevice, StreamId};
pub use module::KernelModule;
pub use real::RealDevice;
