#!/usr/bin/env bash
# GPU call "B" of 2026-12-06: call A cut to what the device budget left after eleven machines
# that did not start — the quant plugin's and batch invariance's CUDA tests, then the split-K
# ticket against main's quant-awq.so before it at concurrency 32 and 64, one round.
set -uo pipefail
DEADLINE=${DEADLINE:-230}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
A8=/tmp/qwen3-8b-awq
timeout 100 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1 &
mkdir -p /tmp/oldq && tar -C /tmp/oldq -xzf .device/oldq.tgz
tests 'quant-awq.cuda|batch_invariance_cuda' 120
wait
P=conf/pinned.ini
{ cat $P; printf '[runtime]\nplugin_dir = /tmp/oldq\n'; } > "$L/oldq.ini"
bench 8b-awq-ticket-load-b 70 --model $A8 -c $P -c "$L/oldq.ini" --allow-diff --set cache.kv_tokens=131072 \
  --input-len 128 --output-len 128 --concurrency 32,64 --rounds 1 --requests 1 --warmup 1
say "end"
