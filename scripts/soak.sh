#!/usr/bin/env bash
# Soak test: many epochs of the train pipeline over ../shared/data/imagenet-400 with bad
# files mixed in, checking delivery, thread count and resident memory (tests/soak.rs).
#
#   scripts/soak.sh                 # 200 epochs
#   SOAK_EPOCHS=30 scripts/soak.sh  # shorter
#   SOAK_THREADS=4 scripts/soak.sh  # more workers (default 2)
#
# Needs the shared data (STOKEHOLD_SHARED, default ../shared); skips without it.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release --test soak -- --ignored --nocapture "$@"
