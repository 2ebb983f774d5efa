#!/usr/bin/env bash
# Third GPU call of 2026-11-26: the new GPU executor measured. Carries .gpu/ (gpu-bundle.sh
# --images 200) and .diag/ (the Python wheel, ../shared/peers/rn50_train.py). In order, each
# with its own time limit and its log under $OUT: the speed round (stokehold --device gpu
# with --stats, torchvision's GPU decode, the DataLoader, stokehold --device cpu; twice,
# alternated) with nvidia-smi dmon beside it; the training benchmark (every loader but DALI);
# gpu-check.sh.
set -u
O="${OUT:-/tmp/out}"; mkdir -p "$O"
exec > >(tee "$O/run3.log") 2>&1
G=.gpu; D=.diag
t0=$(date +%s); say() { echo; echo "=== [t=$(( $(date +%s) - t0 ))s] $*"; }
say machine
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
echo "cores $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export STOKEHOLD_NVJPEG=/usr/local/cuda/lib64/libnvjpeg.so.13
python3 -m pip install -q --no-index --no-deps --target /tmp/site "$D"/*.whl
mkdir -p /tmp/d4k
for k in $(seq 0 19); do for f in "$G"/shared/data/imagenet-400/*; do ln -f "$f" "/tmp/d4k/$k-$(basename "$f")"; done; done
echo "d4k: $(ls /tmp/d4k | wc -l) files, $(du -sh /tmp/d4k | cut -f1)"
sed 's/dtype = "f32"/dtype = "f16"/' pipelines/resnet50-train.toml > /tmp/train16.toml
cat /tmp/d4k/* > /dev/null
nvidia-smi dmon -s u -d 1 -o T > "$O/dmon.log" 2>&1 &
dmon=$!
mark() { echo "MARK $1 $(date +%s)" >> "$O/marks.log"; }  # not dmon.log: its writer overwrites
speed_round() {
    local round=$1
    say "speed round $round (d4k, batch 256, f16 CHW)"
    mark "stokehold-gpu-$round"
    timeout 40 "$G/bin/stokehold" bench /tmp/train16.toml --data /tmp/d4k --device gpu --batch 256 \
        --epochs 3 --stats > "$O/bench-gpu-$round.log" 2>&1
    grep -E "decoders:|in flight|allocations after|decode \(device\)|device memory|throughput=" "$O/bench-gpu-$round.log"
    mark "tvgpu-$round"
    timeout 40 python3 "$D/rn50_train.py" tvgpu --data /tmp/d4k --device gpu --batch 256 --epochs 2 2>&1 | grep throughput=
    mark "torch-$round"
    timeout 40 python3 "$D/rn50_train.py" torch --data /tmp/d4k --device gpu --batch 256 --epochs 2 --threads 16 2>&1 | grep throughput=
    mark "stokehold-cpu-$round"
    timeout 40 "$G/bin/stokehold" bench /tmp/train16.toml --data /tmp/d4k --device cpu --batch 256 \
        --epochs 3 > "$O/bench-cpu-$round.log" 2>&1
    grep throughput= "$O/bench-cpu-$round.log"
}
slots() {
    say "engine slots 1 / 3 (STOKEHOLD_ENGINE_SLOTS)"
for s in 1 3; do
    STOKEHOLD_ENGINE_SLOTS=$s timeout 30 "$G/bin/stokehold" bench /tmp/train16.toml --data /tmp/d4k \
        --device gpu --batch 256 --epochs 3 --stats > "$O/bench-gpu-slots$s.log" 2>&1
    echo "slots=$s $(grep -E 'in flight' "$O/bench-gpu-slots$s.log") $(grep throughput= "$O/bench-gpu-slots$s.log")"
done
}
speed_round 1
say "training benchmark"
PYTHONPATH=/tmp/site timeout 140 python3 examples/python/bench_training.py --mode gpu --data /tmp/d4k \
    --loaders synthetic,stokehold-gpu,stokehold-cpu,dataloader --steps 40 > "$O/training.log" 2>&1
tail -n 12 "$O/training.log"
say "gpu-check"
OUT="$O/check" timeout 120 bash "$G/gpu-check.sh" "$G" > "$O/gpu-check.log" 2>&1
tail -n 24 "$O/gpu-check.log"
speed_round 2
slots
mark end
kill $dmon
say done
