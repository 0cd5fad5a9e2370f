#!/usr/bin/env bash
# gpu-pack.sh — build for the GPU machine and pack what travels (see ../shared/device/README.md).
# Builds build-gpu (CUDA for sm_86/89/90, shared CUDA runtime), bundles the non-system
# libraries it needs into build-gpu/lib, and copies the runnable part of the tree (binaries,
# plugins, libraries, ctest files — no object files) to .device/build-gpu, which the device
# call names in `carry`. On the GPU machine, scripts/gpu-check.sh puts it back in place.
set -euo pipefail
cd "$(dirname "$0")/.."
LLMRT_CUDA=ON scripts/build.sh build-gpu -DCMAKE_BUILD_TYPE=Release "$@"
bundle=${LLMRT_BUNDLE_LIBS:-../shared/device/bundle-libs}
"$bundle" build-gpu >/dev/null
rm -rf .device/build-gpu
mkdir -p .device
rsync -a --prune-empty-dirs --exclude '*.o' --exclude '*.a' --exclude 'CMakeFiles/' \
  --exclude '.ninja_*' --exclude 'Testing/' build-gpu/ .device/build-gpu/
# the source path the ctest files were written for, so the GPU machine can recreate it
grep '^CMAKE_HOME_DIRECTORY' build-gpu/CMakeCache.txt | cut -d= -f2 > .device/build-gpu/SOURCE_DIR
du -sh .device/build-gpu
