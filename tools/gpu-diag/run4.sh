#!/usr/bin/env bash
# For the next GPU call: why the rebuilt chroma (STOKEHOLD_CHROMA_REBUILD=1) gave wrong photos
# on the H100 of 2026-11-26 (compare cpu,gpu: 5 dB from the second batch on; the emulated
# device agrees with the CPU). Carries .gpu/ (scripts/gpu-bundle.sh). Bisects with
# `stokehold compare --devices cpu,gpu` over one factor at a time (STOKEHOLD_DECODE_WHOLE=1:
# no regions of interest asked of nvJPEG), then times the default
# (nvJPEG interpolating) and the rebuild. Each line: the factors, then compare's verdict and
# the decoded images' min PSNR.
set -u
O="${OUT:-/tmp/out}"; mkdir -p "$O"
exec > >(tee "$O/run4.log") 2>&1
G=.gpu
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
P="$G/shared/data/imagenet-400"
cmp_row() {  # env assignments..., then the pipeline
    local log="$O/compare-$(echo "$*" | tr ' =/' '_-_').log"
    env "$@" timeout 60 "$G/bin/stokehold" compare "$G/pipelines/resnet50-train.toml" --data "$P" \
        --devices cpu,gpu > "$log" 2>&1
    echo "$* :: $(tail -n1 "$log") :: $(grep -E '^decoded ' "$log" | awk '{print "min", $5, "dB"}')"
}
echo "== compare, one factor at a time"
cmp_row STOKEHOLD_CHROMA_REBUILD=0
cmp_row STOKEHOLD_CHROMA_REBUILD=1
cmp_row STOKEHOLD_CHROMA_REBUILD=1 STOKEHOLD_CPU_DECODE_SHARE=0
cmp_row STOKEHOLD_CHROMA_REBUILD=1 STOKEHOLD_CPU_DECODE_SHARE=0 STOKEHOLD_ENGINE_SLOTS=1
cmp_row STOKEHOLD_CHROMA_REBUILD=1 STOKEHOLD_CPU_DECODE_SHARE=0 STOKEHOLD_ENGINE_CHUNK=8
cmp_row STOKEHOLD_CHROMA_REBUILD=1 STOKEHOLD_CPU_DECODE_SHARE=1
cmp_row STOKEHOLD_CHROMA_REBUILD=0 STOKEHOLD_CPU_DECODE_SHARE=0.5
cmp_row STOKEHOLD_CHROMA_REBUILD=1 STOKEHOLD_DECODE_WHOLE=1
cmp_row STOKEHOLD_CHROMA_REBUILD=1 STOKEHOLD_DECODE_WHOLE=1 STOKEHOLD_CPU_DECODE_SHARE=0 STOKEHOLD_ENGINE_SLOTS=1
cmp_row STOKEHOLD_CHROMA_REBUILD=0 STOKEHOLD_DECODE_WHOLE=1
echo "== speed: default against the rebuild (200 photos x 20, batch 256, f16)"
mkdir -p /tmp/d4k
for k in $(seq 0 19); do for f in "$P"/*; do ln -f "$f" "/tmp/d4k/$k-$(basename "$f")"; done; done
sed 's/dtype = "f32"/dtype = "f16"/' "$G/pipelines/resnet50-train.toml" > /tmp/train16.toml
for r in 1 2; do
    for rebuild in 0 1; do
        STOKEHOLD_CHROMA_REBUILD=$rebuild timeout 40 "$G/bin/stokehold" bench /tmp/train16.toml \
            --data /tmp/d4k --device gpu --batch 256 --epochs 3 --stats > "$O/bench-$rebuild-$r.log" 2>&1
        echo "rebuild=$rebuild $(grep -E 'decoders:' "$O/bench-$rebuild-$r.log")"
        echo "rebuild=$rebuild $(grep -E 'kernels \(device\)' "$O/bench-$rebuild-$r.log") $(grep throughput= "$O/bench-$rebuild-$r.log")"
    done
done
echo "== each kernel's device time with the rebuild (ncu, the 200 photos in one batch)"
# On the emulated device (imagenet-400, train): 163k of the chroma blocks need chroma_guess,
# at most 48,841 candidates one block (35 blocks over 4,096): the guess alone should not cost
# 67 ms a batch; this says which kernel does.
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
STOKEHOLD_CHROMA_REBUILD=1 timeout 120 "$NCU" --metrics gpu__time_duration.sum --csv --print-units base \
    "$G/bin/stokehold" run /tmp/train16.toml --data "$P" --device gpu --batch 256 --epochs 1 \
    > "$O/ncu-rebuild.csv" 2> "$O/ncu-rebuild.err"
awk -F'","' 'NR > 1 && $0 ~ /gpu__time_duration/ { t[$5] += $NF; n[$5]++ }
    END { for (k in t) printf "  %-40s %4d launches %10.3f ms\n", k, n[k], t[k] / 1e6 }' \
    "$O/ncu-rebuild.csv" | tr -d '"'
