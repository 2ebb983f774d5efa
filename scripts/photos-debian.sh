#!/usr/bin/env bash
# Builds a second folder of ordinary photos for the benchmarks, unlike ImageNet's (which are
# about 500 px a side): the JPEG photographs Debian ships in its wallpaper packages, 64 of
# them, 1365x1074 to 6028x3391 (Plasma's smaller sizes are symlinks to the largest): the
# desktop wallpapers of Plasma, MATE and UKUI, and the camera photographs of Lomiri's
# (Ubuntu Touch's) wallpaper contests, most of those progressive.
#
#   scripts/photos-debian.sh [DEST]        (default: bench-data/photos)
#   BATCH=16 EPOCHS=2 scripts/bench-peers.sh bench-data/photos 3 1 2
#
# Needs apt (Debian or Ubuntu) and network access to its mirror; nothing is installed, the
# packages are only downloaded and unpacked. Only .jpg files are kept (the PNG and WebP
# wallpapers are mostly drawings), flat, named package-subject-file.jpg. A few of the JPEGs
# are renders rather than photographs; 24 are progressive; 4:2:0, 4:2:2 and 4:4:4, one
# grayscale.
# 64 files are a batch of 64: run the benchmarks with BATCH=16 (4 whole batches an epoch).
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-bench-data/photos}
PACKAGES=(plasma-workspace-wallpapers mate-backgrounds ukui-wallpapers lomiri-wallpapers-16.04
    lomiri-wallpapers-20.04)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
(cd "$WORK" && apt-get download "${PACKAGES[@]}" >/dev/null 2>&1) || {
    echo "apt-get download ${PACKAGES[*]} failed (not Debian/Ubuntu, or no mirror)" >&2
    exit 1
}
mkdir -p "$DEST"
for deb in "$WORK"/*.deb; do
    pkg=$(basename "$deb" | cut -d_ -f1)
    dpkg-deb -x "$deb" "$WORK/$pkg"
    # Plasma keeps each photo as contents/images/WxH.jpg under the photo's folder.
    find "$WORK/$pkg" -type f -iname '*.jpg' ! -name 'screenshot*' | while read -r f; do
        rel=${f#"$WORK/$pkg/usr/share/"}
        name=$(echo "$rel" | sed 's#^wallpapers/##; s#^backgrounds/##; s#contents/images/##; s#/#-#g')
        cp "$f" "$DEST/$pkg-$name"
    done
done
echo "$(ls "$DEST" | wc -l) JPEG photos in $DEST ($(du -sh "$DEST" | cut -f1))"
