#!/usr/bin/env bash
# Throughput from tar shards against the same photos in a folder (issue 19): packs a data set
# (default ../shared/data/imagenet-400) into shards, serves them with `python3 -m http.server`
# on 127.0.0.1, and runs `stokehold bench` from the folder, the local shards and HTTP,
# alternated for ROUNDS rounds; then the peak RSS reading 1 GB shards (packed from the data set
# repeated until they are that big; skip with RSS=0).
#
#   scripts/bench-shards.sh [DATA] [PIPELINE]     env: ROUNDS=3 EPOCHS=3 THREADS= RSS=1
#                                                 SHARD_SIZE=50MB BIG_SHARD_SIZE=1GB REPEAT=1
#
# REPEAT=N benches N copies of DATA (class folders c0…, files copied): with imagenet-400 alone
# an epoch lasts a fifth of a second, and each epoch's first shard read and shuffle-buffer
# fill weigh on it more than on a real data set.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${1:-../shared/data/imagenet-400}"
PIPELINE="${2:-pipelines/resnet50-train.toml}"
ROUNDS="${ROUNDS:-3}"
EPOCHS="${EPOCHS:-3}"
SHARD_SIZE="${SHARD_SIZE:-50MB}"
BIG_SHARD_SIZE="${BIG_SHARD_SIZE:-1GB}"
RSS="${RSS:-1}"
THREADS_FLAG=()
[ -n "${THREADS:-}" ] && THREADS_FLAG=(--threads "$THREADS")

REPEAT="${REPEAT:-1}"
cargo build --release --quiet
BIN=target/release/stokehold
WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

if [ "$REPEAT" -gt 1 ]; then
    for c in $(seq 0 $(( REPEAT - 1 ))); do
        mkdir -p "$WORK/data/c$c"
        cp -rL "$DATA"/. "$WORK/data/c$c/"
    done
    echo "== $REPEAT copies of $DATA in $WORK/data"
    DATA="$WORK/data"
fi

# A flat folder (as imagenet-400 is) has no labels: pack refuses it unless told so.
LABELS=()
[ -n "$(find "$DATA"/ -mindepth 1 -maxdepth 1 -type d -print -quit)" ] || LABELS=(--no-labels)
echo "== packing $DATA into $SHARD_SIZE shards"
"$BIN" pack "$DATA" "$WORK/shards" --shard-size "$SHARD_SIZE" "${LABELS[@]}"
LAST=$(( $(ls "$WORK"/shards/train-*.tar | wc -l) - 1 ))
PATTERN="train-{000000..$(printf %06d "$LAST")}.tar"

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m http.server "$PORT" --bind 127.0.0.1 --directory "$WORK/shards" >/dev/null 2>&1 &
SERVER_PID=$!
for _ in $(seq 50); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/index.json')" 2>/dev/null && break
    sleep 0.1
done

bench() {
    local label="$1" data="$2"
    printf '%-8s ' "$label"
    "$BIN" bench "$PIPELINE" --data "$data" --epochs "$EPOCHS" "${THREADS_FLAG[@]}" --device cpu 2>/dev/null | tail -n 1
}
echo "== bench, $ROUNDS rounds alternated ($PIPELINE, $EPOCHS timed epochs)"
for round in $(seq "$ROUNDS"); do
    echo "-- round $round"
    bench folder "$DATA"
    bench shards "$WORK/shards/$PATTERN"
    bench http "http://127.0.0.1:$PORT/$PATTERN"
done

if [ "$RSS" != "0" ]; then
    echo "== peak RSS with $BIG_SHARD_SIZE shards"
    # The data set repeated (symlinks) until one shard of BIG_SHARD_SIZE fills.
    BIG_SRC="$WORK/big-src"
    mkdir -p "$BIG_SRC"
    BYTES=$(du -sbL "$DATA" | cut -f1)
    WANT=$(python3 -c "import re,sys; s='$BIG_SHARD_SIZE'.upper(); m=re.match(r'([0-9.]+)\s*([KMG]?)B?',s); print(int(float(m.group(1))*{'':1,'K':1e3,'M':1e6,'G':1e9}[m.group(2)]))")
    COPIES=$(( WANT / (BYTES > 0 ? BYTES : 1) + 2 ))
    for c in $(seq "$COPIES"); do
        mkdir -p "$BIG_SRC/copy$c"
        for f in "$DATA"/*; do ln -s "$(realpath "$f")" "$BIG_SRC/copy$c/$(basename "$f")"; done
    done
    "$BIN" pack "$BIG_SRC" "$WORK/big" --shard-size "$BIG_SHARD_SIZE"
    ls -l "$WORK"/big/*.tar
    /usr/bin/env time -v "$BIN" bench "$PIPELINE" --data "$WORK/big" --epochs 1 "${THREADS_FLAG[@]}" --device cpu 2>"$WORK/time.txt" | tail -n 2
    grep "Maximum resident" "$WORK/time.txt" || echo "(GNU time not found: the 'peak resident memory' line above is stokehold's own)"
fi
