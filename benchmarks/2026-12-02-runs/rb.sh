#!/usr/bin/env bash
# GPU call "B" (2026-12-02): GPU tests of the merged tree (offload, uva gather, TP skip, MoE
# logits on CUDA), the PCIe floor, memory paths A/B at batch 1 and 32, CPU weight offload
# 25/50/100% per plugin, att_inv A/B at 32 and 256, MoE 30B-A3B JSON, serve to 256 clients.
# Everything comes back in $OUT/results.tgz.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"; L=$(mktemp -d); t0=$(date +%s)
DEADLINE=${DEADLINE:-545}
left() { echo $(( DEADLINE - ($(date +%s) - t0) )); }
say() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$L/summary.txt"; tar -C "$L" -czf "$OUT/results.tgz" . 2>/dev/null; }
[[ -f .device/build-gpu.tgz && ! -d .device/build-gpu ]] && tar -C .device -xzf .device/build-gpu.tgz
[[ -e build-gpu ]] || ln -s .device/build-gpu build-gpu
src=$(cat build-gpu/SOURCE_DIR)
[[ "$src" != "$PWD" && ! -e "$src" ]] && { mkdir -p "$(dirname "$src")"; ln -s "$PWD" "$src"; }
export LD_LIBRARY_PATH=$PWD/build-gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export LLMRT_BENCH_COMMIT=$(cat .device/COMMIT) LLMRT_TOKENIZER_DIR=$PWD/.device/tokenizer
B=$PWD/build-gpu/bin/llmrt; d=2026-12-02; mkdir -p "$L/json" "$L/ini"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
bench() { # name timeout args...
  local name=$1 to=$2; shift 2
  (( $(left) < to )) && { say "SKIP $name (time)"; return; }
  timeout "$to" "$B" bench "$@" --json "$L/json/$d-$name.json" > "$L/$name.txt" 2>&1
  say "$name exit $?"; grep -E ' (faster|slower) than|no meaningful|inconclusive|offload|bus' "$L/$name.txt" | grep -v '^ *;' | head -14 | tee -a "$L/summary.txt"
}
# 1. GPU tests
timeout 230 ctest --test-dir build-gpu -R 'cuda|gpu|offload|tensor_parallel' -j4 --timeout 150 --output-on-failure > "$L/ctest.log" 2>&1
say "ctest: $(grep -E 'tests passed|tests failed' "$L/ctest.log" | tail -1)"
grep -E '\*\*\*(Failed|Exception|Timeout)|Skipped|Not Run' "$L/ctest.log" | head -20 | tee -a "$L/summary.txt"
LLMRT_LOGITS_BACKEND=cuda timeout 100 ctest --test-dir build-gpu -R 'integration.(logits_fp8|moe_logits|logits)$' --output-on-failure > "$L/ctest-fx-cuda.log" 2>&1
say "logits cuda: $(grep -E 'tests passed|tests failed' "$L/ctest-fx-cuda.log" | tail -1)"
grep -hE 'FAIL|error' "$L/ctest-fx-cuda.log" | cut -c1-300 | head -8 | tee -a "$L/summary.txt"
# 2. the bus: H2D GB/s from pageable and pinned memory (torch), and doctor
python3 - > "$L/h2d.txt" 2>&1 <<'PY'
import torch, time
for pin in (False, True):
    for mb in (64, 1024):
        x = torch.empty(mb << 20, dtype=torch.uint8, pin_memory=pin); y = torch.empty_like(x, device="cuda")
        best = 1e9
        for _ in range(5):
            torch.cuda.synchronize(); t = time.perf_counter(); y.copy_(x, non_blocking=pin); torch.cuda.synchronize()
            best = min(best, time.perf_counter() - t)
        print(f"h2d {'pinned' if pin else 'pageable'} {mb} MiB: {mb / 1024 / best:.1f} GiB/s")
PY
say "h2d: $(tr '\n' ';' < "$L/h2d.txt")"
timeout 60 "$B" doctor > "$L/doctor.txt" 2>&1; say "doctor exit $?"
A8=/tmp/qwen3-8b-awq
timeout 90 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1; say "mkmodel awq 8b exit $?"
# 3. memory paths, nothing offloaded: batch 1 and 32
bench 8b-awq-mem-b1 90 --model $A8 -c conf/pageable.ini -c conf/pinned.ini -c conf/uva.ini --input-len 128 --output-len 128 --rounds 2 --requests 3 --warmup 1 --order random
bench 8b-awq-mem-b32 90 --model $A8 -c conf/pageable.ini -c conf/pinned.ini -c conf/uva.ini --input-len 128 --output-len 128 --concurrency 32 --rounds 2 --requests 1 --warmup 1 --order random
# 4. CPU weight offload: 0.9 GB ~ 25% of the layers, 1.8 ~ 50%, 1000 = all
for g in 0.9 1.8 1000; do
  for p in pinned uva pageable; do
    printf '\n[memory]\nplugin = %s\nfallback = pageable\ncpu_offload_gb = %s\n[cache]\nkv_tokens = 16384\n[scheduler]\nasync_scheduling = true\ncuda_graphs = true\n' $p $g > "$L/ini/off-$p-$g.ini"
  done
  bench 8b-awq-offload-$g 100 --model $A8 -c conf/pinned.ini -c "$L/ini/off-pinned-$g.ini" -c "$L/ini/off-uva-$g.ini" -c "$L/ini/off-pageable-$g.ini" --input-len 128 --output-len 32 --rounds 1 --requests 2 --warmup 1
  grep -E 'offload|ITL p50|bus' "$L/8b-awq-offload-$g.txt" | head -8 | tee -a "$L/summary.txt"
done
# 5. decode attention's batch-invariant plan (default) vs att_inv=0 at 32 and 256
printf '\n[backend.cuda]\ntune = att_inv=0\n' | cat conf/pinned.ini - > "$L/ini/pinned-attinv0.ini"
bench 8b-awq-attinv 90 --model $A8 -c conf/pinned.ini -c "$L/ini/pinned-attinv0.ini" --allow-diff --set cache.kv_tokens=131072 --input-len 128 --output-len 128 --concurrency 32,256 --rounds 1 --requests 1 --warmup 1
grep -E 'tok/s' "$L/8b-awq-attinv.txt" | head -6 | tee -a "$L/summary.txt"
# 6. serve under load to 256 clients
if (( $(left) > 110 )); then
  TOKENIZER=.device/tokenizer CONCURRENCY=1,32,128,256 MAX_TOKENS=128 OUT=$L/serve timeout 120 tools/serve-bench.sh "$B" $A8 conf/pinned.ini > "$L/serve.txt" 2>&1
  say "serve exit $?"; tail -8 "$L/serve.txt" | tee -a "$L/summary.txt"
fi
# 7. MoE 30B-A3B AWQ (its JSON did not come back last time)
if (( $(left) > 100 )); then
  M30=/tmp/qwen3-30b-a3b-awq
  timeout 60 "$B" mkmodel --preset qwen3-30b-a3b --quant awq --group-size 128 --seed 1 -q -o $M30 > "$L/mk-moe.log" 2>&1; say "mkmodel moe exit $?"
  bench moe30b-itl128 40 --model $M30 -c conf/pinned.ini --input-len 128 --output-len 256 --rounds 1 --requests 3 --warmup 1
  bench moe30b-load 60 --model $M30 -c conf/pinned.ini --set cache.kv_tokens=65536 --input-len 128 --output-len 128 --concurrency 1,8,32,64 --rounds 1 --requests 1 --warmup 1
fi
say "done"
