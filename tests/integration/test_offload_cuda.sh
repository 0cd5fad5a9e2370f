#!/usr/bin/env bash
# CPU weight offload on the CUDA backend (skipped, exit 77, without a device or the cuda
# plugin): for every fixture the model plugin offloads (dense qwen3, AWQ; FP8 ones must be
# refused by name), greedy ids are the
# same with nothing offloaded and with one layer, half the layers and every layer in host
# memory, under pinned (prefetch into staging slots, in the decode graph), uva (read in place)
# and pageable (synchronous copies, graphs off); async scheduling and graphs on. The summary
# names the offload and its bus traffic.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
[[ -f "$LLMRT_PLUGIN_DIR/backend-cuda.so" ]] || { echo "skip: backend-cuda.so not built"; exit 77; }
command -v nvidia-smi > /dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU || { echo "skip: no CUDA device"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
FIX="$LLMRT_SOURCE_DIR/tests/fixtures/models"
common=(--set runtime.backend=cuda --set "runtime.plugin_dir=$LLMRT_PLUGIN_DIR" --set cache.dtype=f32
        --set cache.kv_tokens=4096 --ids --max-tokens 24 --print-ids)
n_run=0
for dir in "$FIX"/*/; do
  dir=${dir%/}; name=$(basename "$dir")
  grep -q '"Qwen3ForCausalLM"' "$dir/config.json" || continue
  jq -r '.prompts[] | .prompt | map(tostring) | join(",")' "$dir/reference.json" > "$tmp/prompts"
  "$LLMRT" generate "${common[@]}" --model "$dir" --prompts-file "$tmp/prompts" > "$tmp/base" 2> "$tmp/err" ||
    { cat "$tmp/err"; fail "$name: no offload"; }
  # quant-fp8 has no linear_move: offload is refused by name, not ignored
  if [[ $(jq -r '.quantization_config.quant_method // ""' "$dir/config.json") == fp8 ]]; then
    "$LLMRT" generate "${common[@]}" --model "$dir" --set memory.cpu_offload_gb=1e-9 \
      --prompts-file "$tmp/prompts" > /dev/null 2> "$tmp/err" && fail "$name: fp8 offload ran"
    grep -q "memory.cpu_offload_gb: the fp8 quant plugin cannot move its weights into host memory" "$tmp/err" ||
      { cat "$tmp/err"; fail "$name: the fp8 refusal"; }
    echo "ok: $name: offload refused by name (quant-fp8 has no linear_move)"
    continue
  fi
  # 1e-9 GB: one layer; 1e5 GB (memory.cpu_offload_gb's most): all of them
  for mem in pinned uva pageable; do
    for gb in 1e-9 1e5; do
      tag="$name $mem cpu_offload_gb=$gb"
      "$LLMRT" generate "${common[@]}" --model "$dir" --set memory.plugin=$mem \
        --set memory.cpu_offload_gb=$gb --prompts-file "$tmp/prompts" > "$tmp/out" 2> "$tmp/err" ||
        { cat "$tmp/err"; fail "$tag: exit"; }
      grep -q "CPU weight offload: layers" "$tmp/err" || { cat "$tmp/err"; fail "$tag: no offload line"; }
      grep -Eq '\| offload [1-9][0-9]* layers \([a-z (,)]+\): [0-9.]+ MB per step over the bus, [0-9.]*[1-9][0-9.]* GB/s \|' "$tmp/err" ||
        { cat "$tmp/err"; fail "$tag: the summary has no offload bytes per step and GB/s"; }
      cmp -s "$tmp/base" "$tmp/out" || { diff "$tmp/base" "$tmp/out" | head; fail "$tag: ids differ"; }
      n_run=$((n_run + 1))
    done
  done
done
[[ $n_run -gt 0 ]] || fail "no qwen3 fixture"
echo "ok: greedy ids unchanged by CPU weight offload under pinned, uva and pageable ($n_run runs)"
