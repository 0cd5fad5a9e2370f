#!/usr/bin/env bash
# GPU call "C" (2026-12-02): offload and doctor GPU tests, logits on CUDA at the CUDA
# tolerances, doctor's H2D lines, memory-path verdicts with enough requests, serve at 64/256.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"; L=$(mktemp -d); t0=$(date +%s)
say() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$L/summary.txt"; tar -C "$L" -czf "$OUT/results.tgz" . 2>/dev/null; }
[[ -f .device/build-gpu.tgz && ! -d .device/build-gpu ]] && tar -C .device -xzf .device/build-gpu.tgz
[[ -e build-gpu ]] || ln -s .device/build-gpu build-gpu
src=$(cat build-gpu/SOURCE_DIR)
[[ "$src" != "$PWD" && ! -e "$src" ]] && { mkdir -p "$(dirname "$src")"; ln -s "$PWD" "$src"; }
export LD_LIBRARY_PATH=$PWD/build-gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export LLMRT_BENCH_COMMIT=$(cat .device/COMMIT) LLMRT_TOKENIZER_DIR=$PWD/.device/tokenizer
B=$PWD/build-gpu/bin/llmrt; d=2026-12-02; mkdir -p "$L/json"
A8=/tmp/qwen3-8b-awq
timeout 60 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1 &
timeout 150 ctest --test-dir build-gpu -R 'offload|doctor' -j3 --timeout 140 --output-on-failure > "$L/ctest.log" 2>&1
say "ctest offload|doctor: $(grep -E 'tests passed|tests failed' "$L/ctest.log" | tail -1)"
grep -E '^ok|FAIL|\*\*\*' "$L/ctest.log" | cut -c1-250 | head -20 | tee -a "$L/summary.txt"
LLMRT_LOGITS_BACKEND=cuda LLMRT_LOGITS_TOL=2e-2 timeout 100 ctest --test-dir build-gpu -R 'integration.(logits|moe_logits)$' -V > "$L/ctest-fx-cuda.log" 2>&1
say "logits cuda (tol 2e-2): $(grep -E 'tests passed|tests failed' "$L/ctest-fx-cuda.log" | tail -1)"
grep -hE ': (ok|FAIL)' "$L/ctest-fx-cuda.log" | cut -c1-260 | head -16 | tee -a "$L/summary.txt"
wait
timeout 60 "$B" doctor --offload-gb 1.8 --model $A8 > "$L/doctor.txt" 2>&1; say "doctor exit $?"
grep -E 'bus|offload' "$L/doctor.txt" | cut -c1-250 | tee -a "$L/summary.txt"
"$B" bench --model $A8 -c conf/pageable.ini -c conf/pinned.ini -c conf/uva.ini --input-len 128 --output-len 128 --rounds 2 --requests 5 --warmup 1 --json "$L/json/$d-8b-awq-mem-b1.json" > "$L/mem-b1.txt" 2>&1
say "mem b1 exit $?"; grep -E ' than |meaningful|inconclusive' "$L/mem-b1.txt" | tee -a "$L/summary.txt"
"$B" bench --model $A8 -c conf/pageable.ini -c conf/pinned.ini -c conf/uva.ini --input-len 128 --output-len 128 --concurrency 32 --rounds 2 --requests 4 --warmup 1 --json "$L/json/$d-8b-awq-mem-b32.json" > "$L/mem-b32.txt" 2>&1
say "mem b32 exit $?"; grep -E ' than |meaningful|inconclusive' "$L/mem-b32.txt" | tee -a "$L/summary.txt"
SETS="cache.kv_tokens=65536" TOKENIZER=.device/tokenizer CONCURRENCY=64,256 MAX_TOKENS=128 OUT=$L/serve timeout 100 tools/serve-bench.sh "$B" $A8 conf/pinned.ini > "$L/serve.txt" 2>&1
say "serve exit $?"; tail -4 "$L/serve.txt" | tee -a "$L/summary.txt"
say done
