#!/usr/bin/env bash
# GPU call "I" (2026-12-02, second session): the AWQ batch kernel with 16-token column blocks
# for short-K linears up to 64 rows (mma_bn by shape): its tests, the kernel rows, serving
# throughput by default and throughput-first (dequant + cuBLAS from 128 rows, decode
# attention's splits capped by the batch: both give up batch invariance), the batch-32 step,
# the cached-prefix TTFT, FP8 at 8..64 rows.
set -uo pipefail
DEADLINE=${DEADLINE:-420}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
A8=/tmp/qwen3-8b-awq F8=/tmp/qwen3-8b-fp8
timeout 90 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1 &
timeout 120 "$B" mkmodel --preset qwen3-8b --quant fp8 --seed 1 -q -o $F8 > "$L/mk-fp8.log" 2>&1 &
timeout 130 ctest --test-dir build-gpu -R 'quant-awq\.cuda|batch_invariance_cuda|quant-awq\.grouped_cuda|quant-fp8\.cuda' -j3 --timeout 120 --output-on-failure > "$L/ctest.log" 2>&1
say "ctest: $(grep -E 'tests passed|tests failed' "$L/ctest.log" | tail -1)"
grep -E '\*\*\*(Failed|Exception|Timeout)|:F:|:E:' "$L/ctest.log" | head -20 | cut -c1-300 | tee -a "$L/summary.txt"
wait
LLMRT_BENCH_ROWS=16,32,64 timeout 60 build-gpu/bin/llmrt-cuda-bench --batch --filter awq --reps 10 > "$L/kb.txt" 2>&1
say "kernel bench exit $?"; grep -E '^awq \S+( fused)? n=(16|32|64) +[0-9]' "$L/kb.txt" | tr -s ' ' | cut -c1-60 | tee -a "$L/summary.txt"
{ cat conf/pinned.ini; printf '[quant.awq]\ntune = mma_max=127\n[backend.cuda]\ntune = att_inv=0\n'; } > "$L/throughput-first.ini"
bench 8b-awq-load-i 130 --model $A8 -c conf/pinned.ini -c "$L/throughput-first.ini" --allow-diff --set cache.kv_tokens=131072 \
  --input-len 128 --output-len 256 --concurrency 1,8,32,64,128,256 --rounds 1 --requests 1 --warmup 1
OUT=$L/tl timeout 50 plugins/backend-cuda/bench/gpu-sweep.sh timeline32 > "$L/timeline32.txt" 2>&1
say "timeline32: $(grep -A14 'step timeline' "$L/timeline32.txt" | head -15 | tr -s ' ' | tr '\n' ';' | cut -c1-900)"
sed 's/^\[cache\]$/[cache]\nprefix_caching = off/' conf/pinned.ini > "$L/pinned-noprefix.ini"
bench 8b-awq-prefix2048-i 50 --model $A8 -c conf/pinned.ini -c "$L/pinned-noprefix.ini" \
  --input-len 2112 --prefix-len 2048 --output-len 16 --rounds 1 --requests 5 --warmup 1
bench 8b-fp8-load-i 80 --model $F8 -c conf/pinned.ini --set cache.kv_tokens=65536 \
  --input-len 128 --output-len 128 --concurrency 1,8,16,32,64,128 --rounds 1 --requests 1 --warmup 1
say "end"
