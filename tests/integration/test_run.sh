#!/usr/bin/env bash
# scripts/run.sh, the README's main job, as a newcomer runs it (without its build step: this
# build's binary): it makes the demo checkpoint (a tiny random Qwen3 with the real Qwen3
# tokenizer) and ends with generated text, not token ids; its arguments replace the prompt.
# Skipped (77) when the tokenizer cannot be fetched.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
bash "$LLMRT_SOURCE_DIR/tools/fetch-qwen3-tokenizer.sh" > /dev/null 2> "$tmp/fetch.err" ||
  { echo "SKIP: the Qwen3 tokenizer could not be fetched: $(cat "$tmp/fetch.err")"; exit 77; }
run() { LLMRT_RUN_NO_BUILD=1 LLMRT_RUN_MODEL="$tmp/demo" bash "$LLMRT_SOURCE_DIR/scripts/run.sh" "$@"; }

run > "$tmp/out" 2> "$tmp/err" || { tail -20 "$tmp/err"; fail "scripts/run.sh"; }
[[ -f "$tmp/demo/tokenizer.json" && -f "$tmp/demo/config.json" ]] || fail "no demo checkpoint with a tokenizer"
grep -q '"vocab_size": 151936' "$tmp/demo/config.json" || fail "the demo checkpoint does not have Qwen3's vocabulary"
last=$(tail -1 "$tmp/out")
[[ -n "$last" ]] || fail "run.sh printed no text"
! [[ "$last" =~ ^[0-9\ ]+$ ]] || fail "run.sh ends with token ids, not text: $last"
grep -q "llmrt generate: 1 prompt(s), 5 prompt tokens, 32 generated" "$tmp/err" || { tail -3 "$tmp/err"; fail "the default prompt and 32 tokens"; }

run --prompt "Hello" --max-tokens 8 > "$tmp/out" 2> "$tmp/err" || { tail -5 "$tmp/err"; fail "scripts/run.sh --prompt Hello"; }
grep -q "llmrt generate: 1 prompt(s), 1 prompt tokens, 8 generated" "$tmp/err" || { tail -3 "$tmp/err"; fail "arguments replace the prompt"; }
grep -q "wrote the demo checkpoint" "$tmp/err" && fail "the demo checkpoint was made again"
echo "ok: run.sh"
