#!/usr/bin/env bash
# GPU call "models" (2026-12-02): GPU tests, FP8 + MoE fixtures and their logits checks,
# FP8 8B vs AWQ 8B and MoE 30B-A3B benchmarks. Priority order; a global deadline skips the rest.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"; L=$(mktemp -d); t0=$(date +%s)
DEADLINE=${DEADLINE:-560}
left() { echo $(( DEADLINE - ($(date +%s) - t0) )); }
say() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$L/summary.txt"; tar -C "$L" -czf "$OUT/logs.tgz" . 2>/dev/null; }
[[ -f .device/build-gpu.tgz && ! -d .device/build-gpu ]] && tar -C .device -xzf .device/build-gpu.tgz
if [[ -d .device/build-gpu ]]; then
  [[ -e build-gpu ]] || ln -s .device/build-gpu build-gpu
  src=$(cat build-gpu/SOURCE_DIR)
  [[ "$src" != "$PWD" && ! -e "$src" ]] && { mkdir -p "$(dirname "$src")"; ln -s "$PWD" "$src"; }
fi
export LD_LIBRARY_PATH=$PWD/build-gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export LLMRT_BENCH_COMMIT=$(cat .device/COMMIT) LLMRT_TOKENIZER_DIR=$PWD/.device/tokenizer
B=$PWD/build-gpu/bin/llmrt
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
d=2026-12-02
bench() { # name timeout args...
  local name=$1 to=$2; shift 2
  (( $(left) < to )) && { say "SKIP $name (time)"; return; }
  timeout "$to" "$B" bench "$@" --json "$OUT/$d-$name.json" > "$L/$name.txt" 2>&1
  say "$name exit $?: $(grep -E 'tok/s|ITL p50|TTFT p50' "$L/$name.txt" | head -8 | tr -s ' ' | tr '\n' ';' | cut -c1-400)"
}
# 1. GPU tests
timeout 200 ctest --test-dir build-gpu -R 'cuda|gpu' -j4 --timeout 150 --output-on-failure > "$L/ctest.log" 2>&1
say "ctest cuda: $(grep -E 'tests passed|tests failed' "$L/ctest.log" | tail -1)"
grep -E '\*\*\*(Failed|Exception|Timeout)|Skipped' "$L/ctest.log" | head -20 | tee -a "$L/summary.txt"
# 2. fixtures (torch, CPU) and the logits checks on CPU and CUDA
if timeout 170 python3 tools/make_fixtures.py --out "$L/fx" --only fp8,moe > "$L/fixtures.log" 2>&1; then
  tar -C "$L" -cf "$OUT/fixtures-fp8-moe.tar" fx
  cp -r "$L/fx/." tests/fixtures/models/
  say "fixtures ok: $(ls "$L/fx" | tr '\n' ' ')"
  timeout 100 ctest --test-dir build-gpu -R 'integration.(logits_fp8|moe_logits)' --output-on-failure > "$L/ctest-fx.log" 2>&1
  say "logits cpu: $(grep -E 'tests passed|tests failed' "$L/ctest-fx.log" | tail -1)"
  LLMRT_LOGITS_BACKEND=cuda timeout 100 ctest --test-dir build-gpu -R 'integration.(logits_fp8|moe_logits)' --output-on-failure > "$L/ctest-fx-cuda.log" 2>&1
  say "logits cuda: $(grep -E 'tests passed|tests failed' "$L/ctest-fx-cuda.log" | tail -1)"
  grep -hE '^ok:|FAIL' "$L/ctest-fx.log" "$L/ctest-fx-cuda.log" | cut -c1-200 | tee -a "$L/summary.txt"
else
  say "fixtures FAILED: $(tail -3 "$L/fixtures.log" | tr '\n' ' ' | cut -c1-200)"
fi
# 3. FP8 8B vs AWQ 8B
A8=/tmp/qwen3-8b-awq F8=/tmp/qwen3-8b-fp8 M30=/tmp/qwen3-30b-a3b-awq
timeout 90 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1; say "mkmodel awq 8b exit $?"
timeout 120 "$B" mkmodel --preset qwen3-8b --quant fp8 --seed 1 -q -o $F8 > "$L/mk-fp8.log" 2>&1; say "mkmodel fp8 8b exit $? $(du -sh $F8 | cut -f1)"
for m in awq fp8; do
  M=$([[ $m == awq ]] && echo $A8 || echo $F8)
  bench 8b-$m-itl128 60 --model $M -c conf/pinned.ini --set cache.kv_tokens=16384 --input-len 128 --output-len 256 --rounds 1 --requests 3 --warmup 1
  bench 8b-$m-itl2048 60 --model $M -c conf/pinned.ini --set cache.kv_tokens=16384 --input-len 2048 --output-len 256 --rounds 1 --requests 2 --warmup 1
  bench 8b-$m-ttft2048 50 --model $M -c conf/pinned.ini --set cache.kv_tokens=16384 --input-len 2048 --output-len 8 --rounds 1 --requests 5 --warmup 2
  bench 8b-$m-load 110 --model $M -c conf/pinned.ini --set cache.kv_tokens=131072 --input-len 128 --output-len 256 --concurrency 1,8,32,64,128,256 --rounds 1 --requests 1 --warmup 1
done
# 4. MoE 30B-A3B AWQ
if (( $(left) > 150 )); then
  timeout 150 "$B" mkmodel --preset qwen3-30b-a3b --quant awq --group-size 128 --seed 1 -q -o $M30 > "$L/mk-moe.log" 2>&1; say "mkmodel moe 30b exit $? $(du -sh $M30 | cut -f1)"
  bench moe30b-itl128 60 --model $M30 -c conf/pinned.ini --set cache.kv_tokens=16384 --input-len 128 --output-len 256 --rounds 1 --requests 3 --warmup 1
  bench moe30b-load 90 --model $M30 -c conf/pinned.ini --set cache.kv_tokens=65536 --input-len 128 --output-len 128 --concurrency 8,32,64 --rounds 1 --requests 1 --warmup 1
  bench moe30b-ttft2048 50 --model $M30 -c conf/pinned.ini --set cache.kv_tokens=16384 --input-len 2048 --output-len 8 --rounds 1 --requests 5 --warmup 2
  bench moe30b-itl2048 50 --model $M30 -c conf/pinned.ini --set cache.kv_tokens=16384 --input-len 2048 --output-len 256 --rounds 1 --requests 2 --warmup 1
fi
say "done"
cat "$L/summary.txt"
