#!/usr/bin/env bash
# GPU call "F" of 2026-12-03 (second session): quant-fp8's decode GEMV with x staged in shared
# memory (sx) and a grid of one wave streaming across row blocks (pers), both on by default,
# against `tune = pers=0` (staging only) and `tune = sx=0,pers=0` (the GEMV as before) in one
# run: the FP8 tests and the FP8 model's logits on CUDA, batch 1 at ctx 128, load at 8 and 32,
# and the default's batch-1 decode step traced per kernel.
set -uo pipefail
DEADLINE=${DEADLINE:-420}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
F8=/tmp/qwen3-8b-fp8
timeout 120 "$B" mkmodel --preset qwen3-8b --quant fp8 --seed 1 -q -o $F8 > "$L/mk-fp8.log" 2>&1 &
tests 'quant-fp8\.cuda' 120
LLMRT_LOGITS_BACKEND=cuda tests 'integration\.logits_fp8' 60
wait
say "fp8 mkmodel: $(tail -1 "$L/mk-fp8.log")"
{ cat conf/pinned.ini; printf '[quant.fp8]\ntune = pers=0\n'; } > "$L/pinned-nopers.ini"
{ cat conf/pinned.ini; printf '[quant.fp8]\ntune = sx=0,pers=0\n'; } > "$L/pinned-old.ini"
bench 8b-fp8-gemv-${TAG:-f} 90 --model $F8 -c conf/pinned.ini -c "$L/pinned-nopers.ini" -c "$L/pinned-old.ini" --allow-diff \
  --input-len 128 --output-len 64 --rounds 3 --requests 4 --warmup 1
bench 8b-fp8-gemv-load-${TAG:-f} 80 --model $F8 -c conf/pinned.ini -c "$L/pinned-old.ini" --allow-diff \
  --set cache.kv_tokens=65536 --concurrency 8,32 --input-len 128 --output-len 128 --rounds 1 --requests 1 --warmup 1
LLMRT_CUPTI_TRACE=$L/f8.csv LD_PRELOAD=$PWD/build-gpu/lib/libllmrt-cupti-trace.so timeout 40 "$B" bench --model $F8 -c conf/pinned.ini \
  --input-len 128 --output-len 32 --rounds 1 --requests 1 --warmup 1 > "$L/f8-bench.txt" 2>&1
python3 plugins/backend-cuda/bench/step-timeline.py "$L/f8.csv" 8 > "$L/f8-timeline.txt" 2>&1
say "fp8 decode step: $(head -24 "$L/f8-timeline.txt" | tr -s ' ' | tr '\n' ';' | cut -c1-1400)"
gzip -f "$L/f8.csv"
say "end"
