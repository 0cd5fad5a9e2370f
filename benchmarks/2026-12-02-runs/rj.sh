#!/usr/bin/env bash
# GPU call "J" (2026-12-02, second session): the FP8 GEMV with its weights one 128-input block
# ahead in two register sets, against the build before it (.device/old/quant-fp8.so.gz, from
# commit 49e920d) in one bench run: its tests, the FP8 logits on CUDA, batch-1 ITL, 8 and 16 rows.
# Run twice: at 524ed27 (both register sets at every row count) and at the commit after it
# (the second set for decode only).
set -uo pipefail
DEADLINE=${DEADLINE:-300}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
F8=/tmp/qwen3-8b-fp8
timeout 120 "$B" mkmodel --preset qwen3-8b --quant fp8 --seed 1 -q -o $F8 > "$L/mk-fp8.log" 2>&1 &
OLD=/tmp/old-fp8; mkdir -p $OLD; gunzip -c .device/old/quant-fp8.so.gz > $OLD/quant-fp8.so
timeout 100 ctest --test-dir build-gpu -R 'quant-fp8\.cuda' --timeout 90 --output-on-failure > "$L/ctest.log" 2>&1
say "ctest: $(grep -E 'tests passed|tests failed' "$L/ctest.log" | tail -1)"
grep -E '\*\*\*(Failed|Exception|Timeout)|:F:|:E:' "$L/ctest.log" | head -20 | cut -c1-300 | tee -a "$L/summary.txt"
LLMRT_LOGITS_BACKEND=cuda LLMRT_LOGITS_TOL=2e-2 timeout 60 ctest --test-dir build-gpu -R 'integration.logits_fp8' --output-on-failure > "$L/ctest-logits.log" 2>&1
say "logits fp8 cuda: $(grep -E 'tests passed|tests failed' "$L/ctest-logits.log" | tail -1)"
wait
{ cat conf/pinned.ini; printf '[runtime]\nplugin_dir = %s\n' $OLD; } > "$L/pinned-oldfp8.ini"
bench 8b-fp8-gemv2-itl128 90 --model $F8 -c conf/pinned.ini -c "$L/pinned-oldfp8.ini" --allow-diff \
  --input-len 128 --output-len 128 --rounds 2 --requests 5 --warmup 1
bench 8b-fp8-gemv2-load 80 --model $F8 -c conf/pinned.ini -c "$L/pinned-oldfp8.ini" --allow-diff \
  --set cache.kv_tokens=65536 --input-len 128 --output-len 128 --concurrency 8,16 --rounds 1 --requests 1 --warmup 1
say "end"
