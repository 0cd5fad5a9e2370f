#!/usr/bin/env bash
# GPU call "G" of 2026-12-03 (second session): quant-awq's decode GEMV on a grid of one wave
# (default) against `tune = pers=0` (a block per row block, the code before) in one run, batch
# 1 at ctx 128 and load at 8; FP8's decode GEMV (call F's) with 16 K-splitting warps (default)
# against 8 and 4; the AWQ tests, FP8's, the invariance and generate tests; the AWQ decode
# step traced per kernel.
set -uo pipefail
DEADLINE=${DEADLINE:-480}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
A8=/tmp/qwen3-8b-awq F8=/tmp/qwen3-8b-fp8
( timeout 90 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1
  timeout 120 "$B" mkmodel --preset qwen3-8b --quant fp8 --seed 1 -q -o $F8 > "$L/mk-fp8.log" 2>&1 ) &
tests 'quant-awq\.cuda|quant-fp8\.cuda|batch_invariance_cuda|generate_cuda|model-qwen3-moe\.cuda$' 200
wait
say "mkmodel: $(tail -1 "$L/mk-awq.log") / $(tail -1 "$L/mk-fp8.log")"
{ cat conf/pinned.ini; printf '[quant.awq]\ntune = pers=0\n'; } > "$L/pinned-nopers.ini"
bench 8b-awq-wave-${TAG:-g} 90 --model $A8 -c conf/pinned.ini -c "$L/pinned-nopers.ini" --allow-diff \
  --input-len 128 --output-len 64 --rounds 3 --requests 4 --warmup 1
bench 8b-awq-wave-load-${TAG:-g} 60 --model $A8 -c conf/pinned.ini -c "$L/pinned-nopers.ini" --allow-diff \
  --set cache.kv_tokens=65536 --concurrency 8 --input-len 128 --output-len 128 --rounds 2 --requests 1 --warmup 1
for kw in 4 8; do { cat conf/pinned.ini; printf '[quant.fp8]\ntune = kw=%s\n' $kw; } > "$L/pinned-kw$kw.ini"; done
bench 8b-fp8-kw-${TAG:-g} 80 --model $F8 -c conf/pinned.ini -c "$L/pinned-kw8.ini" -c "$L/pinned-kw4.ini" --allow-diff \
  --input-len 128 --output-len 64 --rounds 2 --requests 3 --warmup 1
LLMRT_CUPTI_TRACE=$L/a8.csv LD_PRELOAD=$PWD/build-gpu/lib/libllmrt-cupti-trace.so timeout 40 "$B" bench --model $A8 -c conf/pinned.ini \
  --input-len 128 --output-len 32 --rounds 1 --requests 1 --warmup 1 > "$L/a8-bench.txt" 2>&1
python3 plugins/backend-cuda/bench/step-timeline.py "$L/a8.csv" 8 > "$L/a8-timeline.txt" 2>&1
say "awq decode step: $(head -24 "$L/a8-timeline.txt" | tr -s ' ' | tr '\n' ';' | cut -c1-1400)"
gzip -f "$L/a8.csv"
say "end"
