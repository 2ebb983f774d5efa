#!/usr/bin/env bash
# Runs stokehold's GPU checks on a machine with an NVIDIA driver and CUDA libraries but no
# Rust toolchain, from a bundle made by scripts/gpu-bundle.sh.
#
#   gpu-check.sh BUNDLE_DIR SHARED_DIR [BENCH_DATA]
#
#   BUNDLE_DIR   the folder gpu-bundle.sh wrote (tests/, bin/stokehold, pipelines/)
#   SHARED_DIR   the shared folder holding data/imagenet-400 and data/jpeg-edge
#                (exported as STOKEHOLD_SHARED for the tests)
#   BENCH_DATA   image folder for the benchmarks (default SHARED_DIR/data/imagenet-400)
#
# Environment (all optional):
#   TEST_FILTERS     libtest name filters for the GPU tests and parity checks
#                    (default "nvjpeg cuda parity gpu"; a test runs if its name contains any)
#   BENCH_PIPELINE   pipeline file (default BUNDLE_DIR/pipelines/resnet50-train.toml)
#   BENCH_EPOCHS     timed epochs per bench (default 2)
#   ALLOW_SKIP=1     don't fail when GPU tests skip for want of nvJPEG / a GPU
#   STOKEHOLD_NVJPEG path of libnvjpeg to use (else: ld path, /usr/local/cuda/lib64, pip wheels)
#
# Steps: GPU facts (nvidia-smi, libnvjpeg found), every test binary with the filters
# (--test-threads=1, output kept in BUNDLE_DIR/logs/), then `stokehold bench` with
# --device gpu and --device cpu. Prints a summary table; exits 1 if any test failed, any GPU
# test skipped (unless ALLOW_SKIP=1), or a bench failed; 2 on bad usage.
set -u -o pipefail

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[[ $# -ge 2 && $# -le 3 ]] || usage
bundle="$(cd "$1" 2>/dev/null && pwd)" || { echo "error: no bundle folder $1" >&2; exit 2; }
shared="$(cd "$2" 2>/dev/null && pwd)" || { echo "error: no shared folder $2" >&2; exit 2; }
data="${3:-$shared/data/imagenet-400}"
[[ -d "$bundle/tests" && -x "$bundle/bin/stokehold" ]] ||
    { echo "error: $bundle is not a gpu-bundle.sh folder (tests/, bin/stokehold)" >&2; exit 2; }
[[ -d "$data" ]] || { echo "error: no bench data folder $data" >&2; exit 2; }
read -r -a filters <<<"${TEST_FILTERS:-nvjpeg cuda parity gpu}"
pipeline="${BENCH_PIPELINE:-$bundle/pipelines/resnet50-train.toml}"
epochs="${BENCH_EPOCHS:-2}"
logs="$bundle/logs"
mkdir -p "$logs"
export STOKEHOLD_SHARED="$shared"
export RUST_BACKTRACE=1

failures=0
rows=()

echo "== GPU"
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
else
    echo "warning: nvidia-smi not found"
fi
if [[ -z "${STOKEHOLD_NVJPEG:-}" ]]; then
    if ldconfig -p 2>/dev/null | grep -q 'libnvjpeg\.so\.1[23]'; then
        echo "libnvjpeg: $(ldconfig -p | grep -o '/[^ ]*libnvjpeg\.so\.1[23]' | head -n1) (ld cache)"
    else
        for cand in "${CUDA_HOME:-/usr/local/cuda}/lib64/libnvjpeg.so.13" \
                    /usr/local/cuda/lib64/libnvjpeg.so.13 /usr/local/cuda/lib64/libnvjpeg.so.12; do
            if [[ -f "$cand" ]]; then export STOKEHOLD_NVJPEG="$cand"; break; fi
        done
        echo "libnvjpeg: ${STOKEHOLD_NVJPEG:-not found (the GPU tests will skip)}"
    fi
else
    echo "libnvjpeg: $STOKEHOLD_NVJPEG (STOKEHOLD_NVJPEG)"
fi

echo "== tests (filters: ${filters[*]})"
for bin in "$bundle"/tests/*; do
    [[ -x "$bin" ]] || continue
    name="$(basename "$bin")"
    log="$logs/test-$name.log"
    (cd "$bundle" && "$bin" "${filters[@]}" --test-threads=1 --nocapture) >"$log" 2>&1
    rc=$?
    passed=$(grep -o '[0-9]* passed' "$log" | awk '{s+=$1} END {print s+0}')
    failed=$(grep -o '[0-9]* failed' "$log" | awk '{s+=$1} END {print s+0}')
    skipped=$(grep -c '^skipped' "$log")
    gpu_skips=$(grep -c '^skipped: no nvJPEG / no GPU' "$log")
    status=ok
    if (( rc != 0 || failed > 0 )); then
        status=FAILED; failures=$((failures + 1))
    elif (( gpu_skips > 0 )) && [[ "${ALLOW_SKIP:-0}" != 1 ]]; then
        status="GPU-SKIPPED"; failures=$((failures + 1))
    fi
    rows+=("$(printf '%-28s %7s %7s %8s  %s' "$name" "$passed" "$failed" "$skipped" "$status")")
    echo "  $name: $status (log: $log)"
    grep -E '^(nvJPEG|ROI|skipped: no nvJPEG)' "$log" | sed 's/^/    /' | head -n 20
    if [[ "$status" == FAILED ]]; then
        grep -E "panicked|FAILED|^---- " "$log" | head -n 20 | sed 's/^/    /'
    fi
done

echo "== bench ($pipeline, --epochs $epochs, data $data)"
bench_lines=()
for device in gpu cpu; do
    log="$logs/bench-$device.log"
    "$bundle/bin/stokehold" bench "$pipeline" --data "$data" --device "$device" \
        --epochs "$epochs" >"$log" 2>&1
    rc=$?
    line="$(grep -E 'throughput=' "$log" | tail -n1)"
    if (( rc != 0 )) || [[ -z "$line" ]]; then
        failures=$((failures + 1))
        line="FAILED (exit $rc): $(tail -n1 "$log")"
    fi
    bench_lines+=("$(printf '%-4s %s' "$device" "$line")")
done

echo
echo "== summary"
printf '%-28s %7s %7s %8s  %s\n' "test binary" passed failed skipped status
for r in "${rows[@]}"; do echo "$r"; done
echo
for b in "${bench_lines[@]}"; do echo "bench $b"; done
echo
if (( failures > 0 )); then
    echo "RESULT: $failures problem(s); logs in $logs"
    exit 1
fi
echo "RESULT: all passed"
