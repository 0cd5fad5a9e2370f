#!/usr/bin/env bash
# GPU call "H" (2026-12-02, second session): the AWQ batch kernel with a two-stage ring, three
# blocks per SM at <= 16 tokens per block, and the column-block width as a knob (mma_bn):
# its tests, the kernel rows at 16..256 tokens under each knob, serving throughput with the
# defaults and two variants, the batch-32 step, the cached-prefix TTFT.
set -uo pipefail
DEADLINE=${DEADLINE:-560}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
A8=/tmp/qwen3-8b-awq
timeout 90 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1 &
# 1. tests
timeout 130 ctest --test-dir build-gpu -R 'quant-awq\.cuda|batch_invariance_cuda|quant-awq\.grouped_cuda|model-qwen3-moe\.cuda' -j3 --timeout 120 --output-on-failure > "$L/ctest.log" 2>&1
say "ctest: $(grep -E 'tests passed|tests failed' "$L/ctest.log" | tail -1)"
grep -E '\*\*\*(Failed|Exception|Timeout)|:F:|:E:' "$L/ctest.log" | head -20 | cut -c1-300 | tee -a "$L/summary.txt"
wait
# 2. kernel rows
LLMRT_BENCH_ROWS=16,32,64,96,128,256 timeout 150 build-gpu/bin/llmrt-cuda-bench --batch --filter awq --reps 10 > "$L/kb.txt" 2>&1
say "kernel bench exit $?"
# 3. serving with the defaults, then the knobs at 16..64
bench 8b-awq-load-h 120 --model $A8 -c conf/pinned.ini --set cache.kv_tokens=131072 \
  --input-len 128 --output-len 256 --concurrency 1,8,32,64,128,256 --rounds 1 --requests 1 --warmup 1
{ cat conf/pinned.ini; printf '[quant.awq]\ntune = mma_bn=16\n'; } > "$L/awq-bn16.ini"
{ cat conf/pinned.ini; printf '[quant.awq]\ntune = mma_w=8\n'; } > "$L/awq-w8.ini"
bench 8b-awq-knobs 110 --model $A8 -c conf/pinned.ini -c "$L/awq-bn16.ini" -c "$L/awq-w8.ini" \
  --set cache.kv_tokens=65536 --input-len 128 --output-len 128 --concurrency 16,32,64 --rounds 1 --requests 1 --warmup 1
OUT=$L/tl timeout 50 plugins/backend-cuda/bench/gpu-sweep.sh timeline32 > "$L/timeline32.txt" 2>&1
say "timeline32: $(grep -A14 'step timeline' "$L/timeline32.txt" | head -15 | tr -s ' ' | tr '\n' ';' | cut -c1-900)"
sed 's/^\[cache\]$/[cache]\nprefix_caching = off/' conf/pinned.ini > "$L/pinned-noprefix.ini"
bench 8b-awq-prefix2048-h 50 --model $A8 -c conf/pinned.ini -c "$L/pinned-noprefix.ini" \
  --input-len 2112 --prefix-len 2048 --output-len 16 --rounds 1 --requests 5 --warmup 1
say "end"
