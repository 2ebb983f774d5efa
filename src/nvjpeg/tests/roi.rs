//! EXIF orientation read through on the GPU, ROIs of displayed windows, and output sizes.

use super::*;

#[test]
fn stored_coords_inverts_apply_orientation() {
    let (h, w, c) = (5, 7, 1);
    let src: Vec<u8> = (0..(h * w) as u8).collect();
    for o in 1..=8u8 {
        let (out, oh, ow) = exif::apply_orientation(src.clone(), h, w, c, o);
        for y in 0..oh {
            for x in 0..ow {
                let (sy, sx) = stored_coords(o, y, x, h, w);
                assert_eq!(out[y * ow + x], src[sy * w + sx], "o={o} ({y},{x})");
            }
        }
    }
}

#[test]
fn roi_then_orient_equals_orient_then_crop() {
    let (h, w, c) = (9, 13, 3);
    let src = pattern_rgb(h, w);
    for o in 1..=8u8 {
        let (full, oh, ow) = exif::apply_orientation(src.clone(), h, w, c, o);
        for (x, y, ww, hh) in [
            (0, 0, 1, 1),
            (2, 1, 4, 3),
            (0, 0, ow, oh),
            (ow - 3, oh - 2, 3, 2),
        ] {
            let win = Roi {
                x,
                y,
                width: ww,
                height: hh,
            };
            let roi = roi_for_display_window(win, o, w, h).expect("window inside");
            let part = crop(&src, w, c, roi);
            let (oriented, ph, pw) = exif::apply_orientation(part, roi.height, roi.width, c, o);
            assert_eq!((ph, pw), (hh, ww), "o={o} {win:?}");
            assert_eq!(
                oriented,
                crop(&full, ow, c, win),
                "o={o} {win:?} -> {roi:?}"
            );
        }
        let outside = Roi {
            x: ow,
            y: 0,
            width: 1,
            height: 1,
        };
        assert_eq!(roi_for_display_window(outside, o, w, h), None);
        let empty = Roi {
            x: 0,
            y: 0,
            width: 0,
            height: 1,
        };
        assert_eq!(roi_for_display_window(empty, o, w, h), None);
    }
}

#[test]
fn output_and_roi_checks() {
    use super::safe::output_size;
    let out = |pitch: usize, len: usize| DeviceOutput {
        ptr: 0x1000,
        pitch,
        len,
    };
    let roi = |x, y, width, height| {
        Some(Roi {
            x,
            y,
            width,
            height,
        })
    };
    // Whole image: pitch ≥ 3w; the last row needs only 3w bytes.
    assert_eq!(output_size(10, 4, None, out(30, 120)).unwrap(), (10, 4));
    assert_eq!(
        output_size(10, 4, None, out(32, 32 * 3 + 30)).unwrap(),
        (10, 4)
    );
    assert!(output_size(10, 4, None, out(32, 32 * 3 + 29)).is_err());
    assert!(output_size(10, 4, None, out(29, 1000)).is_err());
    let null = DeviceOutput {
        ptr: 0,
        pitch: 30,
        len: 120,
    };
    assert!(output_size(10, 4, None, null).is_err());
    // ROI: inside, and the output sized for the ROI only.
    assert_eq!(
        output_size(10, 4, roi(2, 1, 5, 3), out(15, 45)).unwrap(),
        (5, 3)
    );
    assert_eq!(
        output_size(10, 4, roi(9, 3, 1, 1), out(3, 3)).unwrap(),
        (1, 1)
    );
    for bad in [
        roi(0, 0, 0, 1),
        roi(0, 0, 1, 0),
        roi(6, 0, 5, 1),
        roi(0, 2, 1, 3),
        roi(usize::MAX, 0, 2, 1),
    ] {
        let e = output_size(10, 4, bad, out(1000, 100_000)).unwrap_err();
        assert!(e.to_string().contains("not inside"), "{bad:?}: {e}");
    }
    // Overflowing sizes are errors, not panics.
    assert!(output_size(usize::MAX, 2, None, out(usize::MAX, usize::MAX)).is_err());
}
