#!/usr/bin/env bash
# For the GPU call after the engines got a feeding thread of their own (6983485: the thread
# that calls nvJPEG is no longer the one that launches the kernels). What it shows:
#   (a) compute-sanitizer memcheck of gpu-check's short run (the feeding thread's first run on
#       a real device);
#   (b) `bench --device gpu --stats`, f16 train pipeline with upsampling = "nearest" over
#       /tmp/d4k, batch 256, alternated twice: the default threads (a quarter of the cores),
#       8 and 16. Read: throughput, `decoders:`, `feeding thread in the decoder:` (µs an image
#       of nvJPEG's call), batches in flight (2 expected now), allocations after warm-up;
#   (c) DALI's GPU pipeline (default split; engines only, hw_decoder_load 1.0) alternated with
#       ours at the default threads, twice, longer runs so that `nvidia-smi dmon` (1 s samples,
#       running the whole call: $L/dmon.log, phases in $L/phases.log) sees each one's engines;
#   (d) "fancy": nvJPEG interpolating, then the repeated chroma rebuilt by our kernels;
#   (e) the 1.8 MP set (make_big.py: the photos at 3x, hard-linked 5 times): nearest, fancy;
#   (f) the training benchmark, nearest: synthetic, stokehold-gpu, stokehold-cpu, dali (where
#       importable), each stokehold loader's pipeline stats on its line.
# Carries .gpu/ (scripts/gpu-bundle.sh --images 200) and .diag/ (a fresh stokehold wheel);
# DALI from /tmp/site where the calls before unpacked it (docs/gpu-machine.md).
# Everything under $OUT/logs, packed into $OUT/logs.tar.gz at the end.
set -u
BUDGET="${RUN7_BUDGET:-560}"
HERE=tools/gpu-diag
# shellcheck source=tools/gpu-diag/lib.sh
source "$HERE/lib.sh" run7
start_call
train_pipelines
make_d4k

# One bench: name, data, pipeline, threads ("" = the default), epochs, then VAR=value settings.
bench() {
    local name=$1 data=$2 pipe=$3 threads=$4 epochs=$5; shift 5
    local log="$L/bench-$name.log"
    phase "start $name"
    env "$@" timeout "$(limit 40)" "$S" bench "$pipe" --data "$data" --device gpu --batch 256 \
        --epochs "$epochs" ${threads:+--threads "$threads"} --stats > "$log" 2>&1
    local rc=$?
    phase "end $name"
    echo "$name rc=$rc $(grep -E 'throughput=' "$log" | tail -n1 | grep -oE 'threads=.*')"
    grep -qE 'throughput=' "$log" || tail -n 2 "$log" | sed 's/^/    /'
    grep -E 'modelled|limit|decoders:|feeding thread|assembl|kernels \(device\)|batches in flight|allocations after|device memory' "$log" \
        | sed 's/^ */    /'
}
dali() {
    local name=$1 data=$2 up=$3 epochs=$4; shift 4
    phase "start $name"
    PYTHONPATH="$DALI" timed 60 python3 "$HERE/dali_upsampling.py" "$data" --upsampling "$up" \
        --batch 256 --epochs "$epochs" --threads 16 "$@" > "$L/$name.log" 2>&1
    local rc=$?
    phase "end $name"
    echo "$name rc=$rc $(grep -oE 'threads=.*' "$L/$name.log" | tail -n1)"
    grep -qE 'throughput=' "$L/$name.log" || tail -n 3 "$L/$name.log" | sed 's/^/    /'
}

say "(a) memcheck of gpu-check's short run (jpeg-edge, batch 8)"
if command -v compute-sanitizer > /dev/null; then
    timed 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$S" run "$G/pipelines/resnet50-train.toml" \
        --data "$G/shared/data/jpeg-edge" --device gpu --batch 8 --epochs 1 > "$L/memcheck-run.log" 2>&1
    echo "rc=$? $(grep -m1 -oE 'ERROR SUMMARY: .*' "$L/memcheck-run.log")"
    grep -m3 -E 'Program hit|Invalid' "$L/memcheck-run.log"
else
    echo "no compute-sanitizer"
fi

say "(b) nearest, d4k: default threads, 8, 16; two rounds"
for r in 1 2; do
    bench "nearest-tdef-r$r" /tmp/d4k /tmp/train16-nearest.toml "" 5
    bench "nearest-t8-r$r" /tmp/d4k /tmp/train16-nearest.toml 8 5
    bench "nearest-t16-r$r" /tmp/d4k /tmp/train16-nearest.toml 16 5
done

DALI=""
PYTHONPATH=/tmp/site python3 -c 'import nvidia.dali' 2> /dev/null && DALI=/tmp/site
echo "DALI: ${DALI:-not importable from /tmp/site}"

say "(c) DALI (default split; engines only) against stokehold, d4k, 15 epochs each"
for r in 1 2; do
    if [[ -n "$DALI" ]]; then
        dali "dali-nearest-r$r" /tmp/d4k nearest 15
        dali "dali-engines-r$r" /tmp/d4k nearest 15 --hw-load 1.0
    fi
    bench "long-nearest-tdef-r$r" /tmp/d4k /tmp/train16-nearest.toml "" 15
done

say "(d) fancy, d4k: nvJPEG interpolating, then rebuilt by our kernels"
bench fancy-tdef /tmp/d4k /tmp/train16-fancy.toml "" 5
bench rebuilt-tdef /tmp/d4k /tmp/train16-fancy.toml "" 5 STOKEHOLD_CHROMA_REBUILD=1
[[ -n "$DALI" ]] && dali dali-fancy /tmp/d4k fancy 5

say "(e) the 1.8 MP set"
if timed 60 python3 "$HERE/make_big.py" "$P" /tmp/big1 3 > "$L/make-big.log" 2>&1; then
    mkdir -p /tmp/big
    for k in 0 1 2 3 4; do for f in /tmp/big1/*; do ln -f "$f" "/tmp/big/$k-$(basename "$f")"; done; done
    echo "big: $(find /tmp/big -maxdepth 1 -type f | wc -l) files, $(du -sh /tmp/big1 | cut -f1) distinct"
    cat /tmp/big/* > /dev/null
    bench big-nearest-tdef /tmp/big /tmp/train16-nearest.toml "" 5
    bench big-nearest-t16 /tmp/big /tmp/train16-nearest.toml 16 5
    [[ -n "$DALI" ]] && dali dali-big-nearest /tmp/big nearest 5
else
    echo "make_big.py failed: $(tail -n 2 "$L/make-big.log")"
fi

say "(f) training benchmark, nearest"
if install_wheel && PYTHONPATH="$SITE" python3 -c 'import stokehold' 2> /dev/null; then
    phase "start training"
    PYTHONPATH="$SITE${DALI:+:$DALI}" timed 170 python3 examples/python/bench_training.py --mode gpu \
        --data /tmp/d4k --upsampling nearest --loaders "synthetic,stokehold-gpu,stokehold-cpu${DALI:+,dali}" \
        --steps 60 > "$L/training.log" 2>&1
    echo "rc=$?"
    phase "end training"
    grep -E '^mode=|^loader=' "$L/training.log" || tail -n 3 "$L/training.log"
else
    echo "skipped: no stokehold Python package (put a fresh wheel in $D/ and carry it)"
fi
say "done"
