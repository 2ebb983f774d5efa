//! EXIF orientation: reading tag 0x0112 from a TIFF-structured EXIF block, and the one map
//! of the eight orientations ([`stored_coords`]), applied exactly as Pillow's
//! `ImageOps.exif_transpose` does.
//!
//! | value | stored image must be … to display | Pillow method |
//! | --- | --- | --- |
//! | 1 | left as is | — |
//! | 2 | mirrored left–right | `FLIP_LEFT_RIGHT` |
//! | 3 | rotated 180° | `ROTATE_180` |
//! | 4 | mirrored top–bottom | `FLIP_TOP_BOTTOM` |
//! | 5 | transposed (mirrored about the main diagonal) | `TRANSPOSE` |
//! | 6 | rotated 90° clockwise | `ROTATE_270` |
//! | 7 | transversed (mirrored about the anti-diagonal) | `TRANSVERSE` |
//! | 8 | rotated 90° counter-clockwise | `ROTATE_90` |
//!
//! Every read is bounds-checked: a damaged EXIF block yields orientation 1, never an error,
//! because EXIF is metadata and the pixels are still fine (Pillow also ignores bad EXIF).

/// The orientation tag of a TIFF-structured EXIF block (starting at the `II`/`MM` byte-order
/// mark, i.e. after the `Exif\0\0` prefix of a JPEG APP1 segment), or `None` when absent,
/// damaged, or outside 1..=8.
pub fn orientation_from_tiff(tiff: &[u8]) -> Option<u8> {
    let le = match tiff.get(..2)? {
        b"II" => true,
        b"MM" => false,
        _ => return None,
    };
    let u16_at = |off: usize| -> Option<u16> {
        let b = tiff.get(off..off.checked_add(2)?)?;
        Some(if le {
            u16::from_le_bytes([b[0], b[1]])
        } else {
            u16::from_be_bytes([b[0], b[1]])
        })
    };
    let u32_at = |off: usize| -> Option<u32> {
        let b = tiff.get(off..off.checked_add(4)?)?;
        let a = [b[0], b[1], b[2], b[3]];
        Some(if le {
            u32::from_le_bytes(a)
        } else {
            u32::from_be_bytes(a)
        })
    };
    if u16_at(2)? != 42 {
        return None;
    }
    let ifd0 = usize::try_from(u32_at(4)?).ok()?;
    let count = usize::from(u16_at(ifd0)?);
    for i in 0..count {
        let entry = ifd0.checked_add(2)?.checked_add(i.checked_mul(12)?)?;
        let tag = u16_at(entry)?;
        if tag != 0x0112 {
            continue;
        }
        let ty = u16_at(entry + 2)?;
        let n = u32_at(entry + 4)?;
        if n < 1 {
            return None;
        }
        let value = match ty {
            3 => u32::from(u16_at(entry + 8)?), // SHORT (the standard type)
            4 => u32_at(entry + 8)?,            // LONG (seen in the wild)
            _ => return None,
        };
        return match value {
            1..=8 => Some(value as u8),
            _ => None,
        };
    }
    None
}

/// The orientation in a JPEG APP1 payload (the bytes after the segment length), if it is an
/// EXIF segment carrying one.
pub fn orientation_from_app1(payload: &[u8]) -> Option<u8> {
    let tiff = payload.strip_prefix(b"Exif\0\0")?;
    orientation_from_tiff(tiff)
}

/// True when orientation `o` swaps width and height (5, 6, 7, 8).
pub fn swaps_axes(o: u8) -> bool {
    matches!(o, 5..=8)
}

/// The stored-image pixel (row, column) shown at displayed position (`y`, `x`) for
/// orientation `o`, in a stored image of `stored_h` × `stored_w` (`o` outside 2..=8: the
/// identity). The one orientation map: [`apply_orientation`] builds the displayed image
/// through it on the CPU, [`stored_rect`] maps windows with it, and the GPU path reads the
/// decoded (stored) image through it.
#[inline(always)]
pub fn stored_coords(
    o: u8,
    y: usize,
    x: usize,
    stored_h: usize,
    stored_w: usize,
) -> (usize, usize) {
    let (h, w) = (stored_h, stored_w);
    match o {
        2 => (y, w - 1 - x),         // mirrored left–right
        3 => (h - 1 - y, w - 1 - x), // rotated 180°
        4 => (h - 1 - y, x),         // mirrored top–bottom
        5 => (x, y),                 // transposed: the displayed image is w × h
        6 => (h - 1 - x, y),         // rotated 90° clockwise
        7 => (h - 1 - x, w - 1 - y), // transversed
        8 => (x, w - 1 - y),         // rotated 90° counter-clockwise
        _ => (y, x),
    }
}

/// The rectangle of the stored image (height `h`, width `w`, before orientation) that
/// orientation `o` turns into `window` (top, left, height, width) of the oriented image.
/// [`apply_orientation`] of that rectangle's pixels gives the window's pixels.
pub fn stored_rect(
    window: (usize, usize, usize, usize),
    h: usize,
    w: usize,
    o: u8,
) -> (usize, usize, usize, usize) {
    let (t, l, wh, ww) = window;
    // The window's opposite corners, in the stored image.
    let (a, b) = (
        stored_coords(o, t, l, h, w),
        stored_coords(o, t + wh - 1, l + ww - 1, h, w),
    );
    let (y0, y1) = (a.0.min(b.0), a.0.max(b.0));
    let (x0, x1) = (a.1.min(b.1), a.1.max(b.1));
    (y0, x0, y1 - y0 + 1, x1 - x0 + 1)
}

/// The inverse of [`stored_coords`]: the displayed position (row, column) of stored pixel
/// (`sy`, `sx`) for orientation `o`, in a stored image of `stored_h` × `stored_w`.
#[inline(always)]
pub fn displayed_coords(
    o: u8,
    sy: usize,
    sx: usize,
    stored_h: usize,
    stored_w: usize,
) -> (usize, usize) {
    let (h, w) = (stored_h, stored_w);
    match o {
        2 => (sy, w - 1 - sx),
        3 => (h - 1 - sy, w - 1 - sx),
        4 => (h - 1 - sy, sx),
        5 => (sx, sy),
        6 => (sx, h - 1 - sy),
        7 => (w - 1 - sx, h - 1 - sy),
        8 => (w - 1 - sx, sy),
        _ => (sy, sx),
    }
}

/// The inverse of [`stored_rect`]: the window (top, left, height, width) of the oriented
/// image that rectangle `rect` of the stored image (height `h`, width `w`) becomes under
/// orientation `o`. The GPU path uses it to find, in a decoded region of the stored image,
/// the displayed window its kernels read.
pub fn displayed_rect(
    rect: (usize, usize, usize, usize),
    h: usize,
    w: usize,
    o: u8,
) -> (usize, usize, usize, usize) {
    let (t, l, rh, rw) = rect;
    let (a, b) = (
        displayed_coords(o, t, l, h, w),
        displayed_coords(o, t + rh - 1, l + rw - 1, h, w),
    );
    let (y0, y1) = (a.0.min(b.0), a.0.max(b.0));
    let (x0, x1) = (a.1.min(b.1), a.1.max(b.1));
    (y0, x0, y1 - y0 + 1, x1 - x0 + 1)
}

/// Applies EXIF orientation `o` (1..=8; others are treated as 1) to an HWC buffer of
/// `h × w × c` elements and returns the new buffer and its (height, width).
pub fn apply_orientation(
    src: Vec<u8>,
    h: usize,
    w: usize,
    c: usize,
    o: u8,
) -> (Vec<u8>, usize, usize) {
    if !(2..=8).contains(&o) || h == 0 || w == 0 {
        return (src, h, w);
    }
    let (oh, ow) = if swaps_axes(o) { (w, h) } else { (h, w) };
    let mut out = vec![0u8; src.len()];
    // Each output pixel (y, x) from the stored pixel the map names.
    let row_out = ow * c;
    for (y, orow) in out.chunks_exact_mut(row_out).enumerate() {
        for x in 0..ow {
            let (sy, sx) = stored_coords(o, y, x, h, w);
            let s = (sy * w + sx) * c;
            orow[x * c..x * c + c].copy_from_slice(&src[s..s + c]);
        }
    }
    (out, oh, ow)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiff(le: bool, ty: u16, value: u32) -> Vec<u8> {
        let mut v = Vec::new();
        let p16 = |v: &mut Vec<u8>, x: u16| {
            v.extend_from_slice(&if le { x.to_le_bytes() } else { x.to_be_bytes() })
        };
        let p32 = |v: &mut Vec<u8>, x: u32| {
            v.extend_from_slice(&if le { x.to_le_bytes() } else { x.to_be_bytes() })
        };
        v.extend_from_slice(if le { b"II" } else { b"MM" });
        p16(&mut v, 42);
        p32(&mut v, 8);
        p16(&mut v, 2);
        // An unrelated tag first (ImageWidth), then orientation.
        p16(&mut v, 0x0100);
        p16(&mut v, 3);
        p32(&mut v, 1);
        p32(&mut v, 0);
        p16(&mut v, 0x0112);
        p16(&mut v, ty);
        p32(&mut v, 1);
        if ty == 3 {
            p16(&mut v, value as u16);
            p16(&mut v, 0);
        } else {
            p32(&mut v, value);
        }
        p32(&mut v, 0);
        v
    }

    #[test]
    fn both_byte_orders() {
        for o in 1..=8u32 {
            assert_eq!(orientation_from_tiff(&tiff(true, 3, o)), Some(o as u8));
            assert_eq!(orientation_from_tiff(&tiff(false, 3, o)), Some(o as u8));
            assert_eq!(orientation_from_tiff(&tiff(false, 4, o)), Some(o as u8));
        }
        assert_eq!(orientation_from_tiff(&tiff(true, 3, 9)), None);
        assert_eq!(orientation_from_tiff(&tiff(true, 3, 0)), None);
    }

    #[test]
    fn every_truncation_is_safe() {
        let t = tiff(false, 3, 6);
        for n in 0..t.len() {
            let r = orientation_from_tiff(&t[..n]);
            assert!(r.is_none() || r == Some(6));
        }
        // An IFD offset pointing far away.
        let mut bad = t.clone();
        bad[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(orientation_from_tiff(&bad), None);
    }

    #[test]
    fn displayed_maps_invert_stored_maps() {
        let (h, w) = (5, 7);
        for o in 1..=8u8 {
            let (dh, dw) = if swaps_axes(o) { (w, h) } else { (h, w) };
            for y in 0..dh {
                for x in 0..dw {
                    let (sy, sx) = stored_coords(o, y, x, h, w);
                    assert_eq!(displayed_coords(o, sy, sx, h, w), (y, x), "orientation {o}");
                }
            }
            for window in [
                (0, 0, dh, dw),
                (1, 2, 3, 1),
                (dh - 2, dw - 3, 2, 3),
                (2, 0, 1, dw),
            ] {
                let stored = stored_rect(window, h, w, o);
                assert_eq!(displayed_rect(stored, h, w, o), window, "orientation {o}");
            }
        }
    }

    #[test]
    fn orientations_on_a_2x3_image() {
        // 2 rows, 3 columns, one channel:
        // a b c
        // d e f
        let src = b"abcdef".to_vec();
        let cases: [(u8, &[u8], usize, usize); 8] = [
            (1, b"abcdef", 2, 3),
            (2, b"cbafed", 2, 3),
            (3, b"fedcba", 2, 3),
            (4, b"defabc", 2, 3),
            (5, b"adbecf", 3, 2),
            (6, b"daebfc", 3, 2),
            (7, b"fcebda", 3, 2),
            (8, b"cfbead", 3, 2),
        ];
        for (o, want, h, w) in cases {
            let (got, gh, gw) = apply_orientation(src.clone(), 2, 3, 1, o);
            assert_eq!((gh, gw), (h, w), "orientation {o}");
            assert_eq!(&got[..], want, "orientation {o}");
        }
    }
}
