#!/usr/bin/env bash
# GPU call "J" of 2026-12-03 (third session): the batch decode attention kernel with its K/V
# rows loaded one step ahead (default) against att_bpf=0 (the kernel before) and under
# att_fill (blocks per SM walking the batch-invariant split plan), its tests; Nsight Compute
# on the batch attention kernel at b=32 and on the AWQ batch kernel's gate/up at 32 rows
# (where the next change should go); load at 32 and 64, default against att_bpf=0 and
# att_fill=16, in one run.
set -uo pipefail
DEADLINE=${DEADLINE:-500}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
A8=/tmp/qwen3-8b-awq
timeout 90 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1 &
CB=build-gpu/bin/llmrt-cuda-bench
tests 'backend-cuda\.ops|batch_invariance_cuda' 150
LLMRT_BENCH_ATT_TUNES="att_bpf=0;att_fill=8;att_fill=16;att_bpf=0,att_fill=16" timeout 90 $CB --batch --filter "attention decode" --reps 10 > "$L/att.txt" 2>&1
say "attention rows exit $?: $(grep -E '^attention decode b=' "$L/att.txt" | tr -s ' ' | cut -d' ' -f1-8 | tr '\n' ';')"
NS="--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section InstructionStats"
timeout 70 ncu --clock-control none -k regex:attn_decode_batch --launch-skip 40 --launch-count 1 $NS \
  $CB --batch --filter "attention decode b=32" --reps 3 > "$L/ncu-att32.txt" 2>&1
say "ncu att b=32 exit $?"
LLMRT_BENCH_ROWS=32 LLMRT_BENCH_AWQ_TUNES=- timeout 90 ncu --clock-control none -k regex:awq_mma_kernel --launch-skip 30 --launch-count 1 $NS \
  --section SourceCounters $CB --batch --filter "awq gate_up" --reps 3 > "$L/ncu-mma-gu32.txt" 2>&1
say "ncu mma gate_up 32 exit $?"
wait
{ cat conf/pinned.ini; printf '[backend.cuda]\ntune = att_bpf=0\n'; } > "$L/pinned-nobpf.ini"
{ cat conf/pinned.ini; printf '[backend.cuda]\ntune = att_fill=16\n'; } > "$L/pinned-fill16.ini"
bench 8b-awq-attbpf-load-${TAG:-j} 150 --model $A8 -c conf/pinned.ini -c "$L/pinned-nobpf.ini" -c "$L/pinned-fill16.ini" --allow-diff \
  --set cache.kv_tokens=131072 --concurrency 32,64 --input-len 128 --output-len 256 --rounds 1 --requests 1 --warmup 1
cp "$L"/ncu-*.txt "$L/att.txt" "$OUT/" 2>/dev/null
say "end"
