#!/usr/bin/env bash
# GPU call "L" (2026-12-02, third session): the AWQ batch kernel's double-buffered x stage
# (the fused split-K reduce of call K taken out again), against the single stage (`mma_xdb=1`,
# the previous kernel's path) in one run: its tests (incl. two instances with other knobs in
# one process, sm_86's 99 KB guard), the kernel rows at 32..128 under the column-block knobs,
# serving throughput at 32 / 64 / 128, the cached-prefix TTFT.
set -uo pipefail
DEADLINE=${DEADLINE:-480}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
A8=/tmp/qwen3-8b-awq
timeout 90 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1 &
timeout 150 ctest --test-dir build-gpu -R 'quant-awq\.cuda|batch_invariance_cuda|quant-awq\.grouped_cuda' -j3 --timeout 140 --output-on-failure > "$L/ctest.log" 2>&1
say "ctest: $(grep -E 'tests passed|tests failed' "$L/ctest.log" | tail -1)"
grep -E '\*\*\*(Failed|Exception|Timeout)|:F:|:E:' "$L/ctest.log" | head -20 | cut -c1-300 | tee -a "$L/summary.txt"
LLMRT_BENCH_ROWS=32,48,64,96,128 LLMRT_BENCH_AWQ_TUNES="-;mma_xdb=1;mma_bn=32;mma_bn=24;mma_bn=16" \
  timeout 90 build-gpu/bin/llmrt-cuda-bench --batch --filter awq --reps 10 > "$L/kb.txt" 2>&1
say "kernel bench exit $?"; grep -E '^awq (qkv fused|o_proj|gate_up fused|down_proj) n=' "$L/kb.txt" | tr -s ' ' | cut -d' ' -f2-7 | tee -a "$L/summary.txt"
wait
{ cat conf/pinned.ini; printf '[quant.awq]\ntune = mma_xdb=1\n'; } > "$L/pinned-xdb1.ini"
bench 8b-awq-load-l 110 --model $A8 -c conf/pinned.ini -c "$L/pinned-xdb1.ini" --allow-diff --set cache.kv_tokens=131072 \
  --input-len 128 --output-len 128 --concurrency 32,64,128 --rounds 1 --requests 1 --warmup 1
bench 8b-awq-prefix2048-l 50 --model $A8 -c conf/pinned.ini -c "$L/pinned-xdb1.ini" --allow-diff \
  --input-len 2112 --prefix-len 2048 --output-len 16 --rounds 1 --requests 5 --warmup 1
say "end"
