//! The kernels, in one table: each kernel the GPU stage launches, with its entry point (its C
//! name in `kernels/`), the module that defines it and how its grid is sized
//! (`Kernel::row`). The launch sites, the module loader, the emulated device and the tests
//! all read it, so that an entry name is spelled once on the Rust side (a test checks it
//! against the sources).

/// The kernel modules (one per `kernels/*.cu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelModule {
    /// `chain.cu`: the fused chain (see `crate::cuda::chain`).
    Chain,
    /// `color.cu`: color jitter.
    Color,
    /// `chroma.cu`: fancy chroma from the JPEG engines' output.
    Chroma,
}

impl KernelModule {
    /// Every module.
    pub const ALL: [KernelModule; 3] = [
        KernelModule::Chain,
        KernelModule::Color,
        KernelModule::Chroma,
    ];

    /// The file stem in `kernels/`.
    pub fn stem(self) -> &'static str {
        match self {
            KernelModule::Chain => "chain",
            KernelModule::Color => "color",
            KernelModule::Chroma => "chroma",
        }
    }

    /// The kernels the module defines.
    pub fn kernels(self) -> impl Iterator<Item = Kernel> {
        Kernel::ALL.into_iter().filter(move |k| k.module() == self)
    }
}

/// Threads per block of every stokehold kernel (`jitter_luma_sum`'s reduction relies on 256,
/// and `chroma_guess`'s scratch holds `GUESS_THREADS` = 256: a test ties them).
pub(crate) const BLOCK: u32 = 256;

/// A launch over `samples` samples (grid.y), `blocks` blocks of `BLOCK` (256) threads each
/// (grid.x).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    /// Blocks along x (the kernels loop over the rest).
    pub blocks: u32,
    /// Samples (grid.y).
    pub samples: u32,
}

/// How a kernel's blocks along x are counted, from the largest sample of a launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GridRule {
    /// A block per output tile (`crate::cuda::chain::launcher::tiles`), at most 2^16: the
    /// resampler's blocks stride over the tiles.
    Tiles,
    /// A thread per element, at most 2^12 blocks: the kernels stride over the rest.
    Elements,
}

impl GridRule {
    /// The grid over `samples` samples, the largest of which has `largest` tiles or elements.
    pub fn grid(self, largest: u64, samples: usize) -> Grid {
        let blocks = match self {
            GridRule::Tiles => largest.clamp(1, 1 << 16),
            GridRule::Elements => largest.div_ceil(u64::from(BLOCK)).clamp(1, 1 << 12),
        };
        Grid {
            blocks: blocks as u32,
            samples: samples as u32,
        }
    }
}

/// The kernels the GPU stage launches (their C signatures are in `kernels/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// `fused_crop_resize_normalize(const FusedDesc*, const i32* taps, u32 n)`.
    Chain,
    /// `jitter_luma_sum(const JitterDesc*, u32 n, u32 step, u64* sums)`.
    JitterLumaSum,
    /// `jitter_step(const JitterDesc*, u32 n, u32 step, const u64* sums)`.
    JitterStep,
    /// `chroma_resolve(const ChromaDesc*, u32 n)`.
    ChromaResolve,
    /// `chroma_guess(const ChromaDesc*, u32 n)`.
    ChromaGuess,
    /// `chroma_upsample(const ChromaDesc*, u32 n)`.
    ChromaUpsample,
}

impl Kernel {
    /// Every kernel.
    pub const ALL: [Kernel; 6] = [
        Kernel::Chain,
        Kernel::JitterLumaSum,
        Kernel::JitterStep,
        Kernel::ChromaResolve,
        Kernel::ChromaGuess,
        Kernel::ChromaUpsample,
    ];

    /// The table: entry point, module, grid rule. The jitter kernels run between the chain's
    /// two launches over the chain's grid (they stride over pixels).
    const fn row(self) -> (&'static str, KernelModule, GridRule) {
        use GridRule::{Elements, Tiles};
        use KernelModule::{Chain, Chroma, Color};
        match self {
            Kernel::Chain => ("fused_crop_resize_normalize", Chain, Tiles),
            Kernel::JitterLumaSum => ("jitter_luma_sum", Color, Tiles),
            Kernel::JitterStep => ("jitter_step", Color, Tiles),
            Kernel::ChromaResolve => ("chroma_resolve", Chroma, Elements),
            Kernel::ChromaGuess => ("chroma_guess", Chroma, Elements),
            Kernel::ChromaUpsample => ("chroma_upsample", Chroma, Elements),
        }
    }

    /// The kernel's entry point.
    pub fn entry(self) -> &'static str {
        self.row().0
    }

    /// The module (`kernels/<stem>.cu`) that defines it.
    pub fn module(self) -> KernelModule {
        self.row().1
    }

    /// How its grid is sized.
    pub fn grid_rule(self) -> GridRule {
        self.row().2
    }

    /// The grid of a launch over `samples` samples, the largest of which has `largest` units
    /// of the kernel's [`GridRule`] (tiles or elements).
    pub fn grid(self, largest: u64, samples: usize) -> Grid {
        self.grid_rule().grid(largest, samples)
    }
}
