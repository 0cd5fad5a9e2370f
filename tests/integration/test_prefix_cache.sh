#!/usr/bin/env bash
# Automatic prefix caching through `llmrt generate` on the CPU backend with the real
# model-qwen3 plugin: greedy ids with cache.prefix_caching=on equal those with it off (and
# transformers' on the fixtures) when later prompts repeat earlier ones, share some of
# their blocks, are a whole number of blocks, continue an earlier prompt and its reply (a
# next turn), or share nothing — one at a time (the most hits), several at once with
# chunked prefill, and in a KV cache too small for them (evictions and preemption). The
# summary's hit count says the cache was used; with it off nothing is counted.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
FIX="$LLMRT_SOURCE_DIR/tests/fixtures/models"
# backend-cpu's exact path: the same bits whatever rows share a call (a prompt prefilled in
# part, its cached blocks skipped, is other calls), and transformers' greedy ids on the AWQ
# fixtures (the fast paths' int8 activations may take another near-tie)
common=(--set runtime.backend=cpu --set "runtime.plugin_dir=$LLMRT_PLUGIN_DIR" --set cache.block_size=4
        --set backend.cpu.simd=exact)

expected() {
  jq -r --argjson k "$2" '.prompts[$k] as $p | ($p.prompt|length) as $n
    | [range(0; $p.greedy|length) | select($p.top2_margin[$n-1+.] < 0.01)] as $low
    | ($low[0] // ($p.greedy|length)) as $cut | $p.greedy[0:$cut] | map(tostring) | join(" ")' \
    "$1/reference.json"
}
prompt_ids() { jq -r --argjson k "$2" '.prompts[$k].prompt | map(tostring) | join(",")' "$1/reference.json"; }
starts_with() { [[ "$1 " == "$2 "* ]]; }
# hits FILE: the "prefix cache hits N of M tokens" count of a generate summary
hits() { sed -n 's/.*prefix cache hits \([0-9]*\) of .*/\1/p' "$1"; }

# 1. every fixture: its three prompts, repeated, one at a time
order=(2 1 2 0 1 2)
for dir in "$FIX"/*/; do
  dir=${dir%/}; name=$(basename "$dir")
  : > "$tmp/prompts"
  for k in "${order[@]}"; do prompt_ids "$dir" $k >> "$tmp/prompts"; done
  ref_sets=() # the semantics the reference was made with (an FP8 fixture's W8A16)
  while IFS= read -r kv; do [[ -n "$kv" ]] && ref_sets+=(--set "$kv"); done \
    < <(jq -r '(.llmrt_set // [])[]' "$dir/reference.json")
  for pc in on off; do
    "$LLMRT" generate "${common[@]}" "${ref_sets[@]}" --set cache.prefix_caching=$pc --set scheduler.max_num_seqs=1 \
      --model "$dir" --prompts-file "$tmp/prompts" --ids --max-tokens 24 --print-ids \
      > "$tmp/out.$pc" 2> "$tmp/err.$pc" || { cat "$tmp/err.$pc"; fail "$name prefix_caching=$pc: exit"; }
  done
  cmp -s "$tmp/out.on" "$tmp/out.off" || { diff "$tmp/out.on" "$tmp/out.off"; fail "$name: on != off"; }
  for i in "${!order[@]}"; do
    got=$(sed -n "$((i + 1))p" "$tmp/out.on")
    starts_with "$got" "$(expected "$dir" "${order[$i]}")" || fail "$name line $((i + 1)): [$got]"
  done
  # repeats of the 17- and 11-token prompts find 16, 8 and 16 tokens (whole blocks before the last)
  h=$(hits "$tmp/err.on")
  [[ "$h" == 40 ]] || { cat "$tmp/err.on"; fail "$name: prefix cache hits '$h', expected 40"; }
  grep -q "prefix cache hits" "$tmp/err.off" && fail "$name: a summary with caching off counts hits"
done
echo "ok: repeated prompts on every fixture: ids equal with caching on and off, and transformers'"

# 2. mkmodel tiny: long shared prefixes
"$LLMRT" mkmodel --preset tiny -o "$tmp/tiny" -q || fail "mkmodel --preset tiny"
ids() { seq "$1" "$2" | awk -v m="$3" '{ printf "%s%d", (NR > 1 ? "," : ""), ($1 * m) % 509 }'; }
sys=$(ids 1 100 7919)                    # a 100-token "system prompt": exactly 25 blocks
{
  echo "$sys,$(ids 1 30 31)"             # sys + a question
  echo "$sys,$(ids 1 30 31)"             # the same again
  echo "$sys,$(ids 1 12 37)"             # sys + another question
  echo "$sys"                            # sys alone: 25 blocks, the last one computed
  echo "$(ids 1 70 7919)"                # the first 70 tokens of sys (17 blocks + 2)
  echo "$(ids 1 80 101)"                 # nothing shared
  echo "$sys,$(ids 1 12 37),$(ids 1 9 41)" # a longer version of line 3
} > "$tmp/p1"
# a next turn: line 1, its reply and a new question
"$LLMRT" generate "${common[@]}" --set cache.prefix_caching=off --model "$tmp/tiny" --prompt-ids "$(sed -n 1p "$tmp/p1")" \
  --max-tokens 24 --ignore-eos --print-ids > "$tmp/reply" 2>/dev/null || fail "tiny: first reply"
cat "$tmp/p1" > "$tmp/p"
echo "$(sed -n 1p "$tmp/p1"),$(tr ' ' ',' < "$tmp/reply"),$(ids 1 10 43)" >> "$tmp/p"
n_lines=$(wc -l < "$tmp/p")
run_tiny() { # TAG SETS...
  local tag=$1; shift
  "$LLMRT" generate "${common[@]}" "$@" --model "$tmp/tiny" --prompts-file "$tmp/p" --ids --max-tokens 24 \
    --ignore-eos --print-ids > "$tmp/t.$tag" 2> "$tmp/e.$tag" || { cat "$tmp/e.$tag"; fail "tiny $tag: exit"; }
  [[ $(wc -l < "$tmp/t.$tag") -eq $n_lines ]] || fail "tiny $tag: $(wc -l < "$tmp/t.$tag") lines, expected $n_lines"
}
run_tiny off --set cache.prefix_caching=off --set scheduler.max_num_seqs=1
[[ "$(sed -n 1p "$tmp/t.off")" == "$(cat "$tmp/reply")" ]] || fail "tiny: line 1 differs from its reply alone"
run_tiny seq --set cache.prefix_caching=on --set scheduler.max_num_seqs=1
run_tiny batch --set cache.prefix_caching=on --set scheduler.max_num_seqs=4 --set scheduler.max_num_batched_tokens=64
run_tiny small --set cache.prefix_caching=on --set scheduler.max_num_seqs=4 --set cache.kv_tokens=256
run_tiny off-small --set cache.prefix_caching=off --set scheduler.max_num_seqs=4 --set cache.kv_tokens=256
for tag in seq batch small off-small; do
  cmp -s "$tmp/t.off" "$tmp/t.$tag" || { diff "$tmp/t.off" "$tmp/t.$tag"; fail "tiny $tag != caching off, one at a time"; }
done
# one at a time: lines 2, 3, 4, 5, 7 and 8 find 128, 100, 96, 68, 112 and 152 tokens (whole
# blocks shared with what an earlier line computed, the block of their last token excluded;
# line 8 past line 1's prompt into the 23 reply tokens line 1 computed)
h=$(hits "$tmp/e.seq")
[[ "$h" == 656 ]] || { cat "$tmp/e.seq"; fail "tiny one at a time: hits '$h', expected 656"; }
h=$(hits "$tmp/e.batch")
[[ -n "$h" && $h -gt 0 ]] || { cat "$tmp/e.batch"; fail "tiny batched: no prefix-cache hits"; }
grep -q "preempted" "$tmp/e.small" || { cat "$tmp/e.small"; fail "a 256-token cache for 4 x ~180 tokens must preempt"; }
ev=$(sed -n 's/.*tokens, \([0-9]*\) evictions.*/\1/p' "$tmp/e.small")
[[ -n "$ev" && $ev -gt 0 ]] || { cat "$tmp/e.small"; fail "tiny small cache: no evictions ('$ev')"; }
echo "ok: shared prefixes on mkmodel tiny: ids equal with caching off, one at a time, batched with chunked prefill, and with evictions and preemption"
