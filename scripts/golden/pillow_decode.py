"""What the decoder's golden scripts (decode_stats.py, bit_flips.py) share: the repository's
root, Pillow's decode as a training pipeline does it, and writing the golden file."""

import os
import sys

from PIL import Image, ImageOps

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def decode_rgb(source) -> Image.Image:
    """`source` (a path or a file object) decoded as a training pipeline would:
    ImageOps.exif_transpose(Image.open(source)).convert("RGB")."""
    with Image.open(source) as im:
        return ImageOps.exif_transpose(im).convert("RGB")


def write_lines(path: str, lines: list) -> None:
    """Writes `lines` to `path`, one a line, and says how many on stderr."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {len(lines)} lines to {path}", file=sys.stderr)
