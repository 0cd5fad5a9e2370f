#!/usr/bin/env bash
# GPU call "N" of 2026-12-03 (third session): the record of decode under load at the session's
# code (4a9788d: batch decode attention of round 17), 1 to 256 concurrent, default against
# att_bpf=0 (the same kernel without its one-step-ahead loads) in one run.
set -uo pipefail
DEADLINE=${DEADLINE:-300}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
A8=/tmp/qwen3-8b-awq
timeout 90 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1
{ cat conf/pinned.ini; printf '[backend.cuda]\ntune = att_bpf=0\n'; } > "$L/pinned-nobpf.ini"
bench 8b-awq-load-${TAG:-n} 200 --model $A8 -c conf/pinned.ini -c "$L/pinned-nobpf.ini" --allow-diff \
  --set cache.kv_tokens=131072 --concurrency 1,8,32,64,128,256 --input-len 128 --output-len 256 --rounds 1 --requests 1 --warmup 1
say "end"
