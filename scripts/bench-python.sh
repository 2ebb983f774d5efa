#!/usr/bin/env bash
# The Python package against `stokehold bench` and the PyTorch DataLoader, on one folder with
# the same threads and batch, alternated round by round:
#   python     scripts/bench_python.py: `for b in pipeline: torch.from_dlpack(b["images"])`
#   rust       stokehold bench pipelines/resnet50-train.toml
#   dataloader ../shared/peers/rn50_train.py torch (DataLoader + torchvision transforms)
# Each prints `... images=I seconds=S throughput=T img/s`; the last lines are the medians and
# the Python loop's throughput as a share of `stokehold bench`'s.
#
#   scripts/bench-python.sh [DATA_DIR] [ROUNDS] [THREADS]
#   scripts/bench-python.sh ../shared/data/imagenet-400 3 2
#
# Environment: PEERS_PYTHON (a Python with torch and torchvision; default: the peers' venv,
# `../shared/peers/setup.sh --torch` makes it), BATCH (64), EPOCHS (3), OUT (bench-results).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${1:-../shared/data/imagenet-400}
ROUNDS=${2:-3}
THREADS=${3:-$(nproc)}
BATCH=${BATCH:-64}
EPOCHS=${EPOCHS:-3}
OUT=${OUT:-bench-results}
PEERS_DIR=${PEERS_DIR:-../shared/peers}
PY=${PEERS_PYTHON:-${PEERS_VENV:-$HOME/.cache/peers-venv}/bin/python}
[ -d "$DATA" ] || { echo "bench-python.sh: no folder $DATA" >&2; exit 1; }
"$PY" -c "import torch, torchvision" 2>/dev/null || {
    echo "bench-python.sh: $PY has no torch/torchvision (run $PEERS_DIR/setup.sh --torch, or set PEERS_PYTHON)" >&2
    exit 1
}
mkdir -p "$OUT"

# The command line and the wheel, both release builds; the wheel goes into a folder of its
# own on that Python's path (its environment stays as it was).
cargo build --release --quiet
scripts/build-wheel.sh >/dev/null
SITE=.dev/bench-site
rm -rf "$SITE"
"$PY" -m pip install --quiet --no-deps --target "$SITE" .whl/stokehold-*-abi3-*"$(uname -m)".whl

RAW="$OUT/python-raw.txt"
: > "$RAW"
log() { echo "round=$1 name=$2 $3" | tee -a "$RAW"; }
for round in $(seq 1 "$ROUNDS"); do
    log "$round" python "$(PYTHONPATH="$SITE" "$PY" scripts/bench_python.py --data "$DATA" --threads "$THREADS" --batch "$BATCH" --epochs "$EPOCHS" | tail -n 1)"
    log "$round" rust "$(target/release/stokehold bench pipelines/resnet50-train.toml --data "$DATA" --device cpu --threads "$THREADS" --batch "$BATCH" --epochs "$EPOCHS" 2>/dev/null | tail -n 1)"
    log "$round" dataloader "$("$PY" "$PEERS_DIR/rn50_train.py" torch --data "$DATA" --device cpu --threads "$THREADS" --batch "$BATCH" --epochs "$EPOCHS" 2>/dev/null | tail -n 1)"
done

"$PY" - "$RAW" <<'PYEOF'
import collections, re, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.search(r"name=(\S+).*throughput=([\d.]+)", line)
    if m:
        runs[m.group(1)].append(float(m.group(2)))
med = {k: statistics.median(v) for k, v in runs.items()}
for k in ("python", "rust", "dataloader"):
    print(f"median {k}: {med[k]:.1f} img/s over {len(runs[k])} runs" if k in med else f"median {k}: no run")
if "python" in med and "rust" in med:
    print(f"python loop / stokehold bench: {100 * med['python'] / med['rust']:.1f}%")
if "python" in med and "dataloader" in med:
    print(f"python loop / DataLoader: {med['python'] / med['dataloader']:.2f}x")
PYEOF
