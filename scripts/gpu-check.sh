#!/usr/bin/env bash
# Checks stokehold's GPU path on a machine with an NVIDIA driver but no Rust toolchain, from
# a bundle made by scripts/gpu-bundle.sh (see docs/gpu-machine.md for the device-tool calls).
#
#   gpu-check.sh [BUNDLE_DIR]        (default: the folder this script is in)
#
# In order, each step's output in BUNDLE_DIR/logs/ (and in $OUT when set):
#   1. what is here: GPU, driver, CUDA toolkit, PyTorch, and the NVRTC, nvJPEG and
#      compute-sanitizer it will use (CUDA toolkit first, then the pip nvidia-* packages
#      beside PyTorch, found with python3); their folders go on LD_LIBRARY_PATH;
#   2. every CUDA, nvJPEG and GPU parity test of the library with a real device, with
#      STOKEHOLD_REQUIRE_GPU=1 and STOKEHOLD_REQUIRE_NVRTC=1 so that none can skip;
#   3. compute-sanitizer memcheck and racecheck on the fused-chain parity tests, and on a
#      short `stokehold run --device gpu`;
#   4. `stokehold compare --devices cpu,gpu` (and cpu,emu when the build has it) on the
#      photo subset and jpeg-edge;
#   5. `stokehold bench --device gpu` and `--device cpu` on the photo subset;
#   6. a summary (BUNDLE_DIR/logs/summary.txt), last line RESULT.
# Exit status 0 when everything passed, 1 otherwise, 2 on bad usage.
#
# Environment (all optional):
#   ALLOW_SKIP=1        a rehearsal on a machine without a GPU: GPU steps may skip (and say
#                       so) instead of failing; STOKEHOLD_REQUIRE_GPU is not set
#   STOKEHOLD_LIB_DIRS  extra folders (colon-separated) to look for NVRTC and nvJPEG in first
#   BENCH_EPOCHS        timed epochs per bench (default 3)
#   OUT                 a folder to copy the summary and the logs (logs.tar.gz) into
set -u -o pipefail

usage() { sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[[ $# -le 1 ]] || usage
[[ "${1:-}" != -* ]] || usage
bundle="$(cd "${1:-$(dirname "$0")}" 2>/dev/null && pwd)" || { echo "error: no bundle folder ${1:-}" >&2; exit 2; }
[[ -x "$bundle/tests/lib" && -x "$bundle/bin/stokehold" && -d "$bundle/shared/data" ]] ||
    { echo "error: $bundle is not a gpu-bundle.sh folder (tests/lib, bin/stokehold, shared/data)" >&2; exit 2; }
allow_skip="${ALLOW_SKIP:-0}"
epochs="${BENCH_EPOCHS:-3}"
logs="$bundle/logs"
rm -rf "$logs"
mkdir -p "$logs"
cli="$bundle/bin/stokehold"
photos="$bundle/shared/data/imagenet-400"
edge="$bundle/shared/data/jpeg-edge"
export STOKEHOLD_SHARED="$bundle/shared"
export STOKEHOLD_KERNEL_CACHE="${STOKEHOLD_KERNEL_CACHE:-/tmp/stokehold-kernel-cache}"
export RUST_BACKTRACE=1
cd "$bundle"

rows=()
failures=0
# A summary row: step, status (ok / FAILED / SKIPPED / n/a), detail. SKIPPED (a GPU step
# that could not run) counts as a failure unless ALLOW_SKIP=1; n/a (not in this build) never.
row() {
    local status="$2"
    case "$status" in
        ok | n/a) ;;
        SKIPPED) [[ "$allow_skip" == 1 ]] || failures=$((failures + 1)) ;;
        *) failures=$((failures + 1)) ;;
    esac
    rows+=("$(printf '%-34s %-8s %s' "$1" "$status" "$3")")
    printf '  %-34s %-8s %s\n' "$1" "$status" "$3"
}

# ---------------------------------------------------------------------------------------
echo "== 1. what is here"
have_gpu=0
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    have_gpu=1
    nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv
    nvidia-smi | grep -m1 -o 'CUDA Version: [0-9.]*' || true
else
    echo "GPU: none (nvidia-smi missing or finds no device)"
fi
echo "host: $(uname -srm); $(nproc) cores; $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
toolkit=""
for t in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
    [[ -n "$t" && -d "$t/lib64" ]] && { toolkit="$t"; break; }
done
if [[ -n "$toolkit" && -x "$toolkit/bin/nvcc" ]]; then
    echo "CUDA toolkit: $toolkit ($("$toolkit/bin/nvcc" --version | grep -o 'release [0-9.]*'))"
else
    echo "CUDA toolkit: ${toolkit:-none}"
fi
# Python packages that may hold CUDA libraries: the pip nvidia-* wheels, PyTorch's lib.
py_dirs=""
if command -v python3 >/dev/null; then
    py_dirs="$(python3 - <<'EOF' 2>/dev/null
import importlib.util, os
for name in ("nvidia", "torch"):
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        continue
    if spec is None:
        continue
    for loc in (spec.submodule_search_locations or [os.path.dirname(spec.origin or "")]):
        print(loc)
EOF
)"
    python3 -c 'import torch; print("PyTorch", torch.__version__, "CUDA", torch.version.cuda)' 2>/dev/null ||
        echo "PyTorch: not importable"
fi
# The first file matching one of the names, in the extra dirs, the toolkit, the loader's
# cache, the Python packages, then the bundle's lib/ (gpu-bundle.sh --nvjpeg).
find_lib() {
    local d n f
    local IFS=$'\n'
    local dirs=()
    [[ -n "${STOKEHOLD_LIB_DIRS:-}" ]] && dirs+=($(tr ':' '\n' <<<"$STOKEHOLD_LIB_DIRS"))
    [[ -n "$toolkit" ]] && dirs+=("$toolkit/lib64" "$toolkit/lib")
    for n in "$@"; do
        for d in "${dirs[@]}"; do
            [[ -e "$d/$n" ]] && { echo "$d/$n"; return 0; }
        done
        f="$(ldconfig -p 2>/dev/null | awk -v n="$n" '$1 == n {print $NF; exit}')"
        [[ -n "$f" ]] && { echo "$f"; return 0; }
    done
    for d in $py_dirs "$bundle/lib"; do
        for n in "$@"; do
            f="$(find "$d" -name "$n" 2>/dev/null | sort | head -n1)"
            [[ -n "$f" ]] && { echo "$f"; return 0; }
        done
    done
    return 1
}
version_of() { readlink -f "$1" | sed 's/.*\.so\.//'; }
nvrtc="$(find_lib libnvrtc.so.13 libnvrtc.so.12)" || nvrtc=""
nvjpeg="$(find_lib libnvjpeg.so.13 libnvjpeg.so.12)" || nvjpeg=""
libdirs=""
if [[ -n "$nvrtc" ]]; then
    echo "NVRTC: $nvrtc ($(version_of "$nvrtc"))"
    libdirs="$(dirname "$nvrtc")"
    export STOKEHOLD_REQUIRE_NVRTC=1
else
    echo "NVRTC: not found (kernel compile tests will skip)"
fi
if [[ -n "$nvjpeg" ]]; then
    echo "nvJPEG: $nvjpeg ($(version_of "$nvjpeg"))"
    export STOKEHOLD_NVJPEG="$nvjpeg"
    [[ ":$libdirs:" == *":$(dirname "$nvjpeg"):"* ]] || libdirs="${libdirs:+$libdirs:}$(dirname "$nvjpeg")"
else
    echo "nvJPEG: not found (nvJPEG tests will skip)"
fi
export LD_LIBRARY_PATH="$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
sanitizer="$(command -v compute-sanitizer 2>/dev/null || true)"
[[ -z "$sanitizer" && -n "$toolkit" && -x "$toolkit/bin/compute-sanitizer" ]] && sanitizer="$toolkit/bin/compute-sanitizer"
echo "compute-sanitizer: ${sanitizer:-not found}"
if [[ "$allow_skip" == 1 ]]; then
    echo "ALLOW_SKIP=1: GPU steps may skip (a rehearsal); STOKEHOLD_REQUIRE_GPU is not set"
else
    export STOKEHOLD_REQUIRE_GPU=1
fi
echo "STOKEHOLD_REQUIRE_GPU=${STOKEHOLD_REQUIRE_GPU:-unset} STOKEHOLD_REQUIRE_NVRTC=${STOKEHOLD_REQUIRE_NVRTC:-unset}"
head -n 4 "$bundle/MANIFEST" 2>/dev/null

# ---------------------------------------------------------------------------------------
echo "== 2. tests with a real device"
filters=(nvjpeg:: cuda:: gpu_)
"$bundle/tests/lib" "${filters[@]}" --list >"$logs/tests-list.log" 2>&1
listed=$(grep -c ': test$' "$logs/tests-list.log")
"$bundle/tests/lib" "${filters[@]}" --test-threads=1 --nocapture >"$logs/tests.log" 2>&1
rc=$?
# Counts from libtest's own line; skips from the tests' messages (with --nocapture a message
# may follow "test name ... " on the same line).
result="$(grep '^test result:' "$logs/tests.log" | tail -n1)"
passed=$(grep -oE '[0-9]+ passed' <<<"$result" | awk '{print $1 + 0}')
failed=$(grep -oE '[0-9]+ failed' <<<"$result" | awk '{print $1 + 0}')
passed=${passed:-0}
failed=${failed:-0}
gpu_skips=$(grep -cE 'skipped: (no CUDA driver|no nvJPEG|NVRTC not found)' "$logs/tests.log")
other_skips=$(grep -c 'skipped: ' "$logs/tests.log")
other_skips=$((other_skips - gpu_skips))
detail="$passed of $listed passed, $failed failed; skips: $gpu_skips for want of a GPU/nvJPEG/NVRTC, $other_skips other"
if ((rc != 0 || failed > 0)) || [[ -z "$result" ]]; then
    row "tests (nvjpeg:: cuda:: gpu_)" FAILED "$detail"
    grep -E "panicked|^---- " "$logs/tests.log" | head -n 20 | sed 's/^/    /'
elif ((gpu_skips > 0)); then
    row "tests (nvjpeg:: cuda:: gpu_)" SKIPPED "$detail"
else
    row "tests (nvjpeg:: cuda:: gpu_)" ok "$detail"
fi
grep -E '^(nvJPEG |GPU: |NVRTC |ROI )' "$logs/tests.log" | sort -u | head -n 12 | sed 's/^/    /'

# ---------------------------------------------------------------------------------------
echo "== 3. compute-sanitizer"
# A short run on the GPU path: two batches of eight.
short_run=("$cli" run pipelines/resnet50-train.toml --data "$edge" --device gpu --batch 8 --epochs 1)
if [[ "$have_gpu" != 1 || -z "$sanitizer" ]]; then
    for tool in memcheck racecheck; do
        row "sanitizer $tool" SKIPPED "no ${sanitizer:+GPU}${sanitizer:-compute-sanitizer}"
    done
else
    for tool in memcheck racecheck; do
        "$sanitizer" --tool "$tool" --error-exitcode 9 "$bundle/tests/lib" \
            fusion::chain::kernel_tests::gpu_ --test-threads=1 >"$logs/sanitizer-$tool-kernels.log" 2>&1
        k=$?
        "$sanitizer" --tool "$tool" --error-exitcode 9 "${short_run[@]}" >"$logs/sanitizer-$tool-run.log" 2>&1
        r=$?
        summary="kernels: $(grep -m1 -oE '(ERROR SUMMARY|RACECHECK SUMMARY): [^$]*' "$logs/sanitizer-$tool-kernels.log" || echo "exit $k");"
        summary+=" run: $(grep -m1 -oE '(ERROR SUMMARY|RACECHECK SUMMARY): [^$]*' "$logs/sanitizer-$tool-run.log" || tail -n1 "$logs/sanitizer-$tool-run.log")"
        if ((k == 0 && r == 0)); then row "sanitizer $tool" ok "$summary"; else row "sanitizer $tool" FAILED "$summary"; fi
    done
fi

# ---------------------------------------------------------------------------------------
echo "== 4. compare"
compare() {
    local name="$1" devices="$2" pipeline="$3" data="$4"
    local log="$logs/compare-$name.log"
    "$cli" compare "pipelines/$pipeline" --data "$data" --devices "$devices" >"$log" 2>&1
    local rc=$?
    local verdict
    verdict="$(tail -n1 "$log")"
    if ((rc == 0)); then
        row "compare $name" ok "$verdict"
    elif grep -q "unknown device" "$log"; then
        row "compare $name" n/a "this build has no device '${devices#*,}'"
    elif [[ "$have_gpu" != 1 ]] && grep -q "GPU" "$log"; then
        row "compare $name" SKIPPED "no GPU: $verdict"
    else
        row "compare $name" FAILED "exit $rc: $verdict"
    fi
    grep -E '^(images|labels|decoded|random) ' "$log" | sed 's/^/    /'
}
compare gpu-train-photos cpu,gpu resnet50-train.toml "$photos"
compare gpu-eval-photos cpu,gpu resnet50-eval.toml "$photos"
compare gpu-train-edge cpu,gpu resnet50-train.toml "$edge"
compare emu-train-photos cpu,emu resnet50-train.toml "$photos"

# ---------------------------------------------------------------------------------------
echo "== 5. bench (resnet50-train, ${epochs} epochs, $(find "$photos" -type f | wc -l) photos)"
for device in gpu cpu; do
    log="$logs/bench-$device.log"
    "$cli" bench pipelines/resnet50-train.toml --data "$photos" --device "$device" \
        --epochs "$epochs" >"$log" 2>&1
    rc=$?
    line="$(grep -E 'throughput=' "$log" | tail -n1)"
    if ((rc == 0)) && [[ -n "$line" ]]; then
        row "bench $device" ok "$line"
    elif [[ "$device" == gpu && "$have_gpu" != 1 ]]; then
        row "bench $device" SKIPPED "no GPU: $(tail -n1 "$log")"
    else
        row "bench $device" FAILED "exit $rc: $(tail -n1 "$log")"
    fi
done

# ---------------------------------------------------------------------------------------
{
    echo "== summary ($(date -u +%Y-%m-%dT%H:%M:%SZ); logs in $logs)"
    printf '%-34s %-8s %s\n' step status detail
    for r in "${rows[@]}"; do echo "$r"; done
    if ((failures > 0)); then
        echo "RESULT: $failures step(s) failed or skipped"
    elif [[ "$allow_skip" == 1 ]] && printf '%s\n' "${rows[@]}" | grep -q ' SKIPPED '; then
        echo "RESULT: passed, with GPU steps skipped (ALLOW_SKIP=1: this proves nothing about a GPU)"
    else
        echo "RESULT: all passed"
    fi
} | tee "$logs/summary.txt"
if [[ -n "${OUT:-}" ]]; then
    mkdir -p "$OUT"
    cp "$logs/summary.txt" "$OUT/"
    tar -czf "$OUT/logs.tar.gz" -C "$bundle" logs
fi
((failures == 0))
