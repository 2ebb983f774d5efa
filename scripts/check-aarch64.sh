#!/usr/bin/env bash
# Builds stokehold for 64-bit Arm and runs its tests there under qemu-user: the code paths
# that x86-64 never takes (no AVX2 resize or normalize, no pdep, libjpeg-turbo's Neon code).
# Needs Debian's gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu and qemu-user (installed
# here with apt-get when missing) and rustup's aarch64-unknown-linux-gnu target.
# Usage: scripts/check-aarch64.sh [extra cargo test arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

target=aarch64-unknown-linux-gnu
need=()
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
command -v aarch64-linux-gnu-g++ >/dev/null || need+=(g++-aarch64-linux-gnu)
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
if ((${#need[@]})); then
    sudo=""
    [[ $(id -u) == 0 ]] || sudo=sudo
    $sudo apt-get install -y -q "${need[@]}"
fi
rustup target list --installed | grep -qx "$target" || rustup target add "$target"

export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER=qemu-aarch64
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
# The host emulation of the CUDA kernels (kernels/host/emu.cpp) is built as an Arm library.
export CXX=aarch64-linux-gnu-g++

cargo clippy --target "$target" --all-targets -- -D warnings
# tests/cli.rs starts the binary as a child process, which qemu-user cannot run without
# binfmt_misc; the same commands are run through qemu directly below instead.
cargo test --release --target "$target" --lib --test bad_input --test pipeline_run \
    --test pipeline_files --test pipeline_file_props --test fuzz_regressions \
    --test shutdown --test readme "$@"
bin="target/$target/release/stokehold"
cargo build --release --target "$target"
samples=$(mktemp -d)
trap 'rm -rf "$samples"' EXIT
STOKEHOLD_SAMPLES="$samples/s" qemu-aarch64 "$bin" run pipelines/resnet50-train.toml \
    --batch 16 --threads 2 --device cpu
qemu-aarch64 "$bin" check pipelines/resnet50-eval.toml >/dev/null
echo "aarch64: clippy clean, tests passed, the command line runs"
