#!/usr/bin/env bash
# Qwen3-MoE against transformers: the qwen3-moe-* fixtures of tests/fixtures/models (written by
# `tools/make_fixtures.py --only moe` where torch and transformers exist; bf16 and AWQ, 4 to 16
# experts, top-k 1 to 4, a dense layer, sharded, on-disk per-expert layout):
#   1. `llmrt logits` within the tolerance of the float32 references, and greedy ids equal the
#      references' while the top-2 margin is clear (logits_check.py);
#   2. batched == alone: each fixture's prompts, twice over in one --prompts-file, give the ids
#      each prompt gives alone, under each memory plugin (pageable, pinned, uva: identical ids).
# Skips (77) while the fixtures are absent.
#
# Tolerance (relative error per row): 1e-4 on the CPU backend, as for dense Qwen3
# (test_logits.sh): both sides are float32 on identical weight values, and the fixtures keep
# every routing decision clear of a tie by >= 1e-3 in router-logit units (MOE_MIN_MARGIN), far
# above f32 rounding, so every row is compared. On another backend (LLMRT_LOGITS_BACKEND=cuda)
# set LLMRT_LOGITS_TOL (~2e-2 for bf16/f16 activations) and LLMRT_LOGITS_ROUTER_BAND (default
# 0.1 off the CPU): rows from the first routing decision closer to a tie than that are not
# compared, since a reduced-precision router may legitimately pick the other expert there.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
fixtures="$LLMRT_SOURCE_DIR/tests/fixtures/models"
dirs=()
for d in "$fixtures"/qwen3-moe-*/; do
  [[ -f "$d/reference.json" ]] && dirs+=("${d%/}")
done
if [[ ${#dirs[@]} -eq 0 ]]; then
  echo "SKIP: no Qwen3-MoE reference fixtures (tests/fixtures/models/qwen3-moe-*) yet; generate"
  echo "      them where torch and transformers exist:"
  echo "      python3 tools/make_fixtures.py --out tests/fixtures/models --only moe"
  exit 77
fi
backend=${LLMRT_LOGITS_BACKEND:-cpu}
tol=${LLMRT_LOGITS_TOL:-1e-4}
band_default=0; [[ "$backend" != cpu ]] && band_default=0.1
band=${LLMRT_LOGITS_ROUTER_BAND:-$band_default}
python3 "$LLMRT_SOURCE_DIR/tests/integration/logits_check.py" --llmrt "$LLMRT" \
  --backend "$backend" --tol "$tol" --router-band "$band" "${dirs[@]}" || exit 1

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
common=(--set "runtime.backend=$backend" --set "runtime.plugin_dir=$LLMRT_PLUGIN_DIR")
for dir in "${dirs[@]}"; do
  name=$(basename "$dir")
  : > "$tmp/prompts"
  for rep in 1 2; do
    for k in 0 1 2; do
      jq -r --argjson k $k '.prompts[$k].prompt | map(tostring) | join(",")' "$dir/reference.json" >> "$tmp/prompts"
    done
  done
  for k in 0 1 2; do
    "$LLMRT" generate "${common[@]}" --model "$dir" --prompt-ids "$(sed -n "$((k + 1))p" "$tmp/prompts")" \
      --max-tokens 16 --ignore-eos --print-ids > "$tmp/alone_$k" 2> "$tmp/err" || { cat "$tmp/err"; fail "$name prompt $k alone"; }
  done
  for mem in pageable pinned uva; do
    "$LLMRT" generate "${common[@]}" --set memory.plugin=$mem --model "$dir" --prompts-file "$tmp/prompts" \
      --ids --max-tokens 16 --ignore-eos --print-ids > "$tmp/batched_$mem" 2> "$tmp/err" \
      || { cat "$tmp/err"; fail "$name batched ($mem)"; }
    for i in 0 1 2 3 4 5; do
      [[ "$(sed -n "$((i + 1))p" "$tmp/batched_$mem")" == "$(cat "$tmp/alone_$((i % 3))")" ]] \
        || fail "$name ($mem) line $((i + 1)): batched [$(sed -n "$((i + 1))p" "$tmp/batched_$mem")] != alone [$(cat "$tmp/alone_$((i % 3))")]"
    done
  done
  cmp -s "$tmp/batched_pageable" "$tmp/batched_pinned" && cmp -s "$tmp/batched_pageable" "$tmp/batched_uva" \
    || fail "$name: pageable, pinned and uva gave different ids"
  echo "ok: $name: batched == alone, identical ids on pageable / pinned / uva"
done
echo "ok: moe_logits"
