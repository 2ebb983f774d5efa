#!/usr/bin/env bash
# Builds tools/nvjpeg-probe/probe (plain C++ against the CUDA runtime and nvJPEG; no CUDA
# toolkit needed here: the headers and libraries come from the pip wheels nvidia-nvjpeg,
# nvidia-cuda-runtime and nvidia-cuda-crt, 13.0). The GPU machine runs it with its own libraries
# (/usr/local/cuda/lib64 is searched first).
#   tools/nvjpeg-probe/build.sh [OUT_BINARY]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/probe}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/stokehold/cuda-13.0-headers"
if [[ ! -f "$cache/nvidia/cu13/include/nvjpeg.h" ]]; then
    tmp="$(mktemp -d)"
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
        'nvidia-nvjpeg==13.0.*' 'nvidia-cuda-runtime==13.0.*' 'nvidia-cuda-crt==13.0.*' -d "$tmp"
    mkdir -p "$cache"
    for w in "$tmp"/*.whl; do python3 -m zipfile -e "$w" "$cache"; done
    rm -rf "$tmp"
fi
inc="$cache/nvidia/cu13/include"
lib="$cache/nvidia/cu13/lib"
g++ -O2 -std=c++17 -Wall -I"$inc" "$here/probe.cpp" "$here/contend.cpp" "$here/solo.cpp" -o "$out" \
    -L"$lib" -l:libnvjpeg.so.13 -l:libcudart.so.13 -lpthread -ldl \
    -Wl,-rpath,/usr/local/cuda/lib64
echo "$out"
