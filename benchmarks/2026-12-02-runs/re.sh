#!/usr/bin/env bash
# GPU call "E" (2026-12-02, second session): the AWQ batch kernel's weight ring against the
# kernel it replaced (.device/old/quant-awq.so.gz, the b87a210 build's plugin), the FP8 GEMV's
# row limit (gemv_rows 16 / 32 / 8), then prefix caching under serve and with nothing shared.
# Priority order; a global deadline skips the rest.
set -uo pipefail
DEADLINE=${DEADLINE:-560}; source "$(dirname "$0")/prelude.sh"
export LLMRT_TOKENIZER_DIR=$PWD/.device/tokenizer
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
# the replaced kernel's plugin, alone in a folder searched first
OLD=/tmp/old-awq; mkdir -p $OLD; gunzip -c .device/old/quant-awq.so.gz > $OLD/quant-awq.so
# 1. the kernels' tests
timeout 130 ctest --test-dir build-gpu -R 'quant-awq\.cuda|quant-fp8\.cuda|batch_invariance_cuda|quant-awq\.grouped_cuda' -j3 --timeout 120 --output-on-failure > "$L/ctest.log" 2>&1
say "ctest: $(grep -E 'tests passed|tests failed' "$L/ctest.log" | tail -1)"
grep -E '\*\*\*(Failed|Exception|Timeout)|Failure|Assertion|:F:|:E:' "$L/ctest.log" | head -20 | cut -c1-300 | tee -a "$L/summary.txt"
# 2. the batch kernel, new against old, and the new one's knobs
timeout 110 build-gpu/bin/llmrt-cuda-bench --batch --filter awq --reps 10 > "$L/kb-new.txt" 2>&1
say "kernel bench new exit $?"; grep -E '^awq' "$L/kb-new.txt" | grep -E 'n=(16|32|64|256) ' | tr -s ' ' | cut -c1-90 | tee -a "$L/summary.txt"
mkdir -p /tmp/oldplug && cp build-gpu/lib/llmrt/plugins/*.so /tmp/oldplug/ && cp $OLD/quant-awq.so /tmp/oldplug/
for f in gate_up down_proj; do
  LLMRT_PLUGIN_DIR=/tmp/oldplug timeout 50 build-gpu/bin/llmrt-cuda-bench --batch --filter "$f" --reps 10 > "$L/kb-old-$f.txt" 2>&1
done
say "kernel bench old:"; grep -hE '^awq' "$L"/kb-old-*.txt | grep -vE 'mma_stages|mma=0' | tr -s ' ' | cut -c1-90 | tee -a "$L/summary.txt"
# 3. models
A8=/tmp/qwen3-8b-awq F8=/tmp/qwen3-8b-fp8
timeout 90 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1 &
timeout 120 "$B" mkmodel --preset qwen3-8b --quant fp8 --seed 1 -q -o $F8 > "$L/mk-fp8.log" 2>&1
wait; say "mkmodel done"
# 4. serving throughput, new kernel against old in one run
{ cat conf/pinned.ini; printf '[runtime]\nplugin_dir = %s\n' $OLD; } > "$L/pinned-oldawq.ini"
bench 8b-awq-ring-load 130 --model $A8 -c conf/pinned.ini -c "$L/pinned-oldawq.ini" --allow-diff \
  --set cache.kv_tokens=131072 --input-len 128 --output-len 256 --concurrency 1,8,32,64,128 --rounds 1 --requests 1 --warmup 1 ||
  bench 8b-awq-ring-load-new 80 --model $A8 -c conf/pinned.ini --set cache.kv_tokens=131072 --input-len 128 --output-len 256 --concurrency 1,8,32,64,128 --rounds 1 --requests 1 --warmup 1
# 5. FP8: the GEMV to 16 rows (default), to 32 (as before), to 8
{ cat conf/pinned.ini; printf '[quant.fp8]\ntune = gemv_rows=32\nw8a8_min_rows = 33\n'; } > "$L/fp8-gemv32.ini"
{ cat conf/pinned.ini; printf '[quant.fp8]\ntune = gemv_rows=8\nw8a8_min_rows = 9\n'; } > "$L/fp8-gemv8.ini"
bench 8b-fp8-gemvrows 100 --model $F8 -c conf/pinned.ini -c "$L/fp8-gemv32.ini" -c "$L/fp8-gemv8.ini" --allow-diff \
  --set cache.kv_tokens=65536 --input-len 128 --output-len 128 --concurrency 8,16,32,64 --rounds 1 --requests 1 --warmup 1
# 6. where the batch-32 step goes now
OUT=$L/tl timeout 60 plugins/backend-cuda/bench/gpu-sweep.sh timeline32 > "$L/timeline32.txt" 2>&1
say "timeline32: $(grep -A16 'step timeline' "$L/timeline32.txt" | tr -s ' ' | tr '\n' ';' | cut -c1-900)"
# 7. prefix caching: 2048 cached + 64 new; nothing shared at 32
sed 's/^\[cache\]$/[cache]\nprefix_caching = off/' conf/pinned.ini > "$L/pinned-noprefix.ini"
bench 8b-awq-prefix2048-ring 50 --model $A8 -c conf/pinned.ini -c "$L/pinned-noprefix.ini" \
  --input-len 2112 --prefix-len 2048 --output-len 16 --rounds 1 --requests 5 --warmup 1
bench 8b-awq-prefix-none 70 --model $A8 -c conf/pinned.ini -c "$L/pinned-noprefix.ini" \
  --set cache.kv_tokens=65536 --input-len 128 --output-len 64 --concurrency 32 --rounds 2 --requests 3 --warmup 1
# 8. serve: a 1,024-token system prompt shared by 32 clients, caching on and off
if (( $(left) > 90 )); then
  SETS="cache.kv_tokens=65536" TOKENIZER=.device/tokenizer SHARED_PREFIX=1024 CONCURRENCY=32 MAX_TOKENS=128 OUT=$L/serve \
    timeout 85 tools/serve-bench.sh "$B" $A8 conf/pinned.ini "$L/pinned-noprefix.ini" > "$L/serve.txt" 2>&1
  say "serve shared 1024 exit $?: $(tail -8 "$L/serve.txt" | tr -s ' ' | tr '\n' ';' | cut -c1-600)"
else say "SKIP serve (time)"; fi
say "end"
