#!/usr/bin/env bash
# The test command (README): builds and runs every test, the Rust crate's and then the Python
# package's. Tests that need ../shared/data say "skipped" when it is absent; GPU parity tests
# say "skipped: no CUDA driver" without a GPU; pytest lists its skips with their reasons (-rs;
# the PyTorch checks run only where torch is installed in the venv). The GPU stage runs end to
# end on the emulated device (--device emu), which must be built in (STOKEHOLD_REQUIRE_EMU=1:
# a build without a working C++ compiler fails here).
#
# Every CUDA kernel is compiled through NVRTC (sm_80, sm_90) even without a GPU: this script
# installs the pinned NVRTC wheel into .dev/pip when it is missing (NVRTC 13.0 emits PTX/cubins
# the CUDA 13.0 driver of the GPU machines accepts) and requires it (STOKEHOLD_REQUIRE_NVRTC=1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
NVRTC_WHEEL="nvidia-cuda-nvrtc==13.0.88"
nvrtc_lib() { find "$PWD/.dev/pip/nvidia" -name 'libnvrtc.so.13' -printf '%h\n' 2>/dev/null | head -n 1; }
if [ -z "$(nvrtc_lib)" ]; then
    python3 -m pip install --quiet --target .dev/pip "$NVRTC_WHEEL"
fi
NVRTC_DIR="$(nvrtc_lib)"
if [ -z "$NVRTC_DIR" ]; then
    echo "test.sh: $NVRTC_WHEEL installed no libnvrtc.so.13 under .dev/pip" >&2
    exit 1
fi
export LD_LIBRARY_PATH="$NVRTC_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# One venv, .dev/venv, for every test that needs Python packages (from PyPI, once): maturin,
# numpy and pytest for the Python package; webdataset for the shard interplay tests in
# tests/shards.rs (shards written by its ShardWriter, ours read by its WebDataset), which
# skip visibly without it and fail on CI.
VENV=.dev/venv
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "maturin>=1.9.4,<2" numpy pytest "webdataset==1.0.2"

export STOKEHOLD_REQUIRE_NVRTC=1
# The emulated device (the kernels built for the host by build.rs) must be built in: without
# it the GPU stage's tests could only skip.
export STOKEHOLD_REQUIRE_EMU=1
cargo test --all-targets "$@"
cargo test --doc "$@"

# The Python package, built and installed into the venv as `pip install .` does (release
# build, in target/), then its tests from python/tests.
PATH="$PWD/$VENV/bin:$PATH" "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-build-isolation --no-deps --force-reinstall .
"$VENV/bin/python" -m pytest -rs python/tests
