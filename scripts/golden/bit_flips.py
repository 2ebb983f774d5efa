#!/usr/bin/env python3
"""Pillow's verdict on JPEGs with one flipped bit in their entropy-coded data, for the
decoder's agreement test (src/decode/tests/bit_flips.rs).

For each JPEG of tests/golden/sequential and tests/golden/progressive (sorted), flips one
bit at a time in the bytes between the end of the first SOS segment and the final EOI:

- every bit of the stuffing byte of (up to) the first 48 `FF 00` pairs: a flip there turns
  the pair into a marker (`FF 01` .. `FF 80`), the damage Pillow and libjpeg judge most
  differently from a plain corrupt code;
- one bit of 160 other bytes, positions and bits drawn from a fixed seed.

Each flipped file is decoded as a training pipeline would,

    ImageOps.exif_transpose(Image.open(io.BytesIO(data))).convert("RGB")

and one line is written to tests/golden/bit_flips.tsv:

    <dir>/<name> \t <byte offset> \t <bit> \t ok | <exception class>: <message>

Rerun:  python3 scripts/golden/bit_flips.py      (needs Pillow; deterministic)
Written with Pillow 13.0.0 (libjpeg-turbo 3.1).
"""

import io
import os
import random
import sys

from pillow_decode import ROOT, decode_rgb, write_lines

DIRS = ["sequential", "progressive"]
OUT = os.path.join(ROOT, "tests", "golden", "bit_flips.tsv")
STUFFINGS = 48
OTHERS = 160


def entropy_range(data: bytes) -> range:
    sos = data.index(b"\xff\xda")
    length = data[sos + 2] << 8 | data[sos + 3]
    return range(sos + 2 + length, data.rindex(b"\xff\xd9"))


def verdict(data: bytes) -> str:
    try:
        decode_rgb(io.BytesIO(data))
    except Exception as e:  # noqa: BLE001 - the verdict is what is recorded
        message = str(e).replace("\t", " ").replace("\n", " ")
        return f"{type(e).__name__}: {message}"
    return "ok"


def main() -> int:
    rng = random.Random(0xB17F11B)
    lines = []
    for d in DIRS:
        folder = os.path.join(ROOT, "tests", "golden", d)
        for name in sorted(os.listdir(folder)):
            data = open(os.path.join(folder, name), "rb").read()
            span = entropy_range(data)
            stuffed = [i + 1 for i in span if data[i] == 0xFF and data[i + 1] == 0x00]
            flips = [(at, bit) for at in stuffed[:STUFFINGS] for bit in range(8)]
            flips += [(rng.choice(span), rng.randrange(8)) for _ in range(OTHERS)]
            for at, bit in flips:
                flipped = bytearray(data)
                flipped[at] ^= 1 << bit
                lines.append(f"{d}/{name}\t{at}\t{bit}\t{verdict(bytes(flipped))}")
    write_lines(OUT, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
