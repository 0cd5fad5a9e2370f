#!/usr/bin/env bash
# build.sh — configure and build llmrt into a build folder (default: build).
# usage: scripts/build.sh [BUILD_DIR] [extra cmake args...]
# CUDA is built when a toolkit is found (LLMRT_CUDA=AUTO); set LLMRT_CUDA=OFF to skip it.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
llmrt_ensure_debs
dir=${1:-build}
shift || true
cmake -S . -B "$dir" -G Ninja -DLLMRT_CUDA="${LLMRT_CUDA:-AUTO}" "$@" >/dev/null
ninja -C "$dir" -j"${LLMRT_JOBS:-$(nproc)}"
