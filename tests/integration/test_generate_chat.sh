#!/usr/bin/env bash
# llmrt chat, driven through stdin on a fixture model given a small tokenizer (printable ASCII,
# newline, Qwen3's special tokens) and the Qwen3 chat template: replies stream, the history
# grows turn by turn (assistant turns kept), /reset starts over, --system and --no-thinking
# change the rendered prompt as the template says, and a model without a tokenizer is a clear
# error.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
common=(--set runtime.backend=cpu --set "runtime.plugin_dir=$LLMRT_PLUGIN_DIR")
src="$LLMRT_SOURCE_DIR/tests/fixtures/models/qwen3-f32-sharded"
cp -r "$src" "$tmp/model"
python3 - "$tmp/model" "$LLMRT_SOURCE_DIR/tests/fixtures/tokenizer/qwen3_chat_template.jinja" <<'PY'
import json, sys
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
m = dict(zip(bs, map(chr, cs)))
vocab = {m[32 + i]: i for i in range(95)}
vocab[m[10]] = 95
added = [(96, "<|endoftext|>", True), (97, "<|im_start|>", True), (98, "<|im_end|>", True),
         (99, "<think>", False), (100, "</think>", False)]
json.dump({"version": "1.0",
           "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False,
                             "rstrip": False, "normalized": False, "special": s} for i, c, s in added],
           "normalizer": None, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
           "trim_offsets": True, "use_regex": False}, "post_processor": None,
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                     "vocab": vocab, "merges": []}},
          open(sys.argv[1] + "/tokenizer.json", "w"), ensure_ascii=False)
json.dump({"chat_template": open(sys.argv[2]).read(), "eos_token": "<|im_end|>"},
          open(sys.argv[1] + "/tokenizer_config.json", "w"))
PY

# prompt_tokens FILE N: the prompt size reported for turn N (1-based)
prompt_tokens() { grep -o '^\[[0-9]* prompt tokens' "$1" | sed -n "${2}p" | tr -dc 0-9; }

printf 'Hi there\nHow are you?\n/frobnicate\n/reset\nHi there\n' |
  "$LLMRT" chat "${common[@]}" --model "$tmp/model" --max-tokens 6 --seed 3 > "$tmp/out" 2> "$tmp/err" \
  || { cat "$tmp/err"; fail "chat exited $?"; }
[[ $(grep -c '^\[[0-9]* prompt tokens, [0-9]* generated' "$tmp/err") -eq 3 ]] || { cat "$tmp/err"; fail "three replies"; }
t1=$(prompt_tokens "$tmp/err" 1); t2=$(prompt_tokens "$tmp/err" 2); t3=$(prompt_tokens "$tmp/err" 3)
# "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n" is 27 tokens here
[[ "$t1" -eq 27 ]] || fail "first turn renders to 27 tokens, got $t1"
[[ "$t2" -gt $((t1 + 14)) ]] || fail "second turn must carry the first exchange ($t2 vs $t1)"
[[ "$t3" -eq "$t1" ]] || fail "/reset: the third turn renders like the first ($t3 vs $t1)"
grep -q "unknown command /frobnicate" "$tmp/err" || fail "unknown /command is reported"
grep -q "(conversation reset)" "$tmp/err" || fail "/reset is acknowledged"
[[ $(wc -l < "$tmp/out") -ge 3 ]] || fail "each reply ends with a newline on stdout"

printf 'Hi there\n' | "$LLMRT" chat "${common[@]}" --model "$tmp/model" --max-tokens 2 --no-thinking \
  > /dev/null 2> "$tmp/err" || fail "--no-thinking"
# enable_thinking=false appends "<think>\n\n</think>\n\n": 6 more tokens
[[ $(prompt_tokens "$tmp/err" 1) -eq 33 ]] || { cat "$tmp/err"; fail "--no-thinking prompt size"; }
printf 'Hi there\n' | "$LLMRT" chat "${common[@]}" --model "$tmp/model" --max-tokens 2 --system "Be brief." \
  > /dev/null 2> "$tmp/err" || fail "--system"
# "<|im_start|>system\nBe brief.<|im_end|>\n" adds 1+6+1+9+1+1 = 19 tokens
[[ $(prompt_tokens "$tmp/err" 1) -eq 46 ]] || { cat "$tmp/err"; fail "--system prompt size"; }

printf 'Hi\n' | "$LLMRT" chat "${common[@]}" --model "$src" > /dev/null 2> "$tmp/err"; rc=$?
[[ $rc -eq 1 ]] && grep -q "no tokenizer.json" "$tmp/err" || { cat "$tmp/err"; fail "no tokenizer: exit $rc"; }
! grep -q "loading\|loaded" "$tmp/err" || { cat "$tmp/err"; fail "no tokenizer: refused only after loading the model"; }
"$LLMRT" chat --temperature -1 > /dev/null 2>&1; [[ $? -eq 2 ]] || fail "bad --temperature exits 2"
echo "ok: chat"
