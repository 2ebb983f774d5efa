#!/usr/bin/env python3
"""Writes the small sequential JPEG fixtures in tests/golden/sequential/: Pillow (libjpeg)
files with optimised Huffman tables in one interleaved scan, with and without restart
markers, RGB, gray and CMYK. The jpeg-encoder crate, which makes the other fixtures, writes
optimised tables only with one scan per component. Optimised tables have other code
lengths than the standard ones (long codes, the slow path of src/decode/baseline.rs);
noise makes large coefficients.

    python3 scripts/make-sequential-fixtures.py     (needs Pillow)
"""
import math
import pathlib
import random

from PIL import Image, ImageFile

# optimize=True encodes in one buffer, which must hold the whole file.
ImageFile.MAXBLOCK = 1 << 22

out = pathlib.Path(__file__).resolve().parent.parent / "tests" / "golden" / "sequential"
out.mkdir(parents=True, exist_ok=True)
w, h = 203, 157
rnd = random.Random(5)
px = []
for y in range(h):
    for x in range(w):
        t = math.sin(x * 0.21) * math.cos(y * 0.17)
        noisy = (x // 24 + y // 24) % 2 == 0
        n = rnd.randrange(256) if noisy else rnd.randrange(9)
        px.append(((int(127 + 120 * t) + n) & 255, (x * 255 // w + y * 7 + n) & 255,
                   (x * y // 13 + n) & 255))
rgb = Image.new("RGB", (w, h))
rgb.putdata(px)
rgb.save(out / "optimised-420.jpg", quality=90, subsampling=2, optimize=True)
rgb.save(out / "optimised-444-q100.jpg", quality=100, subsampling=0, optimize=True)
rgb.save(out / "optimised-422-rst.jpg", quality=75, subsampling=1, optimize=True,
         restart_marker_blocks=5)
rgb.convert("L").save(out / "optimised-gray-rst.jpg", quality=95, optimize=True,
                      restart_marker_rows=1)
rgb.convert("CMYK").save(out / "optimised-cmyk.jpg", quality=90, optimize=True)
for f in sorted(out.iterdir()):
    print(f.name, f.stat().st_size, "bytes")
