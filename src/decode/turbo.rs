//! The libjpeg-turbo decoder (as bundled by `mozjpeg-sys`, whose decoder is libjpeg-turbo's),
//! behind a safe interface. All of the crate's `unsafe` code for libjpeg is here.
//!
//! # Errors never cross C frames by `longjmp`
//!
//! libjpeg reports a fatal error by calling `err->error_exit`, which must not return. We
//! install [`error_exit`], an `extern "C-unwind"` function that formats the message and
//! starts a Rust unwind (`resume_unwind`, no panic hook, nothing printed). `mozjpeg-sys` is
//! built with its `unwinding` feature, which compiles the C code with `-fexceptions` and
//! declares every libjpeg function `extern "C-unwind"`, so the unwind passes through the C
//! frames (which own no resources of their own: everything lives in the decompressor's
//! memory pools) up to the `catch_unwind` in [`decode`]. The decompressor is then destroyed
//! (`Decompress::give_back`, which frees the pools and keeps the emptied box for the
//! thread's next decode; `Drop` destroys one that never got there). Warnings (`emit_message`) are
//! ignored, as Pillow does; truncation was already refused by the header read
//! ([`super::header`]).

use std::os::raw::{c_int, c_ulong};
use std::panic::{catch_unwind, AssertUnwindSafe};

use mozjpeg_sys::{
    boolean, jpeg_common_struct, jpeg_crop_scanline, jpeg_decompress_struct,
    jpeg_destroy_decompress, jpeg_error_mgr, jpeg_mem_src, jpeg_read_header, jpeg_read_scanlines,
    jpeg_skip_scanlines, jpeg_start_decompress, jpeg_std_error, JBLOCKROW, JDIMENSION,
    JSAMPROW_MUT, J_COLOR_SPACE,
};

use crate::error::DecodeError;

// libjpeg-turbo's SIMD dispatch, not in mozjpeg-sys's bindings: `simd/<arch>/jsimd.c` in a
// build with SIMD, `jsimd_none.c` (every function returns 0) in one without (on x86, when
// `nasm` was missing at build time).
extern "C" {
    fn jsimd_can_idct_islow() -> c_int;
}

/// Whether libjpeg-turbo runs its SIMD code here: asks it whether it would use its SIMD IDCT
/// (false when it was built without SIMD, or this CPU lacks the instructions it needs).
pub(crate) fn simd_in_use() -> bool {
    // SAFETY: a C function without arguments that reads the CPU's features into
    // libjpeg-turbo's thread-local flags and returns 0 or 1; it touches no memory of ours and
    // never reports an error (so no unwind can start in it).
    unsafe { jsimd_can_idct_islow() != 0 }
}

/// A rectangle of the stored (un-oriented) image: top, left, height, width.
pub(crate) type Rect = (usize, usize, usize, usize);

/// What the caller wants decoded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request {
    /// Stored width and height from the header (checked against libjpeg's view).
    pub width: usize,
    /// Stored height.
    pub height: usize,
    /// Components in the frame (1, 3 or 4).
    pub components: usize,
    /// Only this rectangle of the stored image (None: all of it).
    pub region: Option<Rect>,
    /// DCT-domain downscale by 1/`scale_denom` (1, 2, 4 or 8). With a value other than 1,
    /// `width`/`height`/`region` are in the *scaled* image's coordinates.
    pub scale_denom: u8,
    /// libjpeg's block smoothing of progressive JPEGs whose coefficients are incomplete
    /// (its default); off for a stream whose unused AC scans were dropped on purpose.
    pub block_smoothing: bool,
    /// libjpeg's fancy (interpolating) chroma upsampling, its default; off: chroma repeated
    /// over each block, as the JPEG engines write it.
    pub fancy_upsampling: bool,
}

/// The error payload carried by the unwind out of [`error_exit`].
struct LibjpegError(String);

/// `err->error_exit`: format libjpeg's message and unwind to [`decode`]'s `catch_unwind`.
unsafe extern "C-unwind" fn error_exit(cinfo: &mut jpeg_common_struct) {
    let mut buf = [0u8; 80];
    // SAFETY: `cinfo.err` is the error manager installed in `Decompress::new`, alive for the
    // whole decompression. `format_message` writes at most JMSG_LENGTH_MAX (80) bytes,
    // NUL-terminated, into the buffer; `mozjpeg-sys` types the buffer as `&[u8; 80]`, which
    // has the same ABI as the `*mut u8` we pass (a pointer), so the transmute only fixes
    // the mutability the C side really has.
    let msg = unsafe {
        match (*cinfo.err).format_message {
            Some(f) => {
                type Fmt = unsafe extern "C-unwind" fn(&mut jpeg_common_struct, *mut u8);
                let f: Fmt = std::mem::transmute::<
                    unsafe extern "C-unwind" fn(&mut jpeg_common_struct, &[u8; 80]),
                    Fmt,
                >(f);
                f(cinfo, buf.as_mut_ptr());
                let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
                String::from_utf8_lossy(&buf[..end]).into_owned()
            }
            None => format!("libjpeg error code {}", (*cinfo.err).msg_code),
        }
    };
    std::panic::resume_unwind(Box::new(LibjpegError(msg)));
}

/// `err->emit_message`: warnings and trace messages are dropped.
unsafe extern "C-unwind" fn emit_message(_cinfo: &mut jpeg_common_struct, _level: c_int) {}

/// `err->output_message`: nothing is printed.
unsafe extern "C-unwind" fn output_message(_cinfo: &mut jpeg_common_struct) {}

/// A decompressor and its error manager, boxed so their addresses are stable (libjpeg keeps
/// a pointer to the error manager, and the source manager points into the input).
struct Decompress {
    cinfo: jpeg_decompress_struct,
    err: jpeg_error_mgr,
    created: bool,
}

thread_local! {
    /// The box of this thread's last decompressor, emptied: a decode reuses it rather than
    /// allocating one (libjpeg's own state is made afresh for each image all the same).
    static SPARE: std::cell::Cell<Option<Box<Decompress>>> = const { std::cell::Cell::new(None) };
}

impl Decompress {
    fn new() -> Box<Decompress> {
        // SAFETY: both structs are plain C data (integers, raw pointers, nullable function
        // pointers, C enums whose zero is a valid variant); all-zero is how C code
        // initialises them before `jpeg_std_error` / `jpeg_create_decompress`.
        let zeroed = || unsafe { std::mem::zeroed::<Decompress>() };
        let mut d = match SPARE.try_with(std::cell::Cell::take).ok().flatten() {
            Some(mut spare) => {
                // The spare's libjpeg state was destroyed (`created` is false): no drop work.
                *spare = zeroed();
                spare
            }
            None => Box::new(zeroed()),
        };
        // SAFETY: `jpeg_std_error` only fills the struct's fields.
        unsafe { jpeg_std_error(&mut d.err) };
        d.err.error_exit = Some(error_exit);
        d.err.emit_message = Some(emit_message);
        d.err.output_message = Some(output_message);
        d.cinfo.common.err = &mut d.err;
        d
    }

    /// Destroys libjpeg's state and keeps the box for this thread's next decode.
    fn give_back(mut d: Box<Decompress>) {
        d.destroy();
        let _ = SPARE.try_with(|spare| spare.set(Some(d)));
    }

    fn destroy(&mut self) {
        if self.created {
            // SAFETY: the decompressor was created by `jpeg_create_decompress` and is
            // destroyed once (`created` is cleared); libjpeg allows destroying in any state,
            // also after an error. Destroying cannot raise an error, so no unwind can start.
            unsafe { jpeg_destroy_decompress(&mut self.cinfo) };
            self.created = false;
        }
    }
}

impl Drop for Decompress {
    fn drop(&mut self) {
        self.destroy();
    }
}

/// Where a sequential JPEG's quantised DCT coefficients come from when not from libjpeg's
/// own entropy decoder: libjpeg asks for the MCUs in order and does everything after
/// entropy decoding itself (see [`decode_from_source`]).
pub(crate) trait McuSource {
    /// Blocks per MCU (1 to 10), in the order of the interleaved scan.
    fn blocks_per_mcu(&self) -> usize;
    /// Writes the next MCU's blocks: quantised coefficients in natural (row-major) order.
    /// libjpeg hands them over zeroed, as it does to its own entropy decoders, so only the
    /// nonzero ones need writing. `None`: the MCU is passed over (rows libjpeg skips).
    /// False when the source cannot give that MCU exactly as libjpeg's entropy decoder
    /// would (more MCUs than it holds, data it does not decode): the decode then stops
    /// with an error, and the caller decodes without the source.
    fn next_mcu(&mut self, blocks: Option<McuBlocks<'_>>) -> bool;
}

/// The blocks of one MCU as libjpeg hands them to its entropy decoder.
pub(crate) struct McuBlocks<'a> {
    blocks: *mut JBLOCKROW,
    len: usize,
    _borrow: std::marker::PhantomData<&'a mut [i16; 64]>,
}

impl McuBlocks<'_> {
    /// Block `i` (below `blocks_per_mcu()`).
    #[inline(always)]
    pub(crate) fn get(&mut self, i: usize) -> &mut [i16; 64] {
        assert!(i < self.len, "block {i} of an MCU of {}", self.len);
        // SAFETY: libjpeg passes `len` (= blocks_in_MCU, checked in `install_source`)
        // pointers to distinct, writable, aligned blocks that live through the
        // `decode_mcu` call this value is confined to; `&mut self` keeps one block
        // borrowed at a time.
        unsafe { &mut **self.blocks.add(i) }
    }
}

/// libjpeg's entropy decoder method table (`struct jpeg_entropy_decoder`, jpegint.h):
/// `decode_mcu` is what we replace.
#[repr(C)]
struct EntropyDecoder {
    start_pass: Option<unsafe extern "C-unwind" fn(*mut jpeg_decompress_struct)>,
    decode_mcu:
        Option<unsafe extern "C-unwind" fn(*mut jpeg_decompress_struct, *mut JBLOCKROW) -> boolean>,
    insufficient_data: boolean,
}

/// The unwind payload of a source that cannot go on.
struct Declined;

/// `entropy->decode_mcu` for [`decode_from_source`]: the next MCU's blocks come from the
/// source `S` in `client_data` (a null `mcu` passes over one, as when rows are skipped).
unsafe extern "C-unwind" fn decode_mcu_from_source<S: McuSource>(
    cinfo: *mut jpeg_decompress_struct,
    mcu: *mut JBLOCKROW,
) -> boolean {
    // SAFETY: installed only by `decode_inner`, which points `client_data` at an `S` that
    // outlives every libjpeg call it makes and clears it before returning.
    let source = unsafe { &mut *((*cinfo).common.client_data as *mut S) };
    let blocks = (!mcu.is_null()).then(|| McuBlocks {
        blocks: mcu,
        len: source.blocks_per_mcu(),
        _borrow: std::marker::PhantomData,
    });
    if !source.next_mcu(blocks) {
        std::panic::resume_unwind(Box::new(Declined));
    }
    1
}

/// Pillow's `CMYK;I` → RGB: the stored (Adobe, inverted) values are inverted back to CMYK,
/// then `R = 255 - K - C·(255 - K)/255` with Pillow's rounding (`MULDIV255`).
#[inline]
fn cmyk_to_rgb(src: &[u8], dst: &mut [u8]) {
    for (p, o) in src.chunks_exact(4).zip(dst.chunks_exact_mut(3)) {
        let nk = u32::from(p[3]); // 255 - K, K = 255 - stored
        for c in 0..3 {
            let cc = 255 - u32::from(p[c]);
            let tmp = cc * nk + 128;
            let mul = ((tmp >> 8) + tmp) >> 8;
            o[c] = nk.saturating_sub(mul) as u8;
        }
    }
}

/// Decodes `data` (starting at the SOI marker) as requested. Returns interleaved pixels of
/// the region (or the whole image) with 1 channel (gray) or 3 (RGB; CMYK/YCCK converted as
/// Pillow does), and the (height, width) returned.
pub(crate) fn decode(
    data: &[u8],
    req: &Request,
) -> Result<(Vec<u8>, usize, usize, usize), DecodeError> {
    decode_with::<NoSource>(data, req, None, false).map(Decoded::into_tuple)
}

/// As [`decode`], for a sequential JPEG whose one scan (all components) is entropy-decoded
/// by `source` instead of libjpeg: libjpeg dequantises, inverse-transforms, upsamples and
/// converts colour as for any sequential JPEG, so the pixels are those of a file holding
/// the same coefficients. `data` may end after the scan header when the source does not
/// read the scan from it. An error when the source declines an MCU (see
/// [`McuSource::next_mcu`]) as for anything else libjpeg refuses: the caller then decodes
/// without the source.
pub(crate) fn decode_from_source<S: McuSource>(
    data: &[u8],
    req: &Request,
    source: &mut S,
) -> Result<(Vec<u8>, usize, usize, usize), DecodeError> {
    decode_with(data, req, Some(source), false).map(Decoded::into_tuple)
}

/// As [`decode_from_source`], but a region comes with the columns libjpeg decodes either
/// side of it (to whole iMCUs and a margin), its rows written straight into the output: no
/// copy of the window out of libjpeg's rows (3% of a training pipeline's CPU). CMYK and
/// whole images come as [`decode_from_source`] gives them.
pub(crate) fn decode_from_source_wide<S: McuSource>(
    data: &[u8],
    req: &Request,
    source: &mut S,
) -> Result<Decoded, DecodeError> {
    decode_with(data, req, Some(source), true)
}

/// Decoded pixels: `height` rows of `width` pixels, `channels` interleaved samples each,
/// the requested region's first column at `left` (0, and the region's width, but from
/// [`decode_from_source_wide`]).
#[derive(Debug)]
pub(crate) struct Decoded {
    pub pixels: Vec<u8>,
    pub height: usize,
    pub width: usize,
    pub channels: usize,
    pub left: usize,
}

impl Decoded {
    /// (pixels, height, width, channels) of a packed result.
    fn into_tuple(self) -> (Vec<u8>, usize, usize, usize) {
        debug_assert_eq!(self.left, 0);
        (self.pixels, self.height, self.width, self.channels)
    }
}

/// The type of no source.
enum NoSource {}

impl McuSource for NoSource {
    fn blocks_per_mcu(&self) -> usize {
        match *self {}
    }
    fn next_mcu(&mut self, _: Option<McuBlocks<'_>>) -> bool {
        match *self {}
    }
}

fn decode_with<S: McuSource>(
    data: &[u8],
    req: &Request,
    source: Option<&mut S>,
    wide: bool,
) -> Result<Decoded, DecodeError> {
    let mut d = Decompress::new();
    let result = catch_unwind(AssertUnwindSafe(|| {
        decode_inner(&mut d, data, req, source, wide)
    }));
    d.cinfo.common.client_data = std::ptr::null_mut();
    Decompress::give_back(d);
    match result {
        Ok(r) => r,
        Err(payload) => Err(DecodeError::Corrupt(
            match payload.downcast::<LibjpegError>() {
                Ok(e) => format!("JPEG: {}", e.0),
                Err(p) if p.is::<Declined>() => {
                    "JPEG: the coefficient source declined an MCU".into()
                }
                Err(p) => format!(
                    "JPEG decoder panicked: {}",
                    p.downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown".into())
                ),
            },
        )),
    }
}

/// Columns of margin decoded left and right of a region, in iMCUs, so that libjpeg's fancy
/// upsampling sees the same neighbours as in a full decode (`jpeg_crop_scanline` treats the
/// crop edges as image edges): one iMCU (8 to 32 pixels) is more than the 1-sample reach of
/// the upsampling filters. Without it the window tests fail.
const MARGIN_IMCUS: usize = 1;

/// The margin where libjpeg smooths blocks ([`smooths_blocks`]): its smoothing estimates a
/// block's first AC coefficients from the DC values of the blocks up to two away, and takes
/// the crop's first block column as the image's edge, so the first two block columns of a
/// crop come out other than in a full decode; a third iMCU keeps the upsampling's sample
/// left of the window out of them too (found by fuzzing: `fuzz/checks.rs`).
const SMOOTHING_MARGIN_IMCUS: usize = 3;

/// Whether libjpeg smooths blocks in this decode (after `jpeg_start_decompress`): a
/// progressive JPEG, smoothing on, and some of the first AC coefficients (zigzag 1 to 9) of a
/// component not known to full precision once every scan has been read — a progression that
/// stops early. A superset of jdcoefct.c's `smoothing_ok`, which also declines for zero
/// quantizers and an unknown DC; complete progressive files (nearly all) are not smoothed.
fn smooths_blocks(cinfo: &jpeg_decompress_struct) -> bool {
    if cinfo.do_block_smoothing == 0 || cinfo.coef_bits.is_null() {
        return false;
    }
    let nc = cinfo.num_components.max(0) as usize;
    // SAFETY: a non-null `coef_bits` is libjpeg's progression table, `2 × num_components`
    // rows of 64 ints (jdphuff.c), alive with the decompressor; `jpeg_start_decompress` has
    // read every scan of a multi-scan file into the coefficient buffer, so it is final, as
    // when libjpeg itself decides.
    let bits = unsafe { std::slice::from_raw_parts(cinfo.coef_bits as *const [c_int; 64], nc) };
    bits.iter().any(|c| c[1..10].iter().any(|&b| b != 0))
}

/// Whether `jpeg_decompress_struct` has the layout whose `entropy` field [`install_source`]
/// finds (mozjpeg-sys 2.2's binding of libjpeg-turbo's jpeglib.h, 64-bit, no jpeg70/80
/// ABI): another layout turns sources off (libjpeg decodes alone instead), and a test
/// fails, so that the offset is checked again.
pub(crate) const ENTROPY_FIELD_KNOWN: bool =
    cfg!(target_pointer_width = "64") && std::mem::size_of::<jpeg_decompress_struct>() == 632;

/// Points libjpeg's entropy decoder at `source` (after `jpeg_start_decompress`, before any
/// row is read). Fails, changing nothing, when the MCU layout is not the source's.
fn install_source<S: McuSource>(
    cinfo: &mut jpeg_decompress_struct,
    source: &mut S,
) -> Result<(), DecodeError> {
    let mismatch = || DecodeError::Corrupt("JPEG: coefficients do not fit the header".into());
    let nc = cinfo.num_components as usize;
    // SAFETY: `comp_info` holds `num_components` entries once the header is read.
    let comps = unsafe { std::slice::from_raw_parts(cinfo.comp_info, nc) };
    let blocks: usize = if nc == 1 {
        1
    } else {
        comps
            .iter()
            .map(|c| (c.h_samp_factor * c.v_samp_factor) as usize)
            .sum()
    };
    if blocks != source.blocks_per_mcu() {
        return Err(mismatch());
    }
    if !ENTROPY_FIELD_KNOWN {
        return Err(mismatch());
    }
    // `entropy` is private in mozjpeg-sys's binding. jpeglib.h ends the struct with five
    // pointers: entropy, idct, upsample, cconvert, cquantize (no padding after pointers).
    let entropy_at = std::mem::size_of::<jpeg_decompress_struct>()
        - 5 * std::mem::size_of::<*mut std::ffi::c_void>();
    // SAFETY: the offset is inside `cinfo` and names its `entropy` field (above), a pointer
    // libjpeg set to its live entropy decoder in `jpeg_start_decompress`; that decoder
    // begins with `struct jpeg_entropy_decoder`, which `EntropyDecoder` mirrors.
    let entropy = unsafe {
        *((cinfo as *mut jpeg_decompress_struct as *mut u8).add(entropy_at)
            as *mut *mut EntropyDecoder)
    };
    // SAFETY: as above; a null or half-initialised table is refused before it is written.
    let table = unsafe { entropy.as_mut() }.ok_or_else(mismatch)?;
    if table.start_pass.is_none() || table.decode_mcu.is_none() {
        return Err(mismatch());
    }
    table.decode_mcu = Some(decode_mcu_from_source::<S>);
    cinfo.common.client_data = source as *mut S as *mut std::ffi::c_void;
    Ok(())
}

fn decode_inner<S: McuSource>(
    d: &mut Decompress,
    data: &[u8],
    req: &Request,
    source: Option<&mut S>,
    wide: bool,
) -> Result<Decoded, DecodeError> {
    let cinfo = &mut d.cinfo;
    // SAFETY: `cinfo` is zeroed with a valid error manager; creation fills the rest.
    unsafe { mozjpeg_sys::jpeg_create_decompress(cinfo) };
    d.created = true;
    // SAFETY: `data` outlives the decompressor (it is destroyed before `decode` returns),
    // and libjpeg only reads `data.len()` bytes from it.
    unsafe { jpeg_mem_src(cinfo, data.as_ptr(), data.len() as c_ulong) };
    // SAFETY: a created decompressor with a memory source; errors unwind to `decode`.
    unsafe { jpeg_read_header(cinfo, 1 as boolean) };
    let (nc, out_cs) = match cinfo.num_components {
        1 => (1, J_COLOR_SPACE::JCS_GRAYSCALE),
        3 => (3, J_COLOR_SPACE::JCS_RGB),
        4 => (4, J_COLOR_SPACE::JCS_CMYK),
        n => {
            return Err(DecodeError::Unsupported(format!(
                "JPEG with {n} components is not supported"
            )))
        }
    };
    if nc != req.components {
        return Err(DecodeError::Corrupt(
            "JPEG: the decoder saw a different number of components than the frame header".into(),
        ));
    }
    cinfo.out_color_space = out_cs;
    if !req.block_smoothing {
        cinfo.do_block_smoothing = 0 as boolean;
    }
    if !req.fancy_upsampling {
        cinfo.do_fancy_upsampling = 0 as boolean;
    }
    if req.scale_denom > 1 {
        cinfo.scale_num = 1;
        cinfo.scale_denom = u32::from(req.scale_denom);
    }
    // SAFETY: header read, parameters set; errors unwind to `decode`.
    unsafe { jpeg_start_decompress(cinfo) };
    if let Some(source) = source {
        install_source(cinfo, source)?;
    }
    let (full_w, full_h) = (cinfo.output_width as usize, cinfo.output_height as usize);
    if (full_w, full_h) != (req.width, req.height) || cinfo.output_components as usize != nc {
        return Err(DecodeError::Corrupt(format!(
            "JPEG: decoder output is {full_w}x{full_h}, expected {}x{}",
            req.width, req.height
        )));
    }
    let (top, left, h, w) = req.region.unwrap_or((0, 0, full_h, full_w));
    if h == 0 || w == 0 || top + h > full_h || left + w > full_w {
        return Err(DecodeError::Corrupt(format!(
            "JPEG: region {h}x{w} at ({top}, {left}) is outside the {full_w}x{full_h} image"
        )));
    }
    let out_c = if nc == 4 { 3 } else { nc };
    if req.region.is_none() && nc != 4 {
        // Whole image straight into the output, a few rows per call.
        let mut out = crate::scratch::buffer::<u8>(h * w * out_c);
        read_rows(cinfo, &mut out, 0, full_h)?;
        return Ok(Decoded {
            pixels: out,
            height: h,
            width: w,
            channels: out_c,
            left: 0,
        });
    }

    // A region (or CMYK): decode a margin around it (libjpeg's crop widens it to whole
    // iMCUs too), its rows kept whole (`wide`) or each copied out of a line buffer.
    let imcu_w = cinfo.max_h_samp_factor.max(1) as usize * 8;
    let margin = match smooths_blocks(cinfo) {
        true => SMOOTHING_MARGIN_IMCUS,
        false => MARGIN_IMCUS,
    } * imcu_w;
    let x0 = left.saturating_sub(margin);
    let x1 = (left + w + margin).min(full_w);
    let mut xoff = x0 as JDIMENSION;
    let mut cw = (x1 - x0) as JDIMENSION;
    // SAFETY: called after start_decompress, before any row is read; `xoff + cw <= full_w`.
    // libjpeg aligns `xoff` down to an iMCU boundary and widens `cw` to keep the end.
    unsafe { jpeg_crop_scanline(cinfo, &mut xoff, &mut cw) };
    let (xoff, cw) = (xoff as usize, cw as usize);
    if xoff > left || xoff + cw < left + w || cinfo.output_width as usize != cw {
        return Err(DecodeError::Corrupt(
            "JPEG: unexpected crop from the decoder".into(),
        ));
    }
    if top > 0 {
        // Rows above the window: libjpeg-turbo entropy-decodes what it must (the Huffman
        // stream is sequential) but skips IDCT, upsampling and colour conversion, and it
        // rebuilds the upsampling context of the first row read (no vertical margin needed;
        // the tests check every subsampling at unaligned tops).
        // SAFETY: top < full_h; errors unwind to `decode`.
        let skipped = unsafe { jpeg_skip_scanlines(cinfo, top as JDIMENSION) };
        if skipped as usize != top {
            return Err(DecodeError::Corrupt("JPEG: could not skip rows".into()));
        }
    }
    if wide && nc != 4 {
        // The window's rows whole, straight into the output.
        let mut out = crate::scratch::buffer::<u8>(h * cw * nc);
        read_rows(cinfo, &mut out, top, top + h)?;
        return Ok(Decoded {
            pixels: out,
            height: h,
            width: cw,
            channels: nc,
            left: left - xoff,
        });
    }
    // Up to ROWS rows per call into a small buffer (one row per call would make libjpeg
    // copy through its spare row for 2× vertical upsampling).
    let mut out = crate::scratch::buffer::<u8>(h * w * out_c);
    let line_len = cw * nc;
    let mut lines = vec![0u8; ROWS * line_len];
    let mut rgb_line = if nc == 4 {
        vec![0u8; cw * 3]
    } else {
        Vec::new()
    };
    let col = (left - xoff) * out_c;
    let row_bytes = w * out_c;
    while (cinfo.output_scanline as usize) < top + h {
        let y = cinfo.output_scanline as usize;
        let want = (top + h - y).min(ROWS);
        let mut rows: [JSAMPROW_MUT; ROWS] = [std::ptr::null_mut(); ROWS];
        for (i, r) in rows.iter_mut().enumerate().take(want) {
            *r = lines[i * line_len..].as_mut_ptr();
        }
        // SAFETY: `want` row pointers, each to `line_len` writable bytes of `lines`, which
        // libjpeg fills with output_width (= cw) × output_components samples = `line_len`.
        let got = unsafe { jpeg_read_scanlines(cinfo, rows.as_mut_ptr(), want as JDIMENSION) };
        let got = got as usize;
        if got == 0 || got > want {
            return Err(DecodeError::Corrupt(
                "JPEG: decoder returned no rows".into(),
            ));
        }
        for (i, line) in lines.chunks_exact(line_len).take(got).enumerate() {
            let src: &[u8] = if nc == 4 {
                cmyk_to_rgb(line, &mut rgb_line);
                &rgb_line
            } else {
                line
            };
            let o = (y + i - top) * row_bytes;
            out[o..o + row_bytes].copy_from_slice(&src[col..col + row_bytes]);
        }
    }
    Ok(Decoded {
        pixels: out,
        height: h,
        width: w,
        channels: out_c,
        left: 0,
    })
}

/// Rows per `jpeg_read_scanlines` call (one row per call would make libjpeg copy through
/// its spare row for 2× vertical upsampling).
const ROWS: usize = 4;

/// Reads output rows `first..end` (the next to come is `first`) into `out`, a row each
/// output width × components bytes (what libjpeg writes a row), a few rows per call: every
/// one of them is written (a scratch buffer's old contents never show) or it fails.
fn read_rows(
    cinfo: &mut jpeg_decompress_struct,
    out: &mut [u8],
    first: usize,
    end: usize,
) -> Result<(), DecodeError> {
    let stride = cinfo.output_width as usize * cinfo.output_components as usize;
    assert!(out.len() >= (end - first) * stride);
    while (cinfo.output_scanline as usize) < end {
        let y = cinfo.output_scanline as usize - first;
        let n = (end - first - y).min(ROWS);
        let mut rows: [JSAMPROW_MUT; ROWS] = [std::ptr::null_mut(); ROWS];
        for (i, r) in rows.iter_mut().enumerate().take(n) {
            *r = out[(y + i) * stride..].as_mut_ptr();
        }
        // SAFETY: each of the `n` row pointers points to `stride` writable bytes of `out`
        // (rows y..y+n ≤ end - first, and `out` holds that many: asserted above), which
        // libjpeg fills with its output_width × output_components samples = `stride`.
        let got = unsafe { jpeg_read_scanlines(cinfo, rows.as_mut_ptr(), n as JDIMENSION) };
        if got == 0 {
            return Err(DecodeError::Corrupt(
                "JPEG: decoder returned no rows".into(),
            ));
        }
    }
    Ok(())
}
