#!/usr/bin/env bash
# GPU calls "D" and "E" of 2026-12-03: quant-fp8's GEMV with one count of K-splitting warps
# on every linear — D: 4 (call A's table read wrong: 3.488 ms was `tune kw=16`, kw=4 5.643),
# E: 16 — against the per-linear choice of the old plugin (.device/fp8-old.tgz: quant-fp8.so
# of a25343d) in one run: the FP8 tests, batch 1 at ctx 128, batch 8 and 32 in load mode.
# (E's JSON files are named -e: NAME_TAG=e.)
set -uo pipefail
DEADLINE=${DEADLINE:-300}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
F8=/tmp/qwen3-8b-fp8
timeout 120 "$B" mkmodel --preset qwen3-8b --quant fp8 --seed 1 -q -o $F8 > "$L/mk-fp8.log" 2>&1 &
tests 'quant-fp8\.cuda' 100
wait
mkdir -p /tmp/fp8old && cp build-gpu/lib/llmrt/plugins/*.so /tmp/fp8old/ && tar -C /tmp/fp8old -xzf .device/fp8-old.tgz
{ cat conf/pinned.ini; printf '[runtime]\nplugin_dir = /tmp/fp8old\n'; } > "$L/pinned-oldkw.ini"
bench 8b-fp8-kw-${NAME_TAG:-d} 80 --model $F8 -c conf/pinned.ini -c "$L/pinned-oldkw.ini" --allow-diff \
  --input-len 128 --output-len 64 --rounds 3 --requests 4 --warmup 1
bench 8b-fp8-kw-load-${NAME_TAG:-d} 90 --model $F8 -c conf/pinned.ini -c "$L/pinned-oldkw.ini" --allow-diff \
  --set cache.kv_tokens=65536 --concurrency 8,32 --input-len 128 --output-len 128 --rounds 1 --requests 1 --warmup 1
say "end"
