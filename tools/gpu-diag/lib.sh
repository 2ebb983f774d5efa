# shellcheck shell=bash disable=SC2034  # (its variables are the sourcing script's)
# Shared by the GPU calls' scripts (run5.sh to run9.sh): sourced after `set -u`, with the
# script's name as $1. Sets O (the call's output folder, $OUT), G (.gpu: the bundle),
# D (.diag: the wheel), P (the bundle's imagenet-400 photos), S (the bundle's CLI), t0 and
# BUDGET (RUN*_BUDGET seconds for the whole call, default 560); tees the script's output to
# $O/$1.log. Functions: say, limit, timed, with_upsampling, make_d4k, install_wheel,
# start_call, phase, memory_by_phase, train_pipelines.
O="${OUT:-/tmp/out}"; mkdir -p "$O"
exec > >(tee "$O/$1.log") 2>&1
exec 3>&1  # the console, for what `timed` says while a step's output goes to its log
G=.gpu; D=.diag
t0=$(date +%s)
say() { echo; echo "=== [t=$(( $(date +%s) - t0 ))s] $*"; }
# A step's time limit: what it asks for, or what is left of the budget (less 5 s) if that is
# less; 0 when nothing is left (the step is skipped).
limit() {
    local left=$(( BUDGET - ($(date +%s) - t0) - 5 ))
    (( left < 0 )) && left=0
    echo $(( $1 < left ? $1 : left ))
}
# Runs "$@" under `timeout` of limit($1); says so when the budget is spent or it timed out.
timed() {
    local want=$1; shift
    local s; s=$(limit "$want")
    if (( s < 5 )); then echo "skipped (budget of ${BUDGET}s spent): $*" >&3; return 124; fi
    timeout "$s" "$@"
    local rc=$?
    (( rc == 124 )) && echo "timed out after ${s}s: $*" >&3
    return "$rc"
}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export STOKEHOLD_NVJPEG=/usr/local/cuda/lib64/libnvjpeg.so.13
export STOKEHOLD_KERNEL_CACHE=/tmp/stokehold-kernel-cache
P="$G/shared/data/imagenet-400"
S="$G/bin/stokehold"
# A pipeline file with the decode node's upsampling set: file, choice, result.
with_upsampling() {
    sed "s/^output = \"decoded\"\$/&\nupsampling = \"$2\"/" "$1" > "$3"
    grep -q "^upsampling = \"$2\"\$" "$3" || { echo "error: no decode node's output = \"decoded\" in $1"; exit 1; }
}
# /tmp/d4k: the bundle's photos hard-linked 20 times (4,000 files), read once into the cache.
make_d4k() {
    mkdir -p /tmp/d4k
    for k in $(seq 0 19); do for f in "$P"/*; do ln -f "$f" "/tmp/d4k/$k-$(basename "$f")"; done; done
    echo "d4k: $(find /tmp/d4k -maxdepth 1 -type f | wc -l) files, $(du -sh /tmp/d4k | cut -f1)"
    cat /tmp/d4k/* > /dev/null
}
# The stokehold wheel of $D installed into $SITE (/tmp/stokehold-site); fails without one.
SITE=/tmp/stokehold-site
install_wheel() {
    compgen -G "$D/stokehold-*.whl" > /dev/null || return 1
    rm -rf "$SITE"
    timed 60 python3 -m pip install -q --no-index --no-deps --target "$SITE" "$D"/stokehold-*.whl
}
# The call's logs in $L ($O/logs), packed into $O/logs.tar.gz when the script ends;
# `nvidia-smi dmon` (engines' and SMs' busy %) running the whole call into $L/dmon.log, and
# `phase WHAT` marking steps in $L/phases.log (wall-clock seconds) to read it against. Says
# the machine and the bundle.
start_call() {
    L="$O/logs"; mkdir -p "$L"
    nvidia-smi dmon -s u -d 1 -o T > "$L/dmon.log" 2>&1 &
    DMON=$!
    # Each process's device memory, twice a second (peak per step: `memory_by_phase`).
    nvidia-smi --query-compute-apps=timestamp,pid,process_name,used_gpu_memory --format=csv,noheader,nounits \
        -lms 500 > "$L/apps.log" 2>&1 &
    APPS=$!
    trap 'kill "$DMON" "$APPS" 2> /dev/null; tar -czf "$O/logs.tar.gz" -C "$O" logs && rm -rf "$L"' EXIT
    say machine
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    echo "cores $(nproc); bundle: $(head -n2 "$G/MANIFEST" | tr '\n' ' ')"
}
phase() { echo "$(date +%s) $*" >> "$L/phases.log"; }
# The most device memory any process held during each step of phases.log (MiB), from the
# samples of $L/apps.log: ours against DALI's.
memory_by_phase() {
    python3 - "$L/phases.log" "$L/apps.log" << 'PY'
import datetime, sys
steps, open_at = [], {}
for line in open(sys.argv[1]):
    parts = line.split(maxsplit=2)
    if len(parts) < 3:
        continue
    t, what, name = parts
    name = name.strip()
    if what == "start":
        open_at[name] = int(t)
    elif what == "end" and name in open_at:
        steps.append((name, open_at.pop(name), int(t)))
samples = []
for line in open(sys.argv[2]):
    f = [x.strip() for x in line.split(",")]
    try:
        t = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        samples.append((t, f[2], int(f[3])))
    except (ValueError, IndexError):
        continue
if not samples:
    print("    no samples (nvidia-smi --query-compute-apps gave none: see apps.log)")
for name, a, b in steps:
    seen = [(mib, proc) for t, proc, mib in samples if a <= t <= b + 1]
    if seen:
        mib, proc = max(seen)
        print(f"    {name}: {mib} MiB at most ({proc})")
PY
}
# /tmp/train16.toml: the bundle's train pipeline in f16; -nearest and -fancy: with each
# upsampling.
train_pipelines() {
    sed 's/dtype = "f32"/dtype = "f16"/' "$G/pipelines/resnet50-train.toml" > /tmp/train16.toml
    with_upsampling /tmp/train16.toml nearest /tmp/train16-nearest.toml
    with_upsampling /tmp/train16.toml fancy /tmp/train16-fancy.toml
}
