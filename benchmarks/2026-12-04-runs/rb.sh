#!/usr/bin/env bash
# GPU call "B" of 2026-12-04: Qwen3-30B-A3B decode with routing unsorted at batch 1
# (route_rows), attention capped at 4 query heads per block and the router's GEMV with a whole
# row in flight, against call A's plugins (.device/oldb.tgz: backend-cuda.so and
# model-qwen3_moe.so of c6d48c3) in one run, each part alone too; the step traced without PDL.
set -uo pipefail
DEADLINE=${DEADLINE:-540}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
M30=/tmp/qwen3-30b-a3b-awq
timeout 170 "$B" mkmodel --preset qwen3-30b-a3b --quant awq --group-size 128 --seed 1 -q -o $M30 > "$L/mk-moe.log" 2>&1 &
mkdir -p /tmp/oldb /tmp/oldmoe /tmp/oldbe && tar -C /tmp/oldb -xzf .device/oldb.tgz
cp /tmp/oldb/model-qwen3_moe.so /tmp/oldmoe/ && cp /tmp/oldb/backend-cuda.so /tmp/oldbe/
tests 'model-qwen3-moe|integration\.moe|batch_invariance_cuda|generate_cuda|quant-awq\.grouped' 160
wait
P=conf/pinned.ini
for o in oldb oldmoe oldbe; do { cat $P; printf '[runtime]\nplugin_dir = /tmp/%s\n' $o; } > "$L/$o.ini"; done
{ cat $P; printf '[backend.cuda]\ntune = att_gb=8\n'; } > "$L/gb8.ini"
bench moe30b-itl128-b 170 --model $M30 -c $P -c "$L/oldb.ini" -c "$L/gb8.ini" -c "$L/oldmoe.ini" -c "$L/oldbe.ini" \
  --allow-diff --input-len 128 --output-len 128 --rounds 3 --requests 3 --warmup 1
trace moe-nopdl-b $M30 --set backend.cuda.pdl=off
trace moe-b $M30
bench moe30b-itl2048-b 70 --model $M30 -c $P -c "$L/oldb.ini" \
  --allow-diff --input-len 2048 --output-len 64 --rounds 3 --requests 3 --warmup 1
say "end"
