#!/usr/bin/env bash
# GPU call "F" of 2026-12-04: call E again with the split-K ticket in the block's dynamic
# shared memory (E's static __shared__ word pushed every batch kernel past the dynamic size
# it is allowed, so the plugin switched the batch kernel off: E's tests failed and its load
# figures are the dequant + cuBLAS path's). Tests, then load at 1, 32, 64 against
# .device/oldq.tgz in one run.
set -uo pipefail
DEADLINE=${DEADLINE:-240}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
A8=/tmp/qwen3-8b-awq
timeout 100 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1 &
mkdir -p /tmp/oldq && tar -C /tmp/oldq -xzf .device/oldq.tgz
tests 'quant-awq\.cuda|batch_invariance_cuda|generate_cuda' 100
wait
P=conf/pinned.ini
{ cat $P; printf '[runtime]\nplugin_dir = /tmp/oldq\n'; } > "$L/oldq.ini"
bench 8b-awq-load-f 90 --model $A8 -c $P -c "$L/oldq.ini" --allow-diff --set cache.kv_tokens=65536 \
  --input-len 128 --output-len 128 --concurrency 1,32,64 --rounds 1 --requests 1 --warmup 1
say "end"
