//! Which SIMD instructions the JPEG decoder (the bundled libjpeg-turbo) uses on this machine,
//! so that a build that lost them says so at run time.
//!
//! On x86 libjpeg-turbo's SIMD code is assembled with `nasm`; when `nasm` is missing at build
//! time, `mozjpeg-sys` builds it without SIMD, warns in a build log that cargo hides for
//! dependencies, and JPEG decoding is about 25% slower. [`jpeg_simd`] asks libjpeg-turbo
//! itself; `build.rs` records whether the build had SIMD (`WITH_SIMD` in the `jconfig.h`
//! that `mozjpeg-sys` wrote), and a test checks that the two agree.

/// The SIMD instructions libjpeg-turbo uses for its IDCT, upsampling and colour conversion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JpegSimd {
    /// None: a build without SIMD (on x86: no `nasm` at build time), or a CPU without any
    /// instructions libjpeg-turbo has code for.
    None,
    /// x86 SSE2.
    Sse2,
    /// x86 AVX2 (taken where the CPU and the OS support it).
    Avx2,
    /// Arm Neon.
    Neon,
    /// Another architecture's SIMD (MIPS DSPr2, PowerPC AltiVec).
    Other,
}

impl JpegSimd {
    /// A short name: `none`, `sse2`, `avx2`, `neon` or `simd`.
    pub fn name(self) -> &'static str {
        match self {
            JpegSimd::None => "none",
            JpegSimd::Sse2 => "sse2",
            JpegSimd::Avx2 => "avx2",
            JpegSimd::Neon => "neon",
            JpegSimd::Other => "simd",
        }
    }
}

impl std::fmt::Display for JpegSimd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Which SIMD instructions the JPEG decoder uses here ([`JpegSimd::None`]: about 25% slower
/// decoding; on x86-64 install `nasm`, then `cargo clean -p mozjpeg-sys` and build again).
///
/// ```
/// let simd = stokehold::decode::jpeg_simd();
/// println!("JPEG SIMD: {simd}");
/// ```
pub fn jpeg_simd() -> JpegSimd {
    if !super::turbo::simd_in_use() {
        return JpegSimd::None;
    }
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    {
        // libjpeg-turbo takes AVX2 where the CPU has it and the OS saves its registers, as
        // this detection checks; else SSE2, which its SIMD build requires.
        if std::arch::is_x86_feature_detected!("avx2") {
            JpegSimd::Avx2
        } else {
            JpegSimd::Sse2
        }
    }
    #[cfg(any(target_arch = "arm", target_arch = "aarch64"))]
    {
        JpegSimd::Neon
    }
    #[cfg(not(any(
        target_arch = "x86",
        target_arch = "x86_64",
        target_arch = "arm",
        target_arch = "aarch64"
    )))]
    {
        JpegSimd::Other
    }
}

/// Whether the bundled libjpeg-turbo was compiled with its SIMD code (what `build.rs` read
/// from `mozjpeg-sys`'s `jconfig.h`).
pub(crate) fn built_with_simd() -> bool {
    env!("STOKEHOLD_JPEG_SIMD_BUILT") == "1"
}

/// The one warning for a decoder without SIMD, as a line of text (`None` when it has SIMD).
pub fn jpeg_simd_warning() -> Option<String> {
    (jpeg_simd() == JpegSimd::None).then(|| {
        let why = if built_with_simd() {
            "this CPU has none of the SIMD instructions libjpeg-turbo has code for"
        } else {
            "libjpeg-turbo was built without its SIMD code (no `nasm` at build time): install \
             nasm, then `cargo clean -p mozjpeg-sys` and build again"
        };
        format!("JPEG decoding runs without SIMD, about 25% slower: {why}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The run-time probe agrees with the build: SIMD exactly when libjpeg-turbo was compiled
    /// with it (every CPU of the architectures it has SIMD code for runs its baseline).
    #[test]
    fn the_simd_probe_agrees_with_the_build() {
        let simd = jpeg_simd();
        let has_code = cfg!(any(
            target_arch = "x86",
            target_arch = "x86_64",
            target_arch = "arm",
            target_arch = "aarch64"
        ));
        if has_code {
            assert_eq!(
                simd != JpegSimd::None,
                built_with_simd(),
                "jpeg_simd() = {simd}, built with SIMD: {}",
                built_with_simd()
            );
        }
        assert_eq!(jpeg_simd_warning().is_some(), simd == JpegSimd::None);
    }

    /// Where a working `nasm` is installed (scripts/setup.sh installs it), the build must have
    /// used it: a decoder without SIMD here is a stale build to redo.
    #[test]
    fn with_nasm_installed_the_jpeg_decoder_has_simd() {
        if !cfg!(any(target_arch = "x86", target_arch = "x86_64")) {
            return;
        }
        let nasm = std::process::Command::new("nasm").arg("-v").output();
        let Ok(out) = nasm else {
            crate::testutil::skip::skip(
                crate::testutil::skip::Need::Tool("nasm"),
                "no nasm on PATH (the JPEG decoder may lack SIMD)",
            );
            return;
        };
        let version = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() || version.contains("NASM version 0.") {
            crate::testutil::skip::skip(
                crate::testutil::skip::Need::Tool("nasm"),
                format!("nasm on PATH does not work or is too old: {version}"),
            );
            return;
        }
        assert!(
            built_with_simd() && jpeg_simd() != JpegSimd::None,
            "nasm is installed ({}) but the JPEG decoder has no SIMD (jpeg_simd() = {}): \
             rebuild it with `cargo clean -p mozjpeg-sys`",
            version.trim(),
            jpeg_simd()
        );
    }
}
