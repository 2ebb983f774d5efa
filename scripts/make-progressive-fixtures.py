#!/usr/bin/env python3
"""Writes the small progressive JPEG fixtures in tests/golden/progressive/ (Pillow's libjpeg
standard progressive script: spectral selection *and* successive approximation, with DC and
AC refinement scans, which the jpeg-encoder crate used for the other fixtures doesn't make).
They test that dropping the AC scans a 1/8 decode never reads changes no pixel, and that
our own progressive decoder (src/decode/progressive.rs) matches libjpeg's.

    python3 scripts/make-progressive-fixtures.py     (needs Pillow)
"""
import math
import pathlib

from PIL import Image

out = pathlib.Path(__file__).resolve().parent.parent / "tests" / "golden" / "progressive"
out.mkdir(parents=True, exist_ok=True)
w, h = 203, 157
# A photo-like pattern: smooth gradients plus texture, so every scan carries data.
px = []
for y in range(h):
    for x in range(w):
        t = math.sin(x * 0.21) * math.cos(y * 0.17)
        px.append((int(127 + 120 * t) & 255, (x * 255 // w + y * 7) & 255, (x * y // 13) & 255))
rgb = Image.new("RGB", (w, h))
rgb.putdata(px)
for name, sub in (("444", 0), ("422", 1), ("420", 2)):
    rgb.save(out / f"progressive-{name}.jpg", quality=90, progressive=True, subsampling=sub)
rgb.convert("L").save(out / "progressive-gray.jpg", quality=90, progressive=True)
# Restart markers every 7 MCUs (blocks, in the one-component AC scans): intervals end
# inside MCU rows and inside end-of-band runs.
rgb.save(out / "progressive-420-rst.jpg", quality=90, progressive=True, subsampling=2,
         restart_marker_blocks=7)
rgb.convert("L").save(out / "progressive-gray-rst.jpg", quality=90, progressive=True,
                      restart_marker_rows=1)
for f in sorted(out.iterdir()):
    print(f.name, f.stat().st_size, "bytes")
