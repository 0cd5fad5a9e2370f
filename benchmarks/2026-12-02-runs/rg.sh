#!/usr/bin/env bash
# GPU call "G" (2026-12-02, second session): Nsight Compute on the AWQ batch kernel at 32 rows,
# the weight-ring kernel and the one it replaced, gate_up (SwiGLU) and down: stall reasons.
set -uo pipefail
source "$(dirname "$0")/prelude.sh"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
mkdir -p /tmp/oldplug && cp build-gpu/lib/llmrt/plugins/*.so /tmp/oldplug/ && gunzip -c .device/old/quant-awq.so.gz > /tmp/oldplug/quant-awq.so
for v in new old; do
  for f in "gate_up fused" "down_proj"; do
    tag=$v-${f%% *}
    env LLMRT_BENCH_ROWS=${ROWS:-32} $([[ $v == old ]] && echo LLMRT_PLUGIN_DIR=/tmp/oldplug) timeout 90 "$NCU" --clock-control none \
      -k regex:awq_mma_kernel --launch-skip 2 --launch-count 1 --set full \
      --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
      build-gpu/bin/llmrt-cuda-bench --batch --filter "$f" --reps 3 > "$L/ncu-$tag.txt" 2>&1
    say "ncu $tag exit $?: $(grep -E '^ +(Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Issue Slots Busy|Warp Cycles Per Issued)' "$L/ncu-$tag.txt" | tr -s ' ' | tr '\n' ';' | cut -c1-700)"
  done
done
say "end"
