#!/usr/bin/env bash
# GPU call "A" (2026-12-02): FP8 + MoE fixtures and their logits checks with full logs, batch-32
# kernel timeline, AWQ batch kernel on/off at 32, prefix-cache TTFT on/off, serve under load.
# Everything comes back in two files: $OUT/results.tgz and $OUT/fixtures.tar.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"; L=$(mktemp -d); t0=$(date +%s)
DEADLINE=${DEADLINE:-540}
left() { echo $(( DEADLINE - ($(date +%s) - t0) )); }
say() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$L/summary.txt"; tar -C "$L" --exclude fx -czf "$OUT/results.tgz" . 2>/dev/null; }
[[ -f .device/build-gpu.tgz && ! -d .device/build-gpu ]] && tar -C .device -xzf .device/build-gpu.tgz
[[ -e build-gpu ]] || ln -s .device/build-gpu build-gpu
src=$(cat build-gpu/SOURCE_DIR)
[[ "$src" != "$PWD" && ! -e "$src" ]] && { mkdir -p "$(dirname "$src")"; ln -s "$PWD" "$src"; }
export LD_LIBRARY_PATH=$PWD/build-gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export LLMRT_BENCH_COMMIT=$(cat .device/COMMIT) LLMRT_TOKENIZER_DIR=$PWD/.device/tokenizer
B=$PWD/build-gpu/bin/llmrt; d=2026-12-02; mkdir -p "$L/json"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
bench() { # name timeout args...
  local name=$1 to=$2; shift 2
  (( $(left) < to )) && { say "SKIP $name (time)"; return; }
  timeout "$to" "$B" bench "$@" --json "$L/json/$d-$name.json" > "$L/$name.txt" 2>&1
  say "$name exit $?"; grep -E 'faster|slower|difference|inconclusive' "$L/$name.txt" | head -8 | tee -a "$L/summary.txt"
}
# 1. fixtures and logits checks
if timeout 150 python3 tools/make_fixtures.py --out "$L/fx" --only fp8,moe > "$L/fixtures.log" 2>&1; then
  tar -C "$L" -cf "$OUT/fixtures.tar" fx; cp -r "$L/fx/." tests/fixtures/models/
  say "fixtures ok"
  for be in cpu cuda; do
    LLMRT_LOGITS_BACKEND=$be timeout 120 ctest --test-dir build-gpu -R 'integration.(logits_fp8|moe_logits)' --output-on-failure > "$L/ctest-fx-$be.log" 2>&1
    say "logits $be: $(grep -E 'tests passed|tests failed' "$L/ctest-fx-$be.log" | tail -1)"
    grep -hE '^ok:|FAIL|rror' "$L/ctest-fx-$be.log" | cut -c1-300 | head -20 | tee -a "$L/summary.txt"
  done
else
  say "fixtures FAILED: $(tail -3 "$L/fixtures.log" | tr '\n' ' ' | cut -c1-300)"
fi
A8=/tmp/qwen3-8b-awq
timeout 90 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1; say "mkmodel awq 8b exit $?"
# 2. the batch kernels and the batch-32 decode step, kernel by kernel
OUT=$L/sweep timeout 200 plugins/backend-cuda/bench/gpu-sweep.sh batch timeline32 > "$L/sweep.txt" 2>&1
say "sweep exit $?"; tail -45 "$L/sweep.txt" | tee -a "$L/summary.txt"
# 3. prefix caching: TTFT of a 2112-token prompt whose first 2048 tokens are shared, on vs off
sed 's/^kv_tokens = 16384/kv_tokens = 16384\nprefix_caching = off/' conf/pinned.ini > /tmp/pinned-noprefix.ini
bench 8b-awq-prefix2048 80 --model $A8 -c conf/pinned.ini -c /tmp/pinned-noprefix.ini --input-len 2112 --prefix-len 2048 --output-len 16 --rounds 1 --requests 5 --warmup 1
grep -E 'TTFT' "$L/8b-awq-prefix2048.txt" | head -4 | tee -a "$L/summary.txt"
# 4. AWQ batch kernel on vs off (mma=0: GEMV to 32 rows, cuBLAS above) at batch 32
printf '\n[quant.awq]\ntune = mma=0\n' | cat conf/pinned.ini - > /tmp/pinned-mma0.ini
bench 8b-awq-mma-ab32 80 --model $A8 -c conf/pinned.ini -c /tmp/pinned-mma0.ini --allow-diff --input-len 128 --output-len 128 --concurrency 32 --rounds 1 --requests 2 --warmup 1
grep -E 'tok/s' "$L/8b-awq-mma-ab32.txt" | head -6 | tee -a "$L/summary.txt"
# 5. serve under load (streaming clients)
if (( $(left) > 100 )); then
  TOKENIZER=.device/tokenizer CONCURRENCY=1,8,32,64,128 MAX_TOKENS=128 OUT=$L/serve timeout 150 tools/serve-bench.sh "$B" $A8 conf/pinned.ini > "$L/serve.txt" 2>&1
  say "serve exit $?"; tail -12 "$L/serve.txt" | tee -a "$L/summary.txt"
fi
say "done"
cat "$L/summary.txt" > /dev/null
