#!/usr/bin/env bash
# Fuzzes the decoder and the pipeline-file parser with cargo-fuzz (libFuzzer).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     # default: 300 s for each of: decode gpu_route
#                                             # shards pipeline_file
#   FUZZ_MAX_LEN=2048 scripts/fuzz.sh 300 decode   # short inputs only: ~2x the executions/s
#                                                  # (headers, EXIF, marker walks)
#
# Needs `cargo install cargo-fuzz`. cargo-fuzz passes unstable (-Z) flags to rustc; on a
# stable toolchain RUSTC_BOOTSTRAP=1 lets them through, and `-s none` skips AddressSanitizer
# (which needs the nightly-only build-std for a clean run); libFuzzer's coverage
# instrumentation and its crash/leak/timeout detection still work. Safe Rust keeps memory
# errors out, so what the fuzzer hunts is panics, aborts, hangs and huge allocations.
#
# The seed corpus is generated here each run (nothing of it is committed):
# - decode: the built-in sample set (JPEG baseline/progressive, every subsampling, gray,
#   PNG), produced by the 01-run-pipeline-file example; plus ../shared/data/jpeg-edge and a
#   few ../shared/data/imagenet-400 photos when present ($STOKEHOLD_SHARED/data wins).
# - gpu_route: the same files (the GPU path's header walk, routes and regions).
# - shards: small tar shards of a few of those files with .cls and .json labels (Python's
#   tarfile: ustar, a GNU long name, a pax header).
# - pipeline_file: the shipped pipelines/*.toml.
# What decode, gpu_route and shards check is fuzz/checks.rs, which tests/fuzz_regressions.rs
# also runs.
# One process, one job (libFuzzer's default). Corpora grow in fuzz/corpus/<target>/ and crashes land in fuzz/artifacts/<target>/ (both
# ignored by git). Every crash must become a test in tests/fuzz_regressions.rs.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${1:-300}"
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(decode gpu_route shards pipeline_file)
SHARED="${STOKEHOLD_SHARED:-$PWD/../shared}/data"
export RUSTC_BOOTSTRAP=1
# Own target dir: the instrumented build shares nothing with the normal one.
FUZZ_TARGET_DIR="${FUZZ_TARGET_DIR:-$PWD/fuzz/target}"
MAX_LEN="${FUZZ_MAX_LEN:-262144}"

seed_decode() {
    local dir=fuzz/corpus/decode
    mkdir -p "$dir"
    local samples
    samples="$(mktemp -d)/samples"
    STOKEHOLD_SAMPLES="$samples" cargo run --quiet --release --example 01-run-pipeline-file \
        -- pipelines/resnet50-eval.toml >/dev/null
    find "$samples" -type f \( -name '*.jpg' -o -name '*.png' \) -exec cp {} "$dir/" \;
    rm -rf "$(dirname "$samples")"
    if [ -d "$SHARED/jpeg-edge" ]; then
        cp "$SHARED"/jpeg-edge/*.jpg "$dir/"
    fi
    if [ -d "$SHARED/imagenet-400" ]; then
        # A handful of small real photos (libFuzzer caps input size anyway).
        find "$SHARED/imagenet-400" -type f -size -40k | sort | head -n 16 |
            while read -r f; do cp "$f" "$dir/"; done
    fi
}

seed_shards() {
    seed_decode
    local dir=fuzz/corpus/shards
    mkdir -p "$dir"
    python3 - "$dir" fuzz/corpus/decode <<'PY'
import io, os, sys, tarfile
out, src = sys.argv[1], sys.argv[2]
files = sorted(f for f in os.listdir(src) if os.path.getsize(os.path.join(src, f)) < 8192)[:6]
for fmt, name in [(tarfile.USTAR_FORMAT, "ustar"), (tarfile.GNU_FORMAT, "gnu"),
                  (tarfile.PAX_FORMAT, "pax")]:
    with tarfile.open(os.path.join(out, f"seed-{name}.tar"), "w", format=fmt) as t:
        for i, f in enumerate(files):
            key = ("d" * 120 + "/" if name != "ustar" and i == 0 else "") + f"s{i}"
            for ext, data in [("jpg", open(os.path.join(src, f), "rb").read()),
                              ("cls", str(i).encode()),
                              ("json", b'{"a": {"b": %d}}' % i)]:
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
PY
}

seed_pipeline_file() {
    local dir=fuzz/corpus/pipeline_file
    mkdir -p "$dir"
    cp pipelines/*.toml "$dir/"
}

for t in "${TARGETS[@]}"; do
    case "$t" in
    decode) seed_decode ;;
    gpu_route) seed_decode && mkdir -p fuzz/corpus/gpu_route &&
        cp -n fuzz/corpus/decode/* fuzz/corpus/gpu_route/ ;;
    shards) seed_shards ;;
    pipeline_file) seed_pipeline_file ;;
    *) echo "unknown target $t (decode, gpu_route, shards, pipeline_file)" >&2; exit 2 ;;
    esac
    echo "== fuzzing $t for ${SECONDS_EACH}s"
    cargo fuzz run "$t" -s none --target-dir "$FUZZ_TARGET_DIR" "fuzz/corpus/$t" -- \
        -max_total_time="$SECONDS_EACH" -max_len="$MAX_LEN" -rss_limit_mb=4096 -timeout=10 \
        -print_final_stats=1 2>&1 | tee "fuzz/last-$t.log" | grep -v '^#[0-9]*.*\(NEW\|REDUCE\|pulse\)' || true
    if ls "fuzz/artifacts/$t"/crash-* "fuzz/artifacts/$t"/oom-* "fuzz/artifacts/$t"/timeout-* >/dev/null 2>&1; then
        echo "!! $t: findings in fuzz/artifacts/$t" >&2
    fi
done
