#!/usr/bin/env bash
# GPU call "D" (2026-12-02): where a Qwen3-30B-A3B batch-1 decode step and an 8B FP8 batch-32
# step go, kernel by kernel (gpu-sweep.sh timeline / timeline32 on those models).
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"; L=$(mktemp -d)
[[ -f .device/build-gpu.tgz && ! -d .device/build-gpu ]] && tar -C .device -xzf .device/build-gpu.tgz
B=$PWD/.device/build-gpu/bin/llmrt; export LD_LIBRARY_PATH=$PWD/.device/build-gpu/lib:/usr/local/cuda/lib64
timeout 60 $B mkmodel --preset qwen3-30b-a3b --quant awq --group-size 128 --seed 1 -q -o /tmp/moe30 > "$L/mk1.log" 2>&1 &
timeout 60 $B mkmodel --preset qwen3-8b --quant fp8 --seed 1 -q -o /tmp/fp8b > "$L/mk2.log" 2>&1
wait
LLMRT_8B_DIR=/tmp/moe30 OUT=$L/moe timeout 80 plugins/backend-cuda/bench/gpu-sweep.sh timeline > "$L/moe.txt" 2>&1
LLMRT_8B_DIR=/tmp/fp8b OUT=$L/fp8 timeout 80 plugins/backend-cuda/bench/gpu-sweep.sh timeline32 > "$L/fp8.txt" 2>&1
tar -C "$L" -czf "$OUT/results.tgz" .
grep -A22 'step timeline' "$L/moe.txt" | head -24; grep -A22 'step timeline' "$L/fp8.txt" | head -24
