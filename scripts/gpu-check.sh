#!/usr/bin/env bash
# Checks stokehold's GPU path on a machine with an NVIDIA driver but no Rust toolchain, from
# a bundle made by scripts/gpu-bundle.sh (docs/gpu-machine.md: running it on a GPU machine).
#
#   gpu-check.sh [BUNDLE_DIR]        (default: the folder this script is in)
#
# In order, each step's output in BUNDLE_DIR/logs/ (and in $OUT when set):
#   1. what is here: GPU, driver, CUDA toolkit, PyTorch, and the NVRTC, nvJPEG and
#      compute-sanitizer it will use (CUDA toolkit first, then the pip nvidia-* packages
#      beside PyTorch, found with python3); their folders go on LD_LIBRARY_PATH;
#   2. every CUDA, nvJPEG and GPU parity test of the library with a real device, with
#      STOKEHOLD_REQUIRE_GPU=1 and STOKEHOLD_REQUIRE_NVRTC=1 so that none can skip;
#   3. the GPU stage's real-device tests (STAGE_TESTS below; docs/gpu.md lists them): the
#      device seam, nvJPEG through it, and the whole GPU path against the CPU path;
#   4. `stokehold run --device gpu --stats` (both shipped pipelines, the photo subset): the
#      GPU figures and where each image was decoded (the JPEG engines must take the baseline
#      photos), and `stokehold check` with device = "auto" choosing the GPU;
#   5. compute-sanitizer memcheck and racecheck on the fused-chain parity tests, and on a
#      short `stokehold run --device gpu`, with and without our chroma rebuild;
#   6. `stokehold compare --devices cpu,gpu` and `cpu,emu` on the photo subset and jpeg-edge,
#      and over two epochs (past the warm-up: the settled pools, groups decoded in parts);
#   7. `stokehold bench --device gpu` and `--device cpu` on the photo subset;
#   8. a summary (BUNDLE_DIR/logs/summary.txt): a row per step, what was skipped and why,
#      last line RESULT.
# Exit status 0 when everything passed, 1 otherwise, 2 on bad usage.
#
# Environment (all optional):
#   ALLOW_SKIP=1        a rehearsal on a machine without a GPU: GPU steps may skip (and say
#                       so) instead of failing; STOKEHOLD_REQUIRE_GPU is not set
#   STOKEHOLD_LIB_DIRS  extra folders (colon-separated) to look for NVRTC and nvJPEG in first
#   BENCH_EPOCHS        timed epochs per bench (default 3)
#   OUT                 a folder to copy the summary and the logs (logs.tar.gz) into
set -u -o pipefail

usage() { sed -n '2,/^set -u/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2; exit 2; }
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
# The tests read the pipeline files from here, never from the build machine's checkout.
export STOKEHOLD_SOURCE_DIR="$bundle"
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

# The GPU stage's tests that need a real device (docs/gpu.md, "The GPU-only remainder";
# tests/gpu_scripts.rs checks that this list, the docs and the sources agree).
STAGE_TESTS=(
    pipeline::run::gpu_tests::gpu_the_real_device_keeps_the_seam_contract
    pipeline::run::gpu_decode_tests::gpu_the_real_device_decodes_through_the_seam
    pipeline::run::gpu_tests::gpu_the_gpu_path_on_a_real_device_matches_the_cpu
    pipeline::run::upsampling_tests::gpu_nearest_chroma_on_a_real_device_matches_the_cpu
    pipeline::run::gpu_decode_tests::gpu_the_jpeg_engines_write_when_called
    pipeline::run::gpu_decode_tests::gpu_the_decoders_feeding_times_answer_during_its_call
    pipeline::run::gpu_huffman_tests::gpu_a_workers_gpu_decoder_matches_the_cpu
    pipeline::run::damaged_tests::gpu_damaged_headers_get_the_cpu_verdicts_on_a_real_device
)

# ---------------------------------------------------------------------------------------
echo "== 2. tests with a real device"
filters=(nvjpeg:: cuda:: gpu_)
skips=()
for t in "${STAGE_TESTS[@]}"; do skips+=(--skip "$t"); done
"$bundle/tests/lib" "${filters[@]}" "${skips[@]}" --list >"$logs/tests-list.log" 2>&1
listed=$(grep -c ': test$' "$logs/tests-list.log")
"$bundle/tests/lib" "${filters[@]}" "${skips[@]}" --test-threads=1 --nocapture >"$logs/tests.log" 2>&1
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
echo "== 3. the GPU stage's real-device tests"
"$bundle/tests/lib" --exact "${STAGE_TESTS[@]}" --list >"$logs/stage-tests-list.log" 2>&1
listed=$(grep -c ': test$' "$logs/stage-tests-list.log")
"$bundle/tests/lib" --exact "${STAGE_TESTS[@]}" --test-threads=1 --nocapture >"$logs/stage-tests.log" 2>&1
rc=$?
result="$(grep '^test result:' "$logs/stage-tests.log" | tail -n1)"
passed=$(grep -oE '[0-9]+ passed' <<<"$result" | awk '{print $1 + 0}')
failed=$(grep -oE '[0-9]+ failed' <<<"$result" | awk '{print $1 + 0}')
skipped=$(grep -cE 'skipped: ' "$logs/stage-tests.log")
detail="${passed:-0} of $listed (of ${#STAGE_TESTS[@]} named) passed, ${failed:-0} failed, $skipped skipped"
if ((rc != 0 || ${failed:-0} > 0 || listed != ${#STAGE_TESTS[@]})) || [[ -z "$result" ]]; then
    row "GPU stage tests (real device)" FAILED "$detail"
    grep -E "panicked|^---- " "$logs/stage-tests.log" | head -n 20 | sed 's/^/    /'
elif ((skipped > 0)); then
    row "GPU stage tests (real device)" SKIPPED "$detail ($(grep -m1 -oE 'skipped: .*' "$logs/stage-tests.log" | sed 's/^skipped: //'))"
else
    row "GPU stage tests (real device)" ok "$detail"
fi
grep -E '^(GPU stage |GPU: |JPEG engines |.* batch [0-9]+ PSNR )' "$logs/stage-tests.log" | head -n 16 |
    sed 's/^/    /'

# ---------------------------------------------------------------------------------------
echo "== 4. run --device gpu --stats, and check"
for pipeline in resnet50-train resnet50-eval; do
    log="$logs/run-gpu-$pipeline.log"
    "$cli" run "pipelines/$pipeline.toml" --data "$photos" --device gpu --epochs 1 --stats >"$log" 2>&1
    rc=$?
    last="$(grep -E 'throughput=' "$log" | tail -n1)"
    engines=$(grep -E '^ *[0-9]+ decoded by device-decoder:hardware' "$log" | awk '{print $1}')
    if ((rc == 0)) && [[ -n "$last" ]]; then
        if [[ -z "$engines" || "$engines" == 0 ]]; then
            row "run --device gpu $pipeline" FAILED "no image decoded by the JPEG engines: $last"
        else
            row "run --device gpu $pipeline" ok "$engines by the JPEG engines; $last"
        fi
    elif [[ "$have_gpu" != 1 ]]; then
        row "run --device gpu $pipeline" SKIPPED "no GPU: $(tail -n1 "$log")"
    else
        row "run --device gpu $pipeline" FAILED "exit $rc: $(tail -n1 "$log")"
    fi
    grep -E '^GPU path|decoded by|prepare \(host\)|device memory' "$log" | sed 's/^/    /'
done
log="$logs/check-auto.log"
"$cli" check pipelines/resnet50-train.toml >"$log" 2>&1
runs_on="$(grep -m1 -oE 'runs on: .*' "$log")"
if [[ "$runs_on" == "runs on: gpu"* ]]; then
    row "check, device = auto" ok "$runs_on"
elif [[ "$have_gpu" != 1 ]]; then
    row "check, device = auto" SKIPPED "no GPU: ${runs_on:-$(tail -n1 "$log")}"
else
    row "check, device = auto" FAILED "${runs_on:-$(tail -n1 "$log")}"
fi

# ---------------------------------------------------------------------------------------
echo "== 5. compute-sanitizer"
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
        # Our chroma rebuild kernels (in place; barriers inside data-dependent loops) load
        # only when the engines' chroma is rebuilt: the same run with them.
        STOKEHOLD_CHROMA_REBUILD=1 "$sanitizer" --tool "$tool" --error-exitcode 9 "${short_run[@]}" \
            >"$logs/sanitizer-$tool-run-rebuilt.log" 2>&1
        rr=$?
        ((r == 0)) && r=$rr
        # The sanitizer's verdict (its summary line; exit 9 = errors found) and the
        # sanitized programs' own result are separate rows: a test that fails under the
        # sanitizer is not a memory error, nor the other way round.
        verdict() { grep -m1 -oE '(ERROR SUMMARY|RACECHECK SUMMARY): [^$]*' "$1"; }
        clean() { verdict "$1" | grep -qE 'SUMMARY: 0 (errors|hazards)'; }
        kv="$(verdict "$logs/sanitizer-$tool-kernels.log" || echo "no summary (exit $k)")"
        rv="$(verdict "$logs/sanitizer-$tool-run.log" || echo "no summary (exit $r)")"
        bv="$(verdict "$logs/sanitizer-$tool-run-rebuilt.log" || echo "no summary (exit $rr)")"
        if ((k != 9 && r != 9 && rr != 9)) && clean "$logs/sanitizer-$tool-kernels.log" &&
            clean "$logs/sanitizer-$tool-run.log" && clean "$logs/sanitizer-$tool-run-rebuilt.log"; then
            row "sanitizer $tool" ok "kernels: $kv; run: $rv; chroma rebuilt: $bv"
        else
            row "sanitizer $tool" FAILED "kernels: $kv; run: $rv; chroma rebuilt: $bv"
        fi
        if ((k == 0 && r == 0)); then
            row "  under $tool: tests, run" ok "kernel tests exit 0, run exit 0"
        elif ((k != 9 && r != 9)); then
            row "  under $tool: tests, run" FAILED "kernel tests exit $k, run exit $r (not the sanitizer's finding: see the logs)"
        fi
    done
fi

# ---------------------------------------------------------------------------------------
echo "== 6. compare"
compare() {
    local name="$1" devices="$2" pipeline="$3" data="$4"
    shift 4 # the rest: more compare flags
    local log="$logs/compare-$name.log"
    [[ "$pipeline" == */* ]] || pipeline="pipelines/$pipeline"
    "$cli" compare "$pipeline" --data "$data" --devices "$devices" "$@" >"$log" 2>&1
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
compare gpu-eval-edge cpu,gpu resnet50-eval.toml "$edge"
# `upsampling = "nearest"`: the engines' repeated chroma is the pipeline's (docs/gpu.md).
nearest="$logs/pipelines-nearest"
mkdir -p "$nearest"
for p in resnet50-train.toml resnet50-eval.toml; do
    sed 's/^output = "decoded"$/&\nupsampling = "nearest"/' "pipelines/$p" >"$nearest/$p"
done
compare gpu-train-photos-nearest cpu,gpu "$nearest/resnet50-train.toml" "$photos"
compare gpu-eval-photos-nearest cpu,gpu "$nearest/resnet50-eval.toml" "$photos"
# Past the warm-up (the first epoch): the settled pools, groups decoded and rebuilt in parts.
compare gpu-train-photos-nearest-settled cpu,gpu "$nearest/resnet50-train.toml" "$photos" \
    --epochs 2 --batch 8
STOKEHOLD_CHROMA_REBUILD=1 compare gpu-train-photos-rebuilt-settled cpu,gpu resnet50-train.toml \
    "$photos" --epochs 2 --batch 8
compare emu-train-photos cpu,emu resnet50-train.toml "$photos"
compare emu-eval-edge cpu,emu resnet50-eval.toml "$edge"

# ---------------------------------------------------------------------------------------
echo "== 7. bench (resnet50-train, ${epochs} epochs, $(find "$photos" -type f | wc -l) photos)"
for device in gpu cpu; do
    log="$logs/bench-$device.log"
    "$cli" bench pipelines/resnet50-train.toml --data "$photos" --device "$device" \
        --epochs "$epochs" --stats >"$log" 2>&1
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
    skipped_rows="$(printf '%s\n' "${rows[@]}" | grep -E '^.{34} SKIPPED ' || true)"
    if [[ -n "$skipped_rows" ]]; then
        echo "skipped ($(grep -c . <<<"$skipped_rows") step(s); nothing in them ran on a GPU):"
        while read -r r; do
            name="${r:0:34}"
            echo "  - ${name%"${name##*[! ]}"}: ${r:44}"
        done <<<"$skipped_rows"
    fi
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
