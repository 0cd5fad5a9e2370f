#!/usr/bin/env bash
# GPU call "J" (2026-12-02, second session): the FP8 GEMV with its weights one 128-input block
# ahead in two register sets, against the build before it (.device/old/quant-fp8.so.gz, from
# commit 49e920d) in one bench run: its tests, the FP8 logits on CUDA, batch-1 ITL, 8 and 16 rows.
# Run twice: at 524ed27 (both register sets at every row count) and at the commit after it
# (the second set for decode only).
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"; L=$(mktemp -d); t0=$(date +%s)
DEADLINE=${DEADLINE:-300}
left() { echo $(( DEADLINE - ($(date +%s) - t0) )); }
say() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$L/summary.txt"; tar -C "$L" -czf "$OUT/logs.tgz" . 2>/dev/null; }
[[ -f .device/build-gpu.tgz && ! -d .device/build-gpu ]] && tar -C .device -xzf .device/build-gpu.tgz
if [[ -d .device/build-gpu ]]; then
  [[ -e build-gpu ]] || ln -s .device/build-gpu build-gpu
  src=$(cat build-gpu/SOURCE_DIR)
  [[ "$src" != "$PWD" && ! -e "$src" ]] && { mkdir -p "$(dirname "$src")"; ln -s "$PWD" "$src"; }
fi
export LD_LIBRARY_PATH=$PWD/build-gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export LLMRT_BENCH_COMMIT=$(cat .device/COMMIT)
B=$PWD/build-gpu/bin/llmrt
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
d=2026-12-02
bench() { # name timeout args...
  local name=$1 to=$2; shift 2
  (( $(left) < to )) && { say "SKIP $name (time)"; return 1; }
  timeout "$to" "$B" bench "$@" --json "$OUT/$d-$name.json" > "$L/$name.txt" 2>&1
  local rc=$?
  say "$name exit $rc:"; grep -E '^ +[0-9]+ \S+ +[0-9.]+ |TTFT p50|faster|slower|difference' "$L/$name.txt" | tr -s ' ' | cut -c1-160 | tee -a "$L/summary.txt"
  return $rc
}
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
