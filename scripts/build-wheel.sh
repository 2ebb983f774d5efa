#!/usr/bin/env bash
# Builds the Python package's one wheel into .whl/: abi3, so it installs on every CPython
# from 3.9 on, for this machine's platform (Linux x86-64 here; run it on a 64-bit Arm Linux
# machine for the aarch64 wheel, or cross-build one from x86-64 with
# `scripts/build-wheel.sh --target aarch64-unknown-linux-gnu`, which uses Debian's
# gcc-aarch64-linux-gnu and rustup's target as scripts/check-aarch64.sh does).
# maturin comes from PyPI into .dev/venv; extra arguments go to `maturin build`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
VENV=.dev/venv
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "maturin>=1.9.4,<2"
for arg in "$@"; do
    if [ "$arg" = aarch64-unknown-linux-gnu ]; then
        command -v aarch64-linux-gnu-gcc >/dev/null || {
            sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
            $sudo apt-get install -y -q gcc-aarch64-linux-gnu g++-aarch64-linux-gnu
        }
        rustup target list --installed | grep -qx aarch64-unknown-linux-gnu ||
            rustup target add aarch64-unknown-linux-gnu
        export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
        export CXX_aarch64_unknown_linux_gnu=aarch64-linux-gnu-g++
        export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
    fi
done
"$VENV/bin/maturin" build --release --out .whl "$@"
ls -1 .whl/*.whl
