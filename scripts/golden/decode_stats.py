#!/usr/bin/env python3
"""Golden statistics for the CPU decoder (src/decode), computed with Pillow.

For every file of $STOKEHOLD_SHARED/data/imagenet-400 and .../jpeg-edge (sorted, by
directory), decodes with Pillow exactly as a training pipeline would:

    im = ImageOps.exif_transpose(Image.open(path)).convert("RGB")

and writes one line per file to tests/golden/decode_thumbs.tsv:

    <dir>/<name> \t <width> \t <height> \t <hex of 8x8x3 block means>

or `<dir>/<name> \t ERR \t <exception class>` when Pillow cannot decode it. The grid: block
(by, bx) covers rows [by*h//8, max((by+1)*h//8, start+1)) and likewise columns (so images
smaller than 8 pixels still have non-empty blocks); each value is the per-channel mean
rounded half up to an integer (floor(mean + 0.5)), stored as one byte, row-major
(by, bx, channel).

The Rust test src/decode/tests.rs::golden_against_pillow (skips without shared data)
computes the same grid from our decoder and requires equal dimensions and a mean absolute
difference of grid values <= 0.5 per file and a largest single difference <= 2
(measured with Pillow 13 / zune-jpeg 0.5.15: mean 0.040 over 408 files, worst file 0.344,
largest value difference 1); it prints the measured figures.

Rerun:  STOKEHOLD_SHARED=/work/shared python3 scripts/golden/decode_stats.py
Needs only Pillow and numpy; deterministic (sorted file order, no randomness).
"""

import os
import sys

import numpy as np

from pillow_decode import ROOT, decode_rgb, write_lines

SHARED = os.environ.get("STOKEHOLD_SHARED", os.path.join(ROOT, "..", "shared"))
DIRS = ["imagenet-400", "jpeg-edge"]
OUT = os.path.join(ROOT, "tests", "golden", "decode_thumbs.tsv")


def grid(a: np.ndarray) -> bytes:
    h, w, _ = a.shape
    out = bytearray()
    for by in range(8):
        y0 = min(by * h // 8, h - 1)
        y1 = max((by + 1) * h // 8, y0 + 1)
        for bx in range(8):
            x0 = min(bx * w // 8, w - 1)
            x1 = max((bx + 1) * w // 8, x0 + 1)
            block = a[y0:y1, x0:x1].astype(np.float64)
            for c in range(3):
                out.append(int(np.floor(block[:, :, c].mean() + 0.5)))
    return bytes(out)


def main() -> int:
    lines = []
    for d in DIRS:
        folder = os.path.join(SHARED, "data", d)
        for name in sorted(os.listdir(folder)):
            if not name.lower().endswith((".jpg", ".jpeg", ".png")):
                continue
            path = os.path.join(folder, name)
            try:
                a = np.asarray(decode_rgb(path))
            except Exception as e:  # noqa: BLE001 - recorded as an expected failure
                lines.append(f"{d}/{name}\tERR\t{type(e).__name__}")
                continue
            h, w, _ = a.shape
            lines.append(f"{d}/{name}\t{w}\t{h}\t{grid(a).hex()}")
    write_lines(OUT, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
