#!/usr/bin/env bash
# GPU call "A" of 2026-12-06 — prepared, never run: none of the session's twelve requests for a
# machine started one. What it runs, all by [quant.awq] tune knobs against the defaults in one
# bench process each: the quant plugin's and batch invariance's CUDA tests first (they cover
# both knobs below), then
#  - (on commit 4c564c4 only, whose quant-awq has the knob) the batch kernel's split-K partials
#    added by each tile's last block (mma_ticket=1) instead of a second kernel, decode under
#    load at 1/32/64 — where the knob is unknown it is ignored and both configs are the same;
#  - the batch kernel from 4 or 2 rows (mma_min; its bits are the GEMV's) and the GEMV staging
#    x for every row count (sx_kb=224) against the defaults at concurrency 4 and 8;
#  - a 2048-token prefill traced (prefill-kinds.py) and the batch-32 step traced.
set -uo pipefail
DEADLINE=${DEADLINE:-540}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
A8=/tmp/qwen3-8b-awq
timeout 100 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1 &
tests 'quant-awq|batch_invariance_cuda|generate_cuda' 150
wait
P=conf/pinned.ini
knob() { { cat $P; printf '[quant.awq]\ntune = %s\n' "$1"; } > "$L/$2.ini"; }
knob mma_ticket=1 ticket; knob mma_min=4 mmamin4; knob mma_min=2 mmamin2; knob sx_kb=224 sxkb
bench 8b-awq-ticket-load-a 100 --model $A8 -c $P -c "$L/ticket.ini" --allow-diff --set cache.kv_tokens=131072 \
  --input-len 128 --output-len 256 --concurrency 1,32,64 --rounds 2 --requests 1 --warmup 1
bench 8b-awq-mmamin-load-a 100 --model $A8 -c $P -c "$L/mmamin4.ini" -c "$L/mmamin2.ini" -c "$L/sxkb.ini" --allow-diff \
  --set cache.kv_tokens=131072 --input-len 128 --output-len 256 --concurrency 4,8 --rounds 2 --requests 1 --warmup 1
ptrace p2048-a $A8 2048
(( $(left) > 60 )) && { OUT=$L/tl timeout 50 plugins/backend-cuda/bench/gpu-sweep.sh timeline32 > "$L/timeline32.txt" 2>&1
  grep -A20 'step timeline' "$L/timeline32.txt" > "$OUT/step32-timeline-a.txt"; say "timeline32: $(head -3 "$OUT/step32-timeline-a.txt" | tr -s ' ' | tr '\n' ';')"; }
say "end"
