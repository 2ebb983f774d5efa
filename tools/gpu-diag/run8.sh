#!/usr/bin/env bash
# For the GPU call after run7 (2026-11-27, H200: nearest 17.7-17.9k img/s = DALI's 17.3-18.1k,
# engines 84-91% busy for both; but the engines' call took 55 µs an image with the SMs idle,
# 284 beside the chroma rebuild's kernels or nvJPEG's interpolation, 362 on the 1.8 MP set,
# 246 under the training loop (93% of synthetic, DALI 90.6%)). The hypothesis: the call
# blocks while the CUDA work nvJPEG queued on the decode stream waits for SMs. The decode
# stream now runs at the device's greatest priority (STOKEHOLD_STREAM_PRIORITY: decode, the
# default; all; normal). Each case alternated between the priorities:
#   (a) nearest, d4k, default threads: normal / decode / all, twice;
#   (b) chroma rebuilt by our kernels (STOKEHOLD_CHROMA_REBUILD=1) and nvJPEG's interpolation
#       ("fancy"): normal / decode;
#   (c) the 1.8 MP set, nearest: normal / decode / all;
#   (d) the training benchmark, nearest, stokehold-gpu: normal / decode / all (and the CPU
#       path once), each with its own synthetic reference.
# `nvidia-smi dmon` runs the whole call ($L/dmon.log; phases in $L/phases.log).
# (The priority setting was tried from an uncommitted build and removed after this call: it
# changed nothing; results in tools/gpu-diag/results-2026-11-27c/run8/.)
# Carries .gpu/ (scripts/gpu-bundle.sh --images 200) and .diag/ (a fresh stokehold wheel).
set -u
BUDGET="${RUN8_BUDGET:-400}"
HERE=tools/gpu-diag
# shellcheck source=tools/gpu-diag/lib.sh
source "$HERE/lib.sh" run8
start_call
train_pipelines
make_d4k

# One bench: name, data, pipeline, priority, then VAR=value settings.
bench() {
    local name=$1 data=$2 pipe=$3 prio=$4; shift 4
    local log="$L/bench-$name.log"
    phase "start $name"
    env STOKEHOLD_STREAM_PRIORITY="$prio" "$@" timeout "$(limit 40)" "$S" bench "$pipe" --data "$data" \
        --device gpu --batch 256 --epochs 5 --stats > "$log" 2>&1
    local rc=$?
    phase "end $name"
    echo "$name rc=$rc $(grep -E 'throughput=' "$log" | tail -n1 | grep -oE 'threads=.*')"
    grep -qE 'throughput=' "$log" || tail -n 2 "$log" | sed 's/^/    /'
    grep -E 'priority|feeding thread|kernels \(device\)|batches in flight|allocations after|stokehold-(feed|assem)' "$log" \
        | sed 's/^ */    /'
}

say "(a) nearest, d4k: stream priorities normal / decode / all, twice"
for r in 1 2; do
    for p in normal decode all; do bench "nearest-$p-r$r" /tmp/d4k /tmp/train16-nearest.toml "$p"; done
done

say "(b) chroma rebuilt by our kernels, then nvJPEG's interpolation: normal / decode"
for p in normal decode; do bench "rebuilt-$p" /tmp/d4k /tmp/train16-fancy.toml "$p" STOKEHOLD_CHROMA_REBUILD=1; done
for p in normal decode; do bench "fancy-$p" /tmp/d4k /tmp/train16-fancy.toml "$p"; done

say "(c) the 1.8 MP set, nearest: normal / decode / all"
if timed 60 python3 "$HERE/make_big.py" "$P" /tmp/big1 3 > "$L/make-big.log" 2>&1; then
    mkdir -p /tmp/big
    for k in 0 1 2 3 4; do for f in /tmp/big1/*; do ln -f "$f" "/tmp/big/$k-$(basename "$f")"; done; done
    cat /tmp/big/* > /dev/null
    for p in normal decode all; do bench "big-$p" /tmp/big /tmp/train16-nearest.toml "$p"; done
else
    echo "make_big.py failed: $(tail -n 2 "$L/make-big.log")"
fi

say "(d) training benchmark, nearest: stokehold-gpu at each priority"
if install_wheel && PYTHONPATH="$SITE" python3 -c 'import stokehold' 2> /dev/null; then
    for p in decode normal all; do
        loaders=stokehold-gpu
        [[ $p == decode ]] && loaders=stokehold-gpu,stokehold-cpu
        phase "start training-$p"
        STOKEHOLD_STREAM_PRIORITY=$p PYTHONPATH="$SITE" timed 80 python3 examples/python/bench_training.py \
            --mode gpu --data /tmp/d4k --upsampling nearest --loaders "$loaders" --steps 60 > "$L/training-$p.log" 2>&1
        echo "priority $p rc=$?"
        phase "end training-$p"
        grep -E '^loader=' "$L/training-$p.log" | sed -E 's/ pipeline=.*"engines_call_seconds":([0-9.]+).*/ engines_call_seconds=\1/' \
            || tail -n 3 "$L/training-$p.log"
    done
else
    echo "skipped: no stokehold Python package (put a fresh wheel in $D/ and carry it)"
fi
say "done"
