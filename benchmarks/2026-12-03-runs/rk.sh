#!/usr/bin/env bash
# GPU call "K" of 2026-12-03 (third session): call J showed the batch-invariant decode
# attention at b=32 ctx 384 1.6x slower than the batch-capped plan (att_inv=0), and the
# one-step-ahead loads worth only 6% there (a loss at b=64: 150 registers, 3 blocks per SM).
# Where its time goes: Nsight Compute's stall reasons and hot instructions for the batch
# kernel (default, att_bpf=0) and for the batch-1 kernel under att_inv=0 at b=32; longer
# splits (att_cmin, the plan of both kernels, so invariance holds) at b=1 and in batches; the
# AWQ batch kernel at 32 rows (rule shapes, mma_tune=0, so no load-time timing launches).
set -uo pipefail
DEADLINE=${DEADLINE:-300}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
CB=build-gpu/bin/llmrt-cuda-bench
LLMRT_BENCH_ATT_TUNES="-;att_cmin=64;att_cmin=128;att_bpf=0,att_cmin=64;att_bpf=0,att_cmin=128" timeout 60 $CB --batch --filter "attention decode" --reps 10 > "$L/att.txt" 2>&1
say "attention rows exit $?"
grep -E '^attention decode b=' "$L/att.txt" | tr -s ' ' | cut -d' ' -f1-9 | tee -a "$L/summary.txt"
NS="--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats --section InstructionStats --section SourceCounters --print-details all"
for v in "b=32" "b=32 [att_bpf=0]" "b=32 [att_inv=0]"; do
  f="$L/ncu-att-$(echo "$v" | tr -dc 'a-z0-9=_').txt"
  LLMRT_BENCH_ATT_TUNES="att_bpf=0" timeout 60 ncu --clock-control none -k regex:attn_decode --launch-skip 5 --launch-count 1 $NS \
    $CB --batch --filter "attention decode $v" --reps 2 > "$f" 2>&1
  say "ncu att $v exit $?"
done
LLMRT_BENCH_ROWS=32 LLMRT_BENCH_AWQ_TUNES="mma_tune=0" timeout 60 ncu --clock-control none -k regex:awq_mma_kernel --launch-skip 30 --launch-count 1 $NS \
  $CB --batch --filter "awq gate_up" --reps 3 > "$L/ncu-mma-gu32.txt" 2>&1
say "ncu mma gate_up 32 exit $?"
cp "$L"/ncu-*.txt "$L/att.txt" "$OUT/" 2>/dev/null
say "end"
