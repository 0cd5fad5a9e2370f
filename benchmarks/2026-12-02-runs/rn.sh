#!/usr/bin/env bash
# GPU call "N" (2026-12-02, third session): the timed launch shapes with the K split as a
# third dimension (1, 2 or 4 blocks per SM), against the built-in shapes and one x stage in
# one run: tests, kernel rows, the cached-prefix TTFT, serving at 32 / 64 / 128, and where a
# cached-prefix request's 64-token prefill step goes (CUPTI, the last 3 requests' steps).
set -uo pipefail
DEADLINE=${DEADLINE:-300}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
A8=/tmp/qwen3-8b-awq
timeout 90 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1 &
tests 'quant-awq\.cuda|batch_invariance_cuda|prefix_cache_cuda' 120
LLMRT_BENCH_ROWS=32,48,64,96,128 LLMRT_BENCH_AWQ_TUNES="-;mma_xdb=1,mma_tune=0" \
  timeout 50 build-gpu/bin/llmrt-cuda-bench --batch --filter awq --reps 10 > "$L/kb.txt" 2>&1
say "kernel bench exit $?"
grep -E '^awq (qkv fused|o_proj|gate_up fused|down_proj) n=' "$L/kb.txt" | awk '{t=$0; sub(/ [0-9]+x[0-9]+ g128.*/,"",t); split($0,a," g128 "); split(a[2],b," "); print t, b[1]}' | tee -a "$L/summary.txt"
wait
{ cat conf/pinned.ini; printf '[quant.awq]\ntune = mma_xdb=1,mma_tune=0\n'; } > "$L/pinned-before.ini"
bench 8b-awq-prefix2048-n 50 --model $A8 -c conf/pinned.ini -c "$L/pinned-before.ini" --allow-diff \
  --input-len 2112 --prefix-len 2048 --output-len 16 --rounds 1 --requests 5 --warmup 1
bench 8b-awq-load-n 70 --model $A8 -c conf/pinned.ini -c "$L/pinned-before.ini" --allow-diff --set cache.kv_tokens=131072 \
  --input-len 128 --output-len 128 --concurrency 32,64,128 --rounds 1 --requests 1 --warmup 1
LLMRT_CUPTI_TRACE=$L/pf.csv LD_PRELOAD=$PWD/build-gpu/lib/libllmrt-cupti-trace.so timeout 40 "$B" bench --model $A8 -c conf/pinned.ini \
  --input-len 2112 --prefix-len 2048 --output-len 1 --rounds 1 --requests 4 --warmup 1 > "$L/pf-bench.txt" 2>&1
python3 plugins/backend-cuda/bench/step-timeline.py "$L/pf.csv" 3 > "$L/pf-timeline.txt" 2>&1
say "prefix prefill step: $(head -24 "$L/pf-timeline.txt" | tr -s ' ' | tr '\n' ';' | cut -c1-1200)"
gzip -f "$L/pf.csv"
say "end"
