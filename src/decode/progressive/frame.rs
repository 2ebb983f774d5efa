//! The coefficient storage of a progressive decode: the frame and its components as the
//! scans fill them, a scan's header, the MCUs a request needs, and the storage each thread
//! keeps for its next image.

pub(super) struct Component {
    pub(super) id: u8,
    pub(super) h: usize,
    pub(super) v: usize,
    /// Quantisation table slot in the frame header.
    pub(super) tq: u8,
    /// Blocks across and down that hold image data.
    pub(super) width_blocks: usize,
    pub(super) height_blocks: usize,
    /// Blocks across in storage (whole MCUs).
    pub(super) stride_blocks: usize,
    /// Block rows stored (those the request needs, in whole MCU rows).
    pub(super) rows_stored: usize,
    /// AC coefficients, 64 per block in zigzag order (entry 0 unused). Only the entries
    /// `nonzero` marks are ever read, so the buffer is not cleared between images: clearing
    /// tens of megabytes (and sweeping them in each DC scan) cost more than decoding.
    pub(super) coefs: Vec<i16>,
    /// DC coefficients, one per block, apart from the AC ones so that DC scans touch a
    /// dense array instead of a cache line per block.
    pub(super) dc: Vec<i16>,
    /// For each block, bit k set when AC coefficient k (zigzag) is nonzero: refinement
    /// scans and the hand-over to libjpeg visit only those.
    pub(super) nonzero: Vec<u64>,
    /// The quantisation table latched at the component's first scan (precision, 64 values
    /// in zigzag order as stored).
    pub(super) quant: Option<(u8, [u16; 64])>,
}

pub(super) struct Frame {
    pub(super) width: usize,
    pub(super) height: usize,
    pub(super) max_h: usize,
    pub(super) max_v: usize,
    pub(super) mcus_x: usize,
    pub(super) mcus_y: usize,
    pub(super) comps: Vec<Component>,
}

/// Scan header fields.
pub(super) struct Scan {
    pub(super) comps: Vec<(usize, usize, usize)>, // (component index, dc table slot, ac table slot)
    pub(super) ss: usize,
    pub(super) se: usize,
    pub(super) ah: u8,
    pub(super) al: u8,
}

/// The needed part of the image, in MCUs: rows r0..r1, columns c0..c1.
#[derive(Clone, Copy)]
pub(super) struct McuRegion {
    pub(super) r0: usize,
    pub(super) r1: usize,
    pub(super) c0: usize,
    pub(super) c1: usize,
}

/// Coefficient storage kept by each thread between images, up to this many coefficients
/// (96 MiB): a large photograph's coefficients are tens of megabytes, and fresh pages cost
/// more to fault in than the whole DC scan takes to decode.
const KEPT_COEFFICIENTS: usize = 48 << 20;

thread_local! {
    static SPARE_COEFS: std::cell::RefCell<Vec<Vec<i16>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A buffer of at least `len` AC coefficients with unspecified (old, never uninitialised)
/// contents, one this thread used before when there is one.
pub(super) fn ac_buffer(len: usize) -> Vec<i16> {
    let spare = SPARE_COEFS.with(|s| {
        let mut s = s.borrow_mut();
        let best = (0..s.len())
            .filter(|&i| s[i].capacity() >= len)
            .min_by_key(|&i| s[i].capacity())
            .or_else(|| (0..s.len()).max_by_key(|&i| s[i].capacity()));
        best.map(|i| s.swap_remove(i))
    });
    let mut v = spare.unwrap_or_default();
    if v.len() < len {
        v.resize(len, 0);
    }
    v
}

/// Keeps `frame`'s coefficient buffers for this thread's next image (within the limit).
pub(super) fn keep_buffers(frame: Frame) {
    SPARE_COEFS.with(|s| {
        let mut s = s.borrow_mut();
        for c in frame.comps {
            s.push(c.coefs);
        }
        s.sort_by_key(|v| std::cmp::Reverse(v.capacity()));
        let mut total = 0;
        s.retain(|v| {
            let keep = total + v.capacity() <= KEPT_COEFFICIENTS;
            total += if keep { v.capacity() } else { 0 };
            keep
        });
    });
}

/// Pixels per MCU across and down in the sequential output (for one component, a block).
pub(super) fn mcu_size(f: &Frame) -> (usize, usize) {
    if f.comps.len() == 1 {
        (8, 8)
    } else {
        (8 * f.max_h, 8 * f.max_v)
    }
}
