#!/usr/bin/env bash
# GPU call "C" of 2026-12-04: Qwen3-30B-A3B decode with the router and routing in one launch
# (a thread-block cluster) against call B's model-qwen3_moe.so (.device/oldc.tgz: the router
# gemm, then route_rows) in one run; the decode attention split knobs (att_cmin, att_gb) at
# the new defaults' side; the CUDA tests of what changed.
set -uo pipefail
DEADLINE=${DEADLINE:-540}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
M30=/tmp/qwen3-30b-a3b-awq
timeout 170 "$B" mkmodel --preset qwen3-30b-a3b --quant awq --group-size 128 --seed 1 -q -o $M30 > "$L/mk-moe.log" 2>&1 &
mkdir -p /tmp/oldc && tar -C /tmp/oldc -xzf .device/oldc.tgz
tests 'model-qwen3-moe|integration\.moe|batch_invariance_cuda|generate_cuda|backend-cuda\.ops' 170
wait
P=conf/pinned.ini
{ cat $P; printf '[runtime]\nplugin_dir = /tmp/oldc\n'; } > "$L/oldc.ini"
for t in att_cmin=32 att_cmin=64 att_gb=2; do { cat $P; printf '[backend.cuda]\ntune = %s\n' $t; } > "$L/${t/=/}.ini"; done
bench moe30b-itl128-c 170 --model $M30 -c $P -c "$L/oldc.ini" -c "$L/att_cmin32.ini" -c "$L/att_cmin64.ini" -c "$L/att_gb2.ini" \
  --allow-diff --input-len 128 --output-len 128 --rounds 3 --requests 3 --warmup 1
trace moe-nopdl-c $M30 --set backend.cuda.pdl=off
trace moe-c $M30
bench moe30b-itl2048-c 70 --model $M30 -c $P -c "$L/oldc.ini" \
  --allow-diff --input-len 2048 --output-len 64 --rounds 3 --requests 3 --warmup 1
say "end"
