#!/usr/bin/env bash
# Gets NVIDIA DALI and its libraries (wheels for the GPU machine's Python 3.12), the peer
# script, the full imagenet-400 and our CLI (from the bundle .gpu/, built by
# scripts/gpu-bundle.sh) with the pipeline files, and splits them into parts the device tool can carry one
# call at a time (each at most 60 MB, under the 64 MiB a call takes with the working tree),
# in the git-ignored folder .peerwhl/: p1/, p2/, ... each one carried by one call. Then
# prints the calls, in order (see also docs/gpu-machine.md and ../shared/peers/README.md).
#
#   scripts/gpu-peers.sh [--shared DIR] [--skip-download]
#
# The GPU machine has no network and keeps its disk only between closely following calls
# (about 30 s): send the parts back to back. Each call copies its part to /tmp/dali; the last
# one joins the parts, installs the wheels into /tmp/site and runs DALI's GPU pipeline and
# our bench on the same photos.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
shared="$root/../shared"
download=1
while (($#)); do
    case "$1" in
        --shared) shared="$2"; shift 2 ;;
        --skip-download) download=0; shift ;;
        *) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    esac
done
cd "$root"
out=.peerwhl
git check-ignore -q "$out/p1" || { echo "error: $out is not git-ignored (see .gitignore)" >&2; exit 1; }
[[ -f "$shared/peers/rn50_train.py" && -d "$shared/data/imagenet-400" ]] ||
    { echo "error: $shared/peers/rn50_train.py or $shared/data/imagenet-400 not found" >&2; exit 1; }
[[ -x .gpu/bin/stokehold ]] || { echo "error: no .gpu/bin/stokehold: run scripts/gpu-bundle.sh first" >&2; exit 1; }
part_mb=60

wheels="$out/wheels"
mkdir -p "$wheels"
if ((download)); then
    scripts/dali-download.sh "$wheels"
fi
ls "$wheels"/*.whl >/dev/null 2>&1 || { echo "error: no wheels in $wheels" >&2; exit 1; }

# One stream, cut into parts: the wheels, the peer script, our CLI, the pipeline files and
# the photos (no staging copy: tar reads each from where it is; -h: `pipelines` is a link to
# the Python package's copy).
rm -rf "$out"/p[0-9]* "$out"/stream.tar.*
tar -chf - -C "$wheels" . -C "$shared/peers" rn50_train.py -C "$root/.gpu/bin" stokehold \
    -C "$root" pipelines -C "$root/tools/gpu-diag" dali_upsampling.py \
    -C "$shared" data/imagenet-400 |
    split -b "${part_mb}M" -d -a 2 - "$out/stream.tar."
n=0
for f in "$out"/stream.tar.*; do
    n=$((n + 1))
    mkdir -p "$out/p$n"
    mv "$f" "$out/p$n/"
done
echo "==> $n parts in $out/ ($(du -sh "$out"/p[0-9]* | awk '{s = s $2 " " $1 "; "} END {print s}'))" >&2

echo "# Device-tool calls, back to back (the machine keeps /tmp for about 30 s between calls)."
((n > 1)) && echo "# Calls 1..$((n - 1)): carry one part each and copy it to /tmp/dali."
for ((k = 1; k < n; k++)); do
    echo "run carry=[\"$out/p$k\"] command='mkdir -p /tmp/dali && cp $out/p$k/* /tmp/dali/ && ls -la /tmp/dali'"
done
cat <<EOF
# Call $n: the last part, then join, install and run DALI's GPU pipeline and our bench on the
# same photos, batch 256, alternated (our CLI and the pipeline files travel in the parts),
# like for like in chroma: DALI's default (repeated) beside upsampling = "nearest", and
# DALI's jpeg_fancy_upsampling=True beside our default (docs/performance.md, GPU path).
run carry=["$out/p$n"] command='mkdir -p /tmp/dali && cp $out/p$n/* /tmp/dali/ && cd /tmp/dali && cat stream.tar.* | tar -x && python3 -m pip install -q --no-index --no-deps --target /tmp/site /tmp/dali/*.whl && sed "s/^output = \"decoded\"\$/&\nupsampling = \"nearest\"/" pipelines/resnet50-train.toml > train-nearest.toml && for r in 1 2; do PYTHONPATH=/tmp/site timeout 60 python3 rn50_train.py dali --device gpu --data data/imagenet-400 --batch 256; timeout 60 ./stokehold bench train-nearest.toml --data data/imagenet-400 --device gpu --batch 256; PYTHONPATH=/tmp/site timeout 60 python3 dali_upsampling.py data/imagenet-400 --upsampling fancy; timeout 60 ./stokehold bench pipelines/resnet50-train.toml --data data/imagenet-400 --device gpu --batch 256; done'
EOF
