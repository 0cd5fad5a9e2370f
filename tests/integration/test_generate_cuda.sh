#!/usr/bin/env bash
# llmrt generate on the CUDA backend (skipped, exit 77, without a CUDA device or the cuda
# plugin): for every fixture, the three prompts batched twice come out identical under every
# combination of memory plugin (pageable, pinned, uva), async scheduling (on, off) and CUDA
# graphs (on, off) — the data path changes, the arithmetic does not — and equal transformers'
# greedy ids while the reference's top-2 margin is >= 0.05 (f32 KV cache here, to keep the
# comparison about the data path). Then a small cache forces preemption under graphs + async.
# A reference that names llmrt settings ("llmrt_set", e.g. an FP8 fixture's W8A16 semantics)
# gets them.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
[[ -f "$LLMRT_PLUGIN_DIR/backend-cuda.so" ]] || { echo "skip: backend-cuda.so not built"; exit 77; }
command -v nvidia-smi > /dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU || { echo "skip: no CUDA device"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
FIX="$LLMRT_SOURCE_DIR/tests/fixtures/models"
common=(--set runtime.backend=cuda --set "runtime.plugin_dir=$LLMRT_PLUGIN_DIR" --set cache.dtype=f32
        --set cache.kv_tokens=4096)
expected() {
  jq -r --argjson k "$2" '.prompts[$k] as $p | ($p.prompt|length) as $n
    | [range(0; $p.greedy|length) | select($p.top2_margin[$n-1+.] < 0.05)] as $low
    | ($low[0] // ($p.greedy|length)) as $cut | $p.greedy[0:$cut] | map(tostring) | join(" ")' \
    "$1/reference.json"
}
prompt_ids() { jq -r --argjson k "$2" '.prompts[$k].prompt | map(tostring) | join(",")' "$1/reference.json"; }
starts_with() { [[ -z "$2" || "$1 " == "$2 "* ]]; } # "": the reference is unsure from the first token

for dir in "$FIX"/*/; do
  dir=${dir%/}; name=$(basename "$dir")
  ref_sets=()
  while IFS= read -r kv; do [[ -n "$kv" ]] && ref_sets+=(--set "$kv"); done \
    < <(jq -r '(.llmrt_set // [])[]' "$dir/reference.json")
  : > "$tmp/prompts"
  for rep in 1 2; do for k in 0 1 2; do prompt_ids "$dir" $k >> "$tmp/prompts"; done; done
  first=""
  for mem in pageable pinned uva; do for async in true false; do for graphs in true false; do
    tag="$name $mem async=$async graphs=$graphs"
    "$LLMRT" generate "${common[@]}" "${ref_sets[@]}" --set memory.plugin=$mem --set scheduler.async_scheduling=$async \
      --set scheduler.cuda_graphs=$graphs --model "$dir" --prompts-file "$tmp/prompts" --ids \
      --max-tokens 24 --print-ids > "$tmp/out" 2> "$tmp/err" || { cat "$tmp/err"; fail "$tag: exit"; }
    grep -q "memory path" "$tmp/err" || { cat "$tmp/err"; fail "$tag: no summary"; }
    if [[ -z "$first" ]]; then
      first="$tag"; cp "$tmp/out" "$tmp/first"
      for i in 0 1 2 3 4 5; do
        got=$(sed -n "$((i + 1))p" "$tmp/out")
        starts_with "$got" "$(expected "$dir" $((i % 3)))" || fail "$tag line $((i + 1)): [$got] vs transformers [$(expected "$dir" $((i % 3)))]"
      done
    else
      cmp -s "$tmp/first" "$tmp/out" || { diff "$tmp/first" "$tmp/out"; fail "$tag differs from $first"; }
    fi
  done; done; done
  echo "ok: $name: identical under 12 data-path configurations, equal to transformers"
done

dir="$FIX/qwen3-f16-untied"
: > "$tmp/prompts"
for rep in 1 2 3; do for k in 0 1 2; do prompt_ids "$dir" $k >> "$tmp/prompts"; done; done
"$LLMRT" generate "${common[@]}" --set memory.plugin=pinned --set cache.kv_tokens=64 --set cache.block_size=4 \
  --model "$dir" --prompts-file "$tmp/prompts" --ids --max-tokens 24 --print-ids > "$tmp/out" 2> "$tmp/err" \
  || { cat "$tmp/err"; fail "small cache"; }
grep -q "preempted" "$tmp/err" || fail "a 64-token cache must preempt"
for i in $(seq 0 8); do
  got=$(sed -n "$((i + 1))p" "$tmp/out")
  starts_with "$got" "$(expected "$dir" $((i % 3)))" || fail "preemption line $((i + 1)): [$got]"
done
echo "ok: preemption on CUDA with graphs and async scheduling"
echo "ok: generate on cuda"
