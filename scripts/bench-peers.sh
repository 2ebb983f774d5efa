#!/usr/bin/env bash
# Runs stokehold and the peer loaders on the same folder, alternating, and writes a table
# of medians and ratios (bench-results/table.md) and a chart of throughput against threads
# (bench-results/throughput.png).
#
#   scripts/bench-peers.sh [DATA_DIR] [ROUNDS] [THREADS...]
#   scripts/bench-peers.sh ../shared/data/imagenet-400 3 1 2
#
# Peers come from ../shared/peers (setup.sh installs DALI; `setup.sh --torch` adds PyTorch):
# DALI's CPU mode and the PyTorch DataLoader run the ResNet-50 training pipeline; stokehold
# runs pipelines/resnet50-train.toml (and, for the eval line, pipelines/resnet50-eval.toml;
# with DCT=1, the default, also pipelines/resnet50-train-dct.toml, the opt-in DCT-domain
# downscaling decode).
# Every run prints the same `... images=I seconds=S throughput=T img/s` line.
# Environment: PEERS_DIR (default ../shared/peers), PEERS_PYTHON (default: the venv that
# setup.sh prints), BATCH (64), EPOCHS (3), OUT (bench-results), DCT (1).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${1:-../shared/data/imagenet-400}
ROUNDS=${2:-3}
shift $(( $# > 2 ? 2 : $# )) || true
THREADS=("$@")
[ ${#THREADS[@]} -eq 0 ] && THREADS=($(seq 1 "$(nproc)"))
PEERS_DIR=${PEERS_DIR:-../shared/peers}
BATCH=${BATCH:-64}
EPOCHS=${EPOCHS:-3}
OUT=${OUT:-bench-results}
DCT=${DCT:-1}
mkdir -p "$OUT"
PY=${PEERS_PYTHON:-$(bash "$PEERS_DIR/setup.sh" | tail -n 1)}
HAVE_TORCH=0
"$PY" -c "import torch, torchvision" 2>/dev/null && HAVE_TORCH=1
"$PY" -c "import matplotlib" 2>/dev/null || "$PY" -m pip install -q matplotlib

cargo build --release --quiet
BIN=target/release/stokehold
RAW="$OUT/raw.txt"
: > "$RAW"
log() { echo "$1 $2" | tee -a "$RAW"; }

for round in $(seq 1 "$ROUNDS"); do
    for t in "${THREADS[@]}"; do
        log "round=$round name=stokehold-train" "$($BIN bench pipelines/resnet50-train.toml --data "$DATA" --device cpu --threads "$t" --batch "$BATCH" --epochs "$EPOCHS" 2>/dev/null | tail -n 1)"
        if [ "$DCT" = 1 ]; then
            log "round=$round name=stokehold-train-dct" "$($BIN bench pipelines/resnet50-train-dct.toml --data "$DATA" --device cpu --threads "$t" --batch "$BATCH" --epochs "$EPOCHS" 2>/dev/null | tail -n 1)"
        fi
        log "round=$round name=dali-train" "$("$PY" "$PEERS_DIR/rn50_train.py" dali --data "$DATA" --device cpu --threads "$t" --batch "$BATCH" --epochs "$EPOCHS" 2>/dev/null | tail -n 1)"
        if [ "$HAVE_TORCH" = 1 ]; then
            log "round=$round name=torch-train" "$("$PY" "$PEERS_DIR/rn50_train.py" torch --data "$DATA" --device cpu --threads "$t" --batch "$BATCH" --epochs "$EPOCHS" 2>/dev/null | tail -n 1)"
        fi
        log "round=$round name=stokehold-eval" "$($BIN bench pipelines/resnet50-eval.toml --data "$DATA" --device cpu --threads "$t" --batch "$BATCH" --epochs "$EPOCHS" 2>/dev/null | tail -n 1)"
        log "round=$round name=dali-eval" "$("$PY" scripts/dali_eval.py --data "$DATA" --threads "$t" --batch "$BATCH" --epochs "$EPOCHS" 2>/dev/null | tail -n 1)"
    done
done

"$PY" - "$RAW" "$OUT" "$(uname -m) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" <<'PYEOF'
import re, statistics, sys, collections
raw, out, machine = sys.argv[1], sys.argv[2], sys.argv[3]
runs = collections.defaultdict(list)
for line in open(raw):
    name = re.search(r"name=(\S+)", line).group(1)
    m = re.search(r"threads=(\d+).*throughput=([\d.]+)", line)
    if m:
        runs[(name, int(m.group(1)))].append(float(m.group(2)))
threads = sorted({t for _, t in runs})
med = {k: statistics.median(v) for k, v in runs.items()}
rows = ["| threads | stokehold train | DALI CPU train | ratio | PyTorch DataLoader | ratio | stokehold eval | DALI CPU eval | ratio |",
        "|---|---|---|---|---|---|---|---|---|"]
def cell(k):
    return f"{med[k]:.0f}" if k in med else "—"
def ratio(a, b):
    return f"{med[a] / med[b]:.2f}×" if a in med and b in med else "—"
for t in threads:
    rows.append(f"| {t} | {cell(('stokehold-train', t))} | {cell(('dali-train', t))} | {ratio(('stokehold-train', t), ('dali-train', t))} "
                f"| {cell(('torch-train', t))} | {ratio(('stokehold-train', t), ('torch-train', t))} "
                f"| {cell(('stokehold-eval', t))} | {cell(('dali-eval', t))} | {ratio(('stokehold-eval', t), ('dali-eval', t))} |")
if any(n == 'stokehold-train-dct' for n, _ in med):
    rows.append("")
    rows.append("| threads | stokehold train, dct_downscale | ratio to DALI CPU train | ratio to the DataLoader |")
    rows.append("|---|---|---|---|")
    for t in threads:
        k = ('stokehold-train-dct', t)
        rows.append(f"| {t} | {cell(k)} | {ratio(k, ('dali-train', t))} | {ratio(k, ('torch-train', t))} |")
if len(threads) > 1 and ('stokehold-train', 1) in med:
    rows.append("")
    rows.append("stokehold train scaling: " + ", ".join(
        f"{t} threads {med[('stokehold-train', t)] / med[('stokehold-train', 1)]:.2f}× of 1" for t in threads[1:] if ('stokehold-train', t) in med))
rows.append("")
rows.append(f"Medians of {max(len(v) for v in runs.values())} alternated runs, img/s; machine: {machine}.")
open(f"{out}/table.md", "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for name in sorted({n for n, _ in runs}):
        ts = [t for t in threads if (name, t) in med]
        ax.plot(ts, [med[(name, t)] for t in ts], marker="o", label=name)
    ax.set_xlabel("threads (workers)")
    ax.set_ylabel("images / s")
    ax.set_xticks(threads)
    ax.set_title("ResNet-50 input pipelines on the CPU")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(f"{out}/throughput.png", dpi=120)
except Exception as e:  # the table is the result; the chart is a convenience
    print(f"no chart: {e}", file=sys.stderr)
PYEOF
