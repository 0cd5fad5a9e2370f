#!/usr/bin/env bash
# GPU call "A" of 2026-12-06: the AWQ batch kernel's split-K partials added by the last block of
# each tile (the ticket in the x stage's first word), against main's quant-awq.so before it
# (.device/oldq.tgz) in one run: the quant plugin's and batch invariance's CUDA tests first, then
# decode under load at 1/32/64, the batch kernel from 4 or 2 rows
# (tune mma_min; the same bits as the GEMV) and the GEMV staging x
# for every row count (tune sx_kb=224) against the defaults at concurrency 4 and 8, the batch-32 step traced, and a 2048-token prefill traced.
set -uo pipefail
DEADLINE=${DEADLINE:-420}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
A8=/tmp/qwen3-8b-awq
timeout 100 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1 &
mkdir -p /tmp/oldq && tar -C /tmp/oldq -xzf .device/oldq.tgz
tests 'quant-awq|batch_invariance_cuda|generate_cuda' 150
wait
P=conf/pinned.ini
{ cat $P; printf '[runtime]\nplugin_dir = /tmp/oldq\n'; } > "$L/oldq.ini"
bench 8b-awq-ticket-load-a 90 --model $A8 -c $P -c "$L/oldq.ini" --allow-diff --set cache.kv_tokens=131072 \
  --input-len 128 --output-len 256 --concurrency 1,32,64 --rounds 2 --requests 1 --warmup 1
for m in 2 4; do { cat $P; printf '[quant.awq]\ntune = mma_min=%s\n' $m; } > "$L/mmamin$m.ini"; done
{ cat $P; printf '[quant.awq]\ntune = sx_kb=224\n'; } > "$L/sxkb.ini"
bench 8b-awq-mmamin-load-a 100 --model $A8 -c $P -c "$L/mmamin4.ini" -c "$L/mmamin2.ini" -c "$L/sxkb.ini" --allow-diff \
  --set cache.kv_tokens=131072 --input-len 128 --output-len 256 --concurrency 4,8 --rounds 2 --requests 1 --warmup 1
ptrace p2048-a $A8 2048
(( $(left) > 60 )) && { OUT=$L/tl timeout 50 plugins/backend-cuda/bench/gpu-sweep.sh timeline32 > "$L/timeline32.txt" 2>&1
  grep -A20 'step timeline' "$L/timeline32.txt" > "$OUT/step32-timeline-a.txt"; say "timeline32: $(head -3 "$OUT/step32-timeline-a.txt" | tr -s ' ' | tr '\n' ';')"; }
say "end"
