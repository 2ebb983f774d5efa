#!/usr/bin/env bash
# First GPU call of 2026-11-26 (session 10): calibration and diagnosis, no stokehold GPU
# code involved but the Python wheel's: the nvJPEG probe on imagenet-400 and a 1.8 MP set,
# then where a training step's time goes under each feeding mode. Carries .diag/.
set -u
O="${OUT:-/tmp/out}"; mkdir -p "$O"
exec > >(tee "$O/run1.log") 2>&1
D=.diag
t0=$(date +%s); say() { echo; echo "=== [t=$(( $(date +%s) - t0 ))s] $*"; }
say machine
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
nproc; python3 -c 'import torch, torchvision; print(torch.__version__, torchvision.__version__)'
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
say "probe: imagenet-400"
timeout 150 "$D/probe" "$D/imagenet-400" /tmp/p1 --images 4000
tar -C /tmp/p1 -cf "$O/dumps.tar" dumps 2>/dev/null
say "probe: 1.8 MP set"
timeout 40 python3 tools/gpu-diag/make_big.py "$D/imagenet-400" /tmp/big 3
timeout 90 "$D/probe" /tmp/big /tmp/p2 --images 2000 --quick
say "training breakdown"
python3 -m pip install -q --no-index --no-deps --target /tmp/site "$D"/*.whl
mkdir -p /tmp/d4k
for k in 0 1 2 3 4 5 6 7 8 9; do for f in "$D"/imagenet-400/*; do ln -f "$f" "/tmp/d4k/$k-$(basename "$f")"; done; done
sed 's/dtype = "f32"/dtype = "f16"/' pipelines/resnet50-train.toml > /tmp/train16.toml
nvidia-smi dmon -s u -d 1 > "$O/dmon.log" 2>&1 &
dmon=$!
PYTHONPATH=/tmp/site timeout 260 python3 tools/gpu-diag/train_breakdown.py /tmp/d4k /tmp/train16.toml \
    --steps 20 --warmup 6 --profile sk > "$O/breakdown.txt" 2>&1
kill $dmon
grep -E "^mode=|Error|error" "$O/breakdown.txt"
say done
