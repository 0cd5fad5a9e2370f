#!/usr/bin/env bash
# GPU call "A" of 2026-12-04: decode attention's query heads per block (tune att_gb) and the
# AWQ grouped GEMV with its first weights in flight while x is staged, against the previous
# quant-awq.so (.device/oldq.tgz) in one run; the Qwen3-30B-A3B step traced with and without
# PDL (where a kernel's time is its own, and where it is the chain's).
set -uo pipefail
DEADLINE=${DEADLINE:-540}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
A8=/tmp/qwen3-8b-awq M30=/tmp/qwen3-30b-a3b-awq
timeout 100 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1 &
timeout 170 "$B" mkmodel --preset qwen3-30b-a3b --quant awq --group-size 128 --seed 1 -q -o $M30 > "$L/mk-moe.log" 2>&1 &
mkdir -p /tmp/oldq && tar -C /tmp/oldq -xzf .device/oldq.tgz
tests 'backend-cuda\.ops|batch_invariance_cuda|quant-awq\.grouped_cuda|model-qwen3-moe\.cuda' 150
LLMRT_BACKEND_CUDA_TUNE=att_gb=1 tests 'batch_invariance_cuda|backend-cuda\.ops' 60
wait
say "models: $(du -sh $A8 $M30 | tr '\n' ' ')"
P=conf/pinned.ini
for g in 4 2 1; do { cat $P; printf '[backend.cuda]\ntune = att_gb=%s\n' $g; } > "$L/gb$g.ini"; done
{ cat $P; printf '[runtime]\nplugin_dir = /tmp/oldq\n'; } > "$L/oldq.ini"
bench moe30b-itl128-a 130 --model $M30 -c $P -c "$L/gb4.ini" -c "$L/gb2.ini" -c "$L/gb1.ini" -c "$L/oldq.ini" \
  --allow-diff --input-len 128 --output-len 128 --rounds 2 --requests 3 --warmup 1
trace moe-a $M30
trace moe-nopdl-a $M30 --set backend.cuda.pdl=off
bench 8b-awq-gb-itl-a 90 --model $A8 -c $P -c "$L/gb2.ini" -c "$L/gb1.ini" \
  --allow-diff --input-len 128 --output-len 128 --rounds 2 --requests 3 --warmup 1
bench 8b-awq-gb-itl2048-a 60 --model $A8 -c $P -c "$L/gb2.ini" -c "$L/gb1.ini" \
  --allow-diff --input-len 2048 --output-len 64 --rounds 2 --requests 2 --warmup 1
bench moe30b-itl2048-a 60 --model $M30 -c $P -c "$L/gb4.ini" -c "$L/gb2.ini" \
  --allow-diff --input-len 2048 --output-len 64 --rounds 2 --requests 2 --warmup 1
say "end"
