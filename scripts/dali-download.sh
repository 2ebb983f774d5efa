#!/usr/bin/env bash
# Downloads NVIDIA DALI 2.4 for CUDA 13 and the libraries it loads, as wheels for the GPU
# machine's Python 3.12 (Linux x86-64), into DIR: the list and the pins of
# ../shared/peers/README.md. Not nvidia-nvjpeg: the GPU machine's own nvJPEG is the one DALI
# and stokehold both decode with. Used by scripts/gpu-peers.sh and scripts/gpu-prepare.sh.
#
#   scripts/dali-download.sh DIR
set -euo pipefail
[[ $# == 1 ]] || { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_17_x86_64 -d "$1" \
    nvidia-dali-cuda130==2.4.0 'nvidia-nvimgcodec-cu13<0.10' nvidia-libnvcomp-cu13==5.3.0.16 \
    nvidia-nvjpeg2k-cu13 nvidia-nvtiff-cu13 nvtx astunparse gast makefun optree 'libcst~=1.8'
