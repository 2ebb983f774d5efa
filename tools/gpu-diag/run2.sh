#!/usr/bin/env bash
# Second GPU call of 2026-11-26 (session 10): the nvJPEG probe's --v2 table (several
# submitting threads, the CPU share of a submit, allocator variants), small plane dumps, and
# the training breakdown again without partial batches (last_batch = "drop"). Carries .diag/.
set -u
O="${OUT:-/tmp/out}"; mkdir -p "$O"
exec > >(tee "$O/run2.log") 2>&1
D=.diag
t0=$(date +%s); say() { echo; echo "=== [t=$(( $(date +%s) - t0 ))s] $*"; }
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
say "probe v2: imagenet-400"
timeout 120 "$D/probe" "$D/imagenet-400" /tmp/p1 --images 5000 --v2
tar -C /tmp/p1 -cJf "$O/dumps.tar.xz" dumps 2>/dev/null; ls -la "$O"
say "probe v2: 1.8 MP set"
timeout 40 python3 tools/gpu-diag/make_big.py "$D/imagenet-400" /tmp/big 3
timeout 60 "$D/probe" /tmp/big /tmp/p2 --images 2000 --v2 --quick
say "training breakdown, last_batch = drop"
python3 -m pip install -q --no-index --no-deps --target /tmp/site "$D"/*.whl
mkdir -p /tmp/d4k
for k in 0 1 2 3 4 5 6 7 8 9; do for f in "$D"/imagenet-400/*; do ln -f "$f" "/tmp/d4k/$k-$(basename "$f")"; done; done
sed 's/dtype = "f32"/dtype = "f16"/; s/last_batch = "partial"/last_batch = "drop"/' pipelines/resnet50-train.toml > /tmp/train16.toml
PYTHONPATH=/tmp/site timeout 150 python3 tools/gpu-diag/train_breakdown.py /tmp/d4k /tmp/train16.toml \
    --steps 24 --warmup 8 --modes synthetic,sk,sk-bg,sk-cpu > "$O/breakdown2.txt" 2>&1
grep -E "^mode=|Error|error" "$O/breakdown2.txt"
say done
