#!/usr/bin/env bash
# runtime.tensor_parallel = 2 on the CUDA backend (skipped, exit 77, without the cuda plugin or
# two CUDA devices): NCCL communicators for GPUs 0 and 1, the same greedy ids as one GPU for
# every committed fixture whose heads split in two (f32 KV cache, so the comparison is about
# the sharding), and doctor's line on how the GPUs are linked.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
[[ -f "$LLMRT_PLUGIN_DIR/backend-cuda.so" ]] || { echo "skip: backend-cuda.so not built"; exit 77; }
command -v nvidia-smi > /dev/null || { echo "skip: no nvidia-smi"; exit 77; }
[[ $(nvidia-smi -L 2>/dev/null | grep -c GPU) -ge 2 ]] || { echo "skip: fewer than 2 CUDA devices"; exit 77; }
export NCCL_NVLS_ENABLE=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
common=(--set runtime.backend=cuda --set "runtime.plugin_dir=$LLMRT_PLUGIN_DIR" --set cache.dtype=f32
        --set cache.kv_tokens=4096 --set scheduler.max_num_seqs=4)
: > "$tmp/prompts"
for i in $(seq 0 5); do
  n=$(( (i * 37) % 50 + 1 ))
  seq -s, $((i * 5 + 1)) $((i * 5 + n)) | awk -F, '{for(i=1;i<=NF;i++) $i=($i*7919)%509; print}' OFS=, >> "$tmp/prompts"
done
gen() {
  "$LLMRT" generate "${common[@]}" --set runtime.tensor_parallel=$2 --model "$1" \
    --prompts-file "$tmp/prompts" --ids --max-tokens 24 --ignore-eos --print-ids 2> "$tmp/err"
}
"$LLMRT" mkmodel -q --preset tiny -o "$tmp/dense" || fail mkmodel
"$LLMRT" mkmodel -q --preset qwen3-moe-tiny -o "$tmp/moe" || fail mkmodel
for m in "$tmp/dense" "$tmp/moe" "$LLMRT_SOURCE_DIR"/tests/fixtures/models/*/; do
  m=${m%/}
  gen "$m" 1 > "$tmp/tp1" || { cat "$tmp/err"; fail "$m: one GPU"; }
  gen "$m" 2 > "$tmp/tp2" || { cat "$tmp/err"; fail "$m: tensor_parallel = 2"; }
  grep -q "tensor parallel rank 1 of 2" "$tmp/err" || { cat "$tmp/err"; fail "$m: no rank 1 of 2"; }
  cmp -s "$tmp/tp1" "$tmp/tp2" || { diff "$tmp/tp1" "$tmp/tp2" | head; fail "$m: TP 2 ids differ from 1 GPU"; }
  echo "ok: $(basename "$m"): tensor_parallel = 2 on two GPUs gives one GPU's greedy ids"
done
"$LLMRT" doctor "${common[@]}" --no-probe > "$tmp/doc" 2>&1
grep -q "GPU 0 <-> 1: " "$tmp/doc" || { cat "$tmp/doc"; fail "doctor does not say how GPUs 0 and 1 are linked"; }
echo "ok: doctor: $(grep -o 'GPU 0 <-> 1: [^;]*' "$tmp/doc")"
