#!/usr/bin/env bash
# Rehearses a bundle of scripts/gpu-bundle.sh as the GPU machine will run it: from a copy in
# another folder, with this checkout and ../shared out of reach (hidden under empty tmpfs
# mounts in a private mount namespace, `unshare`), so that a test or step that reads a path
# of the build machine fails here, not there. No GPU here: GPU steps skip (ALLOW_SKIP=1).
#
#   scripts/gpu-rehearse.sh [BUNDLE_DIR]     (default .gpu)
#
# Exit status: gpu-check.sh's. The copy and its logs stay in the printed folder.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bundle="$(cd "${1:-$root/.gpu}" && pwd)"
shared="$(cd "$root/.." && pwd)/shared"
copy="$(mktemp -d /tmp/stokehold-rehearsal.XXXXXX)"
cp -a "$bundle/." "$copy/"
echo "==> rehearsing a copy of $bundle in $copy, with $root${shared:+ and $shared} hidden" >&2
nvrtc_dirs="$(find "${XDG_CACHE_HOME:-$HOME/.cache}/stokehold" -maxdepth 5 -name 'libnvrtc.so*' \
    -printf '%h\n' 2>/dev/null | sort -u | paste -sd: || true)"
hide="mount -t tmpfs none '$root'"
[[ -d "$shared" ]] && hide+=" && mount -t tmpfs none '$shared'"
if ! unshare -rm true 2>/dev/null; then
    echo "error: unshare -rm (a user and mount namespace) is not allowed here, so the" \
        "checkout can't be hidden; run $copy/gpu-check.sh by hand from another machine" >&2
    exit 1
fi
# Inside: root of a user namespace, only to mount; the check runs as that user.
exec unshare -rm bash -c "$hide && cd / && ALLOW_SKIP=1 STOKEHOLD_LIB_DIRS='$nvrtc_dirs' \
    '$copy/gpu-check.sh' '$copy'"
