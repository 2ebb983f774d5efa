#!/usr/bin/env bash
# Makes, in one go, everything the next GPU call carries (docs/gpu-machine.md, "The next
# call"): the bundle (.gpu/, scripts/gpu-bundle.sh) rehearsed from a copy with this checkout
# hidden (scripts/gpu-rehearse.sh), the stokehold wheel and the nvJPEG probe (.diag/), and
# NVIDIA DALI with its libraries packed as xz parts (.peerwhl/dali-site.tar.xz.*). Then it
# checks what each call sends against the 64 MiB a call takes and prints the calls, in order.
# All of it is git-ignored, so a fresh checkout runs this first (on 2 cores, 2026-11-28: 4
# minutes with the release build cached, 6 from a fresh clone; DALI's xz and the release
# build run side by side).
#
#   scripts/gpu-prepare.sh [--images N] [--no-dali] [--no-rehearse] [--shared DIR]
#
#   --images N      photos of imagenet-400 in the bundle (default 200, as run9.sh expects)
#   --no-dali       leave DALI out (run9.sh then says DALI is absent and runs the rest)
#   --no-rehearse   skip the rehearsal (only when the bundle's tests and scripts are unchanged
#                   since one passed)
#   --shared DIR    the shared folder (default ../shared)
#
# Needs the network (pip: DALI's wheels, maturin, the CUDA 13 headers of the probe), g++,
# xz and unshare (for the rehearsal). Exit status 0 only when every part was made (and the
# rehearsal passed).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
shared="$root/../shared"
images=200
dali=1
rehearse=1
while (($#)); do
    case "$1" in
        --images) images="$2"; shift 2 ;;
        --no-dali) dali=0; shift ;;
        --no-rehearse) rehearse=0; shift ;;
        --shared) shared="$2"; shift 2 ;;
        *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    esac
done
cd "$root"
for d in .gpu .diag .peerwhl; do
    git check-ignore -q "$d/x" || { echo "error: $d is not git-ignored (see .gitignore)" >&2; exit 1; }
done
limit_mib=64
# A DALI part and the working tree travel together: parts of 52 MiB leave the tree 12.
part_mib=52
log="$(mktemp -d /tmp/stokehold-prepare.XXXXXX)"
echo "==> logs in $log" >&2

# DALI first, in the background: its xz is the longest step. Its wheels
# (scripts/dali-download.sh) are unpacked into one folder whose `nvidia` namespace then
# merges with the GPU machine's own `nvidia` packages (the top nvidia/__init__.py removed).
dali_pid=""
if ((dali)); then
    (
        set -euo pipefail
        work="$log/dali"
        mkdir -p "$work/wheels" "$work/site"
        scripts/dali-download.sh "$work/wheels"
        for w in "$work"/wheels/*.whl; do python3 -m zipfile -e "$w" "$work/site"; done
        rm -f "$work/site/nvidia/__init__.py"
        # Executable bits: zipfile drops them, and DALI's libraries are opened, not run, but
        # its few helper binaries are.
        find "$work/site" -path '*/bin/*' -type f -exec chmod +x {} +
        rm -f .peerwhl/dali-site.tar.xz.*
        mkdir -p .peerwhl
        tar -cf - -C "$work/site" . | xz -9 -T2 | split -b "${part_mib}M" - .peerwhl/dali-site.tar.xz.
        rm -rf "$work"
    ) > "$log/dali.log" 2>&1 &
    dali_pid=$!
fi

step() { echo "==> $*" >&2; }
fail() { echo "error: $1 failed; its log: $2" >&2; [[ -z $dali_pid ]] || kill "$dali_pid" 2>/dev/null; exit 1; }

step "bundle: scripts/gpu-bundle.sh --images $images"
scripts/gpu-bundle.sh --images "$images" --shared "$shared" > "$log/bundle.log" 2>&1 ||
    fail "the bundle" "$log/bundle.log"
tail -n 1 "$log/bundle.log" >&2

step "wheel: maturin into .diag/"
rm -rf .diag && mkdir -p .diag
{
    [[ -x "$log/venv/bin/maturin" ]] || {
        python3 -m venv "$log/venv" && "$log/venv/bin/pip" install --quiet "maturin>=1.9.4,<2"
    }
    PATH="$log/venv/bin:$PATH" maturin build --release -m python/Cargo.toml -o .diag
} > "$log/wheel.log" 2>&1 || fail "the wheel" "$log/wheel.log"
ls .diag/stokehold-*.whl >&2

step "probe: tools/nvjpeg-probe/build.sh .diag/probe"
tools/nvjpeg-probe/build.sh .diag/probe > "$log/probe.log" 2>&1 || fail "the probe" "$log/probe.log"

if ((rehearse)); then
    step "rehearsal: scripts/gpu-rehearse.sh (the GPU steps skip here)"
    scripts/gpu-rehearse.sh > "$log/rehearse.log" 2>&1 || fail "the rehearsal" "$log/rehearse.log"
    grep -E '^RESULT' "$log/rehearse.log" >&2 || true
fi

if [[ -n $dali_pid ]]; then
    step "DALI: waiting for its parts (pip download, unzip, xz -9)"
    wait "$dali_pid" || fail "DALI's parts" "$log/dali.log"
fi

# What each call sends: the working tree (tracked and untracked files git does not ignore)
# and what it carries.
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
bytes() { du -scb "$@" 2>/dev/null | tail -n 1 | cut -f1; }
tree=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -n 1 | cut -f1)
over=0
check() {
    local what=$1; shift
    local b=$((tree + $(bytes "$@")))
    printf '    %-44s %6s MiB of %d\n' "$what" "$(mib "$b")" "$limit_mib" >&2
    ((b <= limit_mib * 1048576)) || over=1
}
step "what each call sends (working tree $(mib "$tree") MiB)"
check "1. gpu-check: .gpu" .gpu
parts=(.peerwhl/dali-site.tar.xz.*)
[[ -e ${parts[0]} ]] || parts=()
for p in "${parts[@]}"; do check "DALI part: $p" "$p"; done
check "the run: .gpu .diag" .gpu .diag
((over == 0)) || { echo "error: a call would pass $limit_mib MiB" >&2; exit 1; }

cat <<EOF

The calls, back to back (each within 30 s of the last keeps the machine and its files):
  1. carry [".gpu"], timeout_s 300:
       OUT=\$OUT bash .gpu/gpu-check.sh
EOF
n=2
for p in "${parts[@]}"; do
    echo "  $n. carry [\"$p\"], timeout_s 30:"
    echo "       mkdir -p /tmp/dali && cp .peerwhl/dali-site.tar.xz.* /tmp/dali/"
    n=$((n + 1))
done
unpack=""
((${#parts[@]} == 0)) ||
    unpack='mkdir -p /tmp/site && cat /tmp/dali/dali-site.tar.xz.* | xz -dc -T0 | tar -x -C /tmp/site; '
cat <<EOF
  $n. carry [".gpu", ".diag"], timeout_s = the device time left, less a minute:
       ${unpack}OUT=\$OUT RUN9_BUDGET=<that, in seconds, less 60> bash tools/gpu-diag/run9.sh
EOF
