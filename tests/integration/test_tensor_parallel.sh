#!/usr/bin/env bash
# runtime.tensor_parallel on the CPU backend (ranks as threads, the in-process all-reduce):
#   1. greedy ids with tensor_parallel = 2 and 4 equal tensor_parallel = 1 (up to a near-tie in
#      its logits, see near_ties) — batched prompts with chunked prefill — for dense bf16, AWQ, FP8 (a shape whose 128-blocks split) and
#      Qwen3-MoE (dense and AWQ) synthetic checkpoints, and the committed fixtures; with 4
#      ranks the tiny model's 2 KV heads are replicated
#   2. shapes that do not split are refused naming the tensor or the config key; the key is
#      range-checked
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
common=(--set runtime.backend=cpu --set "runtime.plugin_dir=$LLMRT_PLUGIN_DIR"
        --set scheduler.max_num_batched_tokens=32 --set scheduler.max_num_seqs=4)
mk() { "$LLMRT" mkmodel -q "$@" > "$tmp/mk.log" 2>&1 || { cat "$tmp/mk.log"; fail "mkmodel $*"; }; }
gen() { # model tp → ids on stdout
  "$LLMRT" generate "${common[@]}" --set runtime.tensor_parallel=$2 --model "$1" \
    --prompts-file "$tmp/prompts" --ids --max-tokens 20 --ignore-eos --print-ids 2> "$tmp/err"
}

# near_ties MODEL TP: where TP's ids differ from tensor_parallel = 1's, each prompt's first
# differing token must be a near-tie in tensor_parallel = 1's logits (the two tokens within
# 5e-3 of the row's largest |logit|): the ranks' partial sums are all-reduced, so the rounding
# differs from one rank's sum and a tie may fall either way; a sharding bug differs by far
# more. At most 2 of the 6 prompts may end at such a tie.
near_ties() {
  local m=$1 tp=$2 i=0 n_diff=0 p a b k ta tb prefix ids
  while IFS= read -r p; do
    i=$((i + 1))
    a=$(sed -n "${i}p" "$tmp/tp1"); b=$(sed -n "${i}p" "$tmp/tp$tp")
    [[ "$a" == "$b" ]] && continue
    n_diff=$((n_diff + 1))
    read -r k ta tb prefix < <(python3 -c '
import sys
a, b = sys.argv[1].split(), sys.argv[2].split()
k = next(j for j in range(min(len(a), len(b))) if a[j] != b[j])
print(k, a[k], b[k], ",".join(a[:k]) or "-")' "$a" "$b")
    ids=$p; [[ $prefix != - ]] && ids="$p,$prefix"
    "$LLMRT" logits "${common[@]}" --set runtime.tensor_parallel=1 --model "$m" --ids "$ids" \
      --out "$tmp/l.bin" < /dev/null 2> "$tmp/lerr" || { cat "$tmp/lerr"; return 1; }
    python3 - "$tmp/l.bin" "$(tr ',' ' ' <<< "$ids" | wc -w)" "$ta" "$tb" \
      "$(basename "$m") prompt $i token $k, tensor_parallel $tp" <<'PY' || return 1
import array, sys
logits = array.array("f")
logits.frombytes(open(sys.argv[1], "rb").read())
n_ids, ta, tb, what = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
vocab = len(logits) // n_ids
row = logits[-vocab:]  # the last position predicts token k
gap, scale = abs(row[ta] - row[tb]), max(1.0, max(abs(v) for v in row))
ok = gap <= 5e-3 * scale
print("  %s: %d vs %d, tensor_parallel = 1 logits %.6g vs %.6g: %s" % (
    what, ta, tb, row[ta], row[tb], "a near-tie" if ok else "NOT a near-tie"))
sys.exit(0 if ok else 1)
PY
  done < "$tmp/prompts"
  (( n_diff <= 2 )) || { echo "$n_diff of 6 prompts differ"; return 1; }
}

# ids below 251: inside every fixture's vocabulary (the FP8 ones have 256)
: > "$tmp/prompts"
for i in $(seq 0 5); do
  n=$(( (i * 37) % 50 + 1 ))
  seq -s, $((i * 5 + 1)) $((i * 5 + n)) | awk -F, '{for(i=1;i<=NF;i++) $i=($i*7919)%251; print}' OFS=, >> "$tmp/prompts"
done

# ---- 1. TP = 2, 4 == TP = 1 ----
mk --preset tiny -o "$tmp/dense"
mk --preset tiny --quant awq --group-size 32 -o "$tmp/awq"
# FP8 needs in/out features that split into 128-blocks per rank
python3 - "$tmp/dense/config.json" "$tmp/fp8.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(hidden_size=256, head_dim=128, num_attention_heads=4, num_key_value_heads=2,
         intermediate_size=512)
json.dump(c, open(sys.argv[2], "w"), indent=1)
PY
mk --config "$tmp/fp8.json" --quant fp8 -o "$tmp/fp8"
mk --preset qwen3-moe-tiny -o "$tmp/moe"
# AWQ experts need moe_intermediate_size / ranks in whole groups of 32
python3 - "$tmp/moe/config.json" "$tmp/moe_awq.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(moe_intermediate_size=128)
json.dump(c, open(sys.argv[2], "w"), indent=1)
PY
mk --config "$tmp/moe_awq.json" --quant awq --group-size 32 -o "$tmp/moe_awq"
models=("$tmp/dense" "$tmp/awq" "$tmp/fp8" "$tmp/moe" "$tmp/moe_awq")
for f in "$LLMRT_SOURCE_DIR"/tests/fixtures/models/*/; do
  [[ -f "$f/config.json" ]] && models+=("${f%/}")
done
for m in "${models[@]}"; do
  gen "$m" 1 > "$tmp/tp1" || { cat "$tmp/err"; fail "$m: tensor_parallel = 1"; }
  [[ $(wc -l < "$tmp/tp1") -eq 6 ]] || fail "$m: expected 6 replies"
  for tp in 2 4; do
    if ! gen "$m" $tp > "$tmp/tp$tp"; then
      # a fixture whose heads do not split into this many ranks is refused by name
      grep -q "does not divide\|does not split\|one must divide\|is not a multiple of group_size" "$tmp/err" || { cat "$tmp/err"; fail "$m: tensor_parallel = $tp"; }
      echo "  $(basename "$m"): tensor_parallel = $tp refused: $(sed -n "s/.*error: //p" "$tmp/err" | head -1)"
      [[ $m == "$tmp/"* ]] && fail "$m: a synthetic model must split into $tp ranks"
      continue
    fi
    grep -q "tensor parallel rank $((tp - 1)) of $tp" "$tmp/err" || { cat "$tmp/err"; fail "$m: no rank $((tp - 1)) of $tp"; }
    cmp -s "$tmp/tp1" "$tmp/tp$tp" || near_ties "$m" $tp ||
      { diff "$tmp/tp1" "$tmp/tp$tp" | head; fail "$m: tensor_parallel = $tp ids differ from 1 beyond a near-tie"; }
  done
  echo "ok: $(basename "$m"): tensor_parallel 2 and 4 (where they split) give tensor_parallel 1's greedy ids (up to near-ties)"
done
grep -q "2 KV heads\|(replicated)" <(gen "$tmp/dense" 4 >/dev/null; cat "$tmp/err") || fail "tp 4 does not say KV heads are replicated"

# ---- 2. refusals ----
# AWQ groups: o_proj's in_features 128 / 4 ranks = 32 is not whole groups of 64 (the quant
# plugin sees the rank's in_features and refuses naming the linear)
mk --preset tiny --quant awq --group-size 64 -o "$tmp/awq64"
gen "$tmp/awq64" 4 > /dev/null && fail "AWQ groups that do not split are refused"
grep -q "tensor-parallel rank 0 of 4: quant-awq: model.layers.0.self_attn.o_proj: in_features 32 is not a multiple of group_size 64" "$tmp/err" || { cat "$tmp/err"; fail "the AWQ refusal names the tensor"; }
# FP8 blocks: the tiny model's 64 features are one block of 128
mk --preset tiny --quant fp8 -o "$tmp/fp8small"
gen "$tmp/fp8small" 2 > /dev/null && fail "FP8 blocks that do not split are refused"
grep -q "q_proj.weight_scale_inv \[1, 1\] does not split into 2 parts" "$tmp/err" || { cat "$tmp/err"; fail "the FP8 refusal names the tensor"; }
# heads: tiny has 4 attention heads; 8 ranks cannot take them
gen "$tmp/dense" 8 > /dev/null && fail "8 ranks for 4 heads are refused"
grep -q "runtime.tensor_parallel = 8 does not divide config.json's num_attention_heads = 4" "$tmp/err" || { cat "$tmp/err"; fail "the heads refusal"; }
# the key's range
for bad in 0 9 two; do
  gen "$tmp/dense" $bad > /dev/null && fail "tensor_parallel = $bad is refused"
  grep -q "tensor_parallel" "$tmp/err" || { cat "$tmp/err"; fail "tensor_parallel = $bad: message names the key"; }
done
echo "ok: shapes that do not split are refused by name; the key is range-checked"
