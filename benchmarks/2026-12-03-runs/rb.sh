#!/usr/bin/env bash
# GPU call "B" of 2026-12-03: prefill attention's key splits on by default (512 keys) and the
# merge kernel in 16 blocks per tile (call A traced it at 84 us per layer after a 2048-token
# cached prefix). Tests (CUDA ops incl. the split schedules, prefix caching, AWQ, invariance,
# generate), then in one run each: the cached-prefix TTFT and the 2048-token TTFT, default
# (splits) against att_pf_split=-1 (one split, the old default); the cached-prefix step traced.
set -uo pipefail
DEADLINE=${DEADLINE:-400}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
A8=/tmp/qwen3-8b-awq
timeout 90 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1 &
tests 'backend-cuda\.ops|prefix_cache_cuda|quant-awq\.cuda|quant-fp8\.cuda|batch_invariance_cuda|generate_cuda|model-qwen3-moe\.cuda$' 190
wait
{ cat conf/pinned.ini; printf '[backend.cuda]\ntune = att_pf_split=-1\n'; } > "$L/pinned-onesplit.ini"
bench 8b-awq-prefix2048-b 70 --model $A8 -c conf/pinned.ini -c "$L/pinned-onesplit.ini" --allow-diff \
  --input-len 2112 --prefix-len 2048 --output-len 16 --rounds 2 --requests 5 --warmup 1
bench 8b-awq-ttft2048-b 70 --model $A8 -c conf/pinned.ini -c "$L/pinned-onesplit.ini" --allow-diff \
  --set cache.prefix_caching=off --input-len 2048 --output-len 2 --rounds 2 --requests 4 --warmup 1
LLMRT_CUPTI_TRACE=$L/pf.csv LD_PRELOAD=$PWD/build-gpu/lib/libllmrt-cupti-trace.so timeout 40 "$B" bench --model $A8 -c conf/pinned.ini \
  --input-len 2112 --prefix-len 2048 --output-len 1 --rounds 1 --requests 4 --warmup 1 > "$L/pf-bench.txt" 2>&1
python3 plugins/backend-cuda/bench/step-timeline.py "$L/pf.csv" 3 > "$L/pf-timeline.txt" 2>&1
say "prefix prefill step: $(head -24 "$L/pf-timeline.txt" | tr -s ' ' | tr '\n' ';' | cut -c1-1200)"
gzip -f "$L/pf.csv"
say "end"
