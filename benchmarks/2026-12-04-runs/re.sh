#!/usr/bin/env bash
# GPU call "E" of 2026-12-04: the AWQ batch kernel's split-K partials added by the last block of
# each tile (a counter per tile) instead of a second kernel, against the previous quant-awq.so
# (.device/oldq.tgz, whose quant code is this build's but for that) in one run: the CUDA
# tests of the quant plugin and of batch invariance first, then decode under load 1..128 and
# the batch-32 step traced.
set -uo pipefail
DEADLINE=${DEADLINE:-480}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
A8=/tmp/qwen3-8b-awq
timeout 100 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1 &
mkdir -p /tmp/oldq && tar -C /tmp/oldq -xzf .device/oldq.tgz
tests 'quant-awq|batch_invariance_cuda|generate_cuda|prefix_cache_cuda' 150
wait
P=conf/pinned.ini
{ cat $P; printf '[runtime]\nplugin_dir = /tmp/oldq\n'; } > "$L/oldq.ini"
bench 8b-awq-load-e 150 --model $A8 -c $P -c "$L/oldq.ini" --allow-diff --set cache.kv_tokens=131072 \
  --input-len 128 --output-len 256 --concurrency 1,8,32,64,128 --rounds 1 --requests 1 --warmup 1
(( $(left) > 60 )) && { OUT=$L/tl timeout 50 plugins/backend-cuda/bench/gpu-sweep.sh timeline32 > "$L/timeline32.txt" 2>&1
  grep -A20 'step timeline' "$L/timeline32.txt" > "$OUT/step32-timeline-e.txt"; say "timeline32: $(head -3 "$OUT/step32-timeline-e.txt" | tr -s ' ' | tr '\n' ';')"; }
say "end"
