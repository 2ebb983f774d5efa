#!/usr/bin/env python3
"""Golden outputs for the geometric operators (resize, crop, random_resized_crop's window resize).

Reference: Pillow 13.0. Pillow 13 runs the vertical bilinear pass first when the height
shrinks by more than twice as many pixels as the width; earlier versions always went
horizontal first (12.2-12.3 only for images over 100x taller than wide), so regenerating
with another version changes some outputs by 1 (see `vertical_first` in
src/resample/taps.rs).

Rerun from the repository root (needs only Pillow and numpy):

    python3 scripts/golden/geometry.py

It writes two files:
  tests/golden/geometry_cases.txt    one case per line (format in its header)
  tests/golden/geometry_outputs.bin  the concatenated u8 HWC outputs of the stored cases

Inputs are computed by a formula that the Rust tests implement identically:
    pixel(y, x, c) = (x*7 + y*13 + c*29 + (x*y) % 17) % 256
Images with 1, 3 and 4 channels are Pillow modes "L", "RGB" and "CMYK" (4 independent
bands; "RGBA" would be premultiplied by Pillow before resampling, which stokehold does not do).

Families:
  bilinear          Image.resize((ow, oh), BILINEAR)
  nearest           Image.resize((ow, oh), NEAREST)
  crop_bilinear     Image.crop(window).resize((ow, oh), BILINEAR)   (torchvision resized_crop)
  crop_nearest      Image.crop(window).resize((ow, oh), NEAREST)
  box_bilinear      Image.resize((ow, oh), BILINEAR, box=window)    (pixels outside the window contribute)
  center_crop       torchvision.transforms.functional.center_crop's formula with PIL ops (pad with 0 first)

Outputs longer than STORE_LIMIT bytes are stored only as an FNV-1a 64 hash. The Rust tests
compare with tolerance 0 (bit-exact) and check every hash.
"""

import os

import PIL

import numpy as np
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIR = os.path.join(ROOT, "tests", "golden")
STORE_LIMIT = 6000
MODES = {1: "L", 3: "RGB", 4: "CMYK"}


def pattern(h, w, c):
    y, x, ch = np.meshgrid(np.arange(h), np.arange(w), np.arange(c), indexing="ij")
    return ((x * 7 + y * 13 + ch * 29 + (x * y) % 17) % 256).astype(np.uint8)


def to_pil(a):
    h, w, c = a.shape
    return Image.frombytes(MODES[c], (w, h), a.tobytes())


def from_pil(im, c):
    return np.asarray(im, dtype=np.uint8).reshape(im.size[1], im.size[0], c)


def fnv64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def center_crop(im, ch, cw):
    # torchvision.transforms.functional.center_crop for PIL images, step by step.
    w, h = im.size
    if cw > w or ch > h:
        pl = (cw - w) // 2 if cw > w else 0
        pt = (ch - h) // 2 if ch > h else 0
        pr = (cw - w + 1) // 2 if cw > w else 0
        pb = (ch - h + 1) // 2 if ch > h else 0
        padded = Image.new(im.mode, (w + pl + pr, h + pt + pb), 0)
        padded.paste(im, (pl, pt))
        im = padded
        w, h = im.size
        if cw == w and ch == h:
            return im
    top = int(round((h - ch) / 2.0))
    left = int(round((w - cw) / 2.0))
    return im.crop((left, top, left + cw, top + ch))


# (h, w) -> list of (oh, ow)
RESIZES = [
    ((1, 1), [(1, 1), (5, 7), (3, 1)]),
    ((2, 3), [(7, 11), (1, 1), (2, 1), (4, 3)]),
    ((37, 29), [(64, 64), (1, 1), (37, 29), (10, 29), (37, 8), (20, 90), (36, 28)]),
    ((64, 48), [(128, 96), (1, 48), (64, 1), (32, 24), (21, 17), (100, 30)]),
    ((200, 3), [(50, 1), (224, 224), (7, 3), (200, 5)]),
    ((97, 131), [(31, 17), (97, 40), (40, 131), (224, 224), (13, 200)]),
    ((375, 500), [(224, 224), (224, 298), (112, 112), (256, 341)]),
]

# (h, w) -> list of ((top, left, wh, ww), (oh, ow))
WINDOWS = [
    ((37, 29), [((3, 5, 20, 11), (16, 16)), ((0, 0, 37, 29), (19, 7)), ((36, 28, 1, 1), (4, 4)),
                ((10, 0, 17, 29), (17, 40))]),
    ((97, 131), [((12, 40, 50, 61), (224, 224)), ((1, 2, 95, 128), (31, 33)), ((90, 0, 7, 131), (7, 20)),
                 ((5, 7, 33, 33), (33, 12))]),
    ((375, 500), [((31, 47, 300, 211), (224, 224)), ((0, 100, 375, 300), (112, 112))]),
]

CENTER = [
    ((37, 29), [(20, 20), (36, 28), (37, 29), (40, 10), (10, 40), (50, 50), (1, 1)]),
    ((2, 3), [(5, 5), (1, 2), (2, 4)]),
    ((1, 1), [(2, 2), (3, 1)]),
    ((97, 131), [(97, 130), (94, 128), (99, 133), (224, 224)]),
    ((64, 48), [(64, 48), (63, 47), (33, 21)]),
]


def main():
    assert PIL.__version__.split(".")[0] == "13", f"goldens are for Pillow 13, found {PIL.__version__}"
    lines = []
    blob = bytearray()

    def add(family, h, w, c, win, oh, ow, out):
        out = np.ascontiguousarray(out, dtype=np.uint8)
        assert out.shape == (oh, ow, c), (family, out.shape, (oh, ow, c))
        data = out.tobytes()
        if len(data) <= STORE_LIMIT:
            offset = len(blob)
            blob.extend(data)
        else:
            offset = -1
        t, l, wh, ww = win
        lines.append(f"{family} {h} {w} {c} {t} {l} {wh} {ww} {oh} {ow} {offset} {fnv64(data):016x}")

    for c in (1, 3, 4):
        for (h, w), outs in RESIZES:
            if c == 4 and h * w > 5000:
                continue
            im = to_pil(pattern(h, w, c))
            for oh, ow in outs:
                add("bilinear", h, w, c, (0, 0, h, w), oh, ow,
                    from_pil(im.resize((ow, oh), Image.Resampling.BILINEAR), c))
                add("nearest", h, w, c, (0, 0, h, w), oh, ow,
                    from_pil(im.resize((ow, oh), Image.Resampling.NEAREST), c))
        if c == 4:
            continue
        for (h, w), wins in WINDOWS:
            im = to_pil(pattern(h, w, c))
            for (t, l, wh, ww), (oh, ow) in wins:
                cropped = im.crop((l, t, l + ww, t + wh))
                add("crop_bilinear", h, w, c, (t, l, wh, ww), oh, ow,
                    from_pil(cropped.resize((ow, oh), Image.Resampling.BILINEAR), c))
                add("crop_nearest", h, w, c, (t, l, wh, ww), oh, ow,
                    from_pil(cropped.resize((ow, oh), Image.Resampling.NEAREST), c))
                add("box_bilinear", h, w, c, (t, l, wh, ww), oh, ow,
                    from_pil(im.resize((ow, oh), Image.Resampling.BILINEAR, box=(l, t, l + ww, t + wh)), c))
        for (h, w), crops in CENTER:
            im = to_pil(pattern(h, w, c))
            for ch, cw in crops:
                add("center_crop", h, w, c, (0, 0, h, w), ch, cw, from_pil(center_crop(im, ch, cw), c))

    header = [
        "# Generated by scripts/golden/geometry.py; do not edit.",
        "# family h w c win_top win_left win_h win_w out_h out_w offset fnv1a64",
        "# offset: byte offset of the u8 HWC output in geometry_outputs.bin, -1 = only hashed",
    ]
    with open(os.path.join(OUT_DIR, "geometry_cases.txt"), "w") as f:
        f.write("\n".join(header + lines) + "\n")
    with open(os.path.join(OUT_DIR, "geometry_outputs.bin"), "wb") as f:
        f.write(bytes(blob))


if __name__ == "__main__":
    main()
