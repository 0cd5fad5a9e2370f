#!/usr/bin/env bash
# GPU call "D" of 2026-12-04: the session's final build — the CUDA tests (every test named
# cuda or moe), then decode under load and TTFT at 2048 for Qwen3-30B-A3B and the 8B AWQ
# model against the session's starting plugins (.device/oldb.tgz: backend-cuda.so and
# model-qwen3_moe.so of c6d48c3, whose defaults are the start's) in one run each.
set -uo pipefail
DEADLINE=${DEADLINE:-560}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
A8=/tmp/qwen3-8b-awq M30=/tmp/qwen3-30b-a3b-awq
timeout 100 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1 &
timeout 170 "$B" mkmodel --preset qwen3-30b-a3b --quant awq --group-size 128 --seed 1 -q -o $M30 > "$L/mk-moe.log" 2>&1 &
mkdir -p /tmp/oldb && tar -C /tmp/oldb -xzf .device/oldb.tgz
tests 'cuda|moe' 200
wait
P=conf/pinned.ini
{ cat $P; printf '[runtime]\nplugin_dir = /tmp/oldb\n'; } > "$L/oldb.ini"
bench moe30b-load-d 120 --model $M30 -c $P -c "$L/oldb.ini" --allow-diff --set cache.kv_tokens=65536 \
  --input-len 128 --output-len 128 --concurrency 8,32,64 --rounds 1 --requests 1 --warmup 1
bench moe30b-ttft2048-d 60 --model $M30 -c $P --input-len 2048 --output-len 8 --rounds 2 --requests 3 --warmup 1
bench 8b-awq-load-d 90 --model $A8 -c $P -c "$L/oldb.ini" --allow-diff --set cache.kv_tokens=65536 \
  --input-len 128 --output-len 128 --concurrency 1,32 --rounds 1 --requests 1 --warmup 1
say "end"
