#!/usr/bin/env bash
# GPU call "M" (2026-12-02, third session): the AWQ batch kernel's launch shapes timed at
# load (with the double-buffered x stage) against the built-in shapes and one x stage
# (`mma_xdb=1,mma_tune=0`: the previous kernel's paths) in one run; the Qwen3-MoE combine as
# a thread per output against the previous plugin (.device/old/model-qwen3_moe.so.gz, from
# b1495ac) in one run. Tests first; then kernel rows, serving throughput 1..256, the cached
# prefix TTFT, the batch-32 step traced, the MoE batch-1 ITL and its traced step.
set -uo pipefail
DEADLINE=${DEADLINE:-470}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
A8=/tmp/qwen3-8b-awq M30=/tmp/qwen3-30b-a3b-awq
timeout 90 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1 &
timeout 150 "$B" mkmodel --preset qwen3-30b-a3b --quant awq --group-size 128 --seed 1 -q -o $M30 > "$L/mk-moe.log" 2>&1 &
OLD=/tmp/old-moe; mkdir -p $OLD; gunzip -c .device/old/model-qwen3_moe.so.gz > $OLD/model-qwen3_moe.so
tests 'quant-awq\.cuda|batch_invariance_cuda|quant-awq\.grouped_cuda|model-qwen3-moe\.cuda' 170
LLMRT_BENCH_ROWS=16,32,48,64,96,128,256 LLMRT_BENCH_AWQ_TUNES="-;mma_xdb=1,mma_tune=0" \
  timeout 60 build-gpu/bin/llmrt-cuda-bench --batch --filter awq --reps 10 > "$L/kb.txt" 2>&1
say "kernel bench exit $?"
grep -E '^awq (qkv fused|o_proj|gate_up fused|down_proj) n=' "$L/kb.txt" | awk '{t=$0; sub(/ [0-9]+x[0-9]+ g128.*/,"",t); split($0,a," g128 "); split(a[2],b," "); print t, b[1]}' | tee -a "$L/summary.txt"
wait
{ cat conf/pinned.ini; printf '[quant.awq]\ntune = mma_xdb=1,mma_tune=0\n'; } > "$L/pinned-before.ini"
bench 8b-awq-load-m 130 --model $A8 -c conf/pinned.ini -c "$L/pinned-before.ini" --allow-diff --set cache.kv_tokens=131072 \
  --input-len 128 --output-len 256 --concurrency 1,8,32,64,128,256 --rounds 1 --requests 1 --warmup 1
bench 8b-awq-prefix2048-m 50 --model $A8 -c conf/pinned.ini -c "$L/pinned-before.ini" --allow-diff \
  --input-len 2112 --prefix-len 2048 --output-len 16 --rounds 1 --requests 5 --warmup 1
{ cat conf/pinned.ini; printf '[runtime]\nplugin_dir = %s\n' $OLD; } > "$L/pinned-oldmoe.ini"
bench moe30b-itl128-m 80 --model $M30 -c conf/pinned.ini -c "$L/pinned-oldmoe.ini" --allow-diff \
  --input-len 128 --output-len 128 --rounds 2 --requests 5 --warmup 1
(( $(left) > 60 )) && { OUT=$L/tl timeout 50 plugins/backend-cuda/bench/gpu-sweep.sh timeline32 > "$L/timeline32.txt" 2>&1
  say "timeline32: $(grep -A14 'step timeline' "$L/timeline32.txt" | head -15 | tr -s ' ' | tr '\n' ';' | cut -c1-900)"; }
(( $(left) > 50 )) && { LLMRT_8B_DIR=$M30 OUT=$L/moe timeout 45 plugins/backend-cuda/bench/gpu-sweep.sh timeline > "$L/moe-timeline.txt" 2>&1
  say "moe timeline: $(grep -A16 'step timeline' "$L/moe-timeline.txt" | head -17 | tr -s ' ' | tr '\n' ';' | cut -c1-900)"; }
say "end"
