//! Where the device decoded a sample: its place in a decode area shared with the rest of its
//! submission, and the chroma rebuild it needs first (what the prep workers' plan, the
//! feeding thread and the kernels' launch all speak of).

use std::sync::{Arc, Mutex};

use crate::cuda::chain::SourceDims;
use crate::cuda::gpu_device::{DevicePtr, Event};
use crate::cuda::pool::DeviceBuffer;
use crate::decode::JpegHeader;
use crate::nvjpeg::Roi;

/// How the fancy chroma of a sample the JPEG engines decoded is rebuilt
/// (`kernels/chroma.cu`): the decoded region's place in the stored image and the chroma
/// subsampling. `None` (see [`Rebuild::of`]) when there is nothing to rebuild.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Rebuild {
    pub(super) x0: usize,
    pub(super) y0: usize,
    pub(super) image_w: usize,
    pub(super) image_h: usize,
    pub(super) sx: usize,
    pub(super) sy: usize,
}

impl Rebuild {
    /// The rebuild of region `roi` (`None`: the whole image), `width` × `height` as decoded,
    /// of a JPEG with `header`: `None` for gray or unsubsampled chroma (repetition and
    /// interpolation agree), and for samplings the kernels don't take (the router sends
    /// those to the CPU).
    pub(super) fn of(
        header: &JpegHeader,
        roi: Option<Roi>,
        width: usize,
        height: usize,
    ) -> Option<Rebuild> {
        let c = &header.frame.components;
        if c.len() != 3 || (c[1].h, c[1].v) != (c[2].h, c[2].v) {
            return None;
        }
        let (lh, lv) = (usize::from(c[0].h), usize::from(c[0].v));
        let (ch, cv) = (usize::from(c[1].h).max(1), usize::from(c[1].v).max(1));
        if lh % ch != 0 || lv % cv != 0 {
            return None;
        }
        let (sx, sy) = (lh / ch, lv / cv);
        if (sx, sy) == (1, 1) || sx > 2 || sy > 2 {
            return None;
        }
        let (x0, y0) = roi.map_or((0, 0), |r| (r.x, r.y));
        debug_assert!(roi.is_none_or(|r| (r.width, r.height) == (width, height)));
        Some(Rebuild {
            x0,
            y0,
            image_w: header.width(),
            image_h: header.height(),
            sx,
            sy,
        })
    }
}

/// Where a sample's decoded source is: `dims` at `ptr` (in one of the fill's areas), and
/// the chroma rebuild it needs first.
#[derive(Debug, Clone, Copy)]
pub(super) struct Decoded {
    pub(super) ptr: DevicePtr,
    pub(super) dims: SourceDims,
    pub(super) rebuild: Option<Rebuild>,
}

/// One decode submission's area and the event after its decodes. The samples decoded into
/// it share it, and may end up in two batches (a skipped sample moves the batch boundary):
/// each batch whose kernels read it records its release event, and the area goes back to
/// its pool when the last sample's batch lets go of it.
#[derive(Debug)]
pub(crate) struct DecodeArea {
    pub(super) buffer: Mutex<DeviceBuffer>,
    pub(super) end: Event,
}

impl DecodeArea {
    /// Records that work up to `event` reads the area.
    pub(super) fn used_until(&self, event: Event) {
        self.buffer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .used_until(event);
    }
}

/// A sample the device has decoded: where, and the area it is in.
#[derive(Debug, Clone)]
pub(crate) struct DeviceDecoded {
    pub(super) at: Decoded,
    pub(super) area: Arc<DecodeArea>,
}
