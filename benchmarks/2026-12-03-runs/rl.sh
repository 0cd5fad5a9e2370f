#!/usr/bin/env bash
# GPU call "L" of 2026-12-03 (third session): call K's profile put the batch-invariant decode
# attention's extra cost in its per-split merges (28.6M instructions at b=32 ctx 384 against
# 15.8M for the batch-capped plan). Both decode kernels now merge a split's row groups through
# one helper (att_merge_split: four outputs per thread, the weights and l read once per four)
# — the same sums in the same order. The CUDA tests (batch invariance bit for bit, every
# variant against the CPU), decode attention rows, batch-1 ITL (the batch-1 kernel's merge
# changed too) and load at 32/64/256 against call K's backend-cuda.so (.device/bc-k.tgz;
# with att_bpf=0 it is the kernel before this session), one run each.
set -uo pipefail
DEADLINE=${DEADLINE:-500}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $LLMRT_BENCH_COMMIT"
A8=/tmp/qwen3-8b-awq
timeout 90 "$B" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -q -o $A8 > "$L/mk-awq.log" 2>&1 &
tests 'backend-cuda\.ops|batch_invariance_cuda|generate_cuda' 200
CB=build-gpu/bin/llmrt-cuda-bench
LLMRT_BENCH_ATT_TUNES="-;att_bpf=0" timeout 100 $CB --batch --filter "attention decode" --reps 10 > "$L/att.txt" 2>&1
say "attention rows exit $?"
grep -E '^attention decode b=' "$L/att.txt" | tr -s ' ' | cut -d' ' -f1-9 | tee -a "$L/summary.txt"
wait
mkdir -p /tmp/bck && cp build-gpu/lib/llmrt/plugins/*.so /tmp/bck/ && tar -C /tmp/bck -xzf .device/bc-k.tgz
{ cat conf/pinned.ini; printf '[runtime]\nplugin_dir = /tmp/bck\n'; } > "$L/pinned-callk.ini"
{ cat conf/pinned.ini; printf '[runtime]\nplugin_dir = /tmp/bck\n[backend.cuda]\ntune = att_bpf=0\n'; } > "$L/pinned-before.ini"
bench 8b-awq-merge-itl128-${TAG:-l} 80 --model $A8 -c conf/pinned.ini -c "$L/pinned-callk.ini" --allow-diff \
  --input-len 128 --output-len 64 --rounds 3 --requests 4 --warmup 1
bench 8b-awq-merge-load-${TAG:-l} 150 --model $A8 -c conf/pinned.ini -c "$L/pinned-before.ini" --allow-diff \
  --set cache.kv_tokens=131072 --concurrency 32,64,256 --input-len 128 --output-len 256 --rounds 1 --requests 1 --warmup 1
bench 8b-awq-merge-itl2048-${TAG:-l} 60 --model $A8 -c conf/pinned.ini -c "$L/pinned-callk.ini" --allow-diff \
  --input-len 2048 --output-len 64 --rounds 2 --requests 3 --warmup 1
cp "$L/att.txt" "$OUT/" 2>/dev/null
say "end"
