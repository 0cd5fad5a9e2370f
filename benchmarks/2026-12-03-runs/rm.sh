#!/usr/bin/env bash
# GPU call "M" of 2026-12-03 (third session): the batch decode attention kernel at 128
# registers (4 blocks per SM, the host's fill) for a 16-bit cache at head_dim 64/128, and no
# more blocks than one wave holds (each walking more splits: call L's b=256 row ran 6 rounds
# of 3 blocks per SM). Tests, decode attention rows (default, att_bpf=0, att_inv=0), load at
# 32/64/256 against call L's backend-cuda.so (.device/bc-l.tgz) in one run, and the batch-32
# decode step traced per kernel.
set -uo pipefail
DEADLINE=${DEADLINE:-480}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
A8=/tmp/qwen3-8b-awq
timeout 90 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1 &
tests 'backend-cuda\.ops|batch_invariance_cuda' 150
CB=build-gpu/bin/llmrt-cuda-bench
LLMRT_BENCH_ATT_TUNES="att_bpf=0" timeout 100 $CB --batch --filter "attention decode" --reps 10 > "$L/att.txt" 2>&1
say "attention rows exit $?"
grep -E '^attention decode b=' "$L/att.txt" | tr -s ' ' | cut -d' ' -f1-9 | tee -a "$L/summary.txt"
wait
mkdir -p /tmp/bcl && cp build-gpu/lib/llmrt/plugins/*.so /tmp/bcl/ && tar -C /tmp/bcl -xzf .device/bc-l.tgz
{ cat conf/pinned.ini; printf '[runtime]\nplugin_dir = /tmp/bcl\n'; } > "$L/pinned-calll.ini"
bench 8b-awq-attwave-load-${TAG:-m} 150 --model $A8 -c conf/pinned.ini -c "$L/pinned-calll.ini" --allow-diff \
  --set cache.kv_tokens=131072 --concurrency 32,64,256 --input-len 128 --output-len 256 --rounds 1 --requests 1 --warmup 1
for i in $(seq 1 32); do seq -s, $((i * 100)) $((i * 100 + 127)); done > "$L/prompts32"
LLMRT_MEMORY=pinned LLMRT_CUPTI_TRACE="$L/step32.csv" LD_PRELOAD="$PWD/build-gpu/lib/libllmrt-cupti-trace.so" timeout 60 "$B" generate \
  --model $A8 --set cache.kv_tokens=16384 --prompts-file "$L/prompts32" --ids --max-tokens 64 --ignore-eos --print-ids > "$L/step32-gen.txt" 2>&1
python3 plugins/backend-cuda/bench/step-timeline.py "$L/step32.csv" 16 > "$L/step32-timeline.txt" 2>&1
say "batch-32 step: $(head -20 "$L/step32-timeline.txt" | tr -s ' ' | tr '\n' ';' | cut -c1-1500)"
rm -f "$L/step32.csv"
cp "$L/att.txt" "$L/step32-timeline.txt" "$OUT/" 2>/dev/null
say "end"
