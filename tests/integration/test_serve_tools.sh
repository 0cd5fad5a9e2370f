#!/usr/bin/env bash
# Tool calls, reasoning and the model's own sampling defaults through the real `llmrt serve`,
# checked by the official `openai` npm client (tests/serve/tools_client.mjs) on scripted
# models (`mkmodel --preset tiny-chat`: the greedy reply is a known text):
#   call           reasoning + one call: parsed whole and streamed (name, arguments, id,
#                  finish_reason tool_calls), the stream helper, n = 2, a second turn,
#                  tool_choice none (no tools in the prompt, markup stays content)
#   reasoning_off  the same model with server.reasoning = off
#   two            two calls in one reply (index 0 and 1), parallel_tool_calls false
#   think          reasoning + content, whole and streamed
#   malformed      a call whose JSON does not parse stays content
#   defaults       the random tiny model with temperature/top_p/top_k in generation_config.json:
#                  requests that omit them sample with them (and `llmrt generate` too)
# plus unknown request fields logged once per name. The package and the tokenizer are
# fetched into caches outside the repository; skipped (77) only when npm cannot fetch them.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
SERVE_PID=
trap '[[ -n "$SERVE_PID" ]] && kill -KILL $SERVE_PID 2>/dev/null; rm -rf "$tmp"' EXIT
. "$LLMRT_SOURCE_DIR/tests/serve/lib.sh"

version=6.49.0
prefix="${XDG_CACHE_HOME:-$HOME/.cache}/llmrt/npm-openai-$version"
if [[ ! -f "$prefix/node_modules/openai/package.json" ]]; then
  command -v npm > /dev/null || { echo "SKIP: npm is not installed (needed to fetch the openai package)"; exit 77; }
  mkdir -p "$prefix"
  if ! npm install --prefix "$prefix" --no-audit --no-fund --silent "openai@$version" > "$tmp/npm.log" 2>&1; then
    echo "SKIP: npm could not install openai@$version:"
    tail -5 "$tmp/npm.log"
    exit 77
  fi
fi
if ! tok=$("$LLMRT_SOURCE_DIR/tools/fetch-qwen3-tokenizer.sh" 2> "$tmp/fetch.err"); then
  echo "SKIP: the Qwen3 tokenizer could not be fetched (tools/fetch-qwen3-tokenizer.sh):"
  cat "$tmp/fetch.err"
  exit 77
fi

# scripted NAME TEXT: a tiny-chat model that says TEXT
scripted() {
  "$LLMRT" mkmodel -q --preset tiny-chat --model-opt "tokenizer=$tok" --model-opt "says=$2" \
    -o "$tmp/$1" > "$tmp/mk.log" 2>&1 || { cat "$tmp/mk.log"; fail "mkmodel tiny-chat $1"; }
}
# run SCENARIO MODEL [serve options...]
run() {
  local scenario=$1 model=$2
  shift 2
  serve_start "$scenario" "$tmp/$model" "$@"
  OPENAI_PREFIX="$prefix" node "$LLMRT_SOURCE_DIR/tests/serve/tools_client.mjs" "$SERVE_URL" "$model" "$scenario" ||
    { tail -20 "$SERVE_LOG.err"; fail "the $scenario checks failed"; }
  serve_stop
}

scripted call $'<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
scripted two $'<think>\nTwo cities, so two calls.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Tokyo", "unit": "celsius"}}\n</tool_call>'
scripted think $'<think>\nOkay: 2+2. That is 4. Check: 2+2 = 4. Yes, 4.\n</think>\n\nThe answer is **4**. 🎉 Grüße aus Köln!'
scripted malformed $'Let me try.\n<tool_call>\n{"name": get_weather, "arguments": {}}\n</tool_call>'

run call call
run reasoning_off call --set server.reasoning=off
grep -q 'server.reasoning = off' "$SERVE_LOG.err" || fail "the log does not say reasoning is off"
run two two
run think think
run malformed malformed

# unknown fields: a warning once per name, not per request
serve_start unknown "$tmp/think"
for i in 1 2 3; do
  code=$(post /v1/chat/completions '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "guided_decoding_backend": "xgrammar", "my_field": 1}' "$tmp/u.json")
  [[ "$code" == 200 ]] || { cat "$tmp/u.json"; fail "a request with unknown fields got $code"; }
done
serve_stop
n=$(grep -c "request field 'guided_decoding_backend' is not known" "$SERVE_LOG.err")
[[ "$n" == 1 ]] || fail "'guided_decoding_backend' was warned about $n times, expected once"
n=$(grep -c "request field 'my_field' is not known" "$SERVE_LOG.err")
[[ "$n" == 1 ]] || fail "'my_field' was warned about $n times, expected once"
grep -q "request field 'max_tokens'" "$SERVE_LOG.err" && fail "a known field was warned about"

# the model's sampling defaults: generation_config.json with temperature, top_p, top_k
serve_model "$tmp/defaults"
node -e '
  const fs = require("fs"), f = process.argv[1];
  const g = JSON.parse(fs.readFileSync(f, "utf8"));
  Object.assign(g, {do_sample: true, temperature: 1.3, top_p: 0.9, top_k: 40});
  fs.writeFileSync(f, JSON.stringify(g, null, 2));
' "$tmp/defaults/generation_config.json" || fail "writing generation_config.json"
run defaults defaults
grep -q 'sampling defaults from the model.s generation_config.json.*temperature 1.3, top_p 0.9, top_k 40' "$SERVE_LOG.err" ||
  { tail -5 "$SERVE_LOG.err"; fail "the server does not log the model's sampling defaults"; }
# llmrt generate: the same defaults, and says so
gen() { "$LLMRT" generate --model "$tmp/defaults" --prompt "The capital of France is" --max-tokens 12 --seed 5 --print-ids "$@" 2> "$tmp/gen.err"; }
omitted=$(gen) || { cat "$tmp/gen.err"; fail "generate"; }
grep -q "sampling with the model's defaults (generation_config.json): temperature 1.3, top-p 0.9, top-k 40" "$tmp/gen.err" ||
  { cat "$tmp/gen.err"; fail "generate does not say it uses the model's defaults"; }
explicit=$(gen --temperature 1.3 --top-p 0.9 --top-k 40) || fail "generate"
grep -q "sampling with the model's defaults" "$tmp/gen.err" && fail "generate says it took defaults it was given"
greedy=$(gen --temperature 0) || fail "generate"
grep -q "defaults (generation_config.json): top-p 0.9, top-k 40$" "$tmp/gen.err" ||
  { cat "$tmp/gen.err"; fail "generate --temperature 0 should name the defaults it still took"; }
[[ "$omitted" == "$explicit" ]] || fail "generate without --temperature does not sample with the model's defaults"
[[ "$omitted" != "$greedy" ]] || fail "generate without --temperature is greedy"
"$LLMRT" generate --help | grep -q "generation_config.json" || fail "generate --help does not mention the model's defaults"
"$LLMRT" chat --help | grep -q "generation_config.json" || fail "chat --help does not mention the model's defaults"
# a bad value in generation_config.json is an error naming the file and key
node -e '
  const fs = require("fs"), f = process.argv[1];
  const g = JSON.parse(fs.readFileSync(f, "utf8"));
  g.top_p = 2;
  fs.writeFileSync(f, JSON.stringify(g));
' "$tmp/defaults/generation_config.json"
"$LLMRT" generate --model "$tmp/defaults" --prompt x --max-tokens 1 > /dev/null 2> "$tmp/gen.err" && fail "top_p 2 accepted"
grep -q "generation_config.json: key 'top_p' is 2, expected a number in (0, 1]" "$tmp/gen.err" ||
  { cat "$tmp/gen.err"; fail "the top_p message"; }
echo "ok: serve tools"
