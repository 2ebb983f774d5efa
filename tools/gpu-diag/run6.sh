#!/usr/bin/env bash
# For the GPU call after run5 (2026-11-27: the guard of the decode areas held, nearest 11.2-11.4k
# img/s at 4 threads with the engines' feeding thread busy the whole run, the training loop fed
# by the GPU path at 94% of synthetic). What limits the GPU path now, and what a user gets:
#   (a) compute-sanitizer memcheck of gpu-check's short run (its one error on 2026-11-27 was
#       cuEventElapsedTime on an event not reached yet; the stats now wait for it);
#   (b) `bench --device gpu --stats`, f16 train pipeline with upsampling = "nearest" over
#       /tmp/d4k, batch 256, alternated twice: 4, 8 and 16 worker threads; at 16 also with two
#       staging slots (STOKEHOLD_ENGINE_SLOTS=2). Each run's throughput, `decoders:` line and
#       the new `feeding thread in the decoder:` line (where the thread feeding the engines
#       spends its time; nvJPEG's support checks now run on the prep workers);
#   (c) "fancy" at 4 and 16 threads: nvJPEG interpolating (the default), then the engines'
#       repeated chroma rebuilt by our kernels (STOKEHOLD_CHROMA_REBUILD=1: the engines'
#       speed with the CPU path's pixels, if the kernels keep up);
#   (d) the 1.8 MP set (make_big.py, the photos at 3x, hard-linked 5 times): nearest at 4 and
#       16 threads, fancy at 16;
#   (e) the training benchmark, nearest: synthetic, stokehold-gpu (its own threads, then 16),
#       stokehold-cpu (and dali where importable); each stokehold loader's pipeline stats on
#       its line;
#   (f) where DALI is importable from /tmp/site (carried before in parts: docs/gpu-machine.md),
#       DALI's GPU pipeline on /tmp/d4k (its default: nearest, then fancy) alternated with
#       ours at 16 threads.
# Carries .gpu/ (scripts/gpu-bundle.sh --images 200) and .diag/ (a fresh stokehold wheel).
# Everything under $OUT/logs, packed into $OUT/logs.tar.gz at the end (the device tool brings
# back only a few files).
set -u
BUDGET="${RUN6_BUDGET:-560}"
HERE=tools/gpu-diag
# shellcheck source=tools/gpu-diag/lib.sh
source "$HERE/lib.sh" run6
L="$O/logs"; mkdir -p "$L"
pack() { tar -czf "$O/logs.tar.gz" -C "$O" logs && rm -rf "$L"; }
trap pack EXIT

say machine
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "cores $(nproc); bundle: $(head -n2 "$G/MANIFEST" | tr '\n' ' ')"
sed 's/dtype = "f32"/dtype = "f16"/' "$G/pipelines/resnet50-train.toml" > /tmp/train16.toml
with_upsampling /tmp/train16.toml nearest /tmp/train16-nearest.toml
with_upsampling /tmp/train16.toml fancy /tmp/train16-fancy.toml
make_d4k

# One bench: name, data, pipeline, threads, then VAR=value settings. Prints the figures.
bench() {
    local name=$1 data=$2 pipe=$3 threads=$4; shift 4
    local log="$L/bench-$name.log"
    env "$@" timeout "$(limit 40)" "$S" bench "$pipe" --data "$data" --device gpu --batch 256 \
        --epochs 5 --threads "$threads" --stats > "$log" 2>&1
    echo "$name rc=$? $(grep -E 'throughput=' "$log" | tail -n1 | grep -oE 'threads=.*')"
    grep -qE 'throughput=' "$log" || tail -n 2 "$log" | sed 's/^/    /'
    grep -E 'decoders:|feeding thread|kernels \(device\)|batches in flight|allocations after' "$log" \
        | sed 's/^ */    /'
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

say "(b) nearest, d4k: threads 4/8/16, then at 16 with 2 staging slots"
for r in 1 2; do
    for t in 4 8 16; do bench "nearest-t$t-r$r" /tmp/d4k /tmp/train16-nearest.toml "$t"; done
    bench "nearest-t16-slots2-r$r" /tmp/d4k /tmp/train16-nearest.toml 16 STOKEHOLD_ENGINE_SLOTS=2
done

say "(c) fancy, d4k: nvJPEG interpolating, then rebuilt by our kernels; threads 4 and 16"
for t in 4 16; do
    bench "fancy-t$t" /tmp/d4k /tmp/train16-fancy.toml "$t"
    bench "rebuilt-t$t" /tmp/d4k /tmp/train16-fancy.toml "$t" STOKEHOLD_CHROMA_REBUILD=1
done

say "(d) the 1.8 MP set"
if timed 60 python3 "$HERE/make_big.py" "$P" /tmp/big1 3 > "$L/make-big.log" 2>&1; then
    mkdir -p /tmp/big
    for k in 0 1 2 3 4; do for f in /tmp/big1/*; do ln -f "$f" "/tmp/big/$k-$(basename "$f")"; done; done
    echo "big: $(find /tmp/big -maxdepth 1 -type f | wc -l) files, $(du -sh /tmp/big1 | cut -f1) distinct"
    cat /tmp/big/* > /dev/null
    bench big-nearest-t4 /tmp/big /tmp/train16-nearest.toml 4
    bench big-nearest-t16 /tmp/big /tmp/train16-nearest.toml 16
    bench big-fancy-t16 /tmp/big /tmp/train16-fancy.toml 16
else
    echo "make_big.py failed: $(tail -n 2 "$L/make-big.log")"
fi

DALI=""
PYTHONPATH=/tmp/site python3 -c 'import nvidia.dali' 2> /dev/null && DALI=/tmp/site
echo "DALI: ${DALI:-not importable from /tmp/site}"

say "(e) training benchmark, nearest"
if install_wheel && PYTHONPATH="$SITE" python3 -c 'import stokehold' 2> /dev/null; then
    PYTHONPATH="$SITE${DALI:+:$DALI}" timed 170 python3 examples/python/bench_training.py --mode gpu \
        --data /tmp/d4k --upsampling nearest --loaders "synthetic,stokehold-gpu,stokehold-cpu${DALI:+,dali}" \
        --steps 60 > "$L/training.log" 2>&1
    echo "rc=$?"
    grep -E '^mode=|^loader=' "$L/training.log" || tail -n 3 "$L/training.log"
    PYTHONPATH="$SITE" timed 80 python3 examples/python/bench_training.py --mode gpu --data /tmp/d4k \
        --upsampling nearest --loaders stokehold-gpu --threads 16 --steps 60 > "$L/training-t16.log" 2>&1
    echo "rc=$? (threads 16)"
    grep -E '^loader=' "$L/training-t16.log" || tail -n 3 "$L/training-t16.log"
else
    echo "skipped: no stokehold Python package (put a fresh wheel in $D/ and carry it)"
fi

say "(f) DALI against stokehold, d4k, 16 threads"
if [[ -n "$DALI" ]]; then
    for r in 1 2; do
        for u in nearest fancy; do
            PYTHONPATH="$DALI" timed 60 python3 "$HERE/dali_upsampling.py" /tmp/d4k --upsampling "$u" \
                --batch 256 --epochs 5 --threads 16 > "$L/dali-$u-$r.log" 2>&1
            echo "dali $u r$r rc=$? $(grep -oE 'threads=.*' "$L/dali-$u-$r.log" | tail -n1)"
            grep -qE 'throughput=' "$L/dali-$u-$r.log" || tail -n 2 "$L/dali-$u-$r.log"
        done
        bench "dali-round-nearest-t16-r$r" /tmp/d4k /tmp/train16-nearest.toml 16
    done
else
    echo "skipped: DALI not importable"
fi
say "done"
