#!/usr/bin/env bash
# The test command (docs/testing.md): builds and runs every test, the Rust crate's and then
# the Python package's, and ends with a summary of every check that was skipped and why
# (scripts/skip-summary.py; the tests log their skips to $STOKEHOLD_SKIP_LOG). With CI set
# (.ci/run sets it) the command fails when a check skipped that the CI machine can run:
# anything but a GPU test (or an optional extra such as torch).
#
# Every CUDA kernel is compiled through NVRTC (sm_80, sm_90) even without a GPU, with the
# pinned NVRTC wheel (NVRTC 13.0 emits PTX/cubins the CUDA 13.0 driver of the GPU machines
# accepts): downloaded once per user (about 218 MB, announced) into
# ${XDG_CACHE_HOME:-~/.cache}/stokehold/nvrtc-<version>, shared by every clone. For the CPU
# tests only: STOKEHOLD_NVRTC=skip scripts/test.sh (the kernel compile tests then skip, and
# say so in the summary). The GPU stage runs end to end on the emulated device (--device
# emu), which must be built in (STOKEHOLD_REQUIRE_EMU=1: a build without a working C++
# compiler fails here).
set -euo pipefail
cd "$(dirname "$0")/.."

# The skip log, fresh for this run, and its summary as the last lines whatever happens,
# followed by the tests that failed (from the tests' output, kept in target/test-output.txt),
# each as the command that runs it alone.
mkdir -p target
export STOKEHOLD_SKIP_LOG="$PWD/target/skipped.txt"
: >"$STOKEHOLD_SKIP_LOG"
TEST_LOG="$PWD/target/test-output.txt"
: >"$TEST_LOG"
NVRTC_PARTIAL=""
finish() {
    local rc=$?
    trap - EXIT
    [ -z "$NVRTC_PARTIAL" ] || rm -rf "$NVRTC_PARTIAL"
    echo
    [ "$rc" -eq 0 ] || echo "test.sh: a step failed (exit status $rc); the skips before it:"
    python3 scripts/skip-summary.py "$STOKEHOLD_SKIP_LOG" || { [ "$rc" -ne 0 ] || rc=1; }
    python3 scripts/failed-tests.py "$TEST_LOG" || true
    exit "$rc"
}
trap finish EXIT
# Runs a test command with its output also kept in the test log (for the failures' list).
logged() {
    "$@" 2>&1 | tee -a "$TEST_LOG"
}

# nasm and the rustfmt/clippy components. On CI they must be there; elsewhere a missing nasm
# only costs the check that the JPEG decoder has SIMD, which then skips and says so.
if [ -n "${CI:-}" ]; then
    scripts/setup.sh
else
    scripts/setup.sh || echo "test.sh: setup.sh could not install everything (above); going on"
fi

# One venv, .dev/venv, for every test that needs Python packages (from PyPI, once): maturin,
# numpy and pytest for the Python package; webdataset for the shard interplay tests in
# tests/shards.rs (shards written by its ShardWriter, ours read by its WebDataset), which
# skip visibly without it. Its pip also fetches the NVRTC wheel below.
VENV=.dev/venv
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "maturin>=1.9.4,<2" numpy pytest "webdataset==1.0.2"

# torch and torchvision, for the PyTorch checks (python/tests/test_torch.py) and the training
# benchmark's CPU mode (test_bench_training.py), only when asked: STOKEHOLD_TEST_TORCH=1
# (.ci/run asks). PyPI's Linux wheels come with CUDA's libraries: about 5.5 GB in the venv,
# a minute's download on the CI machine. Where it can't be installed the checks skip and the
# summary says so.
if [ "${STOKEHOLD_TEST_TORCH:-}" = 1 ] && ! "$VENV/bin/python" -c 'import torch, torchvision' 2>/dev/null; then
    free_kb="$(df -Pk "$VENV" 2>/dev/null | awk 'NR == 2 { print $4 }' || true)"
    if [ "${free_kb:-0}" -lt 8000000 ]; then
        echo "test.sh: STOKEHOLD_TEST_TORCH=1 but under 8 GB free beside $VENV: torch not installed, its checks skip"
    else
        echo "test.sh: installing torch and torchvision into $VENV (about 5.5 GB, STOKEHOLD_TEST_TORCH=1)"
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check torch torchvision ||
            echo "test.sh: torch and torchvision did not install (above): their checks skip"
    fi
fi

NVRTC_VERSION=13.0.88
NVRTC_WHEEL="nvidia-cuda-nvrtc==$NVRTC_VERSION"
NVRTC_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/stokehold/nvrtc-$NVRTC_VERSION"
# The folder of libnvrtc.so.13 under $1, or nothing (a missing folder is not an error).
nvrtc_lib_in() {
    local lib
    lib="$(find "$1/nvidia" -name 'libnvrtc.so.13' 2>/dev/null | head -n 1 || true)"
    [ -z "$lib" ] || dirname "$lib"
}
NVRTC="${STOKEHOLD_NVRTC:-}"
case "$(uname -s)-$(uname -m)" in
Linux-x86_64 | Linux-aarch64) ;;
*)
    # The wheel exists for Linux only.
    if [ -z "$NVRTC" ]; then
        echo "test.sh: no NVRTC wheel for $(uname -s) $(uname -m): the kernel compile tests skip"
        NVRTC=skip
    fi
    ;;
esac
case "$NVRTC" in
skip)
    echo "test.sh: NVRTC skipped: the kernel compile tests skip, listed at the end"
    ;;
"")
    # .dev/pip: where clones installed it before the per-user cache.
    NVRTC_DIR="$(nvrtc_lib_in "$PWD/.dev/pip")"
    [ -n "$NVRTC_DIR" ] || NVRTC_DIR="$(nvrtc_lib_in "$NVRTC_CACHE")"
    if [ -z "$NVRTC_DIR" ] && [ -e "$NVRTC_CACHE" ]; then
        echo "test.sh: $NVRTC_CACHE holds no libnvrtc.so.13: delete that folder and run again" >&2
        exit 1
    fi
    if [ -z "$NVRTC_DIR" ]; then
        cat <<EOF
test.sh: downloading $NVRTC_WHEEL (about 218 MB, once per user) into
    $NVRTC_CACHE
  NVRTC compiles every CUDA kernel for the GPU machines' architectures in the tests, without
  a GPU; every clone reuses this copy. For the CPU tests only, stop now (Ctrl-C) and run
  STOKEHOLD_NVRTC=skip scripts/test.sh (docs/testing.md).
EOF
        mkdir -p "$(dirname "$NVRTC_CACHE")"
        NVRTC_PARTIAL="$NVRTC_CACHE.partial.$$"
        rm -rf "$NVRTC_PARTIAL"
        "$VENV/bin/python" -m pip install --disable-pip-version-check --no-cache-dir --quiet \
            --target "$NVRTC_PARTIAL" "$NVRTC_WHEEL"
        # Whole or not at all (another clone may have put its copy there meanwhile).
        [ -e "$NVRTC_CACHE" ] || mv "$NVRTC_PARTIAL" "$NVRTC_CACHE" || true
        rm -rf "$NVRTC_PARTIAL"
        NVRTC_PARTIAL=""
        NVRTC_DIR="$(nvrtc_lib_in "$NVRTC_CACHE")"
    fi
    if [ -z "$NVRTC_DIR" ]; then
        echo "test.sh: $NVRTC_WHEEL installed no libnvrtc.so.13 under $NVRTC_CACHE (delete it and run again)" >&2
        exit 1
    fi
    export LD_LIBRARY_PATH="$NVRTC_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    # Provided, so required: a kernel compile test that can't find it fails.
    export STOKEHOLD_REQUIRE_NVRTC=1
    ;;
*)
    echo "test.sh: STOKEHOLD_NVRTC=$STOKEHOLD_NVRTC: the only value it takes is 'skip'" >&2
    exit 2
    ;;
esac

# The emulated device (the kernels built for the host by build.rs) must be built in: without
# it the GPU stage's tests could only skip.
export STOKEHOLD_REQUIRE_EMU=1
# Every step runs even when one before it failed (a failing test target must not hide the
# others, nor their skips); the command fails if any did.
failed=0
# `cargo test-release` (.cargo/config.toml): the release profile, so that the tests reuse
# every dependency the README's first command (`cargo run --release`) and `pip install .`
# compiled; only stokehold is compiled again, with a test build's debug assertions and
# overflow checks (docs/testing.md has the figures).
logged cargo test-release --no-fail-fast --all-targets "$@" || failed=1
logged cargo test-release --doc "$@" || failed=1
# The tests linked target/release/stokehold to their own build of the command line, whose
# debug assertions make it ~14% slower: the release build back (a relink where the README's
# first command built it).
cargo build --release --quiet --bin stokehold || failed=1

# The Python package, built and installed into the venv as `pip install .` does (release
# build, in target/), then its tests from python/tests.
if PATH="$PWD/$VENV/bin:$PATH" "$VENV/bin/python" -m pip install --quiet \
    --disable-pip-version-check --no-build-isolation --no-deps --force-reinstall .; then
    logged "$VENV/bin/python" -m pytest -rsfE python/tests || failed=1
else
    echo "test.sh: the Python package did not build: its tests did not run" >&2
    failed=1
fi
exit "$failed"
