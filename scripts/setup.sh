#!/usr/bin/env bash
# One-time setup of a fresh machine for building stokehold: the Rust toolchain's lint and
# format components, and nasm, which the bundled libjpeg-turbo (mozjpeg-sys) needs to
# assemble its SIMD code. Safe to run again.
set -euo pipefail
if command -v rustup >/dev/null; then
    for component in rustfmt clippy; do
        rustup component list --installed 2>/dev/null | grep -q "^$component" || rustup component add "$component"
    done
fi
if ! command -v nasm >/dev/null; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    if command -v apt-get >/dev/null; then
        $SUDO apt-get update -qq && $SUDO apt-get install -y -qq nasm
    elif command -v dnf >/dev/null; then
        $SUDO dnf install -y nasm
    elif command -v brew >/dev/null; then
        brew install nasm
    else
        echo "setup.sh: please install nasm (the assembler) with your package manager" >&2
        exit 1
    fi
fi
