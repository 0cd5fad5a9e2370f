#!/usr/bin/env bash
# GPU call "I" of 2026-12-03 (second session): call H showed the item-indexed restructuring
# cost the AWQ GEMV 3.3% (its per-item divisions and pointer arithmetic); FP8's GEMV now walks
# its items with a cursor instead (fp8_gv_next: no division). Main's quant-fp8 against call
# F's (.device/fp8-f.tgz) in one run, plus main's `tune = sx=0,pers=0`; the FP8 tests first.
set -uo pipefail
DEADLINE=${DEADLINE:-240}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
F8=/tmp/qwen3-8b-fp8
[[ -f $F8/config.json ]] || timeout 120 "$B" mkmodel --preset qwen3-8b --quant fp8 --seed 1 -q -o $F8 > "$L/mk-fp8.log" 2>&1 &
tests 'quant-fp8\.cuda' 100
wait
mkdir -p /tmp/fp8f && cp build-gpu/lib/llmrt/plugins/*.so /tmp/fp8f/ && tar -C /tmp/fp8f -xzf .device/fp8-f.tgz
{ cat conf/pinned.ini; printf '[runtime]\nplugin_dir = /tmp/fp8f\n'; } > "$L/pinned-callf.ini"
{ cat conf/pinned.ini; printf '[quant.fp8]\ntune = sx=0,pers=0\n'; } > "$L/pinned-old.ini"
bench 8b-fp8-cursor-${TAG:-i} 90 --model $F8 -c conf/pinned.ini -c "$L/pinned-callf.ini" -c "$L/pinned-old.ini" --allow-diff \
  --input-len 128 --output-len 64 --rounds 3 --requests 4 --warmup 1
say "end"
