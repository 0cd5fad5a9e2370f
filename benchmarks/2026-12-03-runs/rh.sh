#!/usr/bin/env bash
# GPU call "H" of 2026-12-03 (second session): call G measured quant-awq's one-wave decode
# grid no faster than a block per row block (2.043 vs 2.043 ms) and its traced step slower
# in down_proj than November's; the one-wave code is reverted on main. This call runs main's
# quant-awq against the one-wave plugin of 4ceebd0 (.device/awq-pers.tgz) in one run — did
# the restructured kernel cost anything? — and traces main's AWQ decode step.
set -uo pipefail
DEADLINE=${DEADLINE:-240}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
A8=/tmp/qwen3-8b-awq
timeout 90 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1
mkdir -p /tmp/awqpers && cp build-gpu/lib/llmrt/plugins/*.so /tmp/awqpers/ && tar -C /tmp/awqpers -xzf .device/awq-pers.tgz
{ cat conf/pinned.ini; printf '[runtime]\nplugin_dir = /tmp/awqpers\n'; } > "$L/pinned-onewave.ini"
bench 8b-awq-onewave-${TAG:-h} 90 --model $A8 -c conf/pinned.ini -c "$L/pinned-onewave.ini" --allow-diff \
  --input-len 128 --output-len 64 --rounds 3 --requests 4 --warmup 1
LLMRT_CUPTI_TRACE=$L/a8.csv LD_PRELOAD=$PWD/build-gpu/lib/libllmrt-cupti-trace.so timeout 40 "$B" bench --model $A8 -c conf/pinned.ini \
  --input-len 128 --output-len 32 --rounds 1 --requests 1 --warmup 1 > "$L/a8-bench.txt" 2>&1
python3 plugins/backend-cuda/bench/step-timeline.py "$L/a8.csv" 8 > "$L/a8-timeline.txt" 2>&1
say "awq decode step: $(head -24 "$L/a8-timeline.txt" | tr -s ' ' | tr '\n' ';' | cut -c1-1400)"
gzip -f "$L/a8.csv"
say "end"
