#!/usr/bin/env bash
# For the GPU call after run8 (2026-11-27, H200). run7/run8 found nvJPEG's batched hardware
# call (the engines' feeding thread) taking 55-60 µs an image with the SMs idle but 258-284
# beside nvJPEG's interpolation or our chroma rebuild, 309-434 on the 1.8 MP set and ~250
# (one training step a call) under the training loop; the thread's CPU time is close to the
# call's, and the decode stream's priority changed nothing (run8). Since then the workers
# copy the pixels they decode into pinned memory (the assembling thread took 58-73 ms of CPU
# a batch on the 1.8 MP set copying them). What this call asks:
#   (0) what the call waits for: the nvJPEG probe's contention mode (`probe --contend`, built by
#       tools/nvjpeg-probe/build.sh into .diag/probe): the call's wall and CPU time while a
#       kernel spins on a side stream (one block; every SM), on the legacy default stream
#       (PyTorch's), on a blocking stream, on the decode's own stream: a device-wide wait, a
#       legacy-stream synchronisation, or nvJPEG's kernels waiting for SMs; with the context's
#       waits spinning (the default) and sleeping (--blocking-sync) (~30 s);
#   (a) nearest, d4k, default threads (half the cores since 2026-11-28), then 4: the figures with the workers' pinned
#       pixels (`uploaded from their worker's pinned copy: N of M`); (a2) the CPU's topology
#       (lscpu), and where the cores are hyperthread pairs, 8 threads on one of each pair;
#   (b) the engines' ring of nvJPEG states (STOKEHOLD_ENGINE_SLOTS 1 / 2 / 4): does a call
#       wait for the previous call's work? nearest, nvJPEG interpolating, rebuilt chroma (1 /
#       2), the 1.8 MP set;
#   (b2) the same with the driver's host waits sleeping (STOKEHOLD_CUDA_BLOCKING_SYNC=1): if
#       the feeding thread's CPU a batch (`stokehold-feed`) then falls well below its call's
#       time, the call waits for the device; if not, it is nvJPEG's host work;
#   (c) the 1.8 MP set at 4, 8 and 16 threads (the CPU's share without the assembling thread's
#       copies); then with the workers' own GPU decoder for their share
#       (STOKEHOLD_GPU_HUFFMAN=1: `compare --devices cpu,gpu` first, then 4/8/16 threads;
#       `decoded by device-decoder:hybrid` counts its images); DALI where carried, on the
#       1.8 MP set and on d4k (our ImageNet-size ratio needs DALI's figure from this call);
#   at the end, each step's peak device memory, every process (`nvidia-smi
#       --query-compute-apps` twice a second): ours against DALI's;
#   (k) our kernels' own time, each launch alone on the device (`ncu`, which serialises
#       kernels): the chain on the ImageNet-size photos (nearest), the chroma rebuild's three
#       kernels, and the chain on the 1.8 MP set (in (c)); then the rebuild's `compare` and
#       speed against nvJPEG interpolating (its guess's longest thread is 1/5600 of what it
#       was: if it now runs near nearest's speed, `"fancy"` can be rebuilt by default);
#       `"fancy"` with 4 and 12 workers beside the default (half the cores), and on the CPU
#       path (every core: `device = "auto"`'s choice for it). `kernels (device)` in --stats is
#       event time on the kernel stream, which also counts the SMs shared with nvJPEG's work:
#       20 µs an image at ImageNet size and 216 on the 1.8 MP set (H200) against a host
#       emulation that finds the 1.8 MP chain only 3x the work;
#   (d) the training benchmark, nearest, stokehold-gpu with 1 and 2 engine slots, and the CPU
#       path, each with its own synthetic reference; stokehold-gpu-copy (each batch copied
#       into memory PyTorch allocates, as DALI's iterator does, against zero copy); then
#       our default chroma ("fancy"), the GPU and the CPU path (which one `device = "auto"`
#       should pick for it); then stokehold-gpu with 4 threads (the old default). The
#       split now follows the engines' call as it slows beside the loop and may rise above
#       the warm-up's share (`cpu_share` in the pipeline's line, 25% on the H200 before:
#       its ceiling then; now room for the engines 6x slower than the warm-up saw them,
#       `cpu_share_ceiling`, with `estimates_capped` saying whether it still binds, and
#       `allocations_by_kind` what the one allocation after the warm-up was).
#       Where (0) found a device-wide wait: stokehold-gpu with groups of two batches a call
#       (STOKEHOLD_ENGINE_CHUNK=512); where it found a wait for the legacy default stream
#       only: the loop training on a side stream (--train-stream side).
#   (0b) 1, 2 and 4 probe processes feeding the engines at once (`probe --solo`, each one
#       thread from a common instant): whether the feeding bound (~17-18k img/s from one
#       thread, DALI's figure too) is the process's or the device's; one with nvJPEG's
#       max_cpu_threads at 4; then 2 threads of one process in its primary context and 2
#       and 4 each in a CUDA context of its own (`--threads N --own-contexts`): whether a
#       context per feeding thread passes the bound inside one process (~80 s);
#   (k2) PNGs (the bundle's photos, made there with Pillow): the default, whose parked workers
#       should all run (every core), against 8 threads and the CPU path (~40 s);
#   (k3) DALI with interpolated chroma on the engines alone (hw_decoder_load 1.0) and at
#       its default split: whether its call with interpolation is cheaper than ours; the
#       probe's interpolating call with nvJPEG's max_cpu_threads at 4;
# They run in the order (0), (0b), (a), (k), (k2), (d), (a2), (b), (b2), (k3), (c): the training loop before the
# budget can run out (a step that would pass it is skipped and says so).
# `nvidia-smi dmon` runs the whole call ($L/dmon.log; phases in $L/phases.log).
# Carries .gpu/ (scripts/gpu-bundle.sh --images 200) and .diag/ (a fresh stokehold wheel).
set -u
BUDGET="${RUN9_BUDGET:-500}"
HERE=tools/gpu-diag
# shellcheck source=tools/gpu-diag/lib.sh
source "$HERE/lib.sh" run9
start_call
train_pipelines
make_d4k

say "(0) what nvJPEG's call waits for: probe --contend"
if [[ -x "$D/probe" ]]; then
    # Spinning host waits (the default), then sleeping ones: the call's CPU time is then its
    # own work, and what it waited for shows as the difference.
    for how in spin sleep; do
        timed 60 "$D/probe" "$P" /tmp/probe-out --batch 64 --contend \
            $([[ $how == sleep ]] && echo --blocking-sync) > "$L/contend-$how.log" 2>&1
        echo "probe ($how) rc=$?"
        grep -A20 '^contention' "$L/contend-$how.log" || tail -n 5 "$L/contend-$how.log"
    done
else
    echo "skipped: no $D/probe (tools/nvjpeg-probe/build.sh .diag/probe)"
fi

say "(0b) where the engines' feeding bound lives: 1, 2 and 4 probe processes feeding at once"
# One thread's call (55-60 us an image) caps a feeder near DALI's figure; more threads in one
# process went slower (results-2026-11-26/run2.log). If processes add up, the bound is the
# process's (feeding from several processes passes it); if not, the device's.
solo_group() {
    local n=$1 tag=$2; shift 2
    local s; s=$(limit 20)
    if (( s < 12 )); then echo "solo x$n $tag: skipped (budget of ${BUDGET}s spent)"; return; fi
    local at; at=$(( $(date +%s) + 5 ))
    local pids=() i
    for i in $(seq 1 "$n"); do
        timeout "$s" "$D/probe" "$P" /tmp/probe-out --solo --start-at "$at" --seconds 3 "$@" \
            > "$L/solo-$tag-x$n-$i.log" 2>&1 &
        pids+=($!)
    done
    # Only the probes: the call's monitors (start_call) are background jobs of this shell too.
    local rcs=""
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}"
        rcs+=" $?"
    done
    local lines; lines=$(grep -h '^solo ' "$L"/solo-"$tag"-x"$n"-*.log)
    local got; got=$(echo "$lines" | grep -c '^solo ')
    # A process ready after the common start ran partly alone: its figure overstates the sum.
    local late; late=$(echo "$lines" | grep -c ' after the start')
    echo "x$n $tag: sum $(echo "$lines" | grep -oE '= [0-9]+ img/s' | awk '{s += $2} END {print s+0}') img/s" \
        "of $got of $n processes (exit statuses:$rcs; ready late: $late)"
    echo "$lines" | sed 's/^/    /'
}
if [[ -x "$D/probe" ]]; then
    for n in 1 2 4; do solo_group "$n" nearest; done
    for n in 1 2; do solo_group "$n" interp --interp; done
    # nvjpegDecodeBatchedInitialize's max_cpu_threads (1 in stokehold): does nvJPEG then
    # spread its parse of a batch over threads of its own?
    solo_group 1 nearest-cputhreads4 --cpu-threads 4
    # Threads of one process, a handle each: in the primary context (slower than one thread on
    # the H100 of 2026-11-26), then each in a CUDA context of its own. If these add up as
    # processes do, one process passes the bound with a feeding thread per context.
    solo_group 1 threads2-primary --threads 2
    solo_group 1 threads2-contexts --threads 2 --own-contexts
    solo_group 1 threads4-contexts --threads 4 --own-contexts
else
    echo "skipped: no $D/probe"
fi

# One bench: name, data, pipeline, threads ("" = the default), then VAR=value settings.
bench() {
    local name=$1 data=$2 pipe=$3 threads=$4; shift 4
    local log="$L/bench-$name.log"
    # (`timeout 0` would not limit at all.)
    local s; s=$(limit 40)
    if (( s < 5 )); then echo "$name: skipped (budget of ${BUDGET}s spent)"; return; fi
    phase "start $name"
    env "$@" ${TASKSET:-} timeout "$s" "$S" bench "$pipe" --data "$data" --device "${DEVICE:-gpu}" --batch 256 \
        --epochs 5 ${threads:+--threads "$threads"} --stats > "$log" 2>&1
    local rc=$?
    phase "end $name"
    echo "$name rc=$rc $(grep -E 'throughput=' "$log" | tail -n1 | grep -oE 'threads=.*')"
    grep -qE 'throughput=' "$log" || tail -n 2 "$log" | sed 's/^/    /'
    # `assemble` (the assembling thread's time outside its waits, % of the run) first: it
    # was 68-86% of every run7 step, waiting for nvJPEG's call (fixed 2026-11-28).
    grep -E '^  assemble |workers:|decoders:|feeding thread in|kernels \(device\)|batches in flight|allocations after|pipeline threads during|stokehold-(feed|assem|gpu-p|read)' "$log" \
        | sed 's/^ */    /'
}

say "(a) nearest, d4k: default threads (half the cores since 2026-11-28), 4; twice"
for r in 1 2; do
    bench "nearest-tdef-r$r" /tmp/d4k /tmp/train16-nearest.toml ""
    bench "nearest-t4-r$r" /tmp/d4k /tmp/train16-nearest.toml 4
done

# Our kernels' durations under ncu: name, data, pipeline, then VAR=value settings. Launches
# 20..31 (after the first epoch's), each kernel's time alone (gpu__time_duration), its SM and
# memory throughput (% of peak); summed up per kernel in the console.
kernel_times() {
    local name=$1 data=$2 pipe=$3; shift 3
    local log="$L/ncu-$name.csv"
    if ! command -v ncu > /dev/null; then echo "ncu $name: no ncu on PATH"; return; fi
    local s; s=$(limit 90)
    if (( s < 5 )); then echo "ncu $name: skipped (budget of ${BUDGET}s spent)"; return; fi
    phase "start ncu-$name"
    env "$@" timeout "$s" ncu --csv --kernel-name 'regex:^(fused_crop|chroma_|jitter_)' --launch-skip 20 \
        --launch-count 12 --metrics gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed \
        "$S" bench "$pipe" --data "$data" --device gpu --batch 256 --epochs 3 > "$log" 2>&1
    echo "ncu $name rc=$?"
    phase "end ncu-$name"
    python3 - "$log" << 'PY'
import collections, csv, sys
lines = list(csv.reader(open(sys.argv[1], errors="replace")))
head = next((r for r in lines if r and r[0] == "ID" and "Kernel Name" in r), None)
rows = [] if head is None else [dict(zip(head, r)) for r in lines if len(r) == len(head) and r[0] != "ID"]
by = collections.defaultdict(lambda: collections.defaultdict(list))
for r in rows:
    try:
        value = float(r["Metric Value"].replace(",", ""))
    except ValueError:
        continue
    by[r["Kernel Name"].split("(")[0]][(r["Metric Name"], r["Metric Unit"])].append(value)
for kernel, metrics in by.items():
    print("    " + kernel + ": " + "; ".join(
        f"{m} {min(v):g}-{max(v):g} {u} ({len(v)} launches)" for (m, u), v in sorted(metrics.items())))
if not rows:
    print("    no kernel rows (see the log)")
PY
}

say "(k) our kernels alone (ncu): the chain on d4k, nearest; the chroma rebuild"
kernel_times chain-d4k /tmp/d4k /tmp/train16-nearest.toml
kernel_times rebuilt-d4k /tmp/d4k /tmp/train16-fancy.toml STOKEHOLD_CHROMA_REBUILD=1
# The rebuild's guess no longer leaves a thread tens of thousands of candidates (2026-11-28;
# the H200's rebuilt run spent 46 ms a batch in the kernels): its parity with the CPU, then
# its speed against nvJPEG interpolating, the default's decoder.
STOKEHOLD_CHROMA_REBUILD=1 timed 60 "$S" compare /tmp/train16-fancy.toml --data /tmp/d4k \
    --devices cpu,gpu --batches 4 > "$L/compare-rebuilt.log" 2>&1
echo "compare rebuilt: rc=$? $(grep -m1 -E 'within tolerance|outside' "$L/compare-rebuilt.log")"
grep -E '^(images|decoded) ' "$L/compare-rebuilt.log" | sed 's/^/    /'
bench rebuilt /tmp/d4k /tmp/train16-fancy.toml "" STOKEHOLD_CHROMA_REBUILD=1
bench fancy /tmp/d4k /tmp/train16-fancy.toml ""
# Our default chroma: the CPU's share is most of the work (4 workers decoded 2.5k img/s of
# it on the H200, the engines 3.5k): the workers' count, and the CPU path on every core (which
# path `device = "auto"` should take for "fancy").
bench fancy-t4 /tmp/d4k /tmp/train16-fancy.toml 4
bench fancy-t12 /tmp/d4k /tmp/train16-fancy.toml 12
DEVICE=cpu bench fancy-cpu-path /tmp/d4k /tmp/train16-fancy.toml ""

# (k2) The worker gate (2026-11-28): photos the engines don't take start the parked half of the
# cores' workers (`workers: N running` in the log where some are still parked; the info line
# says when they go). The bundle's photos as PNGs, ten times over: the default against 8 (the
# old default) and the CPU path.
say "(k2) PNGs: the parked workers let go"
if timed 60 python3 - "$P" /tmp/png2k << 'PY' > "$L/make-png.log" 2>&1; then
import os, sys
from concurrent.futures import ProcessPoolExecutor
from PIL import Image
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
names = sorted(n for n in os.listdir(src) if n.lower().endswith(("jpg", "jpeg")))
def one(n):
    out = os.path.join(dst, "0-" + os.path.splitext(n)[0] + ".png")
    Image.open(os.path.join(src, n)).convert("RGB").save(out, compress_level=1)
    for k in range(1, 10):
        os.link(out, os.path.join(dst, f"{k}-" + os.path.basename(out)[2:]))
with ProcessPoolExecutor(16) as ex:
    list(ex.map(one, names))
print(len(os.listdir(dst)), "PNGs")
PY
    cat "$L/make-png.log"
    bench png-tdef /tmp/png2k /tmp/train16-nearest.toml ""
    grep -E 'workers|one per core' "$L/bench-png-tdef.log" | head -n 3 | sed 's/^/    /'
    bench png-t8 /tmp/png2k /tmp/train16-nearest.toml 8
    DEVICE=cpu bench png-cpu-path /tmp/png2k /tmp/train16-nearest.toml ""
else
    echo "no PNGs made: $(tail -n 1 "$L/make-png.log")"
fi

say "(d) training benchmark, nearest: stokehold-gpu with 1 and 2 engine slots; the CPU path"
if install_wheel && PYTHONPATH="$SITE" python3 -c 'import stokehold' 2> /dev/null; then
    for k in 1 2; do
        loaders=stokehold-gpu
        [[ $k == 1 ]] && loaders=stokehold-gpu,stokehold-gpu-copy,stokehold-cpu
        phase "start training-slots$k"
        STOKEHOLD_ENGINE_SLOTS=$k PYTHONPATH="$SITE" timed 90 python3 examples/python/bench_training.py \
            --mode gpu --data /tmp/d4k --upsampling nearest --loaders "$loaders" --steps 60 > "$L/training-slots$k.log" 2>&1
        echo "slots $k rc=$?"
        phase "end training-slots$k"
        grep -E '^loader=' "$L/training-slots$k.log" || tail -n 3 "$L/training-slots$k.log"
    done
    # Our default chroma ("fancy": nvJPEG interpolating on the GPU path) in the loop a user
    # runs by default: which path `device = "auto"` should pick for it.
    phase "start training-fancy"
    PYTHONPATH="$SITE" timed 90 python3 examples/python/bench_training.py --mode gpu --data /tmp/d4k \
        --upsampling fancy --loaders stokehold-gpu,stokehold-cpu --steps 60 > "$L/training-fancy.log" 2>&1
    echo "fancy rc=$?"
    phase "end training-fancy"
    grep -E '^loader=' "$L/training-fancy.log" || tail -n 3 "$L/training-fancy.log"
    phase "start training-t4"
    PYTHONPATH="$SITE" timed 60 python3 examples/python/bench_training.py --mode gpu --data /tmp/d4k \
        --upsampling nearest --loaders stokehold-gpu --threads 4 --steps 60 > "$L/training-t4.log" 2>&1
    echo "threads 4 rc=$?"
    phase "end training-t4"
    grep -E '^loader=' "$L/training-t4.log" || tail -n 3 "$L/training-t4.log"
    # Where (0) found the call waiting for the legacy default stream's work (PyTorch's, where
    # the loop trains) and not for a side stream's: the loop on a stream of its own.
    if grep -qE '^legacy default stream, 1 block .*waited' "$L/contend-spin.log" 2> /dev/null &&
        ! grep -qE '^side stream, 1 block .*waited' "$L/contend-spin.log"; then
        phase "start training-side-stream"
        PYTHONPATH="$SITE" timed 60 python3 examples/python/bench_training.py --mode gpu --data /tmp/d4k \
            --upsampling nearest --loaders stokehold-gpu --train-stream side --steps 60 > "$L/training-side.log" 2>&1
        echo "trainer on a side stream rc=$?"
        phase "end training-side-stream"
        grep -E '^loader=' "$L/training-side.log" || tail -n 3 "$L/training-side.log"
    fi
    # Where (0) found the call waiting for every stream's work, fewer and larger calls
    # amortise the wait: groups of two batches.
    if grep -qE '^side stream, 1 block .*waited' "$L/contend-spin.log" 2> /dev/null; then
        phase "start training-chunk512"
        STOKEHOLD_ENGINE_CHUNK=512 PYTHONPATH="$SITE" timed 60 python3 examples/python/bench_training.py \
            --mode gpu --data /tmp/d4k --upsampling nearest --loaders stokehold-gpu --steps 60 \
            > "$L/training-chunk512.log" 2>&1
        echo "engine chunk 512 rc=$?"
        phase "end training-chunk512"
        grep -E '^loader=' "$L/training-chunk512.log" || tail -n 3 "$L/training-chunk512.log"
    fi
else
    echo "skipped: no stokehold Python package (put a fresh wheel in $D/ and carry it)"
fi
say "(a2) the machine's cores; where they are hyperthread pairs, 8 threads on one of each pair"
# 16 threads went slower than 8 (17.0k against 18.1-18.5k, results-2026-11-27c): if the 16
# "cores" are 8 pairs, the workers share the feeding thread's core; on one of each pair the
# feeding thread has a core to itself. (The process then sees 8 cores, so the split counts
# fewer for its workers: the two runs differ in that too.)
lscpu > "$L/lscpu.log" 2>&1
grep -E '^(Model name|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|CPU\(s\)):' "$L/lscpu.log"
# The CPUs this process may use (a cpuset may allow fewer than sysfs lists).
allowed=$(python3 -c 'import os; print(" ".join(map(str, sorted(os.sched_getaffinity(0)))))')
firsts=$(for c in $allowed; do
    sib=$(cut -d, -f1 "/sys/devices/system/cpu/cpu$c/topology/thread_siblings_list" 2> /dev/null | cut -d- -f1)
    [[ " $allowed " == *" ${sib:-$c} "* ]] && echo "${sib:-$c}" || echo "$c"
done | sort -un | paste -sd, -)
if [[ -n "$firsts" ]] && (( $(tr ',' '\n' <<< "$firsts" | wc -l) < $(wc -w <<< "$allowed") )); then
    echo "one of each pair: $firsts (of $(wc -w <<< "$allowed") allowed)"
    TASKSET="taskset -c $firsts" bench nearest-t8-onepercore /tmp/d4k /tmp/train16-nearest.toml 8
    bench nearest-t8-r3 /tmp/d4k /tmp/train16-nearest.toml 8
else
    echo "no hyperthread pairs among the allowed CPUs (${firsts:-no topology})"
fi

say "(b) the engines' ring of nvJPEG states: 1 / 2 / 4 slots"
# nvJPEG interpolating too (the 0.47x of DALI, whose engines were less busy than ours for
# twice the images): its CUDA work after the engines may be what the next call waits for.
for k in 1 2 4; do
    bench "nearest-slots$k" /tmp/d4k /tmp/train16-nearest.toml "" STOKEHOLD_ENGINE_SLOTS=$k
    bench "fancy-slots$k" /tmp/d4k /tmp/train16-fancy.toml "" STOKEHOLD_ENGINE_SLOTS=$k
    [[ $k == 4 ]] || bench "rebuilt-slots$k" /tmp/d4k /tmp/train16-fancy.toml "" STOKEHOLD_ENGINE_SLOTS=$k STOKEHOLD_CHROMA_REBUILD=1
done

say "(b2) host waits that sleep (STOKEHOLD_CUDA_BLOCKING_SYNC=1): the feeding thread's CPU against its call"
bench nearest-sleeping /tmp/d4k /tmp/train16-nearest.toml "" STOKEHOLD_CUDA_BLOCKING_SYNC=1
bench rebuilt-sleeping /tmp/d4k /tmp/train16-fancy.toml "" STOKEHOLD_CUDA_BLOCKING_SYNC=1 STOKEHOLD_CHROMA_REBUILD=1

DALI=""
PYTHONPATH=/tmp/site python3 -c 'import nvidia.dali' 2> /dev/null && DALI=/tmp/site
echo "DALI: ${DALI:-not importable from /tmp/site}"

# (k3) DALI with interpolated chroma made 11.2k img/s on the H200 (run7) with the engines
# 34-40% busy, where ours made 5.3k with them 40-48% busy: at its default split (65% to the
# engines) DALI's engines took >= 7.3k img/s interpolating, ours 3.5k. Engines only tells
# whether DALI's call with interpolation is cheaper than ours (and the probe's 177 us).
say "(k3) DALI's interpolated chroma on the engines alone; the probe's call with 4 CPU threads"
if [[ -n "$DALI" ]]; then
    for load in 1.0 0.65; do
        phase "start dali-fancy-hw$load"
        PYTHONPATH="$DALI" timed 60 python3 "$HERE/dali_upsampling.py" /tmp/d4k --upsampling fancy \
            --hw-load "$load" --batch 256 --epochs 5 --threads 16 > "$L/dali-fancy-hw$load.log" 2>&1
        echo "dali fancy hw_decoder_load $load rc=$? $(grep -oE 'threads=.*' "$L/dali-fancy-hw$load.log" | tail -n1)"
        phase "end dali-fancy-hw$load"
    done
fi
[[ -x "$D/probe" ]] && solo_group 1 interp-cputhreads4 --interp --cpu-threads 4

say "(c) the 1.8 MP set: threads 4 / 8 / 16, engine slots 1 / 2; DALI"
if timed 60 python3 "$HERE/make_big.py" "$P" /tmp/big1 3 > "$L/make-big.log" 2>&1; then
    mkdir -p /tmp/big
    for k in 0 1 2 3 4; do for f in /tmp/big1/*; do ln -f "$f" "/tmp/big/$k-$(basename "$f")"; done; done
    cat /tmp/big/* > /dev/null
    for t in 4 8 16; do bench "big-t$t" /tmp/big /tmp/train16-nearest.toml "$t"; done
    bench big-t8-slots2 /tmp/big /tmp/train16-nearest.toml 8 STOKEHOLD_ENGINE_SLOTS=2
    kernel_times chain-big /tmp/big /tmp/train16-nearest.toml
    # The workers' own GPU decoder (nvJPEG, Huffman on the GPU) for their share of the
    # large photos: parity with the CPU first, then speed.
    STOKEHOLD_GPU_HUFFMAN=1 STOKEHOLD_CPU_DECODE_SHARE=0.5 timed 60 "$S" compare /tmp/train16-nearest.toml --data /tmp/big1 \
        --devices cpu,gpu > "$L/compare-big-huffman.log" 2>&1
    echo "compare big, GPU Huffman on the workers: rc=$? $(grep -m1 -E 'within tolerance|outside' "$L/compare-big-huffman.log")"
    for t in 4 8 16; do bench "big-huffman-t$t" /tmp/big /tmp/train16-nearest.toml "$t" STOKEHOLD_GPU_HUFFMAN=1; done
    if [[ -n "$DALI" ]]; then
        phase "start dali-big"
        PYTHONPATH="$DALI" timed 60 python3 "$HERE/dali_upsampling.py" /tmp/big --upsampling nearest \
            --batch 256 --epochs 5 --threads 16 > "$L/dali-big.log" 2>&1
        echo "dali big rc=$? $(grep -oE 'threads=.*' "$L/dali-big.log" | tail -n1)"
        phase "end dali-big"
        phase "start dali-d4k"
        PYTHONPATH="$DALI" timed 60 python3 "$HERE/dali_upsampling.py" /tmp/d4k --upsampling nearest \
            --batch 256 --epochs 5 --threads 16 > "$L/dali-d4k.log" 2>&1
        echo "dali d4k rc=$? $(grep -oE 'threads=.*' "$L/dali-d4k.log" | tail -n1)"
        phase "end dali-d4k"
    fi
else
    echo "make_big.py failed: $(tail -n 2 "$L/make-big.log")"
fi

say "device memory per step (every process, sampled twice a second): ours against DALI's"
memory_by_phase
say "done"
