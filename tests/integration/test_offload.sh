#!/usr/bin/env bash
# memory.cpu_offload_gb on the CPU backend: device memory is host memory, so offload has no
# meaning there — said once (a warning), not an error, and the tokens are those of no offload
# under every memory plugin. The key is range-checked (negative, not a number: refused naming
# it). The real offload is tested on the GPU (test_offload_cuda.sh).
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
dir="$LLMRT_SOURCE_DIR/tests/fixtures/models/qwen3-f32-sharded"
common=(--set runtime.backend=cpu --set "runtime.plugin_dir=$LLMRT_PLUGIN_DIR" --model "$dir"
        --ids --max-tokens 12 --print-ids)
prompts="$tmp/prompts"
jq -r '.prompts[] | .prompt | map(tostring) | join(",")' "$dir/reference.json" > "$prompts"

"$LLMRT" generate "${common[@]}" --prompts-file "$prompts" > "$tmp/base" 2> "$tmp/err0" ||
  { cat "$tmp/err0"; fail "generate without offload"; }
grep -q "cpu_offload_gb" "$tmp/err0" && fail "a warning without offload"
for mem in pageable pinned uva; do
  "$LLMRT" generate "${common[@]}" --set memory.plugin=$mem --set memory.cpu_offload_gb=2.5 \
    --prompts-file "$prompts" > "$tmp/out" 2> "$tmp/err" || { cat "$tmp/err"; fail "$mem: exit"; }
  cmp -s "$tmp/base" "$tmp/out" || fail "$mem: tokens differ with memory.cpu_offload_gb on cpu"
  n=$(grep -c "memory.cpu_offload_gb = 2.5 has no meaning on the cpu backend" "$tmp/err")
  [[ "$n" -eq 1 ]] || { cat "$tmp/err"; fail "$mem: the warning $n times (once expected)"; }
  grep -q '| offload ' "$tmp/err" && { cat "$tmp/err"; fail "$mem: the summary names an offload that did not happen"; }
done
echo "ok: cpu backend warns once, same tokens"

for bad in -1 abc 1e9; do
  "$LLMRT" generate "${common[@]}" --set memory.cpu_offload_gb=$bad --prompts-file "$prompts" \
    > /dev/null 2> "$tmp/err" && fail "memory.cpu_offload_gb=$bad accepted"
  grep -q "cpu_offload_gb" "$tmp/err" || { cat "$tmp/err"; fail "$bad: the message does not name the key"; }
done
echo "ok: memory.cpu_offload_gb range-checked"
