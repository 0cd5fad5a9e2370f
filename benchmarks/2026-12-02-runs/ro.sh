#!/usr/bin/env bash
# GPU call "O" (written 2026-12-02, fourth session, which had no device time left: for the
# next session): prefill attention with its keys in fixed splits (att_pf_split=512), walked
# by split blocks + a merge where the tiles are few (a chat turn after a cached prefix) and by
# one block folding in registers elsewhere. Tests (the CUDA ops incl. the split schedules'
# bit equality, prefix caching, AWQ, invariance), the cached-prefix TTFT of the default (one
# split), splits, and splits never in split blocks (att_pf_fill=-1) in one run, the
# 2048-token TTFT likewise, the cached-prefix and 2048-token prefill steps traced; then the FP8
# model's batch-1 decode step traced (where issue 21's ITL goes, per kernel).
set -uo pipefail
# (TAG names its JSON files' suffix, default o; the prelude is the caller's folder's)
DEADLINE=${DEADLINE:-420}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
A8=/tmp/qwen3-8b-awq F8=/tmp/qwen3-8b-fp8
timeout 90 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1 &
tests 'backend-cuda\.ops|prefix_cache_cuda|quant-awq\.cuda|batch_invariance_cuda|generate_cuda' 150
wait
timeout 120 "$B" mkmodel --preset qwen3-8b --quant fp8 --seed 1 -q -o $F8 > "$L/mk-fp8.log" 2>&1 &
{ cat conf/pinned.ini; printf '[backend.cuda]\ntune = att_pf_split=512\n'; } > "$L/pinned-split.ini"
{ cat conf/pinned.ini; printf '[backend.cuda]\ntune = att_pf_split=512,att_pf_fill=-1\n'; } > "$L/pinned-oneblock.ini"
bench 8b-awq-prefix2048-${TAG:-o} 60 --model $A8 -c conf/pinned.ini -c "$L/pinned-split.ini" -c "$L/pinned-oneblock.ini" --allow-diff \
  --input-len 2112 --prefix-len 2048 --output-len 16 --rounds 1 --requests 5 --warmup 1
bench 8b-awq-ttft2048-${TAG:-o} 60 --model $A8 -c conf/pinned.ini -c "$L/pinned-split.ini" --allow-diff \
  --set cache.prefix_caching=off --input-len 2048 --output-len 2 --rounds 1 --requests 4 --warmup 1
LLMRT_CUPTI_TRACE=$L/pf.csv LD_PRELOAD=$PWD/build-gpu/lib/libllmrt-cupti-trace.so timeout 40 "$B" bench --model $A8 -c "$L/pinned-split.ini" \
  --input-len 2112 --prefix-len 2048 --output-len 1 --rounds 1 --requests 4 --warmup 1 > "$L/pf-bench.txt" 2>&1
python3 plugins/backend-cuda/bench/step-timeline.py "$L/pf.csv" 3 > "$L/pf-timeline.txt" 2>&1
say "prefix prefill step: $(head -24 "$L/pf-timeline.txt" | tr -s ' ' | tr '\n' ';' | cut -c1-1200)"
gzip -f "$L/pf.csv"
LLMRT_CUPTI_TRACE=$L/p2k.csv LD_PRELOAD=$PWD/build-gpu/lib/libllmrt-cupti-trace.so timeout 40 "$B" bench --model $A8 -c conf/pinned.ini \
  --set cache.prefix_caching=off --input-len 2048 --output-len 1 --rounds 1 --requests 3 --warmup 1 > "$L/p2k-bench.txt" 2>&1
python3 plugins/backend-cuda/bench/step-timeline.py "$L/p2k.csv" 2 > "$L/p2k-timeline.txt" 2>&1
say "2048-token prefill step: $(head -24 "$L/p2k-timeline.txt" | tr -s ' ' | tr '\n' ';' | cut -c1-1200)"
gzip -f "$L/p2k.csv"
wait
say "fp8 mkmodel: $(tail -1 "$L/mk-fp8.log")"
LLMRT_CUPTI_TRACE=$L/f8.csv LD_PRELOAD=$PWD/build-gpu/lib/libllmrt-cupti-trace.so timeout 40 "$B" bench --model $F8 -c conf/pinned.ini \
  --input-len 128 --output-len 32 --rounds 1 --requests 1 --warmup 1 > "$L/f8-bench.txt" 2>&1
python3 plugins/backend-cuda/bench/step-timeline.py "$L/f8.csv" 8 > "$L/f8-timeline.txt" 2>&1
say "fp8 decode step: $(head -24 "$L/f8-timeline.txt" | tr -s ' ' | tr '\n' ';' | cut -c1-1400)"
gzip -f "$L/f8.csv"
for kw in 4 16; do { cat conf/pinned.ini; printf '[quant.fp8]\ntune = kw=%s\n' $kw; } > "$L/pinned-kw$kw.ini"; done
bench 8b-fp8-kw-${TAG:-o} 70 --model $F8 -c conf/pinned.ini -c "$L/pinned-kw4.ini" -c "$L/pinned-kw16.ini" --allow-diff \
  --input-len 128 --output-len 64 --rounds 1 --requests 3 --warmup 1
say "end"
