#!/usr/bin/env bash
# GPU call "O" of 2026-12-03 (third session): both decode attention kernels step through one
# helper (att_decode_step) as they merge through one (att_merge_split) — a refactor that must
# change no bit and no time: the CUDA attention tests (batch invariance bit for bit), then
# batch-1 ITL and load at 32 against call M's backend-cuda.so (.device/bc-m.tgz) in one run.
set -uo pipefail
DEADLINE=${DEADLINE:-230}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
A8=/tmp/qwen3-8b-awq
timeout 90 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1 &
tests 'backend-cuda\.ops|batch_invariance_cuda' 120
wait
mkdir -p /tmp/bcm && cp build-gpu/lib/llmrt/plugins/*.so /tmp/bcm/ && tar -C /tmp/bcm -xzf .device/bc-m.tgz
{ cat conf/pinned.ini; printf '[runtime]\nplugin_dir = /tmp/bcm\n'; } > "$L/pinned-callm.ini"
bench 8b-awq-stephelper-itl128-${TAG:-o} 50 --model $A8 -c conf/pinned.ini -c "$L/pinned-callm.ini" --allow-diff \
  --input-len 128 --output-len 64 --rounds 3 --requests 3 --warmup 1
bench 8b-awq-stephelper-load-${TAG:-o} 40 --model $A8 -c conf/pinned.ini -c "$L/pinned-callm.ini" --allow-diff \
  --set cache.kv_tokens=65536 --concurrency 32 --input-len 128 --output-len 128 --rounds 1 --requests 1 --warmup 1
say "end"
