#!/usr/bin/env bash
# The test command (README): builds and runs every test. Tests that need ../shared/data
# say "skipped" when it is absent; GPU parity tests say "skipped: no CUDA driver" without a GPU.
# The GPU stage runs end to end on the emulated device (--device emu), which must be built in
# (STOKEHOLD_REQUIRE_EMU=1: a build without a working C++ compiler fails here).
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
export STOKEHOLD_REQUIRE_NVRTC=1
# The emulated device (the kernels built for the host by build.rs) must be built in: without
# it the GPU stage's tests could only skip.
export STOKEHOLD_REQUIRE_EMU=1
cargo test --all-targets "$@"
cargo test --doc "$@"
