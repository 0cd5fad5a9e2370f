#!/usr/bin/env bash
# llmrt generate on the transformers fixtures (tests/fixtures/models/*, CPU backend):
# greedy ids equal transformers' greedy ids, alone and batched with --prompts-file, under each
# memory plugin and with a KV cache too small for everyone (preemption); text prompts through
# a tokenizer; seeded sampling is reproducible; errors are clear and exit 1 (runtime) or 2
# (usage).
#
# A reference token is compared only while the reference's top-2 logit margin at that
# position is >= 0.01: below that, float rounding differences between implementations may
# legitimately pick the other token (the fixtures' margins are mostly far above).
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
FIX="$LLMRT_SOURCE_DIR/tests/fixtures/models"
[[ -d "$FIX" ]] || fail "no fixtures in $FIX"
common=(--set runtime.backend=cpu --set "runtime.plugin_dir=$LLMRT_PLUGIN_DIR")

# expected DIR K: reference greedy ids of prompt K, cut at the first low-margin position
expected() {
  jq -r --argjson k "$2" '.prompts[$k] as $p | ($p.prompt|length) as $n
    | [range(0; $p.greedy|length) | select($p.top2_margin[$n-1+.] < 0.01)] as $low
    | ($low[0] // ($p.greedy|length)) as $cut | $p.greedy[0:$cut] | map(tostring) | join(" ")' \
    "$1/reference.json"
}
prompt_ids() { jq -r --argjson k "$2" '.prompts[$k].prompt | map(tostring) | join(",")' "$1/reference.json"; }
# starts_with GOT EXPECTED
starts_with() { [[ "$1 " == "$2 "* ]]; }

# 1. every fixture, every prompt, alone
for dir in "$FIX"/*/; do
  dir=${dir%/}; name=$(basename "$dir")
  for k in 0 1 2; do
    exp=$(expected "$dir" $k)
    [[ -n "$exp" ]] || fail "$name prompt $k: empty reference"
    got=$("$LLMRT" generate "${common[@]}" --model "$dir" --prompt-ids "$(prompt_ids "$dir" $k)" \
          --max-tokens 24 --print-ids 2> "$tmp/err") || { cat "$tmp/err"; fail "$name prompt $k: exit $?"; }
    starts_with "$got" "$exp" || fail "$name prompt $k: got [$got], transformers [$exp]"
  done
done
echo "ok: greedy ids equal transformers on every fixture"

# 2. batched: all prompts twice in one file, under each memory plugin; output in input order
dir="$FIX/qwen3-f32-sharded"
: > "$tmp/prompts"
for rep in 1 2; do for k in 0 1 2; do prompt_ids "$dir" $k >> "$tmp/prompts"; done; done
for mem in pageable pinned uva; do
  "$LLMRT" generate "${common[@]}" --set memory.plugin=$mem --model "$dir" --prompts-file "$tmp/prompts" \
    --ids --max-tokens 24 --print-ids > "$tmp/out" 2> "$tmp/err" || { cat "$tmp/err"; fail "batched ($mem)"; }
  [[ $(wc -l < "$tmp/out") -eq 6 ]] || fail "batched ($mem): $(wc -l < "$tmp/out") lines, expected 6"
  for i in 0 1 2 3 4 5; do
    got=$(sed -n "$((i + 1))p" "$tmp/out")
    starts_with "$got" "$(expected "$dir" $((i % 3)))" || fail "batched ($mem) line $((i + 1)): [$got]"
  done
  grep -q "memory path" "$tmp/err" || fail "summary names the memory path"
done
grep -q "prefill .* tok/s | decode .* tok/s | ITL p50" "$tmp/err" || { cat "$tmp/err"; fail "summary line"; }
echo "ok: batched outputs equal the references, in input order, with pageable, pinned and uva"

# 3. a KV cache too small for all six at once: preemption, same outputs
"$LLMRT" generate "${common[@]}" --set memory.plugin=pageable --set cache.kv_tokens=64 \
  --set cache.block_size=4 --model "$dir" --prompts-file "$tmp/prompts" --ids --max-tokens 24 \
  --print-ids > "$tmp/out" 2> "$tmp/err" || { cat "$tmp/err"; fail "small cache"; }
grep -q "preempted" "$tmp/err" || { cat "$tmp/err"; fail "a 64-token cache for 6 x 40 tokens must preempt"; }
for i in 0 1 2 3 4 5; do
  got=$(sed -n "$((i + 1))p" "$tmp/out")
  starts_with "$got" "$(expected "$dir" $((i % 3)))" || fail "preemption line $((i + 1)): [$got]"
done
echo "ok: preemption keeps every output"

# 3b. a bigger synthetic checkpoint (mkmodel): twelve prompts of 1..120 tokens batched with
# chunked prefill (64-token steps, prefill and decode sharing steps) give exactly the ids each
# prompt gives alone
"$LLMRT" mkmodel --preset tiny -o "$tmp/tiny" -q || fail "mkmodel --preset tiny"
: > "$tmp/tp12"
for i in $(seq 0 11); do
  n=$(( (i * 37) % 120 + 1 ))
  seq -s, $((i * 5 + 1)) $((i * 5 + n)) | awk -F, '{for(i=1;i<=NF;i++) $i=($i*7919)%511; print}' OFS=, >> "$tmp/tp12"
done
"$LLMRT" generate "${common[@]}" --set scheduler.max_num_batched_tokens=64 --set scheduler.max_num_seqs=5 \
  --model "$tmp/tiny" --prompts-file "$tmp/tp12" --ids --max-tokens 40 --ignore-eos --print-ids \
  > "$tmp/batched" 2> "$tmp/err" || { cat "$tmp/err"; fail "tiny batched"; }
for i in $(seq 1 12); do
  alone=$("$LLMRT" generate "${common[@]}" --model "$tmp/tiny" --prompt-ids "$(sed -n "${i}p" "$tmp/tp12")" \
          --max-tokens 40 --ignore-eos --print-ids 2>/dev/null)
  [[ "$(sed -n "${i}p" "$tmp/batched")" == "$alone" ]] || fail "tiny prompt $i: batched [$(sed -n "${i}p" "$tmp/batched")] != alone [$alone]"
  [[ $(wc -w <<< "$alone") -eq 40 ]] || fail "tiny prompt $i: --ignore-eos must give 40 tokens"
done
echo "ok: batched with chunked prefill equals alone (mkmodel tiny)"

# 4. seeded sampling: same seed, same ids; the seed matters
run_seed() { "$LLMRT" generate "${common[@]}" --model "$dir" --prompt-ids 1,2,3 --max-tokens 16 \
             --temperature 1.0 --top-p 0.9 --seed "$1" --print-ids 2>/dev/null; }
a=$(run_seed 7); b=$(run_seed 7); c=$(run_seed 8)
[[ -n "$a" && "$a" == "$b" ]] || fail "seed 7 twice: [$a] vs [$b]"
[[ "$a" != "$c" ]] || fail "seeds 7 and 8 gave the same 16 tokens"
echo "ok: seeded sampling"

# 5. text prompts with a tokenizer (a byte-level BPE over printable ASCII: id = char - 32)
cp -r "$dir" "$tmp/model"
python3 - "$tmp/model/tokenizer.json" <<'EOF'
import json, sys
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
m = dict(zip(bs, map(chr, cs)))
json.dump({"version": "1.0", "added_tokens": [{"id": 95, "content": "<|endoftext|>", "single_word": False,
           "lstrip": False, "rstrip": False, "normalized": False, "special": True}],
           "normalizer": None, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
           "trim_offsets": True, "use_regex": False}, "post_processor": None,
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                     "vocab": {m[32 + i]: i for i in range(95)}, "merges": []}},
          open(sys.argv[1], "w"), ensure_ascii=False)
EOF
t=$("$LLMRT" generate "${common[@]}" --model "$tmp/model" --prompt "Hello" --max-tokens 12 --print-ids 2>"$tmp/err") \
  || { cat "$tmp/err"; fail "--prompt TEXT"; }
i=$("$LLMRT" generate "${common[@]}" --model "$tmp/model" --prompt-ids 40,69,76,76,79 --max-tokens 12 --print-ids 2>/dev/null)
[[ -n "$t" && "$t" == "$i" ]] || fail "--prompt Hello [$t] != --prompt-ids of its encoding [$i]"
"$LLMRT" generate "${common[@]}" --model "$tmp/model" --prompt "Hello" --max-tokens 12 > "$tmp/text" 2>/dev/null \
  || fail "streamed text"
[[ $(wc -l < "$tmp/text") -eq 1 ]] || fail "a single prompt prints one line of text"
printf 'Hello\nHi there\n' > "$tmp/tp"
"$LLMRT" generate "${common[@]}" --model "$tmp/model" --prompts-file "$tmp/tp" --max-tokens 8 > "$tmp/out" 2>/dev/null \
  || fail "--prompts-file with text"
[[ $(wc -l < "$tmp/out") -eq 2 ]] || fail "two text prompts, two lines"
echo "ok: text prompts"

# 6. errors
"$LLMRT" generate "${common[@]}" --model "$dir" --set cache.max_model_len=10 \
  --prompt-ids "$(prompt_ids "$dir" 2)" --max-tokens 4 > "$tmp/out" 2>&1; rc=$?
[[ $rc -eq 1 ]] || fail "too-long prompt: exit $rc, expected 1"
grep -q "17 tokens but cache.max_model_len = 10" "$tmp/out" || { cat "$tmp/out"; fail "too-long prompt message"; }
"$LLMRT" generate "${common[@]}" --model "$dir" --prompt-ids 1,2 > "$tmp/out" 2>&1; rc=$?
[[ $rc -eq 2 ]] && grep -q -- "--max-tokens N is required" "$tmp/out" || fail "missing --max-tokens: exit $rc"
"$LLMRT" generate "${common[@]}" --model "$dir" --prompt hi --max-tokens 2 > "$tmp/out" 2>&1; rc=$?
[[ $rc -eq 2 ]] && grep -q "tokenizer.json" "$tmp/out" || { cat "$tmp/out"; fail "text prompt without a tokenizer: exit $rc"; }
! grep -q "loading\|loaded" "$tmp/out" || { cat "$tmp/out"; fail "text prompt without a tokenizer: refused only after loading the model"; }
printf 'hi\n' > "$tmp/text_lines"
"$LLMRT" generate "${common[@]}" --model "$dir" --prompts-file "$tmp/text_lines" --max-tokens 2 > "$tmp/out" 2>&1; rc=$?
[[ $rc -eq 2 ]] && grep -q "has no tokenizer.json" "$tmp/out" && ! grep -q "loaded" "$tmp/out" ||
  { cat "$tmp/out"; fail "text prompts file without a tokenizer: exit $rc (refused before the load?)"; }
# max_tokens beyond max_model_len: generated up to the limit, and said
"$LLMRT" generate "${common[@]}" --model "$dir" --set cache.max_model_len=16 --prompt-ids 1,2,3,4 --max-tokens 100 --print-ids > "$tmp/ids" 2> "$tmp/out"; rc=$?
[[ $rc -eq 0 ]] && grep -q "note: --max-tokens 100 is cut to 12: cache.max_model_len = 16 and the prompt has 4 tokens" "$tmp/out" ||
  { cat "$tmp/out"; fail "--max-tokens cut by max_model_len is not said (exit $rc)"; }
[[ $(wc -w < "$tmp/ids") -le 12 ]] || fail "more than max_model_len - prompt tokens generated"
"$LLMRT" generate "${common[@]}" --model "$dir" --set cache.max_model_len=16 --prompt-ids 1,2,3,4 --max-tokens 5 --print-ids > /dev/null 2> "$tmp/out"
! grep -q "is cut" "$tmp/out" || fail "a note although --max-tokens fits"
"$LLMRT" generate "${common[@]}" --model "$dir" --prompt-ids 1,x --max-tokens 2 > "$tmp/out" 2>&1; rc=$?
[[ $rc -eq 2 ]] || fail "bad --prompt-ids: exit $rc"
printf '1,2\n\n3\n' > "$tmp/bad"
"$LLMRT" generate "${common[@]}" --model "$dir" --prompts-file "$tmp/bad" --ids --max-tokens 2 > "$tmp/out" 2>&1; rc=$?
[[ $rc -eq 2 ]] && grep -q "bad:2: empty prompt" "$tmp/out" || { cat "$tmp/out"; fail "empty line: exit $rc"; }
# a tokenizer whose ids pass the model's vocabulary: refused when the engine opens, whatever
# the prompt (here token ids the model has)
cp -r "$dir" "$tmp/bigtok"
printf '{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}, "added_tokens": [{"id": 600, "content": "<|x|>", "special": true}]}' > "$tmp/bigtok/tokenizer.json"
"$LLMRT" generate "${common[@]}" --model "$tmp/bigtok" --prompt-ids 1,2 --max-tokens 2 > "$tmp/out" 2>&1; rc=$?
[[ $rc -eq 1 ]] && grep -q "tokenizer.json has ids up to 600 but the model's vocabulary (config.json vocab_size) has 512 rows" "$tmp/out" ||
  { cat "$tmp/out"; fail "tokenizer/model vocabulary mismatch not found at load: exit $rc"; }
"$LLMRT" generate "${common[@]}" --model "$dir" --prompt-ids 1,9999 --max-tokens 2 > "$tmp/out" 2>&1; rc=$?
[[ $rc -eq 1 ]] && grep -q "id 9999, outside the model's vocabulary \[0, 512)" "$tmp/out" \
  || { cat "$tmp/out"; fail "out-of-vocabulary id: exit $rc"; }
"$LLMRT" generate "${common[@]}" --model "$dir" --prompt-ids 1 --prompt hi --max-tokens 2 > /dev/null 2>&1
[[ $? -eq 2 ]] || fail "two prompt options"
echo "ok: errors"
echo "ok: generate"
