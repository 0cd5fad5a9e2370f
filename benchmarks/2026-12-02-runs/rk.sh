#!/usr/bin/env bash
# GPU call "K" (2026-12-02, third session): the AWQ batch kernel with a double-buffered x
# stage (one barrier per iteration) and the split-K reduce fused into its last block, against
# the same build with both off (`mma_xdb=1,mma_fred=0`, the previous kernel's code paths) in
# one run: its tests (incl. sm_86's 99 KB guard), the kernel rows under the knobs, serving
# throughput at 32 / 64, the cached-prefix TTFT.
set -uo pipefail
DEADLINE=${DEADLINE:-480}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
A8=/tmp/qwen3-8b-awq
timeout 90 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1 &
timeout 150 ctest --test-dir build-gpu -R 'quant-awq\.cuda|batch_invariance_cuda|quant-awq\.grouped_cuda' -j3 --timeout 140 --output-on-failure > "$L/ctest.log" 2>&1
say "ctest: $(grep -E 'tests passed|tests failed' "$L/ctest.log" | tail -1)"
grep -E '\*\*\*(Failed|Exception|Timeout)|:F:|:E:' "$L/ctest.log" | head -20 | cut -c1-300 | tee -a "$L/summary.txt"
LLMRT_BENCH_ROWS=16,32,64,128 LLMRT_BENCH_AWQ_TUNES="-;mma_xdb=1,mma_fred=0;mma_xdb=1;mma_fred=0;mma_fill=3;mma_fill=4" \
  timeout 90 build-gpu/bin/llmrt-cuda-bench --batch --filter awq --reps 10 > "$L/kb.txt" 2>&1
say "kernel bench exit $?"; grep -E '^awq \S+( fused)? n=(16|32|64|128)' "$L/kb.txt" | tr -s ' ' | cut -c1-80 | tee -a "$L/summary.txt"
wait
{ cat conf/pinned.ini; printf '[quant.awq]\ntune = mma_xdb=1,mma_fred=0\n'; } > "$L/pinned-oldmma.ini"
bench 8b-awq-load-k 100 --model $A8 -c conf/pinned.ini -c "$L/pinned-oldmma.ini" --allow-diff --set cache.kv_tokens=131072 \
  --input-len 128 --output-len 128 --concurrency 32,64,128 --rounds 1 --requests 1 --warmup 1
bench 8b-awq-prefix2048-k 50 --model $A8 -c conf/pinned.ini -c "$L/pinned-oldmma.ini" --allow-diff \
  --input-len 2112 --prefix-len 2048 --output-len 16 --rounds 1 --requests 5 --warmup 1
say "end"
