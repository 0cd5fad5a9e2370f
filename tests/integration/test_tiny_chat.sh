#!/usr/bin/env bash
# The scripted test vehicle (`llmrt mkmodel --preset tiny-chat`, plugins/model-qwen3/
# qwen3_script.c): for replies with reasoning, tool calls (two to the same function), JSON,
# Unicode, long runs of text and whitespace, the real forward on the CPU backend must produce
# exactly the text through `llmrt generate` (a prompt the Qwen3 template renders) and
# `llmrt chat` (which renders it itself), for any chat; a prompt off the script (here one that
# closed the think block) gets an empty reply; texts it cannot script and bad options are
# refused with messages that say why. Skipped (77) only when the Qwen3 tokenizer cannot be
# fetched (tools/fetch-qwen3-tokenizer.sh).
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! tok=$("$LLMRT_SOURCE_DIR/tools/fetch-qwen3-tokenizer.sh" 2> "$tmp/fetch.err"); then
  echo "SKIP: the Qwen3 tokenizer could not be fetched (tools/fetch-qwen3-tokenizer.sh):"
  cat "$tmp/fetch.err"
  exit 77
fi

texts=(
  $'<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
  $'<think>\nTwo cities, so two calls.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Tokyo", "unit": "celsius"}}\n</tool_call>'
  $'<think>\nOkay: 2+2. That is 4. Check: 2+2 = 4. Yes, 4.\n</think>\n\nThe answer is **4**. 🎉 Grüße aus Köln!'
  $'{"a": 1, "b": [1, 2, 3], "c": {"d": "e"}}\n\n\n  spaces   and\ttabs\n'
  $'a a a a a a a a a a a a b'
  $'The quick brown fox jumps over the lazy dog. The quick brown cat sleeps under the warm sun. The end.'
)
prompt=$'<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nWhat is the weather in Paris and Tokyo?<|im_end|>\n<|im_start|>assistant\n'
i=0
for t in "${texts[@]}"; do
  i=$((i + 1))
  m="$tmp/m$i"
  "$LLMRT" mkmodel -q --preset tiny-chat --model-opt "tokenizer=$tok" --model-opt "says=$t" -o "$m" \
    > "$tmp/mk.log" 2>&1 || { cat "$tmp/mk.log"; fail "mkmodel tiny-chat (text $i)"; }
  for f in config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json; do
    [[ -f "$m/$f" ]] || fail "text $i: the checkpoint has no $f"
  done
  size=$(stat -c %s "$m/model.safetensors")
  (( size < 64000000 )) || fail "text $i: model.safetensors is $size bytes (expected a small model)"
  "$LLMRT" generate --model "$m" --prompt "$prompt" --max-tokens 400 --no-stream \
    > "$tmp/gen.out" 2> "$tmp/gen.err" || { cat "$tmp/gen.err"; fail "generate (text $i)"; }
  printf '%s\n' "$t" | cmp -s - "$tmp/gen.out" ||
    { diff <(printf '%s\n' "$t") "$tmp/gen.out"; fail "generate: text $i is not what the model says"; }
  # the reply ends with <|im_end|>: one token more than the text, finish stop (not length)
  grep -q ' generated' "$tmp/gen.err" || fail "no summary line"
  # llmrt chat renders the conversation itself; a second turn (the first reply in history)
  # gets the same reply
  printf 'Hello there\nAnd again?\n' | "$LLMRT" chat --model "$m" > "$tmp/chat.out" 2> "$tmp/chat.err" ||
    { cat "$tmp/chat.err"; fail "chat (text $i)"; }
  printf '%s\n%s\n' "$t" "$t" | cmp -s - "$tmp/chat.out" ||
    { diff <(printf '%s\n%s\n' "$t" "$t") "$tmp/chat.out"; fail "chat: text $i is not what the model says"; }
done

# a prompt that does not end in the anchor, with a last token (here the "\n\n" after the
# empty think block of enable_thinking = false) the script never continues from: the model
# ends the turn at once
printf 'Hello\n' | "$LLMRT" chat --model "$tmp/m6" --no-thinking > "$tmp/chat.out" 2> "$tmp/chat.err" ||
  { cat "$tmp/chat.err"; fail "chat --no-thinking"; }
[[ "$(cat "$tmp/chat.out")" == "" ]] || fail "an unscripted prompt got a reply: $(head -c 200 "$tmp/chat.out")"
grep -q '1 generated' "$tmp/chat.err" || { cat "$tmp/chat.err"; fail "an unscripted prompt should end at once"; }

# refusals
expect_error() { # MESSAGE ARGS...: mkmodel fails (exit 1 or 2) saying MESSAGE
  local msg=$1
  shift
  "$LLMRT" mkmodel -q --preset tiny-chat -o "$tmp/bad" "$@" > "$tmp/bad.out" 2>&1 && fail "mkmodel $* succeeded"
  grep -qF -- "$msg" "$tmp/bad.out" || { cat "$tmp/bad.out"; fail "mkmodel $*: no '$msg'"; }
}
expect_error "needs --model-opt says=TEXT" --model-opt says=x
expect_error "needs --model-opt says=TEXT" --model-opt "tokenizer=$tok"
expect_error "unknown tiny-chat option 'colour'" --model-opt "tokenizer=$tok" --model-opt says=x --model-opt colour=red
expect_error "special token <|im_end|>" --model-opt "tokenizer=$tok" --model-opt 'says=a<|im_end|>b'
expect_error "is not a readable file" --model-opt "tokenizer=$tmp/none" --model-opt says=x
expect_error "cannot script this text" --model-opt "tokenizer=$tok" --model-opt "says=$(printf 'a %.0s' $(seq 40))b"
expect_error "dense" --model-opt "tokenizer=$tok" --model-opt says=x --quant awq
"$LLMRT" mkmodel -q --preset tiny --model-opt says=x -o "$tmp/bad" > "$tmp/bad.out" 2>&1 && fail "tiny took says="
grep -q "only the tiny-chat preset takes options" "$tmp/bad.out" || { cat "$tmp/bad.out"; fail "tiny + says= message"; }
"$LLMRT" mkmodel --list-presets | grep -q "tiny-chat" || fail "--list-presets lacks tiny-chat"
echo "ok: tiny-chat"
